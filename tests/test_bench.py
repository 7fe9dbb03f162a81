"""The benchmark and stress commands (bench/): every number they take has a range, and a
stress run stopped by Ctrl-C or SIGTERM ends in one line, leaving no process and no folder."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from utils import launch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e  # each case a benchmark started as typed, a fresh Python importing torch
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("script", "bad", "message"),
    [
        ("cifar10.py", ["--budget", "0"], "--budget: must be a number above 0 (not 0)"),
        ("cifar10.py", ["--budget", "-1"], "--budget: must be a number above 0 (not -1)"),
        ("cifar10.py", ["--budget", "nan"], "--budget: must be a number above 0 (not nan)"),
        ("cifar10.py", ["--gpu-target", "55"], "--gpu-target: must be a number, 1 at most"),
        ("ddp_scaling.py", ["--repeats", "0"], "--repeats: must be an integer, 1 or more (not 0)"),
        ("ddp_scaling.py", ["--steps", "0"], "--steps: must be an integer, 1 or more (not 0)"),
        ("ddp_scaling.py", ["--batch-size", "1"], "--batch-size: must be an integer, 2 or more"),
        ("ddp_scaling.py", ["--batch-size", "9"], "--batch-size: must be even: 2 DDP processes"),
        ("stress_ddp.py", ["--runs", "0"], "--runs: must be an integer, 1 or more (not 0)"),
        ("grading.py", ["--students", "0"], "--students: must be an integer from 1 to 1000"),
        ("grading.py", ["--lessons", "06"], "--lessons: one of 01, 02, 03, 04, 05 (not 06)"),
        ("grading.py", ["--lang", "fr"], "--lang: invalid choice: 'fr'"),
        ("grading.py", ["--jobs", "0"], "--jobs: must be an integer from 1 to 64"),
    ],
)
def test_every_benchmark_number_out_of_its_range_is_one_line(
    script: str, bad: list[str], message: str
) -> None:
    # As typed: argparse's usage, then one line naming the option; nothing trained or launched.
    argv = [sys.executable, str(ROOT / "bench" / script), *bad]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=100, cwd=ROOT)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and f"error: argument {message}" in err[-1], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_stopped_stress_run_ends_in_one_line_and_leaves_nothing(
    tmp_path: Path, sig: signal.Signals
) -> None:
    # Ctrl-C (SIGINT) or SIGTERM while torchrun and its workers run: the launch is ended and
    # waited for, the temporary folder (torchrun's logs too) removed, and one line said.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**launch.worker_env(threads=1), "TMPDIR": str(tmp)}
    argv = [sys.executable, "bench/stress_ddp.py", "--runs", "3", "--script", "train_ddp"]
    proc = subprocess.Popen(
        [*argv, "--variant", "plain"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        seen: dict[int, psutil.Process] = {}
        deadline = time.monotonic() + 120
        while len(seen) < 3 and time.monotonic() < deadline:  # torchrun and its two workers
            seen.update((p.pid, p) for p in _descendants(proc.pid))
            time.sleep(0.1)  # polling for the event (the processes exist), bounded above
        assert len(seen) >= 3, f"torchrun and two workers never started: {list(seen)}"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines = out.strip().splitlines()
    assert proc.returncode == 128 + sig.value, out
    assert lines[-1] == (
        f"stress-ddp: stopped by {sig.name}; its launches ended, its temporary folder removed"
    ), out
    assert "Traceback" not in out
    _, alive = psutil.wait_procs(list(seen.values()), timeout=60)
    assert alive == [], f"left running (or unreaped): {alive}"
    assert list(tmp.iterdir()) == []


def test_grading_benchmark_defaults_and_smoke() -> None:
    # Every lesson and 40 students unless told; --smoke is one lesson and two students.
    from bench.grading import parse

    args = parse([])
    assert (args.lessons, args.students, args.lang, args.jobs) == (
        ["01", "02", "03", "04", "05"], 40, "en", [1, 2]
    )  # fmt: skip
    args = parse(["--lessons", "01", "05", "--students", "8", "--lang", "zh", "--jobs", "2"])
    assert (args.lessons, args.students, args.lang, args.jobs) == (["01", "05"], 8, "zh", [2])
    args = parse(["--smoke", "--lessons", "04"])
    assert (args.lessons, args.students, args.jobs) == (["01"], 2, [1])
