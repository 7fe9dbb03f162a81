"""Every committed file a tool writes, regenerated in the one right order (``make generate``)
or checked (``--check``, in ``make test``: it names each stale step). Stored outputs are not
generated here: ``make refresh`` re-executes the notebooks (recording their run times), then
runs this.

    python -m tools.authoring.generate [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import subprocess
import sys
from pathlib import Path

from tools.lessons import IGNORED

ROOT = Path(__file__).resolve().parents[2]
# (what it writes, module, write arguments, check arguments), in order: a later step reads
# what an earlier one wrote (i18n copies slide metadata and the headers' times).
STEPS = [
    ("utils/ from the cells tagged save", "tools.authoring.save_cells", ["write"], ["check"]),
    ("slide metadata", "tools.authoring.slides", ["write"], ["check"]),
    (
        "learner and run times (headers, README)",
        "tools.authoring.lesson_size",
        ["write"],
        ["check"],
    ),
    ("Chinese notebooks (notebooks/zh)", "tools.authoring.i18n", ["build"], ["check"]),
]


def _run(module: str, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True
    )


def check() -> list[str]:
    """One line per stale step: what is stale, the check's first complaint, the fix."""
    # The checks only read, so they run here, one after another: a Python for each would
    # spend most of its time importing what this one already has.
    results = []
    for _, module, _, args in STEPS:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = importlib.import_module(module).main(list(args))
            except SystemExit as stop:  # argparse's usage errors
                code = stop.code if isinstance(stop.code, int) else 1
        results.append(
            subprocess.CompletedProcess(module, code or 0, out.getvalue(), err.getvalue())
        )
    found = []
    for (what, *_), done in zip(STEPS, results, strict=True):
        if done.returncode != 0:
            said = [  # a notebook the step ignored (no lesson) is not why it failed
                line
                for line in (done.stderr.strip() or done.stdout.strip()).splitlines()
                if not line.startswith(IGNORED)
            ]
            first = said[0] if said else f"exit code {done.returncode}"
            if first.startswith("error: "):  # bad input: the later steps read it too
                found.append(f"{what}: {first}")
                break
            else:
                found.append(f"stale: {what}: {first} -- run `make generate`")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when stale")
    if parser.parse_args(argv).check:
        for line in (found := check()):
            print(line, file=sys.stderr)
        return 1 if found else 0
    said: set[str] = set()  # each step lists the lessons: a notebook it ignored is named once
    for what, module, args, _ in STEPS:
        done = _run(module, args)
        sys.stdout.write(done.stdout)
        for line in done.stderr.splitlines(keepends=True):
            if line not in said or done.returncode != 0:
                sys.stderr.write(line)
            said.add(line)
        if done.returncode != 0:
            print(f"generate: {what} failed (python -m {module} {' '.join(args)})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
