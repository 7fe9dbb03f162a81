"""utils.checkpoint: an interrupted and resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import os
import pickle
import random
import stat
import subprocess
import sys
import time
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
        tmp_path / "sub" / "c.pt", model, optimizer, scheduler, epoch=3, losses=[2.3, 1.9], acc=0.5
    )
    raw = torch.load(path, weights_only=True)  # no weights_only=False anywhere
    assert raw["format"] == ckpt_mod.FORMAT and raw["epoch"] == 3
    assert [f.name for f in (tmp_path / "sub").iterdir()] == ["c.pt"]  # no temporary file
    state = load_checkpoint(path, make_run()[0])
    assert state == {"epoch": 3, "losses": [2.3, 1.9], "acc": 0.5}


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


_SCHEDULER_ARGS = {"StepLR": {"step_size": 2}, "OneCycleLR": {"max_lr": 0.2, "total_steps": 10}}


def _build(names: dict[str, str]) -> tuple[nn.Module, dict]:
    """A model and the optimizer/scheduler named, e.g. {"optimizer": "SGD"}."""
    model, objs = nn.Linear(2, 2), {}
    if "optimizer" in names:
        objs["optimizer"] = getattr(torch.optim, names["optimizer"])(model.parameters(), lr=0.1)
    if "scheduler" in names:
        cls = getattr(torch.optim.lr_scheduler, names["scheduler"])
        objs["scheduler"] = cls(objs["optimizer"], **_SCHEDULER_ARGS[names["scheduler"]])
    return model, objs


@pytest.mark.parametrize(
    ("saved", "given", "match"),
    [
        ({"optimizer": "SGD"}, {"optimizer": "Adam"}, "the optimizer SGD, but Adam was given"),
        ({}, {"optimizer": "SGD"}, "no optimizer state, but SGD was given"),
        (
            {"optimizer": "SGD", "scheduler": "StepLR"},
            {"optimizer": "SGD", "scheduler": "OneCycleLR"},
            "the scheduler StepLR, but OneCycleLR was given",
        ),
    ],
    ids=["another optimizer", "no optimizer", "another scheduler"],
)
def test_a_missing_state_or_one_of_another_class_is_named(
    tmp_path: Path, saved: dict, given: dict, match: str
) -> None:
    """Another class's state may load without error and break later: refused by name."""
    model, objs = _build(saved)
    path = save_checkpoint(tmp_path / "c.pt", model, epoch=1, **objs)
    model, objs = _build(given)
    with pytest.raises(CheckpointError, match=f"was saved with {match}"):
        load_checkpoint(path, model, **objs)


# --- nothing lost: wrappers, corruption, concurrent writers, unsafe files -------------------


class WithModuleAttr(nn.Module):
    """A model of one's own whose submodule happens to be called ``module``."""

    def __init__(self) -> None:
        super().__init__()
        self.module = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)


def test_a_submodule_called_module_keeps_every_weight(tmp_path: Path) -> None:
    torch.manual_seed(0)
    saved = WithModuleAttr()
    path = save_checkpoint(tmp_path / "c.pt", saved, epoch=1)
    torch.manual_seed(1)
    loaded = WithModuleAttr()
    load_checkpoint(path, loaded)
    for k, v in saved.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    assert set(torch.load(path, weights_only=True)["model"]) == set(saved.state_dict())
    plain = nn.Linear(2, 2)
    plain.module = "not a module"  # plain attribute, not a submodule
    assert utils.unwrap_model(plain) is plain


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wrapper", [nn.DataParallel, nn.parallel.DistributedDataParallel])
def test_wrappers_around_a_compiled_model_are_unwrapped_by_type(tmp_path: Path, wrapper) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # for DDP
    try:
        inner = nn.Linear(3, 2)
        wrapped = wrapper(torch.compile(inner))  # compiles lazily: nothing runs here
        assert utils.unwrap_model(wrapped) is inner
        path = save_checkpoint(tmp_path / "c.pt", wrapped, epoch=3)
        assert set(torch.load(path, weights_only=True)["model"]) == {"weight", "bias"}
        other = nn.Linear(3, 2)
        assert load_checkpoint(path, wrapper(torch.compile(other)))["epoch"] == 3
    finally:
        dist.destroy_process_group()
    assert torch.equal(other.weight, inner.weight) and torch.equal(other.bias, inner.bias)


