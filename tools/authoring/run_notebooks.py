"""Execute notebooks top to bottom with nbclient and report each (``make test-gpu``,
``make refresh``). Nothing is compared: on a GPU the numbers differ from the stored CPU
outputs by design, so the notebooks' own assertions are the check. Each runs in its own
folder, under the test contract (tools/harness/contract.py). Executed copies go to
``--out-dir``; ``--inplace`` rewrites the notebooks instead, only when every cell ran, and
without timestamps, so a diff shows what really changed.

    python -m tools.authoring.run_notebooks [--inplace] [--timeout 300] [NOTEBOOK ...]

Without NOTEBOOK: the lessons ``_toc.yml`` lists (tools/lessons.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tools.authoring import lesson_size
from tools.harness import contract
from tools.lessons import LessonError, lesson_notebooks, read_notebook

ROOT = Path(__file__).resolve().parents[2]
HEAD_LINES = 3  # of the failing cell's source
TAIL_LINES = 8  # of the traceback: the exception and the frames nearest to it
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks


@dataclass
class Result:
    passed: bool
    seconds: float
    report: str = ""  # empty when passed
    cell_seconds: dict[str, float] | None = None  # "whole", "core", "exercises": code cells' time


def cell_seconds(nb: nbformat.NotebookNode) -> dict[str, float]:
    """How long the code cells ran (nbclient's timestamps), all of them, the core path's and
    the exercises': what a learner waits for, without the kernel's start."""
    from datetime import datetime

    totals = {"whole": 0.0, "core": 0.0, "exercises": 0.0}
    for cell in nb.cells:
        stamps = cell.metadata.get("execution", {})
        if cell.cell_type == "code" and "shell.execute_reply" in stamps:
            began = stamps.get("iopub.execute_input") or stamps["shell.execute_reply.started"]
            end = datetime.fromisoformat(stamps["shell.execute_reply"])
            took = (end - datetime.fromisoformat(began)).total_seconds()
            totals["whole"] += took
            part = lesson_size.part_of(cell)
            if part in totals:  # the deep dives' share is what is left of the whole
                totals[part] += took
    return totals


def _cpu_model() -> str:
    """The CPU's model name where the system says it (Linux), else the platform's word."""
    import platform

    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text(errors="replace") if cpuinfo.is_file() else ""
    names = [
        line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")
    ]
    return names[0] if names else platform.processor() or platform.machine()


def record_times(path: Path, seconds: dict[str, float], environ=os.environ) -> str:
    """Store one run's times in notebooks/run_times.json under the data set it used (the
    subset, or ``full`` when BLITZ_CIFAR10=full), for ``lesson_size write``; which key."""
    data = "full" if environ.get("BLITZ_CIFAR10", "").strip().lower() == "full" else "subset"
    store = lesson_size.RUN_TIMES
    times = lesson_size.load_run_times(store)
    times.setdefault("notebooks", {}).setdefault(path.stem, {})[data] = {
        k: round(v, 1) for k, v in seconds.items()
    }
    times["measured_with"] = lesson_size.MEASURED_WITH.format(
        cpu=_cpu_model(), cpus=os.cpu_count(), threads=environ.get("OMP_NUM_THREADS", "unset")
    )
    store.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return data


def describe_device() -> tuple[str, bool]:
    """What the notebooks will run on (the kernels inherit this environment), and whether
    that is an accelerator."""
    import torch

    import utils

    device = utils.get_device()
    text = f"PyTorch {torch.__version__}, GPUs: {torch.cuda.device_count()}, device: {device}"
    return text, device.type != "cpu"


def _failure_report(
    nb: nbformat.NotebookNode, index: int | None, err: Exception, timeout: int
) -> str:
    """Where it failed (both numbers: "cell" counts every cell from 0, "code cell" is
    nbval's "Cell N"), the cell's first lines and the traceback's last, without colours."""
    if isinstance(err, CellTimeoutError):
        tail = [f"no reply within {timeout} s: the cell hangs or is slow (raise --timeout)"]
    elif isinstance(err, DeadKernelError):
        tail = ["the kernel died (out of memory, or a crash in native code such as a driver)"]
    elif isinstance(err, CellExecutionError):
        lines = [_ANSI.sub("", line).rstrip() for line in err.traceback.splitlines()]
        tail = [line for line in lines if line.strip()][-TAIL_LINES:]
        tail = tail or [f"{err.ename}: {err.evalue}"]
    else:  # e.g. a kernel that did not start
        tail = [f"{type(err).__name__}: {err}"]
    where = "before any cell ran"
    if index is not None:
        code_number = sum(c.cell_type == "code" for c in nb.cells[:index])
        head = nb.cells[index].source.splitlines()[:HEAD_LINES]
        where = f"cell {index} (code cell {code_number}):\n" + "\n".join(
            "      " + line for line in head
        )
    return f"  FAILED at {where}\n    error:\n" + "\n".join("      " + line for line in tail)


_STOPPED: list[int] = []  # the signal that stopped the run (Ctrl-C, SIGTERM), when one did


def _stop(signum: int, frame) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # once: a second one would cut the clean-up
        signal.signal(sig, signal.SIG_IGN)
    _STOPPED.append(signum)
    raise KeyboardInterrupt


def _end_kernel(client: NotebookClient) -> None:
    """End the kernel of a run a stop cut short: it is in a session of its own (jupyter_client),
    so Ctrl-C at the terminal never reaches it, and nbclient's thread is still waiting on it.
    Its process group goes, then its connection file."""
    km = getattr(client, "km", None)
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if hasattr(os, "killpg"):
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        with contextlib.suppress(Exception):
            process.wait(timeout=30)
    if km is not None and getattr(km, "connection_file", ""):
        Path(km.connection_file).unlink(missing_ok=True)


def execute(nb: nbformat.NotebookNode, path: Path, timeout: int, kernel: str) -> Result:
    """Run ``nb`` (read from ``path``) top to bottom in memory, in ``path``'s folder, filling
    in outputs and timestamps. The caller applies the test contract (``contract.apply()``)."""
    running: list[int] = []  # index of the cell being executed, set by nbclient's hook
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(path.parent)}},  # the kernel's working directory
        on_cell_execute=lambda cell, cell_index: running.append(cell_index),
        record_timing=True,  # for the run times; stored notebooks keep no timestamps
    )
    start = time.perf_counter()
    err = _execute_in_thread(client)
    if err is None:
        return Result(True, time.perf_counter() - start, cell_seconds=cell_seconds(nb))
    # RuntimeError covers DeadKernelError and a kernel that does not start: report, go on.
    if isinstance(err, CellExecutionError | CellTimeoutError | RuntimeError):
        report = _failure_report(nb, running[-1] if running else None, err, timeout)
        return Result(False, time.perf_counter() - start, report)
    raise err


