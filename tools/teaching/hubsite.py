"""Whose content runs with whose hub session, and what a student's server and terminal run
(``make hub``; read by tools/teaching/jupyterhub_config.py, hub.py and links.py).

JupyterHub's security overview: without per-user domains every student's server shares the
hub's origin, so a page a student's server serves runs, in the teacher's browser, with the
teacher's hub session; "Subdomains are the only way to reliably isolate user servers", and
without them users must not have ``access:servers`` to servers other than their own. So:

- ``HUB_DOMAIN`` set (``localhost`` on this machine: browsers send ``*.localhost`` to it; or
  a domain with wildcard DNS and, off loopback, a wildcard certificate): each student's server
  is at ``<name>.HUB_DOMAIN``, a site of its own, and the teacher may open students' servers;
- unset (the default): one origin, and the teacher's admin role has neither
  ``access:servers`` nor ``shares``: a student's server is never opened in the teacher's
  browser (the teacher reads a student's files as root on the machine).

In both, a student cannot change what their server runs: the user's Jupyter config is not
loaded (``disable_user_config``) and the server's Python runs isolated (``-I``: neither the
home folder, where the server starts, nor the user's site-packages nor PYTHON* variables come
before the root-owned venv).
"""

from __future__ import annotations

import json
import os
import re

DOMAIN_ENV = "HUB_DOMAIN"
# a DNS name: labels of letters, digits and -, dot-separated (no scheme, port or path)
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_DOMAIN = re.compile(rf"^(?=.{{1,200}}$){_LABEL}(?:\.{_LABEL})*$")
# The admin role's scopes that let the teacher's browser load a student's server (or grant
# itself a share of one): removed when the servers share the hub's origin.
SAME_ORIGIN_DENIED = ("access:servers", "shares")
# The Lab terminal: an interactive shell that is not a login shell. jupyter_server_terminals
# starts `$SHELL -l` under a spawner, and a login shell's /etc/profile sets PATH anew, which
# drops the venv the server was given: `python` was "command not found" and `python3` Debian's.
TERMINAL_SHELL = ["/bin/bash", "-i"]


class DomainError(ValueError):
    """HUB_DOMAIN is not a host name; the message is the line to print."""


def domain(environ: os._Environ | dict = os.environ) -> str:
    """HUB_DOMAIN, lower-cased, or "" when unset; a value that is not a DNS name raises."""
    raw = environ.get(DOMAIN_ENV, "").strip().lower()
    if raw and not _DOMAIN.match(raw):
        raise DomainError(
            f"make hub: {DOMAIN_ENV}={raw!r} is not a host name (e.g. localhost, or "
            "jupyter.school.example with wildcard DNS *.jupyter.school.example)"
        )
    return raw


def check_domain(s, environ: os._Environ | dict = os.environ) -> None:
    """HUB_DOMAIN checked against the settings ``s`` (classroom.Settings): off loopback it
    needs the hub's own TLS (HUB_SSL_*): behind a TLS proxy the hub would not know the
    scheme and port browsers use, and every student's link would be wrong."""
    if domain(environ) and s.ip not in ("127.0.0.1", "localhost", "::1") and not s.ssl_cert:
        raise DomainError(
            f"make hub: {DOMAIN_ENV} with HUB_IP={s.ip} needs HUB_SSL_CERT and HUB_SSL_KEY (the "
            f"hub's own TLS, a wildcard certificate for *.{domain(environ)}); a TLS proxy in "
            "front (HUB_TLS_PROXY=1) is not supported with it"
        )


def public_url(scheme_url: str, port: int, environ: os._Environ | dict = os.environ) -> str:
    """Where people open the hub: HUB_DOMAIN's when set (the hub is there, each student at
    <name>.HUB_DOMAIN), else ``scheme_url`` (the settings' own ip:port)."""
    name = domain(environ)
    if not name:
        return scheme_url
    scheme = scheme_url.split("://", 1)[0]
    return f"{scheme}://{name}:{port}"


def admin_scopes(default_admin_scopes: list[str]) -> list[str]:
    """The admin role's scopes for a hub whose servers share its origin."""
    return [scope for scope in default_admin_scopes if scope not in SAME_ORIGIN_DENIED]


def server_cmd(python: os.PathLike | str) -> list[str]:
    """A student's server: the venv's Python, isolated (-I) from the student's files."""
    return [str(python), "-I", "-m", "jupyterhub.singleuser"]


def terminal_arg() -> str:
    """The server option that makes Lab's terminal TERMINAL_SHELL."""
    return "--ServerApp.terminado_settings=" + json.dumps({"shell_command": TERMINAL_SHELL})
