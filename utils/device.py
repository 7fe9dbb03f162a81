"""Choosing a device: CUDA if it is really usable, else Apple's MPS, else the CPU.

Taught in ``notebooks/01_tensors.ipynb`` (moving tensors with ``.to(device)``) and
used by every later notebook.

Two traps this module handles:

* The PyTorch wheel pinned by this project is a CUDA build, so
  ``torch.accelerator.current_accelerator()`` reports ``cuda`` even on a machine with
  no GPU. Only ``torch.cuda.is_available()`` tells whether CUDA can actually be used.
* ``CUDA_VISIBLE_DEVICES=""`` (empty) hides every GPU: it simply means "use the CPU".

Set ``BLITZ_FORCE_CPU=1`` to ignore every accelerator (the opt-out).
"""

from __future__ import annotations

import os

import torch

FORCE_CPU_ENV = "BLITZ_FORCE_CPU"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _force_cpu() -> bool:
    value = os.environ.get(FORCE_CPU_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    # A typo must not silently mean "use the GPU".
    raise ValueError(
        f"{FORCE_CPU_ENV}={os.environ[FORCE_CPU_ENV]!r} is neither on (1, true, yes, on) "
        "nor off (0, false, no, off, empty): set one of those"
    )


def num_gpus() -> int:
    """Number of usable CUDA GPUs (0 with the opt-out, or when ``CUDA_VISIBLE_DEVICES=""``)."""
    if _force_cpu():
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() == "":
        return 0
    if not torch.cuda.is_available():
        return 0
    return torch.cuda.device_count()


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def get_device(force_cpu: bool | None = None) -> torch.device:
    """Return the best available device: ``cuda`` > ``mps`` > ``cpu``.

    ``force_cpu=True`` (or the environment variable ``BLITZ_FORCE_CPU=1``) returns the
    CPU whatever hardware exists. Taught in notebook 01.
    """
    if force_cpu or _force_cpu():
        return torch.device("cpu")
    if num_gpus() > 0:
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def try_gpu(i: int = 0) -> torch.device:
    """Return ``cuda:i`` if that GPU exists, otherwise the CPU (notebook 01)."""
    if 0 <= i < num_gpus():
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def try_all_gpus() -> list[torch.device]:
    """Every usable GPU, or ``[cpu]`` when there is none -- never an empty list (notebook 05)."""
    gpus = [torch.device(f"cuda:{i}") for i in range(num_gpus())]
    return gpus or [torch.device("cpu")]


def device_summary() -> str:
    """One short, human-readable paragraph describing what this machine offers (notebook 01)."""
    lines = [f"PyTorch {torch.__version__}"]
    n = num_gpus()
    if n:
        for i in range(n):
            props = torch.cuda.get_device_properties(i)
            gib = props.total_memory / 2**30
            lines.append(f"cuda:{i}: {props.name} ({gib:.0f} GiB)")
    elif _force_cpu():
        lines.append(f"accelerators ignored: {FORCE_CPU_ENV} is set")
    elif os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        lines.append('GPUs hidden: CUDA_VISIBLE_DEVICES=""')
    else:
        lines.append("no usable CUDA GPU")
    if not _force_cpu():
        lines.append("MPS (Apple GPU): " + ("available" if _mps_available() else "not available"))
    lines.append(f"CPU threads: {torch.get_num_threads()}")
    lines.append(f"selected device: {get_device()}")
    return "\n".join(lines)