def _execute_in_thread(client: NotebookClient) -> BaseException | None:
    """``client.execute()`` in a thread of its own; what it raised. There nbclient cannot take
    over SIGINT and SIGTERM (it adds event-loop handlers in the main thread only, whose clean-up
    ends in an AssertionError of its own): they reach ``_stop`` here, which ends the kernel."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            client.execute()
        except BaseException as err:  # handed to the main thread
            raised.append(err)

    worker = threading.Thread(target=run, name="nbclient", daemon=True)
    worker.start()
    try:
        worker.join()  # a signal's handler runs here (the main thread) and may raise
    except BaseException:
        _end_kernel(client)
        worker.join(timeout=30)  # the client sees its kernel die and returns
        raise
    return raised[0] if raised else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="default: the lessons _toc.yml lists"
    )
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build" / "gpu-run")
    parser.add_argument("--inplace", action="store_true", help="store the outputs (make refresh)")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    parser.add_argument(
        "--record-times",
        action="store_true",
        help="store each passing notebook's run time in notebooks/run_times.json (for "
        "lesson_size write); --inplace does too",
    )
    args = parser.parse_args(argv)
    contract.apply()
    if missing := [str(p) for p in args.notebooks if not p.is_file()]:
        parser.error(f"no such notebook: {', '.join(missing)}")
    # Everything a run reads is checked before the first notebook is rewritten: the table of
    # contents, every notebook's JSON, and the run times it will add to.
    try:
        args.notebooks = args.notebooks or lesson_notebooks()
        notebooks = [read_notebook(path) for path in args.notebooks]
        if args.inplace or args.record_times:
            lesson_size.load_run_times()
    except LessonError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    names = [p.name for p in args.notebooks]
    if clashes := sorted({n for n in names if names.count(n) > 1}):  # copies named by name
        parser.error(f"two notebooks share a name, their copies would collide: {clashes}")
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    try:
        KernelSpecManager().get_kernel_spec(args.kernel)
    except NoSuchKernel:
        known = ", ".join(sorted(KernelSpecManager().find_kernel_specs())) or "none"
        parser.error(f"no Jupyter kernel named {args.kernel!r} (installed: {known})")
    text, accelerated = describe_device()
    print(text, flush=True)
    if not accelerated and not args.inplace:
        print(
            "WARNING: running on the CPU: this checks nothing GPU-specific "
            "(see the lines above for why no accelerator was selected)",
            flush=True,
        )
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    failed = ran = 0
    current = "the start"
    try:
        for path, nb in zip(args.notebooks, notebooks, strict=True):
            current = path.name
            failed += not run_one(path, nb, args)
            ran += 1
    except BaseException:
        if not _STOPPED:
            raise
        name = signal.Signals(_STOPPED[0]).name
        print(
            f"run_notebooks: stopped by {name} during {current}, its kernel ended and nothing of "
            f"it kept; {ran} ran before it ({failed} failed)",
            file=sys.stderr,
        )
        return 128 + _STOPPED[0]
    where = "stored in place (failed ones left as they were)" if args.inplace else args.out_dir
    print(f"{len(args.notebooks) - failed} passed, {failed} failed; executed copies: {where}")
    return 1 if failed else 0


def run_one(path: Path, nb: nbformat.NotebookNode, args: argparse.Namespace) -> bool:
    """Run one notebook, write its copy (or store it in place), print its lines; passed?"""
    result = execute(nb, path.resolve(), args.timeout, args.kernel)
    if not args.inplace:  # the copy also when it failed: outputs up to the error
        args.out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, args.out_dir / path.name)
    elif result.passed:
        for cell in nb.cells:  # no timestamps in a stored notebook
            cell.metadata.pop("execution", None)
        nbformat.write(nb, path)
    print(f"{'OK    ' if result.passed else 'FAILED'} {result.seconds:6.1f} s  {path}", flush=True)
    if not result.passed:
        print(result.report, flush=True)
    elif (args.record_times or args.inplace) and result.cell_seconds:
        data = record_times(path, result.cell_seconds)
        print(f"       run time recorded ({data}): {result.cell_seconds}", flush=True)
    return result.passed


if __name__ == "__main__":
    sys.exit(main())
