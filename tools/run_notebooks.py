"""Execute notebooks top to bottom with nbclient and report each one: ``make test-gpu`` uses it.

No output is compared: on a GPU the numbers differ from the stored CPU outputs by design,
so the notebooks' own assertions are the check. Executed copies go to ``--out-dir``; the
stored notebooks are never touched.

    python tools/run_notebooks.py notebooks/*.ipynb             # every lesson
    python tools/run_notebooks.py --timeout 300 notebooks/05_data_parallel.ipynb
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

ROOT = Path(__file__).resolve().parents[1]


def describe_device() -> str:
    """What the notebooks will run on, and a warning when that is only the CPU."""
    import torch

    import utils

    device = utils.get_device()
    lines = [f"device: utils.get_device() -> {device}; CUDA GPUs visible to torch: "
             f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}"]  # fmt: skip
    if device.type == "cpu":
        lines.append(
            "WARNING: no accelerator is in use (none found, or BLITZ_FORCE_CPU is set): the "
            "notebooks run on the CPU, which checks nothing GPU-specific"
        )
    return "\n".join(lines)


def _failed_cell(nb: nbformat.NotebookNode, err: Exception) -> str:
    """Which cell failed (index among all cells and among code cells) and what it said."""
    for index, cell in enumerate(nb.cells):
        outputs = cell.get("outputs", []) if cell.cell_type == "code" else []
        if any(o.get("output_type") == "error" for o in outputs) or (
            isinstance(err, CellTimeoutError) and cell.get("execution_count") is None
            and cell.cell_type == "code"
        ):  # fmt: skip
            code_index = sum(c.cell_type == "code" for c in nb.cells[:index])
            head = "\n".join("      " + line for line in cell.source.splitlines()[:3])
            return f"cell {index} (code cell {code_index}):\n{head}"
    return "cell unknown"


def run_one(path: Path, out_dir: Path, timeout: int, kernel: str) -> tuple[bool, float, str]:
    """Execute one notebook in its own folder; (passed, seconds, failure report)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    report = ""
    try:
        client.execute()
        passed = True
    except (CellExecutionError, CellTimeoutError) as err:
        passed = False
        tail = "\n".join("      " + line for line in str(err).strip().splitlines()[-6:])
        report = f"  FAILED at {_failed_cell(nb, err)}\n    error:\n{tail}"
    seconds = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / path.name)
    return passed, seconds, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build" / "gpu-run")
    parser.add_argument("--kernel", default="python3")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    print(describe_device(), flush=True)
    failed = []
    for path in args.notebooks:
        passed, seconds, report = run_one(path.resolve(), args.out_dir, args.timeout, args.kernel)
        print(f"{'OK    ' if passed else 'FAILED'} {seconds:6.1f} s  {path}", flush=True)
        if not passed:
            print(report, flush=True)
            failed.append(path)
    print(f"{len(args.notebooks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
