"""The lesson code saved in ``utils`` (tools/authoring/save_cells.py), checked against references.

Each function comes from the notebook cell that teaches it; these tests pin what the lesson
claims of it, on the CPU, with GPUs and Apple's MPS mocked where a path needs one.
"""

from __future__ import annotations

import ast
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pytest
import torch
import torchvision
from torch import nn
from torchvision.transforms import v2

import utils
from tools.authoring import lesson_size, save_cells
from tools.lessons import lesson_notebooks

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists


# --- tools/authoring/save_cells.py
# -----------------------------------------------------------------


def test_the_lessons_that_save_code_are_the_four_expected() -> None:
    # Whether each module is current: tests/test_generate.py (make generate).
    saved = {save_cells.module_path(nb).name for nb in NOTEBOOKS if save_cells.render(nb)}
    assert saved == {"tensors.py", "neural_networks.py", "cifar10.py", "data_parallel.py"}


def _copy_with(tmp_path: Path, name: str, edit) -> Path:
    """A copy of notebook ``name`` whose first saved cell went through ``edit``."""
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "save" in c["metadata"].get("tags", []))
    cell["source"] = edit("".join(cell["source"]))
    path = tmp_path / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_an_edited_lesson_cell_makes_its_module_stale(tmp_path: Path) -> None:
    edited = _copy_with(tmp_path, "03_neural_networks.ipynb", lambda s: s.replace("6, 5", "8, 5"))
    assert save_cells.render(edited) != save_cells.module_path(edited).read_text()
    assert "nn.Conv2d(in_channels, 8, 5)" in save_cells.render(edited)
    unchanged = tmp_path / "01_tensors.ipynb"
    shutil.copy(ROOT / "notebooks" / unchanged.name, unchanged)
    assert save_cells.render(unchanged) == save_cells.module_path(unchanged).read_text()


def test_a_saved_cell_may_only_define(tmp_path: Path) -> None:
    edited = _copy_with(tmp_path, "01_tensors.ipynb", lambda s: s + '\nprint("hello")\n')
    with pytest.raises(ValueError, match="top-level Expr at line"):
        save_cells.render(edited)


# --- notebook 01: devices and seeding ------------------------------------------------------


def fake_machine(mp: pytest.MonkeyPatch, built: str | None, usable: int) -> None:
    """This process as a machine whose PyTorch was built for the accelerator ``built`` (what
    ``torch.accelerator.current_accelerator()`` names: "cuda", "mps", "xpu" or None) and that
    can use ``usable`` devices of it."""
    built_for = None if built is None else torch.device(built)
    mp.setattr(torch._C, "_accelerator_getAccelerator", lambda: built_for)
    for kind in ("cuda", "mps", "xpu"):
        count = usable if kind == built else 0
        mp.setattr(getattr(torch, kind), "device_count", lambda count=count: count)
        mp.setattr(getattr(torch, kind), "is_available", lambda count=count: count > 0)
    mp.setattr(torch.backends.mps, "is_available", lambda: built == "mps" and usable > 0)


@pytest.mark.parametrize(
    ("built", "usable", "device", "all_gpus"),
    [
        ("cuda", 2, "cuda", ["cuda:0", "cuda:1"]),
        ("cuda", 1, "cuda", ["cuda:0"]),
        ("cuda", 0, "cpu", ["cpu"]),  # the CUDA wheel on a machine without a GPU
        ("mps", 1, "mps", ["cpu"]),  # a Mac; try_gpu and try_all_gpus ask CUDA only
        ("mps", 0, "cpu", ["cpu"]),
        ("xpu", 1, "xpu", ["cpu"]),  # an Intel GPU: torch.accelerator covers it too
        (None, 0, "cpu", ["cpu"]),  # a CPU-only build (pip's wheels for Windows)
    ],
)
def test_device_choice(monkeypatch, built, usable: int, device: str, all_gpus) -> None:
    fake_machine(monkeypatch, built, usable)
    assert torch.accelerator.current_accelerator() == (built and torch.device(built))
    assert utils.get_device() == torch.device(device)
    assert [str(d) for d in utils.try_all_gpus()] == all_gpus
    cuda = usable if built == "cuda" else 0
    assert utils.try_gpu(0) == torch.device("cuda:0" if cuda else "cpu")
    assert utils.try_gpu(1) == torch.device("cuda:1" if cuda > 1 else "cpu")


