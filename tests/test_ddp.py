"""scripts/train_ddp.py under torchrun on the CPU (gloo): several processes, one machine.

Every launch is small (LeNet, 64 synthetic images, 8 steps), uses only 127.0.0.1 and
a free port, and is bounded by a subprocess timeout and a collective timeout. Every
command comes from ``utils.launch``, the launcher notebook 05 and the bench use too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import utils
from utils import distributed, launch
from utils.launch import free_port

ROOT = Path(__file__).resolve().parents[1]

# torchrun launches / a JupyterLab server: seconds each.
pytestmark = pytest.mark.e2e

SCRIPT = launch.TRAIN_DDP_SCRIPT  # scripts/train_ddp.py
CRASH_WRAPPER = ROOT / "tests" / "ddp_crash.py"  # the script, failing one rank on request
STEPS = 8
TRAIN_ARGS = ["--epochs", "2", "--batch-size", "16", "--num-train", "64", "--num-test", "16"]
LAUNCH_TIMEOUT = 180  # seconds; a healthy launch takes 10-30 s on the shared 2-core CPU
RDZV_TIMEOUT = 20  # seconds a node waits for the others at the rendezvous


def child_env() -> dict[str, str]:
    return launch.worker_env(threads=1, force_cpu=True)


def torchrun(
    nproc: int,
    out: Path,
    *extra: str,
    nnodes: int = 1,
    node_rank: int = 0,
    port=None,
    script: Path = SCRIPT,
    rdzv_timeout: int = RDZV_TIMEOUT,
) -> list[str]:
    """One launcher's argv (utils.launch): standalone, or a static rendezvous on 127.0.0.1."""
    return launch.torchrun_argv(
        script,
        [*TRAIN_ARGS, "--out-dir", str(out), *extra],
        nproc_per_node=nproc,
        nnodes=nnodes,
        node_rank=node_rank,
        endpoint=f"127.0.0.1:{port or free_port()}",
        rdzv_timeout_s=rdzv_timeout,
    )


