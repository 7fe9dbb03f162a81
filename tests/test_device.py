"""utils.device: the traps from notebook 01, with GPUs mocked where needed."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import utils


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("BLITZ_FORCE_CPU", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return monkeypatch


def fake_gpus(mp: pytest.MonkeyPatch, n: int, mps: bool = False) -> None:
    mp.setattr(torch.cuda, "is_available", lambda: n > 0)
    mp.setattr(torch.cuda, "device_count", lambda: n)
    mp.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i: SimpleNamespace(name=f"Fake GPU {i}", total_memory=80 * 2**30),
    )
    mp.setattr(torch.backends.mps, "is_available", lambda: mps)


def test_accelerator_reported_but_not_available_means_cpu(no_env) -> None:
    # The CUDA wheel says "cuda" even without a GPU; availability decides.
    fake_gpus(no_env, 0)
    no_env.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda"))
    assert utils.get_device() == torch.device("cpu")
    assert utils.num_gpus() == 0


def test_prefers_cuda_then_mps_then_cpu(no_env) -> None:
    fake_gpus(no_env, 2, mps=True)
    assert utils.get_device() == torch.device("cuda")
    fake_gpus(no_env, 0, mps=True)
    assert utils.get_device() == torch.device("mps")
    fake_gpus(no_env, 0, mps=False)
    assert utils.get_device() == torch.device("cpu")


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_force_cpu_env_opt_out(no_env, value: str) -> None:
    fake_gpus(no_env, 4, mps=True)
    no_env.setenv("BLITZ_FORCE_CPU", value)
    assert utils.get_device() == torch.device("cpu")
    assert utils.try_all_gpus() == [torch.device("cpu")]
    assert "BLITZ_FORCE_CPU" in utils.device_summary()


def test_force_cpu_argument(no_env) -> None:
    fake_gpus(no_env, 1)
    assert utils.get_device(force_cpu=True) == torch.device("cpu")
    no_env.setenv("BLITZ_FORCE_CPU", "0")
    assert utils.get_device() == torch.device("cuda")


def test_empty_cuda_visible_devices_means_cpu(no_env) -> None:
    fake_gpus(no_env, 2)  # even if the driver would report GPUs
    no_env.setenv("CUDA_VISIBLE_DEVICES", "")
    assert utils.num_gpus() == 0
    assert utils.get_device() == torch.device("cpu")
    assert 'CUDA_VISIBLE_DEVICES=""' in utils.device_summary()


def test_empty_cuda_visible_devices_in_a_real_process() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("BLITZ_FORCE_CPU", None)
    out = subprocess.run(
        [sys.executable, "-c", "import utils; print(utils.get_device(), utils.try_all_gpus())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "cpu [device(type='cpu')]"


def test_try_gpu_and_try_all_gpus_on_cpu(no_env) -> None:
    fake_gpus(no_env, 0)
    assert utils.try_gpu() == torch.device("cpu")
    assert utils.try_gpu(3) == torch.device("cpu")
    assert utils.try_all_gpus() == [torch.device("cpu")]  # never empty


def test_try_gpu_and_try_all_gpus_with_gpus(no_env) -> None:
    fake_gpus(no_env, 2)
    assert utils.try_gpu(1) == torch.device("cuda:1")
    assert utils.try_gpu(2) == torch.device("cpu")
    assert utils.try_all_gpus() == [torch.device("cuda:0"), torch.device("cuda:1")]


def test_summary_names_gpus_and_selection(no_env) -> None:
    fake_gpus(no_env, 2)
    text = utils.device_summary()
    assert "cuda:0: Fake GPU 0 (80 GiB)" in text
    assert "cuda:1: Fake GPU 1" in text
    assert text.endswith("selected device: cuda")
    fake_gpus(no_env, 0)
    assert "no usable CUDA GPU" in utils.device_summary()


@pytest.mark.parametrize("value", ["garbage", "2", "yes please"])
def test_a_force_cpu_typo_is_an_error_not_a_gpu(no_env, monkeypatch, value: str) -> None:
    monkeypatch.setenv("BLITZ_FORCE_CPU", value)
    with pytest.raises(ValueError, match=f"BLITZ_FORCE_CPU='{value}' is neither on"):
        utils.get_device()


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no", ""])
def test_force_cpu_off_values(no_env, monkeypatch, value: str) -> None:
    monkeypatch.setenv("BLITZ_FORCE_CPU", value)
    assert utils.device._force_cpu() is False
