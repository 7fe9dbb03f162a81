"""A judge that leaves the learner's random numbers alone (used by the lessons' check modules).

Building a layer (``nn.Linear(...)``) or a shuffling loader draws from PyTorch's global
generator, so a check run in the notebook would change every random number drawn after it,
and with it the results of later cells. ``keeps_global_rng`` runs a judge on a forked CPU
generator, seeded, and restores the learner's state afterwards.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch


def keeps_global_rng(judge: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(judge)
    def isolated(*answers):
        with torch.random.fork_rng(devices=[]):  # the CPU generator only: touches no GPU
            torch.manual_seed(0)  # the same check on every run, whatever ran before
            return judge(*answers)

    return isolated
