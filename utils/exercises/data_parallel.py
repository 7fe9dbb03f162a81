"""Checks for the exercises of notebook 05 (data parallelism); see utils/exercises/__init__.py.

Each judge builds its own tiny model and data, so a check takes milliseconds on a CPU and
never reads the learner's globals.
"""

from __future__ import annotations

import contextlib
import copy
import math
import numbers
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.overrides import TorchFunctionMode
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from . import NotDone, Wrong, exercise


def _tiny_linear(n_in: int, n_out: int, seed: int) -> nn.Linear:
    """A linear layer whose weights come from its own generator (the global one is left alone)."""
    g = torch.Generator().manual_seed(seed)
    layer = nn.Linear(n_in, n_out)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n_out, n_in, generator=g) * 0.5)
        layer.bias.copy_(torch.randn(n_out, generator=g) * 0.5)
    return layer


def _plain_epoch(model, batches, lr: float, zero_grad: bool = True) -> list[float]:
    """One epoch of the lesson's step on `batches`; the loss of every batch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for X in batches:
        if zero_grad:
            optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _same_parameters(a: nn.Module, b: nn.Module) -> bool:
    return all(
        torch.allclose(p.detach().cpu(), q.detach().cpu(), atol=1e-5)
        for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


def _number(value, name: str) -> float:
    """A learner's scalar answer as a float, or Wrong that says what it is."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise Wrong(
                f"`{name}` should be one number; it is a tensor of shape {tuple(value.shape)}.",
                f"`{name}` 应该是一个数；现在是形状为 {tuple(value.shape)} 的张量。",
            )
        if value.requires_grad:
            raise Wrong(
                f"`{name}` is a tensor that still carries autograd's graph: adding up loss "
                "tensors keeps every batch's graph in memory. Add up numbers (`loss.item()`).",
                f"`{name}` 是一个仍带着自动求导计算图的张量：把损失张量直接相加，"
                "每个批量的计算图都会留在内存里。请累加数值（`loss.item()`）。",
            )
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(
            f"`{name}` should be a number; it is a {type(value).__name__}.",
            f"`{name}` 应该是一个数；现在是 {type(value).__name__}。",
        )
    return float(value)


class _Moves(TorchFunctionMode):
    """Counts the calls that move a tensor of the batches' shape (``.to(...)``, ``.cuda()``,
    ``.xpu()``) while an answer runs: on the CPU a batch not moved to ``device`` works the
    same, so what the answer calls is the only sign of it."""

    def __init__(self, batch_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.batch_shape, self.count = batch_shape, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        moved = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.xpu)
        if func in moved and args and tuple(args[0].shape) == self.batch_shape:
            self.count += 1
        return func(*args, **(kwargs or {}))


class _CudaStandIn(TorchFunctionMode):
    """While active, moving a tensor to a CUDA device (``.to("cuda")``, ``.cuda()``) leaves it
    where it is: on a machine without a GPU, an answer that moves its batches only where
    ``device`` is not the CPU (``if device.type != "cpu": ...``) is run with ``device`` saying
    ``cuda`` and shows its moves."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            device, dtype, *_ = torch._C._nn._parse_to(*args[1:], **kwargs)
            if device is not None and device.type == "cuda":
                return args[0] if dtype is None else args[0].to(dtype=dtype)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _device_standing_in_for_a_gpu(function, device: torch.device):
    """Where the check runs on the CPU and ``function`` reads a global ``device`` that is the
    CPU: that global says ``cuda:0`` for the block, and moves there stay on the CPU, also on a
    machine that has a GPU; else nothing."""
    names = getattr(function, "__globals__", None)
    given = names.get("device") if isinstance(names, dict) else None
    if device.type != "cpu" or not isinstance(given, torch.device) or given.type != "cpu":
        yield
        return
    names["device"] = torch.device("cuda", 0)
    try:
        with _CudaStandIn():
            yield
    finally:
        names["device"] = given


class _DataParallelWithoutCuda(nn.DataParallel):
    """``nn.DataParallel`` as ``torch`` builds it on a machine without CUDA (or with MPS): no
    device ids, so ``forward`` calls the module where it is. Still a ``DataParallel``, so an
    answer's ``isinstance`` and ``.module`` see the wrapper they would see there."""

    def __init__(self, module: nn.Module) -> None:
        nn.Module.__init__(self)
        self.module = module
        self.device_ids = []


