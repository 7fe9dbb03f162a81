"""The fixtures tests share. (The test contract is applied by the repository's conftest.py.)"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def environment_left_as_found():
    """Each test leaves ``os.environ`` as it found it (torch.compile, for one, sets
    TORCHINDUCTOR_CACHE_DIR there): later tests, and the kernels nbval starts after them,
    see the test contract's environment and nothing else."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


# Made once per session, in temporary folders: the real site (both languages), the same site
# behind an HTTP server, and one headless Chromium (a skip without one, a failure where
# BLITZ_REQUIRE_BROWSER=1: tests/browser.py).


@pytest.fixture(scope="session")
def browser():
    from tests.browser import launch_chromium

    with launch_chromium() as chromium:
        yield chromium


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The real site, built by `make html`'s command line: its folder (English; zh/ inside)."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path_factory.mktemp("html") / "site"
    built = subprocess.run(
        [sys.executable, "-m", "tools.publishing.build_site", "--out", str(out)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"site build failed:\n{built.stdout}\n{built.stderr}"
    return out


@pytest.fixture(scope="session")
def served_site(site):
    """The site behind `python -m http.server`'s handler on a free port, in a thread: its URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        # shutdown() waits for the loop's next poll: 0.5 s by default, a tenth of that here
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}/"
        server.shutdown()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """`make lab` as a learner types it, in the shell's environment (tests/lab.py)."""
    import shutil

    from tests.lab import LabNotServing, started

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    try:
        with started(tmp_path_factory.mktemp("lab")) as running:
            yield running
    except LabNotServing as err:
        pytest.fail(str(err))


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict]]:
    """What tools.publishing.lab.main() execs, as (argv, environment), recorded instead."""
    from tools.publishing import lab as lab_launcher

    calls: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(
        lab_launcher.os, "execve", lambda path, argv, env: calls.append((argv, env))
    )
    monkeypatch.setenv("JUPYTER_TOKEN", "stray")  # LAB_TOKEN is the one way to choose it
    return calls


@pytest.fixture(scope="session")
def released_course(tmp_path_factory) -> Callable[[str, str], Path]:
    """``released_course(number, lang)``: that lesson's course as `make assignments` writes it
    (source/ and release/), made once per session: nbgrader's generate_assignment takes seconds,
    and tests only read it (one that changes a course makes its own)."""
    from tools.teaching import assignments

    made: dict[tuple[str, str], Path] = {}

    def course(number: str, lang: str) -> Path:
        if (number, lang) not in made:
            folder = tmp_path_factory.mktemp(f"course-{number}-{lang}")
            assignments.write_course(folder, lang, [assignments.lesson_for(number, lang)])
            made[number, lang] = folder
        return made[number, lang]

    return course
