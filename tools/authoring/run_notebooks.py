"""Execute notebooks top to bottom with nbclient and report each one: ``make test-gpu`` and
``make refresh`` use it.

No output is compared: on a GPU the numbers differ from the stored CPU outputs by design,
so the notebooks' own assertions are the check. Each notebook runs with its own folder as
the working directory (relative paths such as ``data/`` behave as in Lab), in the
environment of the test contract (tools/harness/contract.py). Executed copies go to ``--out-dir``;
with ``--inplace`` (``make refresh``) the notebooks themselves are rewritten instead, only
when every cell ran, and without execution timestamps, so a diff shows what really changed.

    python -m tools.authoring.run_notebooks notebooks/*.ipynb             # every lesson
    python -m tools.authoring.run_notebooks --timeout 300 notebooks/05_data_parallel.ipynb
    python -m tools.authoring.run_notebooks --inplace notebooks/*.ipynb   # store fresh outputs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tools.authoring import lesson_size
from tools.harness import contract

ROOT = Path(__file__).resolve().parents[2]
HEAD_LINES = 3  # of the failing cell's source
TAIL_LINES = 8  # of the traceback: the exception and the frames nearest to it
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks


@dataclass
class Result:
    passed: bool
    seconds: float
    report: str = ""  # empty when passed
    cell_seconds: dict[str, float] | None = None  # "whole", "core": the code cells' run time


def cell_seconds(nb: nbformat.NotebookNode) -> dict[str, float]:
    """How long the code cells ran (nbclient's timestamps), all of them and the core path's:
    what a learner waits for, without the kernel's start."""
    from datetime import datetime

    totals = {"whole": 0.0, "core": 0.0}
    for cell in nb.cells:
        stamps = cell.metadata.get("execution", {})
        if cell.cell_type != "code" or "shell.execute_reply" not in stamps:
            continue
        began = stamps.get("iopub.execute_input") or stamps["shell.execute_reply.started"]
        took = (
            datetime.fromisoformat(stamps["shell.execute_reply"].replace("Z", "+00:00"))
            - datetime.fromisoformat(began.replace("Z", "+00:00"))
        ).total_seconds()
        totals["whole"] += took
        if lesson_size.part_of(cell) == "core":
            totals["core"] += took
    return totals


def _cpu_model() -> str:
    """The CPU's model name where the system says it (Linux), else the platform's word."""
    import platform

    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def record_times(path: Path, seconds: dict[str, float], environ=os.environ) -> str:
    """Store one run's times in notebooks/run_times.json under the data set it used (the
    subset, or ``full`` when BLITZ_CIFAR10=full), for ``lesson_size write``; which key."""
    data = "full" if environ.get("BLITZ_CIFAR10", "").strip().lower() == "full" else "subset"
    store = lesson_size.RUN_TIMES
    times = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else {}
    times.setdefault("notebooks", {}).setdefault(path.stem, {})[data] = {
        k: round(v, 1) for k, v in seconds.items()
    }
    times["measured_with"] = (
        f"python -m tools.authoring.run_notebooks --record-times on {_cpu_model()}, "
        f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={environ.get('OMP_NUM_THREADS', 'unset')}"
    )
    store.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return data


def describe_device() -> tuple[str, bool]:
    """What the notebooks will run on, and whether that is an accelerator.

    Computed here with the same environment the kernels inherit, so it is what they will see.
    """
    import torch

    import utils

    device = utils.get_device()
    text = f"PyTorch {torch.__version__}, GPUs: {torch.cuda.device_count()}, device: {device}"
    return text, device.type != "cpu"


def _indent(lines: list[str]) -> str:
    return "\n".join("      " + line for line in lines)


def _error_tail(err: Exception, timeout: int) -> list[str]:
    """The last lines of what went wrong, without colour codes."""
    if isinstance(err, CellTimeoutError):
        return [f"no reply within {timeout} s: the cell hangs or is slow (raise --timeout)"]
    if isinstance(err, DeadKernelError):
        return ["the kernel died (out of memory, or a crash in native code such as a driver)"]
    if isinstance(err, CellExecutionError):
        lines = [_ANSI.sub("", line).rstrip() for line in err.traceback.splitlines()]
        lines = [line for line in lines if line.strip()]
        return lines[-TAIL_LINES:] or [f"{err.ename}: {err.evalue}"]
    return [f"{type(err).__name__}: {err}"]  # e.g. a kernel that did not start


def _failure_report(
    nb: nbformat.NotebookNode, index: int | None, err: Exception, timeout: int
) -> str:
    if index is None:
        where = "before any cell ran"
    else:
        cell = nb.cells[index]
        code_number = sum(c.cell_type == "code" for c in nb.cells[:index])
        # Both numbers: "cell" counts every cell from 0, "code cell" is nbval's "Cell N".
        where = f"cell {index} (code cell {code_number}):\n"
        where += _indent(cell.source.splitlines()[:HEAD_LINES])
    return f"  FAILED at {where}\n    error:\n{_indent(_error_tail(err, timeout))}"


def execute(nb: nbformat.NotebookNode, path: Path, timeout: int, kernel: str) -> Result:
    """Run ``nb`` (read from ``path``) top to bottom in memory, in ``path``'s folder: its
    outputs and timestamps are filled in, nothing is written. The caller applies the test
    contract (``contract.apply()``), as ``main`` and ``make html EXECUTE=1`` do."""
    running: list[int] = []  # index of the cell being executed, set by nbclient's hook

    def on_cell_execute(cell: nbformat.NotebookNode, cell_index: int) -> None:
        running[:] = [cell_index]

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(path.parent)}},  # the kernel's working directory
        on_cell_execute=on_cell_execute,
        record_timing=True,  # for the run times; stored notebooks keep no timestamps
    )
    start = time.perf_counter()
    try:
        client.execute()
        result = Result(True, time.perf_counter() - start, cell_seconds=cell_seconds(nb))
    # RuntimeError covers DeadKernelError and a kernel that does not start: report, go on.
    except (CellExecutionError, CellTimeoutError, RuntimeError) as err:
        index = running[0] if running else None
        result = Result(
            False, time.perf_counter() - start, _failure_report(nb, index, err, timeout)
        )
    return result


