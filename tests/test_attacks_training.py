"""Issue 18's attacks on checkpoints and scripts/train_ddp.py: each once gave a traceback, lost
a run or waited for minutes; each now ends in one clear line and changes nothing.

The checkpoint tests and the in-process script tests take a few seconds at most; the
launches (torchrun, a fresh Python) and two more damage sweeps are marked slow.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import utils
from utils import launch
from utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TRAIN_ARGS = ["--epochs", "2", "--batch-size", "16", "--num-train", "64", "--num-test", "16"]


def trained(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A small model and an SGD optimizer with momentum state (one step taken)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def assert_same(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} was changed"


# --- case 2: damage in the zip directory (the file's last kilobyte) ---------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "damage",
    [0xFF, pytest.param(0x10, marks=pytest.mark.slow), pytest.param(0, marks=pytest.mark.slow)],
    ids=["flipped", "bit 0x10", "zeroed"],
)
def test_every_damaged_byte_of_the_zip_directory_is_a_checkpoint_error(
    tmp_path: Path, damage: int
) -> None:
    """Each byte of the last KB damaged (XOR ``damage``; 0: zeroed): a CheckpointError naming
    the file, or (a byte nothing reads, e.g. a date) a load that gives back exactly what was
    saved; never another error, nor other weights (the folder bit 0x10 once gave garbage)."""
    model, optimizer = trained()
    path = save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1, step=7)
    blob, caught, harmless = path.read_bytes(), 0, 0
    for at in range(len(blob) - 1024, len(blob)):
        damaged = bytearray(blob)
        damaged[at] = damaged[at] ^ damage if damage else 0
        if damaged == blob:
            continue
        path.write_bytes(bytes(damaged))
        fresh, fresh_optimizer = trained(seed=1)
        try:
            state = load_checkpoint(path, fresh, fresh_optimizer, restore_rng=False)
        except CheckpointError as err:
            assert str(path) in str(err) and "\n" not in str(err), err
            caught += 1
            continue
        except Exception as err:  # the bug: UnicodeDecodeError, NotImplementedError, OSError...
            pytest.fail(f"byte {at} of {len(blob)}: {type(err).__name__}: {err}")
        assert state == {"epoch": 1, "step": 7}, f"byte {at}"
        assert_same(fresh, snapshot(model))
        assert str(fresh_optimizer.state_dict()) == str(optimizer.state_dict()), f"byte {at}"
        harmless += 1
    assert caught > 400, (caught, harmless)  # most of the directory is read


# --- case 3: checked before anything changes -------------------------------------------------


def _other_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters())


def _two_groups(model: nn.Module) -> torch.optim.Optimizer:
    groups = [{"params": model[0].parameters()}, {"params": model[2].parameters()}]
    return torch.optim.SGD(groups, lr=0.1, momentum=0.9)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (_other_optimizer, "was saved with the optimizer SGD, but Adam was given"),
        (_two_groups, "does not fit this optimizer: its parameter groups hold \\[4\\] "),
    ],
    ids=["another optimizer", "other parameter groups"],
)
def test_an_unfitting_optimizer_leaves_the_model_as_it_was(tmp_path: Path, build, match) -> None:
    path = save_checkpoint(tmp_path / "c.pt", *trained(), epoch=1)
    model = trained(seed=1)[0]
    before, rng = snapshot(model), torch.get_rng_state()
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(path, model, build(model))
    assert_same(model, before)  # it used to hold the checkpoint's weights by now
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_model_that_half_fits_is_left_as_it_was(tmp_path: Path) -> None:
    """The first layer fits, the last does not: load_state_dict alone copies the first."""
    path = save_checkpoint(tmp_path / "c.pt", trained()[0], epoch=1)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 5))
    before = snapshot(model)
    with pytest.raises(CheckpointError, match=r"does not fit this model .*2\.weight \(2, 3\) vs"):
        load_checkpoint(path, model)
    assert_same(model, before)


# --- case 4: a v2 file with malformed parts ---------------------------------------------------


def _rng(raw: dict, **change) -> dict:
    return {**raw["rng"], **change}


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: {**raw, "rng": {}},
        lambda raw: {**raw, "rng": _rng(raw, python=(3, (1, 2), None))},
        lambda raw: {**raw, "rng": _rng(raw, numpy=("MT19937", torch.zeros(3), 0, 0, 0.0))},
        lambda raw: {**raw, "rng": _rng(raw, torch=torch.zeros(5))},
        lambda raw: {**raw, "rng": _rng(raw, cuda=[torch.zeros(3)])},
        lambda raw: {**raw, "epoch": "2"},
        lambda raw: {**raw, "epoch": 1.5},
        lambda raw: {**raw, "extra": [1, 2]},
        lambda raw: {**raw, "extra": {1: "a"}},
        lambda raw: {**raw, "extra": {"epoch": 9}},
        lambda raw: {k: v for k, v in raw.items() if k != "rng"},
        lambda raw: {**raw, "model": [1]},
        lambda raw: {**raw, "optimizer": {"state": {}}},  # no param_groups
        lambda raw: {**raw, "optimizer_type": None},  # a state without its type
    ],
    ids=[
        "rng empty",
        "python rng",
        "numpy rng",
        "torch rng",
        "cuda rng",
        "epoch a string",
        "epoch a float",
        "extra a list",
        "extra not named",
        "extra with epoch",
        "no rng",
        "model a list",
        "optimizer without groups",
        "optimizer without type",
    ],
)
def test_a_malformed_checkpoint_is_one_error_and_changes_nothing(tmp_path: Path, damage) -> None:
    model, optimizer = trained()
    path = save_checkpoint(tmp_path / "c.pt", model, optimizer, epoch=1, step=3)
    torch.save(damage(torch.load(path, weights_only=True)), path)  # with its checksums
    fresh, fresh_optimizer = trained(seed=1)
    before, groups = snapshot(fresh), str(fresh_optimizer.state_dict())
    rng = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state())
    with pytest.raises(CheckpointError, match="malformed") as info:
        load_checkpoint(path, fresh, fresh_optimizer)  # restore_rng: the RNG parts are read
    assert str(path) in str(info.value) and "Delete it" in str(info.value)
    assert "\n" not in str(info.value)
    assert_same(fresh, before)
    assert str(fresh_optimizer.state_dict()) == groups
    assert random.getstate() == rng[0] and (np.random.get_state()[1] == rng[1]).all()
    assert torch.equal(torch.get_rng_state(), rng[2])


# --- case 5: saving through a symbolic link ---------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="symbolic links need privileges on Windows")
@pytest.mark.parametrize("target_exists", [True, False], ids=["link", "dangling link"])
def test_saving_through_a_symlink_keeps_the_link(tmp_path: Path, target_exists: bool) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "runs").mkdir()
    target, link = tmp_path / "store" / "real.pt", tmp_path / "runs" / "latest.pt"
    if target_exists:
        target.write_bytes(b"an older checkpoint")
    link.symlink_to(Path("..") / "store" / "real.pt")  # relative, as `ln -s` makes them
    model = trained()[0]
    assert save_checkpoint(link, model, epoch=4) == link
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert load_checkpoint(target, trained(seed=1)[0])["epoch"] == 4
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["real.pt"]  # no temporary file
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["latest.pt"]


# --- scripts/train_ddp.py, in this process -------------------------------------------------


def script():
    spec = importlib.util.spec_from_file_location("train_ddp", launch.TRAIN_DDP_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.timeout(120)
def test_a_new_run_never_replaces_an_earlier_one(tmp_path: Path) -> None:
    train_ddp = script()
    train_ddp.main([*TRAIN_ARGS, "--out-dir", str(tmp_path)])
    before = contents(tmp_path)
    assert json.loads(before["metrics.json"])["steps"] == 8
    with pytest.raises(SystemExit, match="holds a run of 8 steps: use --resume to continue it"):
        train_ddp.main([*TRAIN_ARGS, "--steps", "2", "--out-dir", str(tmp_path)])
    assert contents(tmp_path) == before  # it used to hold a run of 2 steps now
    (tmp_path / "checkpoint.pt").unlink()  # without a checkpoint, the results are kept too
    with pytest.raises(SystemExit, match="holds metrics.json and model.pt: use --resume"):
        train_ddp.main([*TRAIN_ARGS, "--out-dir", str(tmp_path)])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--num-test", "0"], "--num-test must be 1 or more"),
        (["--num-test", "-5"], "--num-test must be 1 or more"),
        (["--num-train", "0"], "--num-train must be 1 or more"),
        (["--width", "0"], "--width must be 1 or more"),
        (["--seed", "-1"], "--seed must be 0 or more"),
        (["--seed", str(2**64)], "--seed must be less than 2**32"),
        (["--lr", "0"], "--lr must be a positive number"),
        (["--lr", "-0.1"], "--lr must be a positive number"),
        (["--lr", "nan"], "--lr must be a positive number"),
        (["--lr", "inf"], "--lr must be a positive number"),
    ],
)
def test_every_argument_out_of_its_range_is_refused(
    tmp_path: Path, bad: list[str], message: str, capsys
) -> None:
    with pytest.raises(SystemExit):
        script().parse_args(["--out-dir", str(tmp_path / "run"), *bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"error: {message}"), err  # argparse's usage line, then this one


def test_more_images_than_the_data_have_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--data", "cifar10", "--num-train", "100000", "--out-dir", str(out)]
    have = len(utils.load_cifar10().train)
    with pytest.raises(SystemExit, match=f"--num-train 100000: the cifar10 train set has {have}"):
        script().main(args)
    with pytest.raises(SystemExit, match="--num-test 20000: the synthetic test set has 10000"):
        script().main(["--num-test", "20000", "--out-dir", str(out)])
    assert not out.exists()  # nothing made


def _read_only(folder: Path, monkeypatch) -> None:
    """``folder`` read-only. Root writes into a 0o555 folder all the same: there, the
    file system's answer is simulated (what a read-only mount says)."""
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        real_mkdir = Path.mkdir

        def mkdir(self, *args, **kwargs):
            if folder in self.parents:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)


