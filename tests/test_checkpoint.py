"""utils.checkpoint: an interrupted and resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import utils
from utils import checkpoint as ckpt_mod
from utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

NUM_EPOCHS = 4
STEPS_PER_EPOCH = 5


def make_run(seed: int = 0):
    """A tiny model with dropout (uses the RNG), SGD with momentum and a one-cycle schedule."""
    utils.seed_everything(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.2, total_steps=NUM_EPOCHS * STEPS_PER_EPOCH
    )
    return model, optimizer, scheduler


def train_epoch(model, optimizer, scheduler) -> None:
    # Data drawn from every generator a real loop may use: torch, NumPy and Python.
    for _ in range(STEPS_PER_EPOCH):
        X = torch.randn(6, 8) + float(np.random.rand()) + random.random()
        y = torch.randint(0, 3, (6,))
        loss = nn.functional.cross_entropy(model(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def test_resumed_run_matches_uninterrupted_run(tmp_path: Path) -> None:
    model, optimizer, scheduler = make_run()
    for _ in range(NUM_EPOCHS):
        train_epoch(model, optimizer, scheduler)
    reference = {k: v.clone() for k, v in model.state_dict().items()}

    # Interrupted after 2 of 4 epochs...
    model, optimizer, scheduler = make_run()
    for epoch in range(2):
        train_epoch(model, optimizer, scheduler)
        save_checkpoint(tmp_path / "run.pt", model, optimizer, scheduler, epoch=epoch + 1)
    # ...the "new process" starts with other random numbers and fresh objects.
    model, optimizer, scheduler = make_run(seed=123)
    state = load_checkpoint(tmp_path / "run.pt", model, optimizer, scheduler)
    assert state["epoch"] == 2
    for _ in range(state["epoch"], NUM_EPOCHS):
        train_epoch(model, optimizer, scheduler)

    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, reference[name], rtol=0, atol=1e-7, msg=name)
    assert scheduler.last_epoch == NUM_EPOCHS * STEPS_PER_EPOCH


def test_resume_without_rng_state_differs(tmp_path: Path) -> None:
    """The RNG state matters: without it the resumed run does not end at the same place."""
    model, optimizer, scheduler = make_run()
    for _ in range(NUM_EPOCHS):
        train_epoch(model, optimizer, scheduler)
    reference = model[0].weight.detach().clone()
    model, optimizer, scheduler = make_run()
    train_epoch(model, optimizer, scheduler)
    save_checkpoint(tmp_path / "run.pt", model, optimizer, scheduler, epoch=1)
    model, optimizer, scheduler = make_run(seed=123)
    load_checkpoint(tmp_path / "run.pt", model, optimizer, scheduler, restore_rng=False)
    for _ in range(1, NUM_EPOCHS):
        train_epoch(model, optimizer, scheduler)
    assert not torch.allclose(model[0].weight, reference)


def test_checkpoint_loads_with_weights_only_and_keeps_extras(tmp_path: Path) -> None:
    model, optimizer, scheduler = make_run()
    path = save_checkpoint(
        tmp_path / "sub" / "c.pt", model, optimizer, scheduler, epoch=3, losses=[2.3, 1.9]
    )
    raw = torch.load(path, weights_only=True)  # no weights_only=False anywhere
    assert raw["format"] == ckpt_mod.FORMAT and raw["epoch"] == 3
    assert not (tmp_path / "sub" / "c.pt.tmp").exists()
    state = load_checkpoint(path, make_run()[0])
    assert state == {"epoch": 3, "losses": [2.3, 1.9]}


def test_rng_state_round_trip() -> None:
    state = ckpt_mod.rng_state()
    a = (random.random(), float(np.random.rand()), torch.rand(2))
    ckpt_mod.set_rng_state(state)
    b = (random.random(), float(np.random.rand()), torch.rand(2))
    assert a[:2] == b[:2] and torch.equal(a[2], b[2])


@pytest.mark.parametrize("cut", [0, 100, 0.5, -10])
def test_truncated_checkpoint_is_a_clear_error(tmp_path: Path, cut: float) -> None:
    model, optimizer, scheduler = make_run()
    path = save_checkpoint(tmp_path / "c.pt", model, optimizer, scheduler, epoch=1)
    blob = path.read_bytes()
    end = int(len(blob) * cut) if isinstance(cut, float) else cut
    path.write_bytes(blob[:end])
    with pytest.raises(CheckpointError, match="corrupt or truncated") as info:
        load_checkpoint(path, model, optimizer, scheduler)
    assert "Delete it" in str(info.value)


def test_corrupted_bytes_are_a_clear_error(tmp_path: Path) -> None:
    model = make_run()[0]
    path = save_checkpoint(tmp_path / "c.pt", model, epoch=1)
    blob = bytearray(path.read_bytes())
    blob[: len(blob) // 2] = bytes(len(blob) // 2)  # zero the first half
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(path, model)


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    model = make_run()[0]
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "absent.pt", model)
    torch.save(model.state_dict(), tmp_path / "weights.pt")  # a plain state_dict
    with pytest.raises(CheckpointError, match="not a checkpoint written by save_checkpoint"):
        load_checkpoint(tmp_path / "weights.pt", model)


def test_checkpoint_from_another_model_is_named(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "c.pt", nn.Linear(4, 2), epoch=1)
    with pytest.raises(CheckpointError, match="does not fit"):
        load_checkpoint(path, nn.Linear(5, 2))
    with pytest.raises(CheckpointError, match="no optimizer state"):
        model = nn.Linear(4, 2)
        load_checkpoint(path, model, torch.optim.SGD(model.parameters(), lr=0.1))