def _zero_the_first_half(blob: bytearray, path: Path) -> None:
    blob[: len(blob) // 2] = bytes(len(blob) // 2)


def _flip_bytes_inside_the_weight(blob: bytearray, path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(path) as zf:
        info = max(zf.infolist(), key=lambda i: i.file_size)  # the weight's data
    head = info.header_offset  # local header: 30 bytes, then the name and the extra field
    name_len = int.from_bytes(blob[head + 26 : head + 28], "little")
    extra_len = int.from_bytes(blob[head + 28 : head + 30], "little")
    start = head + 30 + name_len + extra_len + info.file_size // 2
    blob[start : start + 64] = bytes(b ^ 0xFF for b in blob[start : start + 64])


@pytest.mark.parametrize("damage", [_zero_the_first_half, _flip_bytes_inside_the_weight])
def test_damaged_bytes_are_caught(tmp_path: Path, damage) -> None:
    path = save_checkpoint(tmp_path / "c.pt", nn.Linear(100, 50), epoch=1)
    blob = bytearray(path.read_bytes())
    damage(blob, path)
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="is corrupt: .* fails its checksum"):
        load_checkpoint(path, nn.Linear(100, 50))


_start_together = None  # a Barrier in each worker of the pool below


def _share_barrier(barrier) -> None:
    global _start_together
    _start_together = barrier


def _hammer(path: str, seconds: float, role: str) -> tuple[int, int]:
    """Save (writer) or load (reader) the same checkpoint path for a while: (done, failed)."""
    model, done, failures = nn.Linear(64, 64), 0, 0
    _start_together.wait(timeout=40)  # all three overlap, however long each took to start
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if role == "writer":
                save_checkpoint(path, model, epoch=1)
                done += 1
            elif Path(path).exists():
                load_checkpoint(path, model, restore_rng=False)
                done += 1
        except Exception:
            failures += 1
    return done, failures


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_two_writers_and_a_reader_never_fail(tmp_path: Path) -> None:
    import multiprocessing as mp

    path = str(tmp_path / "shared.pt")
    ctx = mp.get_context("spawn")
    # A task waiting at the barrier keeps its worker busy, so each task gets its own process.
    with ctx.Pool(3, initializer=_share_barrier, initargs=(ctx.Barrier(3),)) as pool:
        jobs = [pool.apply_async(_hammer, (path, 4.0, r)) for r in ("writer", "writer", "reader")]
        results = [job.get(timeout=50) for job in jobs]
    assert [failed for _, failed in results] == [0, 0, 0]
    assert all(done > 0 for done, _ in results), f"(done, failed) per process: {results}"
    assert [p.name for p in tmp_path.iterdir()] == ["shared.pt"]  # no temporary files left


def test_stale_temporary_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / f"{ckpt_mod._TMP_PREFIX}dead.tmp"
    stale.write_bytes(b"x" * 1000)  # what a kill -9 during torch.save leaves
    old = time.time() - 2 * ckpt_mod._STALE_TMP_S
    os.utime(stale, (old, old))
    fresh = tmp_path / f"{ckpt_mod._TMP_PREFIX}busy.tmp"  # maybe another writer, right now
    fresh.write_bytes(b"y")
    save_checkpoint(tmp_path / "c.pt", nn.Linear(2, 2))
    assert not stale.exists() and fresh.exists()


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo this should never run",))


class _Plain:
    """A class of one's own: plain data, no code, and still refused by weights_only."""


class _SchedulerWithAClass:
    def state_dict(self) -> dict:
        return {"kind": _Plain}  # a class: torch.save stores it, weights_only refuses it


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"acc": np.float64(0.5)}, r"extra value 'acc' .*numpy.*float\(acc\)"),
        ({"note": WithModuleAttr}, r"extra value 'note' .*WithModuleAttr"),
        ({"scheduler": _SchedulerWithAClass()}, r"the scheduler state .*_Plain"),
        ({"fn": lambda x: x}, r"extra value 'fn' "),  # not even picklable
    ],
    ids=["numpy number", "class", "scheduler state", "lambda"],
)
def test_what_weights_only_cannot_load_is_refused_when_saving(
    tmp_path: Path, kwargs: dict, match: str
) -> None:
    with pytest.raises(CheckpointError, match=match):
        save_checkpoint(tmp_path / "c.pt", nn.Linear(2, 2), **kwargs)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (_RunsCode(), f"{os.system.__module__}.system"),  # posix.system or nt.system
        (_Plain(), f"Unsupported global: GLOBAL {_Plain.__module__}._Plain"),
    ],
    ids=["code", "a class of one's own"],
)
def test_a_file_with_more_than_data_is_refused_with_the_full_reason(
    tmp_path: Path, payload: object, reason: str
) -> None:
    path = tmp_path / "evil.pt"
    torch.save({"format": ckpt_mod.FORMAT, "model": payload}, path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, nn.Linear(2, 2))
    msg = str(info.value)
    assert reason in msg  # torch's reason, in full
    assert "Do not load files you do not trust" in msg
    assert "False" not in msg, f"the message must not suggest weights_only=False: {msg}"


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_saved_checkpoint_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = save_checkpoint(tmp_path / "c.pt", nn.Linear(2, 2))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # like any file one writes, not 0600


