"""scripts/train_ddp.py's bad input: every argument, folder, rank or missing peer ends in one
clear line, in bounded time, and changes nothing (an earlier run is never replaced).

The in-process tests take a few seconds at most; the launches (torchrun, a fresh Python) are
marked slow. (The checkpoints it writes and loads: tests/test_checkpoint.py.)
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import utils
from utils import launch

ROOT = Path(__file__).resolve().parents[1]
TRAIN_ARGS = ["--epochs", "2", "--batch-size", "16", "--num-train", "64", "--num-test", "16"]


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
        (["--num-test", "0"], "--num-test: must be an integer, 1 or more (not 0)"),
        (["--num-test", "-5"], "--num-test: must be an integer, 1 or more (not -5)"),
        (["--num-train", "0"], "--num-train: must be an integer, 1 or more (not 0)"),
        (["--width", "0"], "--width: must be an integer, 1 or more (not 0)"),
        (["--steps", "-1"], "--steps: must be an integer, 0 or more (not -1)"),
        (["--epochs", "1.5"], "--epochs: must be an integer, 1 or more (not 1.5)"),
        (["--seed", "-1"], "--seed: must be an integer from 0 to 4294967295 (not -1)"),
        (["--seed", str(2**64)], f"--seed: must be an integer from 0 to 4294967295 (not {2**64})"),
        (["--lr", "0"], "--lr: must be a number above 0 (not 0)"),
        (["--lr", "-0.1"], "--lr: must be a number above 0 (not -0.1)"),
        (["--lr", "nan"], "--lr: must be a number above 0 (not nan)"),
        (["--lr", "inf"], "--lr: must be a number above 0 (not inf)"),
    ],
)
def test_every_argument_out_of_its_range_is_refused(
    tmp_path: Path, bad: list[str], message: str, capsys
) -> None:
    with pytest.raises(SystemExit):
        script().parse_args(["--out-dir", str(tmp_path / "run"), *bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"error: argument {message}"), err  # argparse's usage, then this


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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("nccl, backend", [(True, "nccl"), (False, "gloo")])
def test_gpus_without_nccl_train_on_the_cpu_through_gloo(
    nccl: bool, backend: str, monkeypatch
) -> None:
    # Windows' PyTorch has CUDA but no NCCL: two GPUs there must not ask for NCCL.
    import torch
    import torch.distributed as dist

    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(launch.free_port()))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: nccl)
    chosen: list[str] = []
    monkeypatch.setattr(dist, "init_process_group", lambda b, **kwargs: chosen.append(b))
    _, _, device = script().setup()
    assert chosen == [backend] and device.type == ("cuda" if nccl else "cpu")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "5"}, "RANK=5 is not below WORLD_SIZE=2 (ranks: 0 to 1)"),
        ({"RANK": "abc"}, "RANK='abc' is not a whole number of 0 or more"),
        ({"RANK": "-1"}, "RANK='-1' is not a whole number of 0 or more"),
        ({"LOCAL_RANK": "1"}, "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1 (ranks: 0 to 0)"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not a whole number of 0 or more"),
    ],
    ids=["rank too high", "rank not a number", "rank negative", "local rank", "world size"],
)
def test_a_bad_rank_is_named_before_waiting_for_the_master(
    env: dict, message: str, monkeypatch
) -> None:
    # Rule: torchrun's numbers are checked before any wait, and the bad one is named.
    base = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(launch.free_port()))  # nobody there
    for name, value in {**base, **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    train_ddp = script()
    monkeypatch.setattr(train_ddp, "TIMEOUT_S", 2, raising=False)  # 60 s in a real job
    with pytest.raises(SystemExit) as info:
        train_ddp.setup()
    assert (
        str(info.value)
        == f"{message}: start the script with torchrun, which sets them, or fix them"
    )


def test_an_empty_out_dir_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    # Rule: an empty --out-dir is refused, never taken for the current folder.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        script().main([*TRAIN_ARGS, "--out-dir", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        "error: --out-dir must name a folder (an empty one means the current folder)"
    ), err
    assert list(tmp_path.iterdir()) == []  # nothing written where it was started


def test_a_read_only_out_dir_holding_a_lock_is_refused_before_training(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    # Rule: the out dir is checked writable before training, in one line.
    out = tmp_path / "ro"
    out.mkdir()
    (out / ".lock").write_text("")  # left by an earlier run: opening it still works
    out.chmod(0o555)
    if os.access(out, os.W_OK):  # root writes anyway: simulate a read-only mount's answer
        real_open = os.open

        def read_only(path, flags, *args, **kwargs):
            if Path(path).parent == out and flags & os.O_CREAT:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", read_only)
        why = os.strerror(errno.EROFS)
    else:
        why = os.strerror(errno.EACCES)
    try:
        with pytest.raises(SystemExit) as info:
            script().main([*TRAIN_ARGS, "--out-dir", str(out)])
    finally:
        out.chmod(0o755)  # so that pytest can remove it
    assert str(info.value) == f"cannot write to {out} ({why}): pass another --out-dir"
    assert "epoch" not in capsys.readouterr().out  # refused before training, not after it
    assert [p.name for p in out.iterdir()] == [".lock"]


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


def _rewrite_extra(path: Path, **values) -> None:
    """Give the checkpoint at ``path`` other extra values, as a hand or another tool might."""
    import torch

    payload = torch.load(path, weights_only=True)
    payload["extra"].update(values)
    torch.save(payload, path)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("steps", "extra", "message"),
    [
        (6, {"step": "abc"}, "says step 'abc', not a whole number of 0 or more"),
        (6, {"step": 1.5}, "says step 1.5, not a whole number of 0 or more"),
        (6, {"step": -5}, "says step -5, not a whole number of 0 or more"),
        (6, {"step": 2}, "is at step 2 but says 1 epochs of 4 steps are done"),
        (6, {"metrics": [1, 2]}, "has metrics without losses, epoch_times_s, test_accuracy"),
        (4, {"metrics": {}}, "has metrics without losses, epoch_times_s, test_accuracy"),
        (6, {"metrics": {"losses": ["x"], "epoch_times_s": [], "test_accuracy": []}}, "metrics"),
        (6, {"settings": "data"}, "has settings 'data', not a dict"),
    ],
    ids=[
        "step text",
        "step fraction",
        "step negative",
        "step and epoch disagree",
        "metrics a list",
        "metrics empty after a full epoch",
        "a loss a string",
        "settings text",
    ],
)
def test_a_checkpoint_whose_extras_have_other_types_or_ranges_is_one_line(
    tmp_path: Path, steps: int, extra: dict, message: str
) -> None:
    # Rule: every file read is validated before use (types and ranges), in one line.
    train_ddp = script()
    train_ddp.main([*TRAIN_ARGS, "--steps", str(steps), "--out-dir", str(tmp_path)])
    _rewrite_extra(tmp_path / "checkpoint.pt", **extra)
    before = contents(tmp_path)
    with pytest.raises(SystemExit) as info:
        train_ddp.main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])
    msg = str(info.value)
    assert msg.startswith(f"cannot resume: {tmp_path / 'checkpoint.pt'} "), msg
    assert message in msg and "delete it, or pass another --out-dir" in msg, msg
    assert "\n" not in msg and contents(tmp_path) == before


def _compressed(path: Path, inflate_last_record_to: int = 0) -> None:
    """Rewrite the checkpoint at ``path`` with deflated records, as torch.save never writes
    them; ``inflate_last_record_to``: the last tensor record becomes that many zero bytes,
    which deflate to a few hundred kB (written in chunks, never held)."""
    import zipfile

    packed = path.with_name("packed.pt")
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as zout:
        records = [i.filename for i in zin.infolist() if "/data/" in i.filename]
        last = max(records, key=lambda name: int(name.rsplit("/", 1)[1]))
        for info in zin.infolist():
            if inflate_last_record_to and info.filename == last:
                with zout.open(info.filename, "w", force_zip64=True) as f:
                    for _ in range(inflate_last_record_to >> 20):
                        f.write(bytes(1 << 20))
            else:
                zout.writestr(info.filename, zin.read(info))
    packed.replace(path)


@pytest.mark.timeout(180)
def test_a_checkpoint_with_a_compressed_record_is_refused_before_torch_reads_it(
    tmp_path: Path,
) -> None:
    # torch.save stores records uncompressed (2.14: its writer has no compression flag), so a
    # compressed record is no checkpoint of ours: refused, not resumed from.
    train_ddp = script()
    train_ddp.main([*TRAIN_ARGS, "--steps", "6", "--out-dir", str(tmp_path)])
    _compressed(tmp_path / "checkpoint.pt")
    before = contents(tmp_path)
    with pytest.raises(SystemExit) as info:
        train_ddp.main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])
    msg = str(info.value)
    assert msg.startswith(
        f"cannot resume: the checkpoint {tmp_path / 'checkpoint.pt'} holds a compressed record"
    ), msg
    assert "which torch.save never writes" in msg and "\n" not in msg
    assert contents(tmp_path) == before


@pytest.mark.e2e  # the script started as typed, twice, its peak memory read from outside
@pytest.mark.timeout(300)
def test_a_small_checkpoint_that_inflates_costs_no_memory_without_resume(tmp_path: Path) -> None:
    # Without --resume the script only looks at the checkpoint to say what the folder holds:
    # a 1 GiB record deflated into a few MB must not be inflated for that (it was: torch.load).
    import torch

    def peak_mb(out: Path) -> tuple[int, str]:
        """Peak memory of `python scripts/train_ddp.py --out-dir OUT`, and its stderr."""
        code = (
            "import resource, subprocess, sys; "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024); "
            "print(p.stderr.strip())"
        )
        argv = [sys.executable, "-c", code, sys.executable, str(launch.TRAIN_DDP_SCRIPT)]
        argv += [*TRAIN_ARGS, "--out-dir", str(out)]
        env = launch.worker_env(threads=1)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
        mb, err = proc.stdout.split("\n", 1)
        return int(mb), err.strip()

    run, bomb = tmp_path / "run", tmp_path / "bomb"
    script().main([*TRAIN_ARGS, "--steps", "6", "--out-dir", str(run)])
    utils.save_checkpoint(bomb / "checkpoint.pt", torch.nn.Linear(2, 2), pad=torch.zeros(1))
    _compressed(bomb / "checkpoint.pt", inflate_last_record_to=1 << 30)
    assert (bomb / "checkpoint.pt").stat().st_size < 10_000_000
    usual, said = peak_mb(run)
    assert (
        said == f"{run} holds a run of 6 steps: use --resume to continue it, or another "
        "--out-dir (or delete it)"
    ), said
    peak, said = peak_mb(bomb)
    assert (
        said == f"{bomb} holds checkpoint.pt: use --resume to continue it, or another "
        "--out-dir (or delete it)"
    ), said
    assert peak < usual + 256, f"{peak} MB at its peak, {usual} MB for an ordinary checkpoint"


# --- a master or a peer that never comes: one line, in bounded time --------------------------


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


@pytest.mark.e2e
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


@pytest.mark.e2e
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
