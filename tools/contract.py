"""How the notebooks run under test, defined once: pytest (``tests/conftest.py``), ``make
refresh`` and ``make test-gpu`` (``tools/run_notebooks.py``) and ``make test-portable`` all
apply these defaults, so each works the same from a fresh shell with nothing exported.

The stored outputs were recorded on a CPU, with two threads, from the 6,000-image CIFAR-10
subset. A variable already set wins: ``OMP_NUM_THREADS=4 pytest ...`` is how
``make test-portable`` tries other thread counts, ``BLITZ_FORCE_CPU=0`` lets the notebooks
use an accelerator (``make test-gpu``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

from utils import data

ROOT = Path(__file__).resolve().parents[1]
SHARED_SUBSET = ROOT.parent / "shared" / "data" / "cifar10-subset.npz"
_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}

# What a kernel runs first on a Mac when the CPU is forced: there is no variable that hides
# Apple's GPU the way CUDA_VISIBLE_DEVICES="" hides NVIDIA's.
_HIDE_MPS = "import torch\n\ntorch.backends.mps.is_available = lambda: False\n"


def add_venv_to_path(environ: MutableMapping[str, str] = os.environ) -> None:
    """Put this Python's scripts folder first on PATH, as an activated venv does, so that a
    notebook's ``!torchrun ...`` runs the launcher of the kernel's own PyTorch."""
    scripts = str(Path(sys.executable).parent)
    parts = environ.get("PATH", "").split(os.pathsep)
    if parts[:1] != [scripts]:
        environ["PATH"] = os.pathsep.join([scripts, *(p for p in parts if p and p != scripts)])


def apply(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set the test contract's defaults in ``environ`` (kernels and workers inherit them)."""
    environ.setdefault("OMP_NUM_THREADS", "2")
    add_venv_to_path(environ)
    data.install_kernel_hook()  # torchvision's CIFAR10 calls read the subset in the kernels
    environ.setdefault("BLITZ_CIFAR10", "subset")
    if SHARED_SUBSET.is_file():
        environ.setdefault("BLITZ_CIFAR10_SUBSET", str(SHARED_SUBSET))
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
