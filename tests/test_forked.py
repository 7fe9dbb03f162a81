"""The grader's nbgrader commands, forked from a Python that has imported nbgrader and PyTorch
(tools/teaching/forked.py): the same exit code, output and environment as the command typed,
and a command past its limit stopped with everything it started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.teaching import forked
from tools.teaching.assignments import ROOT, nbgrader_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the grader runs on Linux")

# nbgrader runs a course's nbgrader_config.py as Python: a stand-in course that says where it
# ran, writes to both streams, and on request starts a child and waits
CONFIG = """import os, subprocess, sys, time
print("config read, FORKED_TEST=" + os.environ.get("FORKED_TEST", "unset"), flush=True)
print("a line on stderr", file=sys.stderr, flush=True)
if os.environ.get("FORKED_TEST") == "hang":
    child = subprocess.Popen(["sleep", "300"])
    open("child.pid", "w").write(str(child.pid))
    time.sleep(300)
"""


@pytest.fixture
def course(tmp_path: Path) -> Path:
    (tmp_path / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    return tmp_path


ARGV = ["autograde", "nothing", "--student=x"]  # nbgrader's own error: exit 1, a line


def test_a_forked_command_exits_and_writes_as_the_command_typed(course: Path) -> None:
    env = {**nbgrader_env(), "FORKED_TEST": "given"}
    log = course / "forked.log"
    log.write_bytes(b"")
    code = forked.run(course, ARGV, env, log, 120)
    said = log.read_text(encoding="utf-8")
    assert code == 1
    assert "config read, FORKED_TEST=given" in said  # its environment, its folder
    assert "a line on stderr" in said
    assert "No notebooks were matched" in said  # nbgrader's own error, as typed (below)


@pytest.mark.e2e  # a fresh Python importing nbgrader (about 5 s)
def test_the_command_typed_says_what_the_forked_one_says(course: Path) -> None:
    env = {**nbgrader_env(), "FORKED_TEST": "given"}
    typed = subprocess.run(
        [sys.executable, "-m", "nbgrader", *ARGV], cwd=course, env=env, capture_output=True
    )
    assert typed.returncode == 1
    assert "config read, FORKED_TEST=given" in typed.stdout.decode()
    assert "a line on stderr" in typed.stderr.decode()
    assert "No notebooks were matched" in typed.stderr.decode()


@pytest.mark.e2e  # waits out the command's 30 s limit
def test_a_forked_command_past_its_limit_is_stopped_with_its_children(course: Path) -> None:
    log = course / "forked.log"
    log.write_bytes(b"")
    env = {**nbgrader_env(), "FORKED_TEST": "hang"}
    assert forked.run(course, ["db", "student", "list"], env, log, 30) is None
    pid = int((course / "child.pid").read_text())
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    if state not in ("gone", "Z"):  # a zombie is dead, waiting for init to reap it
        os.kill(pid, 9)
        pytest.fail(f"the command's child outlived its limit (state {state})")


@pytest.mark.e2e  # a fresh Python importing nbgrader twice over (about 10 s)
def test_without_a_fork_server_the_command_runs_as_typed(course: Path, tmp_path_factory) -> None:
    # a fresh Python whose TMPDIR is too deep for the fork server's socket (107 bytes at most)
    deep = tmp_path_factory.mktemp("t") / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    script = (
        "import sys; from pathlib import Path; from tools.teaching import forked; "
        "from tools.teaching.assignments import nbgrader_env; "
        "log = Path(sys.argv[1]) / 'forked.log'; log.write_bytes(b''); "
        "sys.exit(forked.run(Path(sys.argv[1]), ['autograde', 'nothing', '--student=x'], "
        "nbgrader_env(), log, 120) + 10)"
    )
    env = {**os.environ, "TMPDIR": str(deep)}
    done = subprocess.run([sys.executable, "-c", script, str(course)], env=env, cwd=ROOT)
    assert done.returncode == 11  # nbgrader's exit code 1, no traceback of the fork server's
    assert "No notebooks were matched" in (course / "forked.log").read_text(encoding="utf-8")