def test_hidden_gpus_mean_the_cpu() -> None:
    # A learner hides the GPUs as the test contract does, before Python starts:
    # CUDA_VISIBLE_DEVICES="". In a fresh process, since one that has used CUDA keeps its devices
    # (`make test-gpu` runs this file with the GPUs visible).
    code = (
        "import torch, utils\n"
        "mps = torch.backends.mps.is_available()\n"
        "print(utils.get_device() in (torch.device('cpu'), torch.device('mps') if mps else None),"
        " utils.try_all_gpus() == [torch.device('cpu')])"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]


def test_seed_everything_repeats_all_three_generators() -> None:
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3)

    assert utils.seed_everything(123) is None  # a Generator repr would print an address
    a = draw()
    utils.seed_everything(123)
    b = draw()
    assert a[:2] == b[:2] and torch.equal(a[2], b[2])
    utils.seed_everything(124)
    assert draw()[0] != a[0]


@pytest.mark.parametrize("arg", ["cuda", "false"])
def test_get_device_takes_no_argument(arg: str) -> None:
    """It picks the best device itself: an argument is a TypeError, never a silent CPU."""
    with pytest.raises(TypeError, match=r"get_device\(\) takes 0 positional arguments"):
        utils.get_device(arg)  # type: ignore[call-arg]


# Rule: bad arguments get one clear line, never a silent CPU (True is an int in Python).
@pytest.mark.parametrize("arg", ["0", -1, 1.5, None, True, False])
def test_try_gpu_rejects_what_is_not_a_gpu_number(arg) -> None:
    with pytest.raises(ValueError) as info:
        utils.try_gpu(arg)
    assert str(info.value) == f"try_gpu: i must be a GPU number (0, 1, ...), got {arg!r}"


def test_try_gpu_still_answers_for_gpu_numbers() -> None:
    gpus = torch.cuda.device_count()
    assert utils.try_gpu() == utils.try_gpu(0) == torch.device("cuda:0" if gpus else "cpu")
    assert utils.try_gpu(gpus) == torch.device("cpu"), "a GPU this machine lacks: the CPU"


# --- notebook 02: fine-tuning -------------------------------------------------------------


def _fine_tuning_core() -> str:
    """The core cell of notebook 02 that freezes ResNet-18 and trains a new head."""
    nb = nbformat.read(ROOT / "notebooks" / "02_autograd.ipynb", as_version=4)
    cells = [
        c.source
        for c in nb.cells
        if c.cell_type == "code"
        and lesson_size.part_of(c) == "core"
        and "requires_grad_(False)" in c.source
    ]
    assert len(cells) == 1, f"expected one fine-tuning cell on 02's core path, found {len(cells)}"
    return cells[0]


