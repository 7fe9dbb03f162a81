"""How the notebooks run under test, defined once: pytest (``tests/conftest.py``), ``make
refresh`` and ``make test-gpu`` (``tools/authoring/run_notebooks.py``) and ``make
test-portable`` all
apply these defaults, so each works the same from a fresh shell with nothing exported.

The stored outputs were recorded on a CPU, with two threads, from the 6,000-image CIFAR-10
subset: each is one documented variable that a learner can set the same way before ``make
lab`` (README); nothing else differs from a learner's kernel. A variable already set wins:
``OMP_NUM_THREADS=4 pytest ...`` is how ``make test-portable`` tries other thread counts,
``BLITZ_FORCE_CPU=0`` lets the notebooks use an accelerator (``make test-gpu``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

from utils import data

ROOT = Path(__file__).resolve().parents[2]
SHARED_SUBSET = ROOT.parent / "shared" / "data" / "cifar10-subset.npz"
# The notebooks' thread count where the shell sets none (the stored outputs were recorded so).
THREADS = "2"
_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}

# What a kernel runs first on a Mac when the CPU is forced: there is no variable that hides
# Apple's GPU the way CUDA_VISIBLE_DEVICES="" hides NVIDIA's. It answers as CUDA does with
# CUDA_VISIBLE_DEVICES="": torch.backends.mps says unavailable, and so does torch.accelerator,
# whose is_available() and device_count() ask torch.mps (torch/accelerator/__init__.py; its
# current_accelerator() still names "mps", the build's accelerator, as it names "cuda" here).
_HIDE_MPS = """import torch

torch.backends.mps.is_available = lambda: False
torch.mps.is_available = lambda: False
torch.mps.device_count = lambda: 0
"""


# The environment of the shell that started the tests, before apply() changed anything: what
# `make lab` gets when a learner types it (tests/test_lab.py starts it with this).
SHELL_ENVIRON: dict[str, str] = {}


def apply(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set the test contract's defaults in ``environ`` (kernels and workers inherit them).

    Only documented variables, each of which a learner could set the same way before
    ``make lab`` (README): tests/test_kernel_env.py fails on any other difference between a
    test kernel and a kernel of ``make lab``."""
    if environ is os.environ and not SHELL_ENVIRON:
        SHELL_ENVIRON.update(environ)
    environ.setdefault("OMP_NUM_THREADS", THREADS)
    environ.setdefault("BLITZ_CIFAR10", "subset")
    _subset_file(environ)
    force = environ.setdefault("BLITZ_FORCE_CPU", "1").strip().lower()
    if force not in _ON | _OFF:
        raise SystemExit(f"BLITZ_FORCE_CPU={force!r}: use 1 (CPU only, the default) or 0")
    if force in _ON:
        environ["CUDA_VISIBLE_DEVICES"] = ""  # no GPU for the notebooks, workers and tests
        if sys.platform == "darwin" and "IPYTHONDIR" not in environ:
            ipython = Path(tempfile.mkdtemp(prefix="blitz-ipython-"))
            startup = ipython / "profile_default" / "startup"
            startup.mkdir(parents=True)
            (startup / "00-hide-mps.py").write_text(_HIDE_MPS)
            environ["IPYTHONDIR"] = str(ipython)


def _subset_file(environ: MutableMapping[str, str]) -> None:
    """``BLITZ_CIFAR10_SUBSET``: the team's file beside the checkout, else one cut once from
    the full download into notebooks/data/ (a machine with internet but without the file)."""
    if environ.get(data.SUBSET_ENV, "").strip():
        return
    if SHARED_SUBSET.is_file():
        environ[data.SUBSET_ENV] = str(SHARED_SUBSET)
        return
    made = ROOT / "notebooks" / "data" / "cifar10-subset.npz"
    if not made.is_file():
        print(f"test contract: cutting the CIFAR-10 subset into {made} (once)", file=sys.stderr)
        try:
            data.write_subset(made, root=made.parent)
        except (data.CIFAR10Unavailable, data.SubsetError) as err:
            print(f"test contract: no CIFAR-10 subset: {err}", file=sys.stderr)
            return  # the notebooks that need it fail with that message
    environ[data.SUBSET_ENV] = str(made)
