"""Reproducibility: one call seeds Python's ``random``, NumPy and PyTorch.

Taught in ``notebooks/01_tensors.ipynb``, where random tensors first appear.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int = 0) -> None:
    """Seed ``random``, NumPy and torch (CPU and every GPU) with ``seed``.

    Returns ``None`` on purpose: ``torch.manual_seed`` returns a Generator whose repr
    holds a memory address, which would change a notebook's output on every run.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