def _setup_q1(seeds: tuple[int, int]) -> tuple[DataLoader, nn.Linear]:
    """Exercise 1's batches and starting model, from ``seeds``."""
    g = torch.Generator().manual_seed(seeds[0])
    # A real DataLoader, as in the lesson (an answer may read its .dataset or .batch_size); no
    # shuffling, so every pass gives the same 5 batches.
    return DataLoader(torch.randn(40, 5, generator=g), batch_size=8), _tiny_linear(5, 2, seeds[1])


def _trial_q1(train_epoch, device: torch.device, seeds: tuple[int, int]) -> dict:
    """What ``train_epoch`` does on exercise 1's setup, as data: it runs where the answer lives
    (for the class grader, the submission's kernel), the judge reads the result."""
    batches, start = _setup_q1(seeds)
    model = copy.deepcopy(start).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    moves = _Moves(batch_shape=(batches.batch_size, 5))
    with _device_standing_in_for_a_gpu(train_epoch, device), moves:
        result = train_epoch(model, batches, nn.CrossEntropyLoss(), optimizer)
    trial = {
        "result": result,
        "after": [p.detach().cpu() for p in model.parameters()],
        "moves": moves.count,
        "through": None,
    }
    # Where CUDA is available, DataParallel puts the module on a GPU whatever `device` says; a
    # function written for a CPU model there would be judged on data it never asked for. So a
    # CPU check there wraps the model as a machine without CUDA does (forward calls the module).
    if device.type == "cuda":
        wrapped = nn.DataParallel(copy.deepcopy(start).to(device), device_ids=[device])
    elif torch.cuda.is_available():
        wrapped = _DataParallelWithoutCuda(copy.deepcopy(start).to(device))
    else:
        wrapped = nn.DataParallel(copy.deepcopy(start).to(device))
    through = []  # one entry per call of the wrapper itself, not of its .module
    wrapped.register_forward_pre_hook(lambda module, args: through.append(1))
    train_epoch(wrapped, batches, nn.CrossEntropyLoss(), torch.optim.SGD(wrapped.parameters(), 0.5))
    trial["through"] = len(through)
    trial["wrapped_after"] = [p.detach().cpu() for p in wrapped.module.parameters()]
    return trial


def _same_values(got, module: nn.Module) -> bool:
    """Whether ``got`` (tensors, as a trial reports them) are ``module``'s parameters."""
    theirs = list(module.parameters())
    return (
        isinstance(got, list)
        and len(got) == len(theirs)
        and all(
            isinstance(p, torch.Tensor)
            and p.shape == q.shape
            and torch.allclose(p.detach().double(), q.detach().cpu().double(), atol=1e-5)
            for p, q in zip(got, theirs, strict=True)
        )
    )


