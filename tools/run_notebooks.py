"""Execute notebooks top to bottom with nbclient and report each one: ``make test-gpu`` uses it.

No output is compared: on a GPU the numbers differ from the stored CPU outputs by design,
so the notebooks' own assertions are the check. Each notebook runs with its own folder as
the working directory (relative paths such as ``data/`` behave as in Lab) and inherits this
process's environment (``BLITZ_FORCE_CPU``, ``BLITZ_CIFAR10``, ...). Executed copies go to
``--out-dir``; the stored notebooks are never touched. Works on the CPU too.

    python tools/run_notebooks.py notebooks/*.ipynb             # every lesson
    python tools/run_notebooks.py --timeout 300 notebooks/05_data_parallel.ipynb
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parents[1]
HEAD_LINES = 3  # of the failing cell's source
TAIL_LINES = 8  # of the traceback: the exception and the frames nearest to it
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks


@dataclass
class Result:
    passed: bool
    seconds: float
    report: str = ""  # empty when passed


def describe_device() -> tuple[str, bool]:
    """What the notebooks will run on (utils' own summary), and whether that is an accelerator.

    Computed here with the same environment the kernels inherit, so it is what they will see.
    """
    import torch

    import utils

    text = f"{utils.device_summary()}\ntorch.cuda.device_count(): {torch.cuda.device_count()}"
    return text, utils.get_device().type != "cpu"


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


def run_one(path: Path, out_dir: Path, timeout: int, kernel: str) -> Result:
    """Execute one notebook in its own folder and write the executed copy to ``out_dir``."""
    nb = nbformat.read(path, as_version=4)
    running: list[int] = []  # index of the cell being executed, set by nbclient's hook

    def on_cell_execute(cell: nbformat.NotebookNode, cell_index: int) -> None:
        running[:] = [cell_index]

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(path.parent)}},  # the kernel's working directory
        on_cell_execute=on_cell_execute,
    )
    start = time.perf_counter()
    try:
        client.execute()
        result = Result(True, time.perf_counter() - start)
    # RuntimeError covers DeadKernelError and a kernel that does not start: report, go on.
    except (CellExecutionError, CellTimeoutError, RuntimeError) as err:
        index = running[0] if running else None
        result = Result(
            False, time.perf_counter() - start, _failure_report(nb, index, err, timeout)
        )
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
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    args = parser.parse_args(argv)
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
    try:
        text, accelerated = describe_device()
    except ValueError as err:  # e.g. a BLITZ_FORCE_CPU typo: the notebooks would fail the same
        parser.error(str(err))
    print(text, flush=True)
    if not accelerated:
        print(
            "WARNING: running on the CPU: this checks nothing GPU-specific "
            "(see the lines above for why no accelerator was selected)",
            flush=True,
        )
    failed = 0
    for path in args.notebooks:
        result = run_one(path.resolve(), args.out_dir, args.timeout, args.kernel)
        print(
            f"{'OK    ' if result.passed else 'FAILED'} {result.seconds:6.1f} s  {path}", flush=True
        )
        if not result.passed:
            print(result.report, flush=True)
            failed += 1
    print(
        f"{len(args.notebooks) - failed} passed, {failed} failed; executed copies in {args.out_dir}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
