"""The test contract (tools/harness/contract.py): what it hides on a Mac, and the thread
counts `make test-portable` adds to it.

No Mac runs here, so this process plays one: PyTorch's C functions that report an MPS build
and Apple's GPU are replaced, and the real Python layers above them (torch.backends.mps,
torch.mps, torch.accelerator, notebook 01's get_device) answer from them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import utils
from tools.harness import contract

MPS = torch.device("mps")


@pytest.fixture
def a_mac(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as a Mac with Apple's GPU and PyTorch's macOS wheel (built for MPS)."""
    # torch.backends.mps.is_available caches its answer: an earlier test's real "no" would
    # stand, and the fake "yes" must not outlive this test.
    cached = torch.backends.mps.is_available
    cached.cache_clear()
    monkeypatch.setattr(torch._C, "_accelerator_getAccelerator", lambda: MPS)
    monkeypatch.setattr(torch._C, "_has_mps", True)
    monkeypatch.setattr(torch._C, "_mps_is_available", lambda: True)
    # What the startup file replaces: restored after the test.
    for module, name in [
        (torch.backends.mps, "is_available"),
        (torch.mps, "is_available"),
        (torch.mps, "device_count"),
    ]:
        monkeypatch.setattr(module, name, getattr(module, name))
    yield
    cached.cache_clear()


def _startup_file(monkeypatch: pytest.MonkeyPatch) -> str:
    """What contract.apply() gives a kernel to run first on a Mac with the CPU forced."""
    monkeypatch.setattr(sys, "platform", "darwin")
    environ: dict[str, str] = {}
    contract.apply(environ)
    ipython = Path(environ["IPYTHONDIR"])
    try:
        return (ipython / "profile_default" / "startup" / "00-hide-mps.py").read_text()
    finally:
        shutil.rmtree(ipython)


def test_the_fake_mac_has_apple_gpu_by_every_api(a_mac) -> None:
    assert torch.backends.mps.is_available() and torch.mps.device_count() == 1
    assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
    assert utils.get_device() == MPS


def test_a_forced_cpu_hides_apple_gpu_from_torch_accelerator_too(a_mac, monkeypatch) -> None:
    exec(_startup_file(monkeypatch), {})
    assert not torch.backends.mps.is_available()
    assert not torch.accelerator.is_available()
    assert torch.accelerator.device_count() == 0
    assert torch.accelerator.current_accelerator(check_available=True) is None
    # Unchecked, it still names the build's accelerator, as it names "cuda" with
    # CUDA_VISIBLE_DEVICES="" on Linux: notebook 01 prints both.
    assert torch.accelerator.current_accelerator() == MPS
    assert utils.get_device() == torch.device("cpu")


def test_an_accelerator_allowed_leaves_apple_gpu_alone(monkeypatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    environ = {"BLITZ_FORCE_CPU": "0"}
    contract.apply(environ)
    assert "IPYTHONDIR" not in environ and "CUDA_VISIBLE_DEVICES" not in environ


def test_test_portable_runs_the_thread_counts_make_test_did_not() -> None:
    """CI's shell sets one thread (.ci/run): the stored outputs are then checked at 2 and 4
    threads; from a plain shell, make test runs at the contract's 2, so 1 and 4. Each run
    also caps the instruction set. A count above the cores, which PyTorch runs as the cores,
    is left out where it would repeat another run."""
    from tools.harness import portable

    def cores(n: int):
        return lambda count: str(min(int(count), n))

    plan = portable.default_variants
    assert plan({}, cores(8)) == (["avx2+omp1", "generic+omp4"], [])
    assert plan({"OMP_NUM_THREADS": "1"}, cores(8)) == (["avx2+omp2", "generic+omp4"], [])
    assert plan({"OMP_NUM_THREADS": " 4 "}, cores(8)) == (["avx2+omp1", "generic+omp2"], [])
    assert plan({"OMP_NUM_THREADS": "8"}, cores(8))[0] == ["avx2+omp1", "generic+omp2", "omp4"]
    # 2 cores: omp4 runs 2 threads, as omp2 (CI) or make test itself does
    assert plan({"OMP_NUM_THREADS": "1"}, cores(2)) == (
        ["avx2+omp2", "generic"],
        ["omp4: PyTorch runs 2 threads here, as another run does"],
    )
    assert plan({}, cores(2))[0] == ["avx2+omp1", "generic"]
    both = portable._variant("generic+omp4")
    assert both["OMP_NUM_THREADS"] == "4" and both["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    with pytest.raises(SystemExit, match="no variant 'omp3'"):
        portable._variant("avx2+omp3")


def test_pytorch_is_asked_how_many_threads_it_runs() -> None:
    from tools.harness import portable

    assert portable.threads_run("1") == "1"
    assert int(portable.threads_run("64")) <= (os.cpu_count() or 1)