def run_one(path: Path, out_dir: Path | None, timeout: int, kernel: str) -> Result:
    """Execute one notebook in its own folder; write the executed copy to ``out_dir``, or
    (``out_dir`` None) over the notebook itself if every cell ran."""
    nb = nbformat.read(path, as_version=4)
    result = execute(nb, path, timeout, kernel)
    if out_dir is None:
        if result.passed:
            for cell in nb.cells:  # timestamps an older run left
                cell.metadata.pop("execution", None)
            nbformat.write(nb, path)
        return result
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / path.name)  # also when it failed: outputs up to the error
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=ROOT / "build" / "gpu-run",
        help="where the executed copies go (default build/gpu-run)",
    )
    parser.add_argument(
        "--inplace", action="store_true", help="store the outputs in the notebooks (make refresh)"
    )
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument(
        "--record-times",
        action="store_true",
        help="store each passing notebook's run time in notebooks/run_times.json, the source of "
        "the headers' run-time lines (then: python -m tools.authoring.lesson_size write); "
        "--inplace does too",
    )
    args = parser.parse_args(argv)
    contract.apply()
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    names = [p.name for p in args.notebooks]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:  # the copies in --out-dir are named after the notebook alone
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
    failed = 0
    for path in args.notebooks:
        out_dir = None if args.inplace else args.out_dir
        result = run_one(path.resolve(), out_dir, args.timeout, args.kernel)
        print(
            f"{'OK    ' if result.passed else 'FAILED'} {result.seconds:6.1f} s  {path}", flush=True
        )
        if not result.passed:
            print(result.report, flush=True)
            failed += 1
        elif (args.record_times or args.inplace) and result.cell_seconds:
            data = record_times(path, result.cell_seconds)
            print(f"       run time recorded ({data}): {result.cell_seconds}", flush=True)
    where = "stored in place (failed ones left as they were)" if args.inplace else args.out_dir
    print(f"{len(args.notebooks) - failed} passed, {failed} failed; executed copies: {where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