def test_checkpoints_carry_checksums_even_when_torch_is_told_not_to(tmp_path: Path) -> None:
    torch.serialization.set_crc32_options(False)
    try:
        path = save_checkpoint(tmp_path / "c.pt", nn.Linear(2, 2), epoch=2)
        assert torch.serialization.get_crc32_options() is False  # the setting is left as it was
    finally:
        torch.serialization.set_crc32_options(True)
    assert load_checkpoint(path, nn.Linear(2, 2))["epoch"] == 2


def test_a_file_without_checksums_is_named(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    payload = torch.load(save_checkpoint(tmp_path / "c.pt", model), weights_only=True)
    torch.serialization.set_crc32_options(False)
    try:
        torch.save(payload, tmp_path / "no-crc.pt")
    finally:
        torch.serialization.set_crc32_options(True)
    with pytest.raises(CheckpointError, match="has no checksums"):
        load_checkpoint(tmp_path / "no-crc.pt", model)


@pytest.mark.timeout(120)
def test_saving_does_not_import_the_compiler(tmp_path: Path) -> None:
    """Only a compiled model needs torch._dynamo, whose import takes seconds."""
    path = str(tmp_path / "c.pt")
    code = (
        "import sys; from torch import nn; import utils; "
        f"utils.save_checkpoint({path!r}, nn.Linear(2, 2)); "
        f"utils.load_checkpoint({path!r}, nn.Linear(2, 2)); "
        "print('torch._dynamo' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_torchs_advice_is_cut_even_from_its_outer_message() -> None:
    """If torch stopped keeping the unpickler's own error, its outer message is cleaned."""
    reason = "Trying to load unsupported GLOBAL posix.system whose module posix is blocked."
    outer = pickle.UnpicklingError(
        f"Weights only load failed. {torch.serialization.UNSAFE_MESSAGE}\n\n{reason}"
    )
    cleaned = ckpt_mod._refusal_reason(outer)
    assert reason in cleaned and "False" not in cleaned
