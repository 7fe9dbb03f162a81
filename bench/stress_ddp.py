"""Stress command: do the DDP scripts end cleanly every time? (not part of `make test`)

    .venv/bin/python bench/stress_ddp.py [--runs 100] [--script minimal|train_ddp|both]

Launches a DDP script ``--runs`` times with ``python -m torch.distributed.run --standalone
--nproc-per-node=2`` (the kernel's own torchrun, as notebook 05 does), on the CPU (gloo), once
under plain settings and once with an extra ``sitecustomize`` on ``PYTHONPATH`` that installs
an import hook in every worker (as some environments have): a known gloo teardown race
aborted ranks more often there. Prints ``failures / runs`` per variant and the end of the
first failure's output; exits 1 if any run failed.

``minimal`` is ``ddp_minimal.py`` exactly as notebook 05's ``%%writefile`` cell writes it;
``train_ddp`` is ``scripts/train_ddp.py`` on a few steps of random images.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from utils import launch
from utils.cli import number

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_data_parallel.ipynb"
RUN_TIMEOUT_S = 120  # one launch; a hang counts as a failure
STOP_WAIT_S = 40  # how long a launch may take to end once told to (torchrun waits 30 s)
# An import hook that every worker loads at start-up (Python imports sitecustomize itself).
SITECUSTOMIZE = """import importlib.abc
import sys


class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        return None  # looks at every import, changes none


sys.meta_path.insert(0, Watch())
"""


def minimal_script(folder: Path) -> Path:
    """notebook 05's ddp_minimal.py, written from its %%writefile cell into ``folder``."""
    magic = "%%writefile ddp_minimal.py\n"
    for cell in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith(magic):
            path = folder / "ddp_minimal.py"
            path.write_text(source.removeprefix(magic), encoding="utf-8")
            return path
    raise SystemExit(f"{NOTEBOOK.name}: no cell starts with {magic.strip()!r}")


class Stopped(Exception):
    """Ctrl-C or SIGTERM: the launch in progress is ended, then the temporary folder."""


def _stop(signum: int, frame) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # once: a second one would cut the clean-up
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def _end(proc: subprocess.Popen) -> None:
    """End a launch: SIGTERM to torchrun, which ends its workers (they are in sessions of their
    own) within 30 s; SIGKILL if it has not ended in STOP_WAIT_S. Waited for: no zombie."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):  # already ended
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + STOP_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=1)  # reads its output meanwhile, so it never blocks
        if proc.returncode is not None:
            break
    for pipe in (proc.stdout, proc.stderr):  # a killed launch's workers may still hold them
        pipe.close()


def stress(make_argv, env: dict[str, str], cwd: Path, runs: int) -> tuple[int, str]:
    """How many of ``runs`` launches (``make_argv(i)``) failed (non-zero exit or a hang), and
    the first failure's output."""
    failures, first = 0, ""
    print(f"  0/{runs} runs", end="", flush=True)  # the line a stop message ends
    for i in range(runs):
        argv = make_argv(i)
        # a session of its own: Ctrl-C reaches this process only, which ends the launch in order
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
            failed, out = proc.returncode != 0, f"exit code {proc.returncode}\n{err}"
        except subprocess.TimeoutExpired:
            _end(proc)
            failed, out = True, f"still running after {RUN_TIMEOUT_S} s: killed"
        except BaseException:  # Stopped, or anything else: never leave a launch running
            _end(proc)
            raise
        if failed:
            failures += 1
            first = first or f"run {i + 1}: {out[-2000:]}"
        print(f"\r  {i + 1}/{runs} runs, {failures} failed", end="", flush=True)
    print()
    return failures, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=number(int, least=1), default=100, help="per variant")
    parser.add_argument("--script", choices=("minimal", "train_ddp", "both"), default="both")
    parser.add_argument("--variant", choices=("plain", "sitecustomize", "both"), default="both")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        total = run_all(args)
    except Stopped as stop:  # the launch was ended and the temporary folder removed on the way
        print(f"\nstress-ddp: stopped by {stop}; its launches ended, its temporary folder removed")
        sys.exit(128 + signal.Signals[str(stop)].value)
    sys.exit(1 if total else 0)


def run_all(args: argparse.Namespace) -> int:
    """Every script and variant asked for: the number of failed launches."""
    total = 0
    with tempfile.TemporaryDirectory(prefix="stress-ddp-") as tmp:
        work, hook = Path(tmp), Path(tmp) / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        minimal = str(minimal_script(work))
        tiny = ["--model", "lenet", "--num-train", "256", "--batch-size", "32", "--steps", "4"]
        scripts = {  # run number -> the script and its arguments (train_ddp: a new folder)
            "minimal": lambda i: [minimal],
            "train_ddp": lambda i: [
                str(launch.TRAIN_DDP_SCRIPT),
                *tiny,
                *("--out-dir", str(work / "runs" / str(i))),
            ],
        }
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        torchrun += ["--nproc-per-node=2", "--max-restarts=0"]
        names = list(scripts) if args.script == "both" else [args.script]
        variants = ("plain", "sitecustomize") if args.variant == "both" else (args.variant,)
        for name in names:
            for variant in variants:
                env = launch.worker_env(threads=1)
                env["TMPDIR"] = str(work)  # torchrun's log folders too: removed with it
                if variant == "sitecustomize":
                    env["PYTHONPATH"] = os.pathsep.join(
                        p for p in (str(hook), env.get("PYTHONPATH", "")) if p
                    )
                shutil.rmtree(work / "runs", ignore_errors=True)
                print(f"{name}, {variant}:")
                start = time.monotonic()
                failures, first = stress(
                    lambda i, n=name: [*torchrun, *scripts[n](i)], env, work, args.runs
                )
                total += failures
                took = time.monotonic() - start
                print(f"{name}, {variant}: {failures} failures / {args.runs} runs ({took:.0f} s)")
                if first:
                    print(f"  first failure, {first}")
    return total


if __name__ == "__main__":
    main()
