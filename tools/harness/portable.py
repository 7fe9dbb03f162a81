"""``make test-portable``: nbval on every notebook under other CPU kernels and thread counts.

The stored outputs come from one machine. A learner's CPU picks other oneDNN/MKL kernels and
may run another number of threads, which changes the last digits of long floating-point
work. This re-runs nbval (strict, with the bands of ``tests/nbval_bands.py``) against the
same stored outputs under each variant below, on this one machine, and fails if any does.

    python -m tools.harness.portable                 # every variant
    python -m tools.harness.portable --only omp1     # one of them
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What differs between learners' machines, reproduced on one: capped instruction sets make
# oneDNN, MKL and ATen's own kernels take the code paths an older CPU would.
VARIANTS: dict[str, dict[str, str]] = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
    "generic": {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    },
    "omp1": {"OMP_NUM_THREADS": "1"},
    "omp4": {"OMP_NUM_THREADS": "4"},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(VARIANTS), help="a variant")
    parser.add_argument("notebooks", nargs="*", default=["notebooks"], help="default: all")
    args = parser.parse_args(argv)
    names = args.only or list(VARIANTS)
    results = []
    for name in names:
        env = {**os.environ, **VARIANTS[name]}  # pytest adds the rest (tools/harness/contract.py)
        settings = " ".join(f"{k}={v}" for k, v in VARIANTS[name].items())
        print(f"\n=== variant {name}: {settings}", flush=True)
        start = time.perf_counter()
        command = [sys.executable, "-m", "pytest", "--nbval", "-q", *args.notebooks]
        rc = subprocess.run(command, cwd=ROOT, env=env).returncode
        results.append((name, rc, time.perf_counter() - start))
    print("\n=== test-portable summary")
    for name, rc, seconds in results:
        verdict = "passed" if rc == 0 else f"FAILED (pytest exit {rc})"
        print(f"{name:8s} {verdict:24s} {seconds:6.0f} s")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