@pytest.mark.parametrize("where", ["a file", "inside a file", "read-only"])
def test_an_out_dir_that_cannot_be_written_is_one_line(tmp_path: Path, where, monkeypatch) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    out, why = {
        "a file": (tmp_path / "notes.txt", "it is a file"),
        "inside a file": (tmp_path / "notes.txt" / "run", f"{tmp_path / 'notes.txt'} is a file"),
        "read-only": (tmp_path / "ro" / "run", os.strerror(errno.EROFS)),
    }[where]
    if where == "read-only":
        _read_only(tmp_path / "ro", monkeypatch)
        why = os.strerror(errno.EACCES) if not os.access(tmp_path / "ro", os.W_OK) else why
    try:
        with pytest.raises(SystemExit) as info:
            script().main([*TRAIN_ARGS, "--out-dir", str(out)])
    finally:
        if (tmp_path / "ro").exists():
            (tmp_path / "ro").chmod(0o755)  # so that pytest can remove it
    assert str(info.value) == f"cannot write to {out} ({why}): pass another --out-dir"
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_rank_without_torchrun_is_one_line(monkeypatch) -> None:
    for name in ("WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit, match="RANK is set but not WORLD_SIZE, .*MASTER_PORT: start"):
        script().setup()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--num-train", "128"], r"is a run with --num-train 64 \(not 128\)"),
        (["--lr", "5.0"], r"is a run with --lr 0.02 \(not 5.0\)"),
    ],
)
def test_a_resume_with_other_data_or_rate_is_refused(tmp_path: Path, change, message) -> None:
    train_ddp = script()
    train_ddp.main([*TRAIN_ARGS, "--steps", "6", "--out-dir", str(tmp_path)])
    before = contents(tmp_path)
    with pytest.raises(SystemExit, match=f"cannot resume: .*{message}: resume it with its"):
        train_ddp.main([*TRAIN_ARGS, *change, "--out-dir", str(tmp_path), "--resume"])
    assert contents(tmp_path) == before
    train_ddp.main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])  # the same: it goes on
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == 8


