"""Every committed file that a tool writes, regenerated in the one right order (``make
generate``), or checked (``make test`` runs ``--check``: it names the step that is stale).

1. ``utils/`` lesson modules from the notebooks' cells tagged ``save``
(tools/authoring/save_cells.py);
2. slide metadata from the headings (tools/authoring/slides.py);
3. learner and run times in the headers, both languages, and the README's table
   (tools/authoring/lesson_size.py, from notebooks/run_times.json);
4. the Chinese notebooks from the English ones and the catalogs (tools/authoring/i18n.py).

Stored outputs are not generated here: ``make refresh`` re-executes the notebooks (which
also records their run times) and then runs this. After ``python -m tools.authoring.generate``,
``git diff`` shows nothing unless a notebook or a catalog changed.

    python -m tools.authoring.generate           # write everything
    python -m tools.authoring.generate --check   # exit 1 naming each stale step
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# (what it writes, the command that writes it, the command that checks it): in this order,
# because the later ones read what the earlier ones wrote (i18n copies slide metadata and the
# header's times into the Chinese notebooks).
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


def write() -> int:
    for what, module, args, _ in STEPS:
        done = _run(module, args)
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            print(f"generate: {what} failed (python -m {module} {' '.join(args)})", file=sys.stderr)
            return 1
    return 0


def check() -> list[str]:
    """One line per stale step: what is stale, the check's first complaint, the fix."""
    found = []
    for what, module, _, args in STEPS:
        done = _run(module, args)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            first = said[0] if said else f"exit code {done.returncode}"
            found.append(f"stale: {what}: {first} -- run `make generate`")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when stale")
    args = parser.parse_args(argv)
    if not args.check:
        return write()
    found = check()
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