def load_script():
    """The script as a module, to call its main() and parse_args() in this process."""
    spec = importlib.util.spec_from_file_location("train_ddp", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return launch.launch(argv, env or child_env(), timeout_s=LAUNCH_TIMEOUT, check=False)


def weights(out: Path) -> dict[str, torch.Tensor]:
    # On a GPU machine the weights were saved on cuda:N: compare everything on the CPU.
    return torch.load(out / "model.pt", map_location="cpu", weights_only=True)


def initial_weights() -> dict[str, torch.Tensor]:
    """What the script starts from (its --seed 0), rebuilt without touching this process's
    own random numbers."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return utils.LeNet(in_channels=3).state_dict()


def gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest difference of a and b, as a share of how far training moved that tensor.

    1 process and 2 processes add the same gradients in another order, so float32 rounding
    differs by an amount that depends on the CPU's kernels (generic kernels differ more than
    AVX-512 ones): notebook 05 measured 1e-7 to 5e-6 of the movement, and the bugs this must
    catch (gradients summed instead of averaged, ranks stepping apart) 0.4 to 1.8. A fixed
    absolute bound such as 1e-5 failed on one CPU and not another."""
    assert a.keys() == b.keys()
    w0 = initial_weights()
    return max(((a[k] - b[k]).abs().max() / (a[k] - w0[k]).abs().max()).item() for k in a)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: one process, no torchrun, same global batch."""
    out = tmp_path_factory.mktemp("single")
    proc = run(torchrun(0, out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and metrics["steps"] == STEPS
    return out


# torch.distributed.launch, torchrun's deprecated predecessor: exit_with_launcher must not take
# it for a dead launcher (it once did, by reading its parent's command line).
@pytest.mark.parametrize("launcher", ["torch.distributed.run", "torch.distributed.launch"])
def test_two_processes_match_one_process(single: Path, tmp_path: Path, launcher: str) -> None:
    argv = torchrun(2, tmp_path)
    at = argv.index("torch.distributed.run")
    argv[at : at + 1] = [launcher] if launcher.endswith(".run") else [launcher, "--use-env"]
    proc = run(argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("epoch ") == 2  # rank 0 alone prints, once per epoch
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    ref = json.loads((single / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["device"] == "cpu"
    assert metrics["test_accuracy"] == ref["test_accuracy"]  # counts all-reduced over ranks
    assert gap(weights(tmp_path), weights(single)) < 0.01
    assert metrics["losses"] == pytest.approx(ref["losses"], abs=1e-3)


def test_two_nodes_on_loopback_agree(single: Path, tmp_path: Path) -> None:
    port = free_port()
    outs = [tmp_path / "node0", tmp_path / "node1"]
    launchers = [
        launch.start(
            torchrun(1, outs[i], nnodes=2, node_rank=i, port=port),
            child_env(),
            cwd=ROOT,
            stderr=subprocess.STDOUT,
        )
        for i in (0, 1)
    ]
    logs = [out for out, _ in launch.finish(launchers, timeout_s=LAUNCH_TIMEOUT)]
    assert [p.returncode for p in launchers] == [0, 0], "\n".join(logs)
    assert "epoch 1:" in logs[0] and "epoch" not in logs[1]  # node 0 holds global rank 0
    assert not (outs[1] / "model.pt").exists()  # rank 1 (node 1) writes nothing
    assert gap(weights(outs[0]), weights(single)) < 0.01


def test_a_dead_rank_ends_the_job_and_leaves_a_whole_checkpoint(tmp_path: Path) -> None:
    # Bounded by LAUNCH_TIMEOUT: a job that hangs after losing a rank fails the test.
    env = {**child_env(), "BLITZ_TEST_CRASH": "1:6"}  # rank 1 fails at its step 6
    proc = run(torchrun(2, tmp_path, script=CRASH_WRAPPER), env)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert "simulated failure of rank 1 at step 6" in log, log
    assert not (tmp_path / "model.pt").exists()

    # the checkpoint written after epoch 1 (step 4) is complete and loads safely
    ckpt = torch.load(tmp_path / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert ckpt["extra"]["step"] == 4 and ckpt["epoch"] == 1
    assert not list(tmp_path.glob("*.tmp"))


def test_the_checkpoint_of_a_dead_rank_resumes(single: Path, tmp_path: Path) -> None:
    env = {**child_env(), "BLITZ_TEST_CRASH": "1:6"}
    proc = run(torchrun(2, tmp_path, script=CRASH_WRAPPER), env)
    assert proc.returncode != 0

    # resume with a different world size (one process): same result as never crashing
    metrics = load_script().main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])
    assert metrics["start_step"] == 4 and metrics["steps"] == STEPS
    assert gap(weights(tmp_path), weights(single)) < 0.01
    # the metrics keep the history from step 0, not only the steps since the resume
    ref = json.loads((single / "metrics.json").read_text())
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["losses"] == pytest.approx(ref["losses"], abs=1e-3)

    # resuming a finished run is refused, and nothing is overwritten
    with pytest.raises(SystemExit, match="nothing to do: the checkpoint is at step"):
        load_script().main([*TRAIN_ARGS, "--steps", "6", "--out-dir", str(tmp_path), "--resume"])
    assert json.loads((tmp_path / "metrics.json").read_text()) == saved


def test_a_run_stopped_inside_an_epoch_counts_only_the_finished_epochs(tmp_path: Path) -> None:
    # 4 steps an epoch: --steps 6 stops inside the second
    load_script().main([*TRAIN_ARGS, "--steps", "6", "--out-dir", str(tmp_path)])
    path, model = tmp_path / "checkpoint.pt", utils.LeNet(in_channels=3)
    state = utils.load_checkpoint(path, model, restore_rng=False)
    assert state["step"] == 6 and state["epoch"] == 1


def test_one_process_trains_where_the_ranks_would(monkeypatch) -> None:
    """Never on Apple's MPS: DDP's processes train on the CPU there, so one process does too
    and the two can be compared."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert load_script().setup() == (0, 1, torch.device("cpu"))


def test_script_rejects_bad_batch_and_missing_checkpoint(tmp_path: Path) -> None:
    script = load_script()
    proc = run(torchrun(2, tmp_path, "--batch-size", "15"))
    assert proc.returncode != 0
    assert "--batch-size 15 is not divisible by the world size 2" in proc.stderr
    with pytest.raises(SystemExit, match="less than one batch of 128"):
        script.main(["--out-dir", str(tmp_path), "--num-train", "64", "--batch-size", "128"])
    with pytest.raises(SystemExit, match="no checkpoint at"):
        script.main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])


