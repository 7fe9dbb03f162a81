"""Notebook 05's gradient check switches TF32 off and gives the settings back, even when it fails.

The cells of the from-scratch deep dive run in IPython, as in the notebook, from settings
that are not the defaults; once as they are, once with the check failing (the comparison
raises). Both times the TF32 settings must be the ones the learner had before.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_data_parallel.ipynb"
# The set-up cell, the deep dive's LeNet and helpers, and the check (by their first lines).
STARTS = ("import torch\n", "import torch.nn.functional as F", "def split_batch(", "tf32 = ")


def settings() -> tuple[str, str]:
    return torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision


@pytest.fixture
def learner_settings():
    """Settings a learner may have chosen (TF32 for matmuls, IEEE for convolutions)."""
    before = settings()
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    yield settings()
    torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision = before


def run_cells() -> object:
    code = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    cells = [next(s for s in code if s.startswith(start)) for start in STARTS]
    shell = InteractiveShell.instance(colors="nocolor")
    try:
        for source in cells:
            result = shell.run_cell(source, store_history=False)
        return result
    finally:
        InteractiveShell.clear_instance()


def test_the_check_passes_and_restores_the_settings(learner_settings) -> None:
    result = run_cells()
    assert result.success, result.error_in_exec
    assert settings() == learner_settings


def test_a_failing_check_still_restores_the_settings(learner_settings, monkeypatch) -> None:
    def differ(*args, **kwargs):
        raise AssertionError("the gradients differ")

    monkeypatch.setattr(torch.testing, "assert_close", differ)
    result = run_cells()
    assert isinstance(result.error_in_exec, AssertionError)  # the check failed ...
    assert settings() == learner_settings  # ... and the settings came back
