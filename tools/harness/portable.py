"""``make test-portable``: nbval on every notebook under other CPU kernels and thread counts.

The stored outputs come from one machine. A learner's CPU picks other oneDNN/MKL kernels and
may run another number of threads, which changes the last digits of long floating-point
work. This re-runs nbval (strict, with the bands of ``tests/nbval_bands.py``) against the
same stored outputs under each variant below, on this one machine, and fails if any does.
Each instruction-set cap runs at one of the thread counts 1, 2 and 4 that ``make test`` did
not run at (the test contract's two, or ``OMP_NUM_THREADS`` where the shell sets it, as CI
does). With more threads than cores, PyTorch still runs as many as there are cores
(pytorch/pytorch#60000): on 2 cores, 4 threads are 2, and such a count is left out.

    python -m tools.harness.portable                 # every variant
    python -m tools.harness.portable --only omp1     # one of them
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tools.harness import contract

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
    "omp2": {"OMP_NUM_THREADS": "2"},
    "omp4": {"OMP_NUM_THREADS": "4"},
}


def threads_run(count: str) -> str:
    """How many threads PyTorch runs here when ``OMP_NUM_THREADS`` is ``count``: never more
    than its default, the machine's cores (pytorch/pytorch#60000), so on 2 cores 4 are 2."""
    probe = "import torch; print(torch.get_num_threads())"
    env = {**os.environ, "OMP_NUM_THREADS": count}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(f"portable: PyTorch did not start: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def default_variants(
    environ: Mapping[str, str] = os.environ, runs: Callable[[str], str] = threads_run
) -> tuple[list[str], list[str]]:
    """Each capped instruction set at one of the thread counts (1, 2, 4) that ``make test``
    did not run at, as a learner's machine differs in both at once; one left over runs
    alone. A count PyTorch cannot run here (more threads than cores) would repeat another
    run: it is left out, with a line saying so. Returns the runs and those lines."""
    asked = environ.get("OMP_NUM_THREADS", "").strip() or contract.THREADS
    isas = [name for name, env in VARIANTS.items() if "OMP_NUM_THREADS" not in env]
    seen, others, left_out = {runs(asked)}, [], []
    for name, env in VARIANTS.items():
        if (count := env.get("OMP_NUM_THREADS")) in (None, asked):
            continue  # an instruction set, or make test's own count
        if (ran := runs(count)) in seen:
            left_out.append(f"{name}: PyTorch runs {ran} threads here, as another run does")
            continue
        seen.add(ran)
        others.append(name)
    pairs = [f"{isa}+{omp}" for isa, omp in zip(isas, others, strict=False)]
    return pairs + isas[len(others) :] + others[len(isas) :], left_out


def _variant(name: str) -> dict[str, str]:
    """``avx2``, ``omp4`` or several joined by ``+`` (``avx2+omp4``)."""
    parts = name.split("+")
    unknown = [part for part in parts if part not in VARIANTS]
    if unknown:
        known = ", ".join(VARIANTS)
        raise SystemExit(f"portable: no variant {unknown[0]!r}: use {known}, or join them with +")
    return {k: v for part in parts for k, v in VARIANTS[part].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a variant, e.g. omp1 or avx2+omp4")
    parser.add_argument("notebooks", nargs="*", default=["notebooks"], help="default: all")
    args = parser.parse_args(argv)
    names, left_out = (args.only, []) if args.only else default_variants()
    for line in left_out:
        print(f"=== left out {line}", flush=True)
    variants = {name: _variant(name) for name in names}
    results = []
    for name in names:
        env = {**os.environ, **variants[name]}  # pytest adds the rest (tools/harness/contract.py)
        settings = " ".join(f"{k}={v}" for k, v in variants[name].items())
        print(f"\n=== variant {name}: {settings}", flush=True)
        start = time.perf_counter()
        command = [sys.executable, "-m", "pytest", "--nbval", "-q", *args.notebooks]
        rc = subprocess.run(command, cwd=ROOT, env=env).returncode
        results.append((name, rc, time.perf_counter() - start))
    print("\n=== test-portable summary")
    for name, rc, seconds in results:
        verdict = "passed" if rc == 0 else f"FAILED (pytest exit {rc})"
        print(f"{name:13s} {verdict:24s} {seconds:6.0f} s")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
