"""The hub's sign-up and approval pages, made safe for a class (``make hub``; imported by
tools/teaching/jupyterhub_config.py).

NativeAuthenticator 1.3.0 approves, un-approves and discards sign-ups with plain GET links
(``/hub/authorize/<name>`` toggles): an ``<img src="/hub/authorize/x">`` on any page the
teacher opens on the hub's origin changed who may sign in. Here every change is a POST that
JupyterHub checks against its XSRF token, names the change it wants (approve or revoke, never
a toggle, so a replayed form cannot flip it back), and a GET changes nothing.

Sign-up refuses, with the rule in words (English or Chinese, from the browser's
Accept-Language), every name that could never sign in: one failing the Unix login pattern,
and one that is already an account this hub did not make (``root``, ``daemon``, a colleague).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

# Unix login names the hub creates: a lower-case letter, then lower-case letters, digits, - or
# _, at most 31 characters in all (useradd's default limit is 32; JupyterHub's
# username_pattern in jupyterhub_config.py is this one).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,30}$"
TEMPLATES = Path(__file__).resolve().parent / "templates"

RULE = {
    "en": (
        "A name is a lower-case letter (a-z) first, then lower-case letters, digits, - or _, "
        "at most 31 characters, no spaces or accents (e.g. alice, li_wei2)."
    ),
    "zh": (
        "用户名须以小写英文字母（a-z）开头，其后只能是小写英文字母、数字、- 或 _，"
        "最多 31 个字符，不能有空格、汉字或带重音的字母（例如 alice、li_wei2）。"
    ),
}
REFUSED = {
    "en": {
        "pattern": "The name {name!r} cannot be a login name. " + RULE["en"],
        "taken": (
            "The name {name!r} is already an account on this machine that the class may not use "
            "(a system account or someone's login). Choose another name. " + RULE["en"]
        ),
    },
    "zh": {
        "pattern": "用户名 {name!r} 不能用作登录名。" + RULE["zh"],
        "taken": (
            "用户名 {name!r} 已是本机的一个账户（系统账户或他人的登录名），课堂不能使用。"
            "请换一个名字。" + RULE["zh"]
        ),
    },
}


def page_language(accept_language: str) -> str:
    """``zh`` when the browser's Accept-Language puts Chinese before English, else ``en``."""
    for part in accept_language.split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.startswith("zh"):
            return "zh"
        if tag.startswith("en"):
            return "en"
    return "en"


def refusal(name: str, may_sign_in: Callable[[str], bool], lang: str = "en") -> str | None:
    """Why ``name`` (as normalised: lower-cased) can never sign in, as the one line to show,
    or None when it can. ``may_sign_in`` says whether an existing account may be used."""
    words = REFUSED.get(lang, REFUSED["en"])
    if not re.fullmatch(USERNAME_PATTERN, name):
        return words["pattern"].format(name=name[:40] + ("…" if len(name) > 40 else ""))
    if not may_sign_in(name):
        return words["taken"].format(name=name)
    return None


def handlers(may_sign_in: Callable[[str], bool], teacher: str) -> list[tuple[str, type]]:
    """NativeAuthenticator's sign-up, approval and discard handlers replaced by the ones below
    (imported here: only the hub, which has the package, needs them); ``teacher``'s own
    approval cannot be revoked."""
    from jupyterhub.scopes import needs_scope
    from nativeauthenticator.handlers import LocalBase, SignUpHandler
    from nativeauthenticator.orm import UserInfo
    from tornado import web

    admin_users = needs_scope("admin:users")

    class ClassSignUpHandler(SignUpHandler):
        """NativeAuthenticator's sign-up, refusing first what could never sign in."""

        def get_result_message(self, user, *args):
            # a sign-up approved at once (the teacher's) says so, admin or not
            if user is not None and user.is_authorized:
                return "alert-success", (
                    "The signup was successful! You can now go to the home page and log in "
                    "to the system."
                )
            return super().get_result_message(user, *args)

        async def post(self):
            if not self.authenticator.enable_signup:
                raise web.HTTPError(404)
            raw = self.get_body_argument("username", "", strip=False)
            name = self.authenticator.normalize_username(raw)
            lang = page_language(self.request.headers.get("Accept-Language", ""))
            if (why := refusal(name, may_sign_in, lang)) is None:
                return await super().post()
            self.log.warning("Sign-up refused for %r: %s", raw[:64], why)
            html = await self.render_template(
                "signup.html",
                ask_email=self.authenticator.ask_email_on_signup,
                result_message=why,
                alert="alert-danger",
                two_factor_auth=self.authenticator.allow_2fa,
                recaptcha_key=self.authenticator.recaptcha_key,
                tos=self.authenticator.tos,
            )
            self.set_status(400)
            self.finish(html)

    class ApprovalHandler(LocalBase):
        """POST /hub/authorize/<name> with action=approve or action=revoke (the XSRF token
        JupyterHub checks for every POST comes with the form)."""

        def get(self, name):
            raise web.HTTPError(405, "Approval changes only with the Authorize page's buttons")

        @admin_users
        async def post(self, name):
            action = self.get_body_argument("action", "")
            if action not in ("approve", "revoke"):
                raise web.HTTPError(400, "action must be approve or revoke")
            info = UserInfo.find(self.db, name)
            if info is None:
                raise web.HTTPError(404, f"no sign-up named {name}")
            if name == teacher and action == "revoke":
                raise web.HTTPError(400, "the teacher's own approval cannot be revoked")
            if info.is_authorized != (action == "approve"):
                UserInfo.change_authorization(self.db, name)
                self.log.info("%s: %s %s", self.current_user.name, action, name)
            self.redirect(self.hub.base_url + "authorize#" + name)

    class DiscardHandler(LocalBase):
        """POST /hub/discard/<name>: removes a sign-up not yet approved."""

        def get(self, name):
            raise web.HTTPError(405, "Discard only with the Authorize page's button")

        @admin_users
        async def post(self, name):
            info = self.authenticator.get_user(name)
            if info is not None and not info.is_authorized:
                self.authenticator.delete_user(type("User", (), {"name": name}))
                if self.users.get(name) is not None:
                    self.users.delete(name)
                self.log.info("%s: discarded the sign-up %s", self.current_user.name, name)
            self.redirect(self.hub.base_url + "authorize")

    return [
        (r"/signup", ClassSignUpHandler),
        (r"/authorize/([^/]*)", ApprovalHandler),
        (r"/discard/([^/]*)", DiscardHandler),
    ]


def replace_handlers(
    native: list[tuple[str, type]], ours: list[tuple[str, type]]
) -> list[tuple[str, type]]:
    """NativeAuthenticator's handler list with each route of ``ours`` in place of its own; a
    route of ours it no longer has is an error (an upgrade moved it: look before serving)."""
    mine = dict(ours)
    routes = [route for route, _ in native]
    missing = [route for route in mine if route not in routes]
    if missing:
        raise RuntimeError(f"NativeAuthenticator no longer has the routes {missing}")
    return [(route, mine.get(route, handler)) for route, handler in native]