@exercise(1)
def q1(train_epoch, device=None) -> None:
    device = torch.device(device) if device is not None else torch.device("cpu")
    via = getattr(train_epoch, "via", None)  # a function in another process (the grader's)
    # seeds drawn now where the answer runs elsewhere: its results cannot be known in advance
    seeds = (1, 2) if via is None else tuple(int.from_bytes(os.urandom(4), "little") for _ in "ab")
    if via is not None:
        trial = via(f"{__name__}:_trial_q1", device, seeds)
    else:
        trial = _trial_q1(train_epoch, device, seeds)
    if not isinstance(trial, dict) or not {"result", "after", "moves", "through"} <= set(trial):
        raise Wrong(
            "the check could not run `train_epoch` on its own model and batches.",
            "检查无法用它自己的模型和批量运行 `train_epoch`。",
        )
    batches, start = _setup_q1(seeds)
    reference = copy.deepcopy(start)
    losses = _plain_epoch(reference, batches, lr=0.5)
    result, model = trial["result"], trial["after"]
    if result is None and _same_values(model, start):
        raise NotDone  # the placeholder: nothing trained, nothing returned
    if not _same_values(model, reference):
        if _same_values(model, start):
            raise Wrong(
                "the parameters did not change: what makes the optimizer update them after "
                "`backward()`?",
                "参数没有变化：在 `backward()` 之后，是哪一步让优化器更新参数？",
            )
        stale = copy.deepcopy(start)
        _plain_epoch(stale, batches, lr=0.5, zero_grad=False)
        if _same_values(model, stale):
            raise Wrong(
                "each step used the gradients of all earlier batches too: `backward()` adds "
                "to `.grad`. What clears them before each batch?",
                "每一步都用上了之前所有批量的梯度：`backward()` 会累加到 `.grad` 上。"
                "每个批量之前，该用什么把梯度清零？",
            )
        raise Wrong(
            "after one epoch the parameters differ from the lesson's training step: one step "
            "per batch, labels `(X[:, 0] > 0).long()`, the loss function and optimizer passed in.",
            "训练一轮后，参数与课上的训练步骤得到的不同：每个批量一步，标签为 "
            "`(X[:, 0] > 0).long()`，并使用传入的损失函数和优化器。",
        )
    if result is None:
        raise Wrong(
            "the model trained, but the function returned None: return the epoch's mean loss.",
            "模型训练了，但函数返回了 None：应返回这一轮的平均损失。",
        )
    value = _number(result, "train_epoch(...)")
    mean = sum(losses) / len(losses)
    if not math.isclose(value, mean, rel_tol=1e-4, abs_tol=1e-6):
        if math.isclose(value, sum(losses), rel_tol=1e-4):
            raise Wrong(
                "that is the sum of the batches' losses; the function should return their mean.",
                "这是各批量损失之和；函数应返回它们的平均值。",
            )
        if math.isclose(value, losses[-1], rel_tol=1e-4):
            raise Wrong(
                "that is the loss of the last batch only; return the mean over all the batches "
                "of the epoch.",
                "这只是最后一个批量的损失；应返回这一轮所有批量的平均损失。",
            )
        raise Wrong(
            f"it returned {value:.4g}, which is not the mean of the batches' losses.",
            f"它返回了 {value:.4g}，这不是各批量损失的平均值。",
        )

    moves = trial["moves"]
    if not isinstance(moves, int) or moves < len(batches):
        raise Wrong(
            f"{moves} of the {len(batches)} batches were moved with `.to(...)`: the "
            "question asks to move each batch to `device`. Here the model is on the CPU and "
            "it works; on a GPU the model is there and a batch left on the CPU fails.",
            f"{len(batches)} 个批量中只有 {moves} 个用 `.to(...)` 移动过。题目要求把每个"
            "批量移到 `device` 上。这里模型在 CPU 上，所以能运行；在 GPU 上模型在 GPU 里，"
            "留在 CPU 上的批量会出错。",
        )

    through = trial["through"]
    if not isinstance(through, int) or through < len(batches):
        raise Wrong(
            f"a model wrapped in `nn.DataParallel` was called {through} time(s) for "
            f"{len(batches)} batches: calling its `.module` skips the wrapper, so on several "
            "GPUs one would do all the work. Call `model(X)` whatever the model is.",
            f"{len(batches)} 个批量，用 `nn.DataParallel` 包装的模型只被调用了 {through} 次。"
            "调用它的 `.module` 会绕过包装，多个 GPU 时只有一个在工作。不论是什么模型，都调用 "
            "`model(X)`。",
        )
    if not _same_values(trial.get("wrapped_after"), reference):
        raise Wrong(
            "a model wrapped in `nn.DataParallel` ends with other parameters than the plain "
            "one: the step must be the same for both (call `model(X)`, not its `.module`).",
            "用 `nn.DataParallel` 包装的模型训练后的参数与未包装的不同：两者的训练步骤应当完全"
            "一样（调用 `model(X)`，而不是它的 `.module`）。",
        )


