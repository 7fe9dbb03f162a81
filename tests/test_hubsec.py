"""The hub's sign-up rule, its isolation settings, the Lab terminal's Python and the links
``make hub`` prints (tools/teaching/hubauth.py, hubsite.py, links.py, hub.py), without starting
a hub: tests/test_hub.py tries the same in a running one (e2e, root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.teaching import classroom, hub, hubauth, hubsite, links

NEVER = ["alice ", "../x", "a" * 200, "élève", "学生", "1abc", "", "Alice"]


@pytest.mark.parametrize("name", NEVER)
def test_a_name_failing_the_pattern_is_refused_with_the_rule(name: str) -> None:
    why = hubauth.refusal(name, lambda _: True)
    assert why and hubauth.RULE["en"] in why
    assert "…" in why if len(name) > 40 else name in why


def test_an_account_the_hub_did_not_make_is_refused_in_both_languages() -> None:
    taken = {"root", "daemon", "www-data"}
    for name in taken:
        assert "already an account" in hubauth.refusal(name, lambda n: n not in taken)
        assert "已是本机的一个账户" in hubauth.refusal(name, lambda n: n not in taken, "zh")
    assert hubauth.refusal("li_wei2", lambda n: n not in taken) is None
    assert hubauth.refusal("a" * 31, lambda _: True) is None
    assert hubauth.refusal("a" * 32, lambda _: True) is not None


def test_the_page_language_follows_the_browser() -> None:
    assert hubauth.page_language("zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert hubauth.page_language("en-US,en;q=0.9,zh;q=0.8") == "en"
    assert hubauth.page_language("fr-FR") == "en"
    assert hubauth.page_language("") == "en"


def test_the_sign_up_rule_and_the_real_accounts_agree() -> None:
    """root, daemon and www-data (Debian's) are accounts the hub did not make."""
    for name in ("root", "daemon"):
        assert not classroom.is_student_or_teacher(name, "teacher", set())
        assert "already an account" in hubauth.refusal(
            name, lambda n: classroom.is_student_or_teacher(n, "teacher", set())
        )


def test_our_handlers_replace_native_authenticators_own_routes() -> None:
    pytest.importorskip("nativeauthenticator")
    from nativeauthenticator import NativeAuthenticator

    native = NativeAuthenticator.get_handlers(None, None)
    ours = hubauth.handlers(lambda _: True, "teacher")
    merged = dict(hubauth.replace_handlers(native, ours))
    assert len(merged) == len(native)
    for route, handler in ours:
        assert merged[route] is handler
    # the routes that changed state on a GET answer 405 to a GET now
    for route in ("/authorize/([^/]*)", "/discard/([^/]*)"):
        assert "get" in vars(merged[route]) and "post" in vars(merged[route])
    with pytest.raises(RuntimeError):
        hubauth.replace_handlers(native[:1], ours)


def test_the_approval_page_posts_with_the_xsrf_token() -> None:
    page = (hubauth.TEMPLATES / "authorization-area.html").read_text()
    assert page.count('method="post"') == 2 and page.count('name="_xsrf"') == 2
    assert 'href="{{ base_url }}authorize/' not in page
    assert 'href="{{ base_url }}discard/' not in page


def test_hub_domain_gives_each_student_a_site_and_is_checked() -> None:
    assert hubsite.domain({}) == ""
    assert hubsite.public_url("http://127.0.0.1:8000", 8000, {}) == "http://127.0.0.1:8000"
    env = {"HUB_DOMAIN": "Jupyter.School.example"}
    assert (
        hubsite.public_url("https://0.0.0.0:443", 443, env) == "https://jupyter.school.example:443"
    )
    for bad in ("http://x", "x/y", "a..b", "-a", "x:80"):
        with pytest.raises(hubsite.DomainError):
            hubsite.domain({"HUB_DOMAIN": bad})


def test_one_origin_takes_access_to_servers_from_the_teacher() -> None:
    default = ["admin-ui", "admin:users", "access:servers", "shares", "admin:servers"]
    assert hubsite.admin_scopes(default) == ["admin-ui", "admin:users", "admin:servers"]


def test_the_server_runs_isolated_from_the_students_home(tmp_path: Path) -> None:
    """A module in the folder the server starts in (the student's home) is not imported."""
    cmd = hubsite.server_cmd(sys.executable)
    assert cmd[1:] == ["-I", "-m", "jupyterhub.singleuser"]
    (tmp_path / "json.py").write_text("raise SystemExit('the home folder came first')\n")
    probe = [cmd[0], cmd[1], "-c", "import json, sys; print(json.__file__)"]
    res = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert str(tmp_path) not in res.stdout


def _terminal(shell: list[str], home: Path, path: str) -> str:
    """What `command -v python` and the venv's torch say in a Lab terminal started with
    ``shell``, given the spawner's PATH, for a fresh account's home (Debian's skeleton)."""
    env = {"HOME": str(home), "PATH": path, "TERM": "dumb", "SHELL": "/bin/bash"}
    script = "command -v python; python -c 'import sys; print(sys.prefix)'\nexit\n"
    res = subprocess.run(
        shell, input=script, env=env, cwd=home, capture_output=True, text=True, timeout=60
    )
    return res.stdout


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_the_lab_terminal_runs_the_lessons_python(tmp_path: Path) -> None:
    """The spawner's PATH (student_environment) through the terminal the server is told to
    start: `python` is the venv's. jupyter_server_terminals's default under a spawner, a login
    shell, resets PATH in /etc/profile (Debian's) and loses it."""
    home = tmp_path / "home"
    shutil.copytree("/etc/skel", home) if Path("/etc/skel").is_dir() else home.mkdir()
    s = classroom.settings({"HUB_SRV": str(tmp_path / "srv")})
    path = classroom.student_environment(s)["PATH"]
    venv_bin = str(classroom.VENV_PYTHON.parent)
    out = _terminal(hubsite.TERMINAL_SHELL, home, path)
    assert out.splitlines()[0] == f"{venv_bin}/python", out
    assert out.splitlines()[1] == sys.prefix
    assert hubsite.terminal_arg().endswith('{"shell_command": ["/bin/bash", "-i"]}')
    if "PATH=" in Path("/etc/profile").read_text():  # Debian's sets PATH anew
        # what a student had before (jupyter_server_terminals' login shell): not the venv's
        assert not _terminal(["/bin/bash", "-l"], home, path).startswith(venv_bin)


def _settings(tmp_path: Path, lessons: Path) -> classroom.Settings:
    srv = tmp_path / "srv"
    (srv / "hub").mkdir(parents=True, mode=0o700)
    return classroom.settings({"HUB_SRV": str(srv), "HUB_LESSONS": str(lessons)})


def _lessons(tmp_path: Path, zh: bool = True) -> Path:
    lessons = tmp_path / "course"
    (lessons / "notebooks" / "zh").mkdir(parents=True)
    (lessons / "notebooks" / "01_tensors.ipynb").write_text("{}")
    if zh:
        (lessons / "notebooks" / "zh" / "01_tensors.ipynb").write_text("{}")
    return lessons


def test_the_links_are_english_and_chinese_and_in_a_private_file(tmp_path: Path) -> None:
    s = _settings(tmp_path, _lessons(tmp_path))
    found = links.class_links(s, {})
    assert [x.url for x in found] == [
        s.link("notebooks/01_tensors.ipynb"),
        s.link("notebooks/zh/01_tensors.ipynb"),
    ]
    assert "urlpath=lab%2Ftree%2Fcourse%2Fnotebooks%2Fzh%2F01_tensors.ipynb" in found[1].url
    txt, page = links.write(s, found, {})
    for path in (txt, page):
        assert path.parent == s.state_dir and path.stat().st_mode & 0o777 == 0o600
        for link in found:
            assert (
                link.url.replace("&", "&amp;") in page.read_text() or link.url in path.read_text()
            )
    assert found[1].url in txt.read_text().splitlines()
    lines = links.block(s, found, (txt, page), "en", {})
    assert lines[-1].startswith("=") and found[0].url in lines and found[1].url in lines
    assert any(str(txt) in line and str(page) in line for line in lines)
    zh = links.block(s, found, (txt, page), "zh", {})
    assert "课堂链接" in zh and "第 1 课（中文版） / Lesson 01, Chinese:" in zh
    # homework: no link, the command and where students find it, in the hub's menu language
    assert any("make homework LESSON=01" in x and "Homework > Assignment List" in x for x in lines)
    assert any("make homework LESSON=01" in x and "作业 > Assignment List" in x for x in zh)


def test_hub_domain_moves_the_links(tmp_path: Path) -> None:
    s = _settings(tmp_path, _lessons(tmp_path, zh=False))
    found = links.class_links(s, {"HUB_DOMAIN": "localhost"})
    assert len(found) == 1 and found[0].url.startswith(f"http://localhost:{s.port}/hub/")


def test_course_lang_chooses_the_teachers_language() -> None:
    assert links.course_lang({"COURSE_LANG": "zh"}) == "zh"
    assert links.course_lang({"COURSE_LANG": "zh_CN"}) == "zh"
    assert links.course_lang({}) == "en" and links.course_lang({"COURSE_LANG": "en"}) == "en"


def test_the_links_come_after_jupyterhubs_start_up_log(tmp_path: Path, capfdbinary) -> None:
    """hub._run_hub passes the child's output through and prints the links once it says it
    runs: after that line, not before."""
    fake = "import sys; print('starting'); print('JupyterHub is now running at x'); print('later')"
    code = hub._run_hub([sys.executable, "-c", fake], ["LINKS", "http://link"])
    out = capfdbinary.readouterr().out.decode().splitlines()
    assert code == 0
    assert out == ["starting", "JupyterHub is now running at x", "LINKS", "http://link", "later"]


def test_a_bad_hub_domain_is_one_line_from_make_hub() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env["HUB_DOMAIN"] = "https://jupyter.school.example"
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-m", "tools.teaching.hub"], cwd=root, env=env, capture_output=True
    )
    assert run.returncode == 1 and run.stdout == b""
    lines = run.stderr.decode().strip().splitlines()
    assert (
        len(lines) == 1 and "HUB_DOMAIN='https://jupyter.school.example' is not a host" in lines[0]
    )