@pytest.mark.parametrize(
    "bad,message",
    [
        (["--steps", "-5"], "argument --steps: must be an integer, 0 or more (not -5)"),
        (["--epochs", "0"], "argument --epochs: must be an integer, 1 or more (not 0)"),
        (["--batch-size", "0"], "argument --batch-size: must be an integer, 1 or more (not 0)"),
    ],
)
def test_nonsensical_numbers_are_refused(tmp_path: Path, bad: list[str], message: str, capsys):
    with pytest.raises(SystemExit):
        load_script().parse_args(["--out-dir", str(tmp_path), *bad])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "damage,message",
    [
        ("truncate", "corrupt or truncated"),
        ("foreign", "not a checkpoint written by save_checkpoint"),
        ("other model", "does not fit this model"),
    ],
)
def test_a_bad_checkpoint_gives_a_clear_message_on_resume(
    tmp_path: Path, damage: str, message: str
) -> None:
    script = load_script()
    script.main([*TRAIN_ARGS, "--out-dir", str(tmp_path)])
    path = tmp_path / "checkpoint.pt"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "foreign":
        torch.save({"step": 4}, path)
    else:
        utils.save_checkpoint(path, torch.nn.Linear(3, 2), step=4)
    with pytest.raises(SystemExit, match=f"cannot resume: .*{message}"):
        script.main([*TRAIN_ARGS, "--out-dir", str(tmp_path), "--resume"])


def test_a_node_whose_master_never_comes_gives_up(tmp_path: Path) -> None:
    """Node 1 alone: the rendezvous timeout ends it, well within the subprocess bound, in one
    line (tests/test_train_ddp.py checks node 0 alone too)."""
    proc = run(torchrun(1, tmp_path, nnodes=2, node_rank=1, rdzv_timeout=3))
    assert proc.returncode != 0
    assert "its master (node 0) at 127.0.0.1:" in proc.stderr
    assert "did not come within 3 s" in proc.stderr


def test_workers_exit_when_the_launcher_is_killed(tmp_path: Path) -> None:
    argv = torchrun(2, tmp_path)
    argv[argv.index("--epochs") + 1] = "100000"  # far longer than this test waits
    launcher = subprocess.Popen(
        argv,
        env=child_env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers: list[int] = []
    try:
        workers = _wait_for_children(launcher.pid, 2, timeout=LAUNCH_TIMEOUT)
        # Training has begun once epoch 1's checkpoint exists: every worker is watching.
        _wait_for(lambda: (tmp_path / "checkpoint.pt").exists(), LAUNCH_TIMEOUT, "no checkpoint")
        os.kill(launcher.pid, signal.SIGKILL)  # no chance to stop its workers
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.5)
        alive = [pid for pid in workers if _alive(pid)]
    finally:
        for pid in _children(launcher.pid) + workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers {alive} still run 60 s after their launcher was killed"


# A worker of no torchrun: it loads utils/distributed.py alone (no torch import: fast), waits
# sys.argv[2] seconds (a slow start), watches its launcher, says so in the file sys.argv[3].
_WORKER = """import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("distributed", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
time.sleep(float(sys.argv[2]))
module.exit_with_launcher(poll_s=0.1)
open(sys.argv[3], "w").close()
time.sleep(300)
"""
_PLAIN_LAUNCHER = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(300)"