class _Watched:
    """What a DDP model did during an answer: forwards (with or without sync), all-reduces."""

    def __init__(self, ddp: DDP) -> None:
        self.forward_synced: list[bool] = []  # per forward: will its backward all-reduce?
        self.allreduce_after: list[int] = []  # per all-reduced bucket: forwards run so far
        self.no_sync_entered = 0
        ddp.module.register_forward_pre_hook(
            lambda module, args: self.forward_synced.append(ddp.require_backward_grad_sync)
        )

        def counted_allreduce(group, bucket):
            self.allreduce_after.append(len(self.forward_synced))
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())  # one process: the all-reduce changes nothing
            return fut

        ddp.register_comm_hook(None, counted_allreduce)
        original = ddp.no_sync

        def no_sync():
            self.no_sync_entered += 1
            return original()

        ddp.no_sync = no_sync  # this object only: counts the learner's `with model.no_sync():`


def _setup_q2(seeds: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor, nn.Sequential]:
    g = torch.Generator().manual_seed(seeds[0])
    X, y = torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g)
    start = nn.Sequential(
        _tiny_linear(6, 8, seed=seeds[1]), nn.ReLU(), _tiny_linear(8, 3, seed=seeds[2])
    )
    return X, y, start


def _trial_q2(accumulate_gradients, seeds: tuple[int, int, int], micro_batches: int) -> dict:
    """What ``accumulate_gradients`` does to a DDP model of exercise 2's setup, as data: it
    runs where the answer lives (for the class grader, the submission's kernel)."""
    X, y, start = _setup_q2(seeds)
    own_group = not dist.is_initialized()
    if own_group:  # one process is enough to run DDP's real code
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = DDP(copy.deepcopy(start))
        watched = _Watched(ddp)
        accumulate_gradients(ddp, nn.CrossEntropyLoss(), X, y, micro_batches)
    finally:
        if own_group:
            dist.destroy_process_group()
    return {
        "forward_synced": list(watched.forward_synced),
        "allreduce_after": list(watched.allreduce_after),
        "no_sync_entered": watched.no_sync_entered,
        "grads": [p.grad for p in ddp.module.parameters()],
    }


def _bools(values) -> list[bool]:
    if not (isinstance(values, list) and all(isinstance(v, bool) for v in values)):
        raise Wrong(
            "the check could not watch `accumulate_gradients` at work.",
            "检查无法观察 `accumulate_gradients` 的运行。",
        )
    return values