def test_make_hubs_own_lines_exist_in_both_languages_with_the_same_blanks(monkeypatch) -> None:
    import string

    def blanks(text: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    assert hub._SAY["en"].keys() == hub._SAY["zh"].keys()
    for key, english in hub._SAY["en"].items():
        assert blanks(english) == blanks(hub._SAY["zh"][key]), key
    monkeypatch.setenv("COURSE_LANG", "zh")
    assert hub._say("no_subset", shared="/srv/x").startswith("/srv/x 处没有子集")
    monkeypatch.setenv("COURSE_LANG", "en")
    assert hub._say("no_subset", shared="/srv/x").startswith("no subset at /srv/x")


def test_hub_domain_off_loopback_needs_the_hubs_own_tls(tmp_path: Path) -> None:
    behind_proxy = classroom.settings({"HUB_IP": "0.0.0.0", classroom.TLS_PROXY_ENV: "1"})
    with pytest.raises(hubsite.DomainError, match="needs HUB_SSL_CERT and HUB_SSL_KEY"):
        hubsite.check_domain(behind_proxy, {"HUB_DOMAIN": "jupyter.school.example"})
    hubsite.check_domain(behind_proxy, {})  # one origin behind a proxy: as before
    (tmp_path / "c.pem").write_text("x")
    (tmp_path / "k.pem").write_text("x")
    tls = {"HUB_SSL_CERT": str(tmp_path / "c.pem"), "HUB_SSL_KEY": str(tmp_path / "k.pem")}
    own_tls = classroom.settings({"HUB_IP": "0.0.0.0", **tls})
    hubsite.check_domain(own_tls, {"HUB_DOMAIN": "jupyter.school.example"})
    hubsite.check_domain(classroom.settings({}), {"HUB_DOMAIN": "localhost"})