def _puts_in_eval_mode(source: str) -> bool:
    """Whether the code calls ``.eval()`` or ``.train(False)`` on something."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "eval" and not node.args:
                return True
            if node.func.attr == "train" and [getattr(a, "value", None) for a in node.args] == [
                False
            ]:
                return True
    return False


@pytest.mark.parametrize("as_taught", [True, False], ids=["as taught", "without eval"])
def test_the_fine_tuning_core_keeps_the_batch_norm_statistics(as_taught: bool) -> None:
    """The recipe freezes ResNet-18 with eval() as well as requires_grad_(False): one
    training step of it leaves all 20 batch norms' running statistics as they were. The
    same cell without its eval() line moves them (so the check can fail)."""
    source = _fine_tuning_core()
    assert _puts_in_eval_mode(source), "02's fine-tuning core must put the frozen model in eval()"
    if not as_taught:
        source = source.replace("model.eval()", "model")  # the line does nothing now
        assert not _puts_in_eval_mode(source)
    fresh = nn.BatchNorm2d(1)  # a new layer's statistics: mean 0, variance 1, 0 batches
    torch.manual_seed(0)
    ns = {"torch": torch, "torchvision": torchvision, "nn": nn, "print": lambda *a: None}
    exec(compile(source, "02_autograd.ipynb: fine-tuning cell", "exec"), ns)
    model = ns["model"]
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(norms) == 20
    kept = [
        bool((bn.running_mean == fresh.running_mean).all())
        and bool((bn.running_var == fresh.running_var).all())
        and bn.num_batches_tracked.item() == 0
        for bn in norms
    ]
    assert kept == [as_taught] * 20
    assert model.fc.weight.grad is not None and model.fc.weight.grad.abs().sum() > 0  # it trained


# --- notebook 03: LeNet --------------------------------------------------------------------


@pytest.mark.parametrize(("channels", "params"), [(1, 61_706), (3, 62_006)])
def test_lenet_shapes_and_size(channels: int, params: int) -> None:
    model = utils.LeNet(in_channels=channels)
    assert model(torch.randn(2, channels, 32, 32)).shape == (2, 10)
    assert sum(p.numel() for p in model.parameters()) == params
    assert utils.LeNet(num_classes=4)(torch.randn(1, 1, 32, 32)).shape == (1, 4)


# --- notebook 04: the data, the pictures and the better recipe ----------------------------


class TinyCIFAR:
    """What to_tensors reads of a torchvision CIFAR10: ``.data`` N x 32 x 32 x 3 bytes."""

    def __init__(self, n: int = 5) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, 256, (n, 32, 32, 3), generator=g, dtype=torch.uint8).numpy()
        self.targets = list(range(n))


def test_to_tensors_equals_the_per_image_transform() -> None:
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    data = TinyCIFAR()
    X, y = utils.to_tensors(data, mean, std)
    transform = v2.Compose(
        [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]
    )
    assert X.shape == (5, 3, 32, 32) and y.tolist() == [0, 1, 2, 3, 4]
    for x, image in zip(X, data.data, strict=True):
        torch.testing.assert_close(x, transform(image))


def test_imshow_undoes_the_normalization() -> None:
    img = torch.rand(3, 4, 6)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.5)
    normalized = v2.Normalize(mean, std)(img)
    ax = utils.imshow(normalized, mean, std)
    shown = torch.as_tensor(np.asarray(ax.images[0].get_array()))
    torch.testing.assert_close(shown, img.permute(1, 2, 0))
    matplotlib.pyplot.close(ax.figure)


def test_better_net_with_and_without_batch_norm() -> None:
    normed, plain = utils.better_net(), utils.better_net(batch_norm=False)
    # the textbook order: convolution, (batch norm,) ReLU, then max-pooling, in every block
    textbook = [nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d]
    for block in normed[:3]:
        assert [type(m) for m in block] == textbook
    for block in plain[:3]:
        assert [type(m) for m in block] == [nn.Conv2d, nn.ReLU, nn.MaxPool2d]
    assert not any(isinstance(m, nn.BatchNorm2d) for m in plain.modules())
    # three conv biases replace three batch norms' scale and shift: 16 + 32 + 64 fewer weights
    count = [sum(p.numel() for p in m.parameters()) for m in (normed, plain)]
    assert count[0] - count[1] == 16 + 32 + 64
    assert normed.eval()(torch.randn(2, 3, 40, 40)).shape == (2, 10)  # global pooling


def test_augment_is_a_flip_and_a_shift_of_each_image() -> None:
    torch.manual_seed(0)
    X = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).view(2, 3, 8, 8) + 1
    out = utils.augment(X, pad=2)
    assert out.shape == X.shape
    for x, o in zip(X, out, strict=True):
        padded = [nn.functional.pad(c, (2, 2, 2, 2)) for c in (x, x.flip(2))]
        windows = [p[:, i : i + 8, j : j + 8] for p in padded for i in range(5) for j in range(5)]
        assert any(torch.equal(o, w) for w in windows)


def test_sgd_and_one_cycle_as_notebook_04_states() -> None:
    optimizer = utils.sgd(0.1, nesterov=True, weight_decay=5e-4)(utils.better_net().parameters())
    group = optimizer.param_groups[0]
    assert (group["momentum"], group["nesterov"], group["weight_decay"]) == (0.9, True, 5e-4)
    scheduler = utils.one_cycle(optimizer, 100)
    # It starts at max_lr / 25 with momentum 0.95, peaks at 0.1 and ends at max_lr / 25 / 1e4.
    assert abs(group["lr"] - 0.1 / 25) < 1e-12 and group["momentum"] == 0.95
    lrs = []
    for _ in range(99):
        optimizer.step()
        scheduler.step()
        lrs.append(group["lr"])
    assert abs(max(lrs) - 0.1) < 1e-12 and abs(lrs[-1] - 0.1 / 25 / 1e4) < 1e-12


def test_training_lowers_the_loss_and_accuracy_counts() -> None:
    torch.manual_seed(0)
    X = torch.randn(64, 3, 8, 8)
    y = (X.mean(dim=(1, 2, 3)) > 0).long()  # a learnable rule
    model, cpu = utils.better_net(width=4), torch.device("cpu")
    optimizer = utils.sgd(0.1)(model.parameters())
    scaler = utils.grad_scaler_for(cpu)
    assert not scaler.is_enabled()  # float32 on the CPU: nothing to scale
    losses = [
        utils.train_one_epoch(model, optimizer, nn.CrossEntropyLoss(), X, y, 16, cpu, scaler)
        for _ in range(16)
    ]
    assert losses[-1] < losses[0]
    assert 0.5 < utils.accuracy(model, X, y, cpu) <= 1.0
    assert 0.0 <= utils.accuracy(model, X, y, cpu, flips=True) <= 1.0


def test_train_one_epoch_keeps_the_scaler_it_is_given_across_epochs() -> None:
    """The scaler is created once per run: its scale keeps growing over epochs. A scaler made
    inside each epoch would start again from init_scale every time."""
    torch.manual_seed(0)
    X, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    model, cpu = utils.better_net(width=4), torch.device("cpu")
    optimizer = utils.sgd(0.01)(model.parameters())
    # an enabled scaler on the CPU (float32 gradients never overflow here): it doubles its
    # scale after every 3 steps in a row without overflow
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0, growth_interval=3)
    for _ in range(2):  # 2 epochs of 4 steps: doubled after steps 3 and 6
        utils.train_one_epoch(model, optimizer, nn.CrossEntropyLoss(), X, y, 16, cpu, scaler)
    assert scaler.get_scale() == 8.0
    assert scaler.state_dict()["_growth_tracker"] == 2


@pytest.mark.parametrize(("native_bf16", "dtype"), [(True, torch.bfloat16), (False, torch.float16)])
def test_mixed_precision_only_on_cuda(monkeypatch, native_bf16: bool, dtype) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: native_bf16)
    assert utils.amp_dtype_for(torch.device("cuda")) == dtype
    assert utils.amp_dtype_for(torch.device("cpu")) is None
    assert utils.amp_dtype_for(torch.device("mps")) is None
    assert not utils.grad_scaler_for(torch.device("cpu")).is_enabled()


# --- notebook 05: data parallelism from scratch --------------------------------------------


def test_split_batch_cuts_like_dataparallel() -> None:
    X, y = torch.arange(10.0).view(10, 1), torch.arange(10)
    cpu = torch.device("cpu")
    shards = utils.split_batch(X, y, [cpu] * 4)
    assert [len(Xs) for Xs, _ in shards] == [len(c) for c in X.chunk(4)] == [3, 3, 3, 1]
    assert torch.equal(torch.cat([ys for _, ys in shards]), y)


def test_replicas_with_allreduce_give_the_full_batch_gradient() -> None:
    torch.manual_seed(0)
    model, cpu = utils.LeNet(in_channels=3), torch.device("cpu")
    names = [n for n, _ in model.named_parameters()]
    X, y = torch.randn(13, 3, 32, 32), torch.randint(0, 10, (13,))

    def loss_sum(params, X, y):
        out = torch.func.functional_call(model, dict(zip(names, params, strict=True)), (X,))
        return nn.functional.cross_entropy(out, y, reduction="sum")

    full = utils.replicate(list(model.parameters()), cpu)
    (loss_sum(full, X, y) / len(X)).backward()
    replicas = [utils.replicate(list(model.parameters()), cpu) for _ in range(3)]
    assert all(p.is_leaf and p.requires_grad for p in replicas[0])
    for rep, (Xs, ys) in zip(replicas, utils.split_batch(X, y, [cpu] * 3), strict=True):
        (loss_sum(rep, Xs, ys) / len(X)).backward()  # shards of 5, 5 and 3
    for i in range(len(full)):
        utils.allreduce([rep[i].grad for rep in replicas])
    for rep in replicas:
        for p, ref in zip(rep, full, strict=True):
            torch.testing.assert_close(p.grad, ref.grad)


def test_allreduce_writes_the_sum_into_every_tensor() -> None:
    tensors = [torch.full((3,), float(k)) for k in (1, 2, 4)]
    utils.allreduce(tensors)
    assert all(t.tolist() == [7.0, 7.0, 7.0] for t in tensors)