@exercise(2)
def q2(accumulate_gradients) -> None:
    micro_batches = 3
    via = getattr(accumulate_gradients, "via", None)  # a function in another process
    seeds = (
        (3, 4, 5) if via is None else tuple(int.from_bytes(os.urandom(4), "little") for _ in "abc")
    )
    X, y, start = _setup_q2(seeds)
    reference = copy.deepcopy(start)
    nn.functional.cross_entropy(reference(X), y).backward()  # the whole batch at once
    wanted = [p.grad for p in reference.parameters()]
    if via is None:
        trial = _trial_q2(accumulate_gradients, seeds, micro_batches)
    else:
        trial = via(f"{__name__}:_trial_q2", seeds, micro_batches)
    if not isinstance(trial, dict):
        _bools(None)
    forward_synced = _bools(trial.get("forward_synced"))
    allreduce_after = trial.get("allreduce_after")
    no_sync_entered = trial.get("no_sync_entered")
    grads = trial.get("grads")
    if not (
        isinstance(allreduce_after, list)
        and all(isinstance(v, int) for v in allreduce_after)
        and isinstance(no_sync_entered, int)
        and isinstance(grads, list)
        and len(grads) == len(wanted)
        and all(
            g is None or (isinstance(g, torch.Tensor) and g.shape == w.shape)
            for g, w in zip(grads, wanted, strict=True)
        )
    ):
        _bools(None)
    forwards = len(forward_synced)
    if forwards == 0:
        raise NotDone
    if forwards != micro_batches or any(grad is None for grad in grads):
        raise Wrong(
            f"for {micro_batches} micro-batches the model ran {forwards} forward(s): one "
            "forward and one backward per micro-batch, each on its own slice of X and y.",
            f"{micro_batches} 个微批量，模型却做了 {forwards} 次前向传播：每个微批量应在它自己"
            "那一份 X 和 y 上做一次前向、一次反向。",
        )
    if not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, wanted, strict=True)):
        if all(
            torch.allclose(a, micro_batches * b, atol=1e-5)
            for a, b in zip(grads, wanted, strict=True)
        ):
            raise Wrong(
                f"the gradient is {micro_batches} times the batch's: each micro-batch's mean "
                "loss counts once per micro-batch. What should each loss be divided by?",
                f"梯度是整批梯度的 {micro_batches} 倍：每个微批量的平均损失都被完整计入了。"
                "每个损失应该除以什么？",
            )
        last = copy.deepcopy(start)
        k = len(X) // micro_batches
        nn.functional.cross_entropy(last(X[-k:]), y[-k:]).backward()
        pairs = list(zip(grads, (p.grad for p in last.parameters()), strict=True))
        if any(
            all(torch.allclose(a, s * b, atol=1e-6) for a, b in pairs)
            for s in (1.0, 1.0 / micro_batches)
        ):
            raise Wrong(
                "only the last micro-batch's gradient is left: the earlier ones were cleared. "
                "Accumulating means letting `backward()` add to `.grad` between optimizer steps.",
                "只留下了最后一个微批量的梯度：前面的都被清零了。累积梯度就是在两次优化器更新"
                "之间让 `backward()` 一直加到 `.grad` 上。",
            )
        raise Wrong(
            "the accumulated gradient is not the gradient of the whole batch's mean loss: "
            "split X and y into equal micro-batches, in order, and scale each loss.",
            "累积得到的梯度不是整批平均损失的梯度：把 X 和 y 按顺序切成大小相同的微批量，"
            "并缩放每个损失。",
        )
    synced = sorted(set(allreduce_after))
    if not synced:
        raise Wrong(
            "nothing was all-reduced, so with several processes each would keep its own "
            "gradient: which micro-batch must run outside `no_sync()`?",
            "没有任何全归约，多个进程时每个进程只会留下自己的梯度：哪一个微批量必须在 "
            "`no_sync()` 之外运行？",
        )
    if synced != [micro_batches]:
        if no_sync_entered and not any(not s for s in forward_synced):
            raise Wrong(
                "you used `no_sync()`, but every micro-batch still all-reduced: DDP decides "
                "during the forward whether the next backward all-reduces. What must run "
                "inside the block besides the backward?",
                "你用了 `no_sync()`，但每个微批量仍然做了全归约：DDP 在前向传播时就决定"
                "下一次反向传播是否全归约。除了反向传播，还有什么必须放进这个代码块？",
            )
        raise Wrong(
            f"the backwards of micro-batches {synced} all-reduced; only the last one should: "
            "the others run forward and backward inside `with model.no_sync():`.",
            f"微批量 {synced} 的反向传播都做了全归约；只有最后一个应该做："
            "其余的微批量要在 `with model.no_sync():` 里做前向和反向。",
        )


def _setup_q3(seed: int) -> tuple[TensorDataset, nn.Linear]:
    n, n_in, n_classes = 11, 4, 3  # 11 images divide evenly among neither 2 nor 3 ranks
    g = torch.Generator().manual_seed(seed)
    X, y = torch.randn(n, n_in, generator=g), torch.randint(0, n_classes, (n,), generator=g)
    return TensorDataset(X, y), _tiny_linear(n_in, n_classes, seed=seed + 1).eval()


def _trial_q3(count_correct, seed: int) -> list[list]:
    """What ``count_correct`` returns for each rank of 2 and of 3, on exercise 3's test set and
    model: it runs where the answer lives (for the class grader, the submission's kernel)."""
    test_set, model = _setup_q3(seed)
    return [
        [count_correct(model, test_set, rank, world_size) for rank in range(world_size)]
        for world_size in (2, 3)
    ]