@pytest.mark.parametrize("killed", ["while it watches", "while it starts"])
def test_a_worker_of_another_launcher_lives_and_dies_with_it(tmp_path: Path, killed: str) -> None:
    """The launcher is a plain Python process: exit_with_launcher reads no command line."""
    ready, start_s = tmp_path / "watching", "0" if killed == "while it watches" else "3"
    worker_argv = [sys.executable, "-c", _WORKER, str(ROOT / "utils" / "distributed.py"), start_s]
    parent = subprocess.Popen(
        [sys.executable, "-c", _PLAIN_LAUNCHER, *worker_argv, str(ready)], start_new_session=True
    )
    worker = 0
    try:
        worker = _wait_for_children(parent.pid, 1, timeout=60)[0]
        if killed == "while it watches":
            _wait_for(lambda: ready.exists() or not _alive(worker), 60, "the worker never started")
            time.sleep(1)  # ten polls
            assert ready.exists() and _alive(worker), "the worker exited while its launcher lived"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        if killed == "while it starts" and (_ppid(worker) != 1 or distributed._in_a_container()):
            pytest.skip(
                "an orphan's parent here (a subreaper, or a container's pid 1) cannot be "
                "told from a launcher at start"
            )
        _wait_for(lambda: not _alive(worker), 60, "the worker did not exit after its launcher")
        if killed == "while it starts":
            assert not ready.exists(), "the worker watched a launcher already gone"
    finally:
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def _wait_for(condition, timeout: float, failure: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{failure} within {timeout:.0f} s")
        time.sleep(0.1)


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent has not collected it


def _wait_for_children(pid: int, n: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = _children(pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.2)
    pytest.fail(f"torchrun (pid {pid}) did not start {n} workers within {timeout} s")


def test_two_runs_into_one_folder_are_refused(tmp_path: Path) -> None:
    script = load_script()
    held = utils.lock_folder(tmp_path)  # a run that is still writing here
    try:
        with pytest.raises(SystemExit, match="another run is writing to"):
            script.main([*TRAIN_ARGS, "--out-dir", str(tmp_path)])
    finally:
        held.close()
    script.main([*TRAIN_ARGS, "--out-dir", str(tmp_path)])  # free again


# Runs a DDP script as torchrun's worker, then counts the threads the process still has that
# Python did not start (gloo's workers and its network loop are native threads).
_THREADS_AFTER = """import os, runpy, sys, threading
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
native = len(os.listdir("/proc/self/task")) - threading.active_count()
# one write per line: the two ranks share the launcher's stdout (print writes the text and
# its newline separately, and the two ranks' lines once came out interleaved)
sys.stdout.write(f"rank {os.environ['RANK']}: {native} native threads left\\n")
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("which", ["ddp_minimal.py", "train_ddp.py"])
def test_the_ddp_scripts_stop_the_process_groups_threads_before_python_exits(
    tmp_path: Path, which: str
) -> None:
    """The precondition of a clean exit, checked every time rather than by chance: when the
    script's last line has run, destroy_process_group() has freed the group and gloo's threads
    are gone. (A group still alive at exit let a gloo thread need the GIL while Python was
    finalizing: 'terminate called without an active exception', about 1 run in 6; DDP imports
    torch.distributed.nn, whose default arguments held the group when imported after
    init_process_group. `make stress-ddp` counts the exits themselves.)"""
    spec = importlib.util.spec_from_file_location("stress_ddp", ROOT / "bench" / "stress_ddp.py")
    stress = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stress)
    runner = tmp_path / "threads_after.py"
    runner.write_text(_THREADS_AFTER)
    if which == "ddp_minimal.py":
        args = [str(stress.minimal_script(tmp_path))]
    else:
        args = [str(SCRIPT), *TRAIN_ARGS, "--out-dir", str(tmp_path / "out")]
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    proc = subprocess.run(
        [*argv, str(runner), *args],
        env=child_env(),
        cwd=tmp_path,  # ddp_minimal.py saves into .runs/05/ here
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    left = sorted(re.findall(r"rank (\d+): (\d+) native threads left", proc.stdout))
    assert left == [("0", "0"), ("1", "0")], proc.stdout
