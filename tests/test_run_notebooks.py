"""tools/authoring/run_notebooks.py (``make test-gpu``): a failing cell is named, a good
notebook passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_markdown_cell("# a title")]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in sources]
    nbformat.write(nb, path)
    return path


def _run(*args: str | Path, timeout: int, **env: str) -> subprocess.CompletedProcess[str]:
    # BLITZ_FORCE_CPU=1: the device lines then need no GPU, on any machine.
    environ = {**os.environ, "BLITZ_FORCE_CPU": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "tools.authoring.run_notebooks", *map(str, args)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.e2e
def test_a_good_a_bad_and_a_hanging_notebook(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("beside the notebook")
    good = _notebook(
        tmp_path / "good.ipynb",
        "import os\nx = 1 + 1",
        # the kernel works in the notebook's folder and inherits the environment
        "assert open('data.txt').read() == 'beside the notebook'",
        "assert os.environ['BLITZ_CIFAR10'] == 'subset'",
    )
    bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "y = 2", "assert x == 2, 'x is not two'")
    slow = _notebook(tmp_path / "slow.ipynb", "import time", "time.sleep(120)", "x = 1")
    out = tmp_path / "out"
    proc = _run(
        good, bad, slow, "--out-dir", out, "--timeout", "3", timeout=180, BLITZ_CIFAR10="subset"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "WARNING: running on the CPU" in proc.stdout  # BLITZ_FORCE_CPU=1
    assert "device: cpu" in proc.stdout
    assert "OK    " in proc.stdout and str(good) in proc.stdout
    report = proc.stdout.split("FAILED", 1)[1]
    assert "cell 3 (code cell 2):" in report  # counted among all cells and code cells
    assert "assert x == 2, 'x is not two'" in report  # the cell's first source line
    assert "AssertionError: x is not two" in report  # the traceback's last line, no colours
    assert "cell 2 (code cell 1):\n      time.sleep(120)" in report  # the hanging one
    assert "no reply within 3 s" in report
    assert "\x1b[" not in proc.stdout
    assert "1 passed, 2 failed" in proc.stdout
    assert (out / "good.ipynb").is_file() and (out / "bad.ipynb").is_file()
    assert nbformat.read(good, as_version=4).cells[1].get("outputs") == []  # untouched


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.ipynb"], "no such notebook"),
        (["a/x.ipynb", "b/x.ipynb"], "two notebooks share a name"),
        (["a/x.ipynb", "--kernel", "no-such-kernel"], "no Jupyter kernel named 'no-such-kernel'"),
    ],
)
def test_usage_errors(
    tmp_path: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # main() in-process: the errors come before any kernel
    from tools.authoring import run_notebooks

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        _notebook(tmp_path / folder / "x.ipynb", "x = 1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        run_notebooks.main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err, err


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_ends_the_run_and_its_kernel_in_one_line(tmp_path: Path, sig: int) -> None:
    # Seen on an H200: `timeout` stopping `make test-gpu` left ~60 lines of nbclient traceback.
    started = tmp_path / "kernel.pid"
    nb = _notebook(
        tmp_path / "01_slow.ipynb",
        f"import os, time\nopen({str(started)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.authoring.run_notebooks", nb, "--out-dir", tmp_path / "out"],
        cwd=ROOT,
        env={**os.environ, "BLITZ_FORCE_CPU": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180  # the kernel's start, on a loaded machine
        while not (started.is_file() and started.read_text()) and proc.poll() is None:
            assert time.monotonic() < deadline, "the cell never started"
            time.sleep(0.2)
        kernel = int(started.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, out + err
    assert "Traceback" not in out + err
    # stderr also holds the kernel's own start-up warning; the stop is its one last line
    assert err.strip().splitlines()[-1] == (
        f"run_notebooks: stopped by {signal.Signals(sig).name} during 01_slow.ipynb, its kernel "
        "ended and nothing of it kept; 0 ran before it (0 failed)"
    ), err
    with pytest.raises(ProcessLookupError):  # the kernel is gone, not orphaned
        os.kill(kernel, 0)
    assert not (tmp_path / "out").exists()  # no copy of a notebook that did not finish
