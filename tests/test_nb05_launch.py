"""utils.launch: the one torchrun command builder of notebook 05, tests/test_ddp.py and the bench.

Only the commands and environments are checked here (fast); tests/test_ddp.py runs them.
"""

from __future__ import annotations

import sys

import pytest

from utils import launch


def test_the_training_script_is_the_projects() -> None:
    script = launch.TRAIN_DDP_SCRIPT
    assert script.is_file() and script.parts[-2:] == ("scripts", "train_ddp.py")
    assert "DistributedDataParallel" in script.read_text(encoding="utf-8")


def test_no_torchrun_for_zero_processes() -> None:
    assert launch.torchrun_argv("s.py", ["--x", "1"], nproc_per_node=0) == [
        sys.executable,
        "s.py",
        "--x",
        "1",
    ]


def test_one_node_is_standalone_with_a_bounded_rendezvous() -> None:
    argv = launch.torchrun_argv("s.py", ["--x"], nproc_per_node=2, rdzv_timeout_s=7)
    assert argv[:4] == [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
    assert "--standalone" in argv and "--rdzv-conf=join_timeout=7" in argv
    assert argv[-2:] == ["s.py", "--x"]


def test_several_nodes_meet_at_the_endpoint_with_their_node_rank() -> None:
    argv = launch.torchrun_argv(
        "s.py", nproc_per_node=1, nnodes=2, node_rank=1, endpoint="127.0.0.1:1234"
    )
    for flag in (
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-backend=static",
        "--rdzv-endpoint=127.0.0.1:1234",
        "--rdzv-conf=timeout=60",
    ):
        assert flag in argv
    assert "--standalone" not in argv


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nproc_per_node": -1},
        {"nproc_per_node": 1, "nnodes": 2, "node_rank": 2, "endpoint": "h:1"},
        {"nproc_per_node": 1, "nnodes": 2},  # no endpoint
        {"nproc_per_node": 0, "nnodes": 2, "endpoint": "h:1"},
    ],
)
def test_nonsensical_launches_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        launch.torchrun_argv("s.py", **kwargs)


def test_worker_env_sets_threads_and_device_and_drops_torchrun_variables(monkeypatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    env = launch.worker_env(threads=2, force_cpu=False)
    assert env["OMP_NUM_THREADS"] == "2" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "RANK" not in env and "MASTER_PORT" not in env
    assert launch.worker_env()["CUDA_VISIBLE_DEVICES"] == ""


def test_a_failed_launch_names_its_exit_code() -> None:
    argv = [sys.executable, "-c", "import sys; sys.exit(3)"]
    with pytest.raises(RuntimeError, match="exit code 3"):
        launch.launch(argv, timeout_s=60)
    assert launch.launch(argv, timeout_s=60, check=False).returncode == 3


def test_free_ports_lie_outside_the_ephemeral_range() -> None:
    # a client retrying to connect to an ephemeral port can end up connected to itself
    ports = {launch.free_port() for _ in range(20)}
    assert all(20000 <= p < 32000 for p in ports) and len(ports) > 1


def test_finish_bounds_the_wait_and_kills_what_still_runs() -> None:
    quick = launch.start([sys.executable, "-c", "print('done')"])
    stuck = launch.start([sys.executable, "-c", "import time; time.sleep(600)"])
    with pytest.raises(TimeoutError, match=r"launches \[1\] still ran after 2 s"):
        launch.finish([quick, stuck], timeout_s=2)
    assert stuck.poll() is not None  # killed, not left behind
    assert launch.finish([launch.start([sys.executable, "-c", "print('hi')"])]) == [("hi\n", "")]


@pytest.mark.parametrize(
    "platform, interfaces, expected",
    [
        ("linux", [(1, "lo"), (2, "eth0")], "lo"),
        ("darwin", [(1, "lo0"), (4, "en0")], "lo0"),  # "lo" does not exist on a Mac
        ("win32", [(1, "Loopback Pseudo-Interface 1")], None),  # gloo's default device
        ("linux", [(2, "eth0")], None),  # no loopback by that name: PyTorch's default
    ],
)
def test_gloo_gets_the_loopback_interface_of_its_platform(
    monkeypatch, platform, interfaces, expected
) -> None:
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setattr(launch.sys, "platform", platform)
    monkeypatch.setattr(launch.socket, "if_nameindex", lambda: interfaces)
    assert launch.loopback_interface() == expected
    assert launch.worker_env().get("GLOO_SOCKET_IFNAME") == expected


def test_a_gloo_interface_the_user_chose_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth1")
    assert launch.worker_env()["GLOO_SOCKET_IFNAME"] == "eth1"


@pytest.mark.parametrize("platform, libuv", [("win32", "0"), ("linux", None), ("darwin", None)])
def test_windows_launches_ask_for_no_libuv_store(monkeypatch, platform, libuv) -> None:
    # torchrun asks for a libuv TCPStore by default; PyTorch's Windows builds have none
    monkeypatch.delenv("USE_LIBUV", raising=False)
    monkeypatch.setattr(launch.sys, "platform", platform)
    monkeypatch.setattr(launch.socket, "if_nameindex", lambda: [])
    assert launch.one_machine_env().get("USE_LIBUV") == libuv
    assert launch.worker_env().get("USE_LIBUV") == libuv
    monkeypatch.setenv("USE_LIBUV", "1")  # the user's own choice wins
    assert launch.worker_env()["USE_LIBUV"] == "1"