# --- case 11: a master that never comes ---------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rank", [1, 0])
def test_a_missing_master_or_peer_is_one_line(rank: int, monkeypatch, capfd) -> None:
    """Started by hand as in a multi-node job (all of torchrun's variables, no torchrun)."""
    port = launch.free_port()
    env = {"WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    env.update(RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    train_ddp = script()
    monkeypatch.setattr(train_ddp, "TIMEOUT_S", 2, raising=False)  # 60 s in a real job
    with pytest.raises(SystemExit) as info:
        train_ddp.setup()
    expected = {
        1: f"rank 1: its master (rank 0) at 127.0.0.1:{port} did not come within 2 s: start it",
        0: "rank 0: ",  # then torch's one line: "... 1/2 clients joined."
    }[rank]
    assert str(info.value).startswith(expected), info.value
    assert rank == 1 or "1/2 clients joined. Start all 2 ranks" in str(info.value), info.value
    assert "Exception raised from" not in capfd.readouterr().err  # no C++ stack on the way


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("node", [1, 0])
def test_a_node_whose_peer_never_comes_says_so_in_one_line(tmp_path: Path, node: int) -> None:
    """Through torchrun (utils.launch, the static rendezvous): one node of two, alone."""
    port = launch.free_port()
    argv = launch.torchrun_argv(
        launch.TRAIN_DDP_SCRIPT,
        [*TRAIN_ARGS, "--out-dir", str(tmp_path / "run")],
        nproc_per_node=1,
        nnodes=2,
        node_rank=node,
        endpoint=f"127.0.0.1:{port}",
        rdzv_timeout_s=3,
    )
    proc = launch.launch(argv, launch.worker_env(), timeout_s=90, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # it was ~80, a C++ stack and a traceback
    expected = {
        1: f"node 1: its master (node 0) at 127.0.0.1:{port} did not come within 3 s",
        0: f"node 0: the rendezvous at 127.0.0.1:{port} failed after ",
    }[node]
    assert lines[0].startswith(expected), lines[0]
    assert node == 1 or "1/2 clients joined" in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_rank_without_torchrun_from_the_command_line(tmp_path: Path) -> None:
    """`RANK=0 python scripts/train_ddp.py ...`, as typed: one line, no traceback."""
    env = {**launch.worker_env(), "RANK": "0"}
    argv = [sys.executable, str(launch.TRAIN_DDP_SCRIPT), "--out-dir", str(tmp_path / "r")]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "RANK is set but not WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT: start the script with torchrun, or unset RANK"
    ]
