"""utils.parallel (from-scratch data parallelism, DataParallel's split rule, wrapper errors),
utils.distributed (torchrun's environment) and utils.ResNet18 -- all on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import utils
from utils import resnet


@pytest.mark.parametrize(
    ("batch", "n", "sizes"),
    [
        (30, 2, [15, 15]),
        (30, 3, [10, 10, 10]),
        (30, 8, [4, 4, 4, 4, 4, 4, 4, 2]),
        (10, 8, [2, 2, 2, 2, 2]),  # chunk() gives only 5 chunks: 3 devices stay idle
        (9, 4, [3, 3, 3]),
        (1, 1, [1]),
    ],
)
def test_scatter_sizes_follow_chunk(batch: int, n: int, sizes: list[int]) -> None:
    assert utils.scatter_sizes(batch, n) == sizes
    assert sum(sizes) == batch


def test_scatter_sizes_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        utils.scatter_sizes(0, 2)


def test_check_batch_size_message() -> None:
    utils.check_batch_size(4, 4)
    with pytest.raises(ValueError, match="batch of 3 sample.*smaller than the 4 devices"):
        utils.check_batch_size(3, 4)


def lenet_params_and_loss():
    """LeNet as a list of parameters and a pure function of them (for the from-scratch code)."""
    torch.manual_seed(0)
    model = utils.LeNet(in_channels=3)
    names = [n for n, _ in model.named_parameters()]

    def loss_sum(params, X, y):
        out = torch.func.functional_call(model, dict(zip(names, params, strict=True)), (X,))
        return F.cross_entropy(out, y, reduction="sum")

    return [p.detach() for p in model.parameters()], loss_sum


@pytest.mark.parametrize("batch", [12, 13])  # equal and unequal shards
def test_from_scratch_gradients_equal_full_batch(batch: int) -> None:
    params, loss_sum = lenet_params_and_loss()
    X, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    full = utils.replicate(params, torch.device("cpu"))
    (loss_sum(full, X, y) / batch).backward()

    devices = [torch.device("cpu")] * 3
    shards = utils.split_batch(X, y, devices)
    assert [len(s[0]) for s in shards] == utils.scatter_sizes(batch, 3)
    replicas = [utils.replicate(params, d) for d in devices]
    for rep, (Xs, ys) in zip(replicas, shards, strict=True):
        (loss_sum(rep, Xs, ys) / batch).backward()  # divide by the GLOBAL batch
    for i in range(len(params)):
        utils.allreduce([rep[i].grad for rep in replicas])
    for rep in replicas:
        for p_full, p_rep in zip(full, rep, strict=True):
            torch.testing.assert_close(p_rep.grad, p_full.grad, atol=1e-6, rtol=1e-5)


def test_replicate_copies_and_allreduce_sums() -> None:
    src = [torch.ones(2)]
    rep = utils.replicate(src, torch.device("cpu"))
    assert rep[0].requires_grad and rep[0].data_ptr() != src[0].data_ptr()
    ts = [torch.full((2,), float(i)) for i in range(1, 4)]
    utils.allreduce(ts)
    assert all(torch.equal(t, torch.full((2,), 6.0)) for t in ts)
    with pytest.raises(ValueError, match="one shape"):
        utils.allreduce([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(ValueError, match="at least one"):
        utils.allreduce([])


def test_split_batch_errors() -> None:
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="smaller than the 4 devices"):
        utils.split_batch(torch.zeros(3, 1), torch.zeros(3), [cpu] * 4)
    with pytest.raises(ValueError, match="only 3 chunk"):
        utils.split_batch(torch.zeros(9, 1), torch.zeros(9), [cpu] * 4)
    with pytest.raises(ValueError, match="y has 4"):
        utils.split_batch(torch.zeros(5, 1), torch.zeros(4), [cpu])


def test_functional_data_parallel_fails_on_cpu(monkeypatch) -> None:
    # what notebook 05 shows: without a GPU the functional form cannot run at all
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="device type could not be determined"):
        nn.parallel.data_parallel(nn.Linear(4, 2), torch.randn(6, 4))


def test_resnet18_shapes_and_stem() -> None:
    model = utils.ResNet18(width=8)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    stem = model.stem[0]
    assert stem.kernel_size == (3, 3) and stem.stride == (1, 1)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    blocks = [m for m in model.modules() if isinstance(m, resnet.Residual)]
    assert len(blocks) == 8  # 4 stages x 2 blocks: with stem and head, 18 weight layers
    classic = utils.ResNet18()
    assert 11_000_000 < sum(p.numel() for p in classic.parameters()) < 11_300_000
    with pytest.raises(ValueError, match="N x C x H x W"):
        model(torch.randn(3, 32, 32))