@exercise(3)
def q3(count_correct, dealt) -> None:
    via = getattr(count_correct, "via", None)  # a function in another process (the grader's)
    seed = 6 if via is None else int.from_bytes(os.urandom(4), "little")
    test_set, model = _setup_q3(seed)
    X, y = test_set.tensors
    n = len(X)
    with torch.no_grad():
        whole = int((model(X).argmax(dim=1) == y).sum())
    trial = _trial_q3(count_correct, seed) if via is None else via(f"{__name__}:_trial_q3", seed)
    if not (
        isinstance(trial, list)
        and all(isinstance(t, list) for t in trial)
        and [len(t) for t in trial] == [2, 3]
    ):
        raise Wrong(
            "the check could not run `count_correct` for every rank of 2 and of 3.",
            "检查无法对 2 个和 3 个 rank 的每个 rank 运行 `count_correct`。",
        )
    for world_size, answers in zip((2, 3), trial, strict=True):
        parts = []
        for part in answers:
            if part is None:
                raise NotDone
            part = torch.as_tensor(part, dtype=torch.float64).flatten()
            if part.numel() != 2:
                raise Wrong(
                    "each rank should return its two counts `[correct, seen]`, not "
                    f"{part.numel()} number(s): accuracies of shares of different sizes "
                    "do not add up, counts do.",
                    f"每个 rank 应返回两个计数 `[correct, seen]`，而不是 {part.numel()} 个数："
                    "大小不同的各份的准确率不能相加，计数可以。",
                )
            parts.append(part)
        correct, seen = (int(v) for v in torch.stack(parts).sum(dim=0).round())
        if seen > n:
            raise Wrong(
                f"on {world_size} ranks the shares hold {seen} images of {n}: some are counted "
                "twice. Each image must belong to exactly one rank's share (what does "
                "DistributedSampler do to make the shares equal?).",
                f"{world_size} 个 rank 的各份加起来有 {seen} 张图像，而测试集只有 {n} 张："
                "有的被数了两次。每张图像必须恰好属于一个 rank"
                "（DistributedSampler 为了让各份一样大做了什么？）。",
            )
        if seen < n:
            raise Wrong(
                f"on {world_size} ranks the shares hold {seen} images of {n}: some are never "
                "counted. When the length is not a multiple of world_size, the last images "
                "must still go to some rank.",
                f"{world_size} 个 rank 的各份加起来只有 {seen} 张图像，而测试集有 {n} 张："
                "有的从未被数到。长度不是 world_size 的整数倍时，最后几张图像也必须分给某个 rank。",
            )
        if correct != whole:
            raise Wrong(
                f"the shares cover the test set once, but their correct answers add up to "
                f"{correct}, not what the whole set gives: count `model(X).argmax(1) == y` "
                "in each share.",
                f"各份恰好覆盖测试集一次，但正确数加起来是 {correct}，与整个测试集的结果不同："
                "在每一份里统计 `model(X).argmax(1) == y`。",
            )

    _judge_dealt(dealt)


def _judge_dealt(dealt) -> None:
    expected = {
        drop_last: sum(
            len(list(DistributedSampler(range(10), 3, r, shuffle=False, drop_last=drop_last)))
            for r in range(3)
        )
        for drop_last in (False, True)
    }
    if not isinstance(dealt, dict) or set(dealt) != {False, True}:
        raise Wrong(
            "`dealt` should be a dict with the keys False and True (drop_last) and, for each, "
            "how many images the 3 shares of 10 images hold together.",
            "`dealt` 应是以 False 和 True（drop_last）为键的字典，值为 10 张图像分成 3 份后"
            "各份加起来的图像数。",
        )
    if dealt == expected:
        return
    if {dealt[False], dealt[True]} == {10}:
        raise Wrong(
            "10 is what an even split would need, not what DistributedSampler deals: sum "
            "`len(list(DistributedSampler(range(10), 3, rank, ...)))` over the ranks.",
            "10 是能平均分配时才有的结果，不是 DistributedSampler 实际分出的数：把各 rank 的 "
            "`len(list(DistributedSampler(range(10), 3, rank, ...)))` 加起来。",
        )
    if dealt == {False: expected[True], True: expected[False]}:
        raise Wrong(
            "the two are swapped: which setting repeats images and which leaves some out?",
            "两个值对调了：哪种设置会重复图像，哪种会漏掉图像？",
        )
    raise Wrong(
        f"DistributedSampler deals other numbers than {dealt}: build it for 10 images on 3 "
        "ranks, with drop_last False and True, and count.",
        f"DistributedSampler 分出的数不是 {dealt}。请为 10 张图像、3 个 rank 构造它，"
        "分别取 drop_last 为 False 和 True，数一数。",
    )
