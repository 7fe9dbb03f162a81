"""``nbgrader`` commands forked from one Python that has already imported nbgrader and PyTorch.

The grader runs ``nbgrader autograde`` once a submission, each in a process of its own: a
submission that hangs or crashes nbgrader costs only its own grade. As a fresh ``python -m
nbgrader``, each of those processes spent about 5 s importing nbgrader, the judge and PyTorch
(measured on the 2-core machine: ``python -c "import nbgrader.apps, torch"``) before its first
cell, half of a lesson's grading time. The standard library's ``forkserver`` imports them once
and forks each command from there: the same command line and environment, still a process of
its own in its own session (stopped as a group at its limit), without the imports.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

# What the fork server imports once (a module it cannot import is skipped by the standard
# library: the command then imports it itself, slower, not wrong). Not tools.teaching.grade:
# run as ``python -m``, it is the parent's __main__, which each child runs again by name
# (multiprocessing's rule), and runpy warns when that module is already imported.
PRELOAD = ["nbgrader.apps.nbgraderapp", "torch", "tools.teaching.judge", "tools.teaching.sandbox"]


def _context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # before the server's first start; later: ignored
    return context


def _nbgrader(cwd: str, argv: list[str], env: dict[str, str], log: str) -> None:
    """The child: ``nbgrader <argv>`` in ``cwd`` with ``env``, its stdout and stderr in ``log``;
    its exit code is nbgrader's."""
    os.setsid()  # its kernels and theirs: one group, stopped together at the limit
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["nbgrader", *argv]
    from nbgrader.apps.nbgraderapp import NbGraderApp

    NbGraderApp.launch_instance(argv)


def run(cwd: Path, argv: list[str], env: dict[str, str], log: Path, limit_s: float) -> int | None:
    """``nbgrader <argv>`` in ``cwd``, its output appended to ``log`` (which exists); its exit
    code (negative: the signal that stopped it), or None when it ran past ``limit_s`` and was
    stopped with everything it started in its session."""
    process = _context().Process(target=_nbgrader, args=(str(cwd), list(argv), dict(env), str(log)))
    try:
        process.start()
    except OSError:  # no fork server here (its socket's path under TMPDIR too long): as typed
        return _typed(cwd, argv, env, log, limit_s)
    process.join(limit_s)
    if process.exitcode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:  # not yet its own group: the process alone
            process.kill()
        process.join()
        return None
    return process.exitcode


def _typed(cwd: Path, argv: list[str], env: dict[str, str], log: Path, limit_s: float):
    """``run`` as a fresh ``python -m nbgrader``: the same result, without the saved imports."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "nbgrader", *argv],
            cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
        try:
            return process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None
