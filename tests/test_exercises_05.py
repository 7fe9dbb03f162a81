"""Notebook 05's exercise checks: the solution is right, the placeholder is not done, and the
mistakes learners make are caught with their hint, in English and in Chinese."""

import contextlib
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, Subset

from tests.exercise_cases import assert_right, assert_todo, assert_wrong
from utils.exercises import data_parallel as ex

# --- exercise 1: a DataParallel training step -------------------------------------------------


def train_epoch_moving_batches_to(device):
    def train_epoch(model, loader, loss_fn, optimizer):  # the notebook's solution, as it is there
        total = 0.0
        for X in loader:
            X = X.to(device)
            y = (X[:, 0] > 0).long()
            optimizer.zero_grad()
            loss = loss_fn(model(X), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        return total / len(loader)

    return train_epoch


train_epoch = train_epoch_moving_batches_to(torch.device("cpu"))


def train_epoch_placeholder(model, loader, loss_fn, optimizer): ...


def train_epoch_without_zero_grad(model, loader, loss_fn, optimizer):
    total = 0.0
    for X in loader:
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def train_epoch_returning_sum(model, loader, loss_fn, optimizer):
    return train_epoch(model, loader, loss_fn, optimizer) * len(loader)


def train_epoch_returning_last(model, loader, loss_fn, optimizer):
    for X in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
    return loss.item()


def train_epoch_adding_tensors(model, loader, loss_fn, optimizer):
    total = 0.0
    for X in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total = total + loss  # keeps every batch's graph alive
    return total / len(loader)


def train_epoch_without_step(model, loader, loss_fn, optimizer):
    total = 0.0
    for X in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        total += loss.item()
    return total / len(loader)


def train_epoch_reading_the_loader(model, loader, loss_fn, optimizer):
    # Issue 44, case 5: raised when the check passed a list of batches, not a DataLoader.
    batches = math.ceil(len(loader.dataset) / loader.batch_size)
    losses = []
    for X in loader:
        X = X.to("cpu", non_blocking=True)
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return sum(losses) / batches


def train_epoch_to_the_models_device(model, loader, loss_fn, optimizer):
    where = next(model.parameters()).device
    total = torch.zeros(())
    for X in loader:
        optimizer.zero_grad()
        X = X.to(where)
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(loader)  # a 0-dim tensor without a graph is a number too


def train_epoch_numpy_mean(model, loader, loss_fn, optimizer):
    losses = []
    for X in loader:
        X = X.to(torch.device("cpu"))
        y = (X[:, 0] > 0).long()
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.mean(losses)


def train_epoch_through_module(model, loader, loss_fn, optimizer):
    # Issue 44, case 10: bypasses the wrapper, which on a CPU gives the same numbers.
    net = model.module if isinstance(model, torch.nn.DataParallel) else model
    total = 0.0
    for X in loader:
        X = X.to("cpu")
        optimizer.zero_grad()
        loss = loss_fn(net(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def train_epoch_not_moving(model, loader, loss_fn, optimizer):
    # Issue 44, case 10: forgets `X = X.to(device)`, which only a GPU would show.
    total = 0.0
    for X in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


device = torch.device("cpu")  # the notebook's global, which its answers read


def train_epoch_moving_where_needed(model, loader, loss_fn, optimizer):
    # Issue 44 item 2: moves a batch only where `device` is not the CPU; right on any machine.
    total = 0.0
    if device.type != "cpu":
        model.to(device)
    for X in loader:
        if device.type != "cpu":
            X = X.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = loss_fn(model(X), (X[:, 0] > 0).long())
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


@pytest.mark.parametrize(
    "answer",
    [
        train_epoch_reading_the_loader,
        train_epoch_to_the_models_device,
        train_epoch_numpy_mean,
        train_epoch_moving_where_needed,
    ],
)
def test_train_epoch_other_right_answers(answer):
    assert_right(ex.q1, answer, torch.device("cpu"))
    assert globals()["device"] == torch.device("cpu")  # the learner's global, as it was


def test_train_epoch_solution_is_right_and_placeholder_is_todo():
    assert_right(ex.q1, train_epoch, torch.device("cpu"))
    assert_right(ex.q1, train_epoch, None)
    assert_todo(ex.q1, train_epoch_placeholder, torch.device("cpu"))
    assert_todo(ex.q1, ..., torch.device("cpu"))


def test_a_cpu_model_on_a_cuda_machine_stays_on_the_cpu(monkeypatch):
    # Seen on an H200 (make test-gpu): the check wrapped the CPU model in DataParallel, which put
    # it on the GPU, and the right answer "raised". Here CUDA only claims to be there: the check
    # must not build a wrapper that would move the model.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert_right(ex.q1, train_epoch, torch.device("cpu"))


@pytest.mark.parametrize(
    "answer", [train_epoch_moving_where_needed, train_epoch_reading_the_loader]
)
def test_a_cpu_check_on_a_cuda_machine_accepts_what_a_cpu_machine_accepts(monkeypatch, answer):
    # Seen on an H200 (make test-gpu, 2026-11-29): with `device` the CPU, an answer that moves
    # its batches only where `device` is not the CPU was called wrong there ("0 of the 5
    # batches were moved"), and right on a machine without a GPU.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert_right(ex.q1, answer, torch.device("cpu"))


@pytest.mark.parametrize(
    ("answer", "en"),
    [
        (train_epoch_through_module, "calling its `.module` skips the wrapper"),
        (train_epoch_not_moving, "of the 5 batches were moved"),
    ],
)
def test_a_cpu_check_on_a_cuda_machine_refuses_what_a_cpu_machine_refuses(monkeypatch, answer, en):
    # Seen on an H200 (make test-gpu, 2026-11-29): bypassing the wrapper with `.module` was
    # called right there, since the check left the wrapper out where CUDA was available.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    status, message = ex.q1.outcome(answer, torch.device("cpu"), lang="en")
    assert status == "wrong" and en in message, message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA GPU (make test-gpu)")
def test_train_epoch_is_judged_on_the_gpu_it_names():
    # The check cell passes the notebook's `device`: on a GPU the model, the batches and the
    # DataParallel wrapper are all there. A model left on the CPU of a GPU machine is judged
    # too (above), through the wrapper a machine without CUDA builds.
    cuda = torch.device("cuda")
    assert_right(ex.q1, train_epoch_moving_batches_to(cuda), cuda)
    assert_todo(ex.q1, train_epoch_placeholder, cuda)


@pytest.mark.parametrize(
    ("answer", "en", "zh"),
    [
        (train_epoch_without_zero_grad, "`backward()` adds to `.grad`", "`backward()` 会累加"),
        (train_epoch_returning_sum, "sum of the batches' losses", "各批量损失之和"),
        (train_epoch_returning_last, "last batch only", "最后一个批量"),
        (train_epoch_adding_tensors, "carries autograd's graph", "自动求导计算图"),
        (train_epoch_without_step, "parameters did not change", "参数没有变化"),
        (train_epoch_through_module, "calling its `.module` skips the wrapper", "绕过包装"),
        (train_epoch_not_moving, "of the 5 batches were moved", "批量移到 `device` 上"),
    ],
)
def test_train_epoch_mistakes_get_their_hint(answer, en, zh):
    assert_wrong(ex.q1, (answer, torch.device("cpu")), en, zh)


# --- exercise 2: gradient accumulation with no_sync -------------------------------------------


def accumulate_gradients(model, loss_fn, X, y, micro_batches):  # the notebook's solution
    pieces = list(zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    for X_micro, y_micro in pieces[:-1]:
        with model.no_sync():  # forward and backward inside: no all-reduce
            (loss_fn(model(X_micro), y_micro) / micro_batches).backward()
    X_micro, y_micro = pieces[-1]
    (loss_fn(model(X_micro), y_micro) / micro_batches).backward()  # all-reduces the sum


def accumulate_placeholder(model, loss_fn, X, y, micro_batches): ...


def accumulate_without_no_sync(model, loss_fn, X, y, micro_batches):
    for X_micro, y_micro in zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True):
        (loss_fn(model(X_micro), y_micro) / micro_batches).backward()


def accumulate_backward_only_in_no_sync(model, loss_fn, X, y, micro_batches):
    pieces = list(zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    for X_micro, y_micro in pieces[:-1]:
        loss = loss_fn(model(X_micro), y_micro) / micro_batches
        with model.no_sync():
            loss.backward()
    X_micro, y_micro = pieces[-1]
    (loss_fn(model(X_micro), y_micro) / micro_batches).backward()


def accumulate_unscaled(model, loss_fn, X, y, micro_batches):
    pieces = list(zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    for X_micro, y_micro in pieces[:-1]:
        with model.no_sync():
            loss_fn(model(X_micro), y_micro).backward()
    loss_fn(model(pieces[-1][0]), pieces[-1][1]).backward()


def accumulate_all_in_no_sync(model, loss_fn, X, y, micro_batches):
    with model.no_sync():
        for X_micro, y_micro in zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True):
            (loss_fn(model(X_micro), y_micro) / micro_batches).backward()


def accumulate_clearing_between(model, loss_fn, X, y, micro_batches):
    pieces = list(zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    for X_micro, y_micro in pieces[:-1]:
        with model.no_sync():
            model.zero_grad()
            (loss_fn(model(X_micro), y_micro) / micro_batches).backward()
    model.zero_grad()
    (loss_fn(model(pieces[-1][0]), pieces[-1][1]) / micro_batches).backward()


def accumulate_by_index(model, loss_fn, X, y, micro_batches):
    k = len(X) // micro_batches
    for i in range(micro_batches):
        part = slice(i * k, (i + 1) * k)
        last = i == micro_batches - 1
        with contextlib.nullcontext() if last else model.no_sync():
            loss = loss_fn(model(X[part]), y[part]) * k / len(X)
            loss.backward()


def accumulate_with_exit_stack(model, loss_fn, X, y, micro_batches):
    k = len(X) // micro_batches
    pieces = list(zip(X.split(k), y.split(k), strict=True))
    for i, (X_micro, y_micro) in enumerate(pieces):
        with contextlib.ExitStack() as stack:
            if i + 1 < len(pieces):
                stack.enter_context(model.no_sync())
            out = model(X_micro)
            (loss_fn(out, y_micro) / len(pieces)).backward()


def accumulate_summed_losses(model, loss_fn, X, y, micro_batches):
    chunks = list(zip(X.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    with model.no_sync():
        for X_micro, y_micro in chunks[:-1]:
            nn.functional.cross_entropy(model(X_micro), y_micro, reduction="sum").div(
                len(X)
            ).backward()
    X_micro, y_micro = chunks[-1]
    nn.functional.cross_entropy(model(X_micro), y_micro, reduction="sum").div(len(X)).backward()


@pytest.mark.parametrize(
    "answer", [accumulate_by_index, accumulate_with_exit_stack, accumulate_summed_losses]
)
def test_accumulation_other_right_answers(answer):
    assert_right(ex.q2, answer)


def test_accumulation_solution_is_right_and_placeholder_is_todo():
    assert_right(ex.q2, accumulate_gradients)
    assert_todo(ex.q2, accumulate_placeholder)
    assert_todo(ex.q2, ...)
    assert not torch.distributed.is_initialized()  # the check cleaned up its process group


@pytest.mark.parametrize(
    ("answer", "en", "zh"),
    [
        (accumulate_without_no_sync, "only the last one should", "只有最后一个应该做"),
        (accumulate_backward_only_in_no_sync, "decides during the forward", "在前向传播时就决定"),
        (accumulate_unscaled, "times the batch's", "倍"),
        (accumulate_all_in_no_sync, "nothing was all-reduced", "没有任何全归约"),
        (accumulate_clearing_between, "only the last micro-batch's gradient", "最后一个微批量"),
    ],
)
def test_accumulation_mistakes_get_their_hint(answer, en, zh):
    assert_wrong(ex.q2, (answer,), en, zh)


# --- exercise 3: evaluation across ranks ------------------------------------------------------


@torch.no_grad()
def count_correct(model, test_set, rank, world_size):  # the notebook's solution
    share = Subset(test_set, range(rank, len(test_set), world_size))
    counts = torch.zeros(2)
    for X, y in DataLoader(share, batch_size=64):
        counts += torch.tensor([(model(X).argmax(1) == y).sum().item(), len(y)])
    return counts


DEALT = {False: 12, True: 9}


def count_correct_placeholder(model, test_set, rank, world_size): ...


def count_with_sampler(drop_last):
    @torch.no_grad()
    def count(model, test_set, rank, world_size):
        sampler = DistributedSampler(test_set, world_size, rank, shuffle=False, drop_last=drop_last)
        correct = seen = 0
        for X, y in DataLoader(test_set, batch_size=64, sampler=sampler):
            correct += (model(X).argmax(1) == y).sum().item()
            seen += len(y)
        return [correct, seen]

    return count


@torch.no_grad()
def accuracy_of_share(model, test_set, rank, world_size):
    correct, seen = count_correct(model, test_set, rank, world_size).tolist()
    return correct / seen


@torch.no_grad()
def count_ignoring_rank(model, test_set, rank, world_size):
    return count_correct(model, test_set, 0, 1)


@torch.no_grad()
def count_in_blocks(model, test_set, rank, world_size):
    block = np.array_split(np.arange(len(test_set)), world_size)[rank]
    X, y = test_set[block.tolist()]
    return (int((model(X).argmax(1) == y).sum()), len(block))


@torch.no_grad()
def count_by_hand(model, test_set, rank, world_size):
    correct = seen = 0
    for i in range(rank, len(test_set), world_size):
        X, y = test_set[i]
        correct += int(model(X[None]).argmax(1).item() == y.item())
        seen += 1
    return np.array([correct, seen])


@torch.no_grad()
def count_with_padding_removed(model, test_set, rank, world_size):
    indices = list(DistributedSampler(test_set, world_size, rank, shuffle=False))
    indices = [i for n, i in enumerate(indices) if n * world_size + rank < len(test_set)]
    X, y = test_set[indices]
    return torch.tensor([(model(X).argmax(1) == y).sum(), len(indices)])


@pytest.mark.parametrize(
    "dealt", [DEALT, {True: 9, False: 12}, {False: np.int64(12), True: torch.tensor(9)}]
)
@pytest.mark.parametrize("answer", [count_in_blocks, count_by_hand, count_with_padding_removed])
def test_count_correct_other_right_answers(answer, dealt):
    assert_right(ex.q3, answer, dealt)


def test_count_correct_solution_is_right_and_placeholder_is_todo():
    assert_right(ex.q3, count_correct, DEALT)
    assert_todo(ex.q3, count_correct_placeholder, DEALT)
    assert_todo(ex.q3, count_correct, ...)


@pytest.mark.parametrize(
    ("answers", "en", "zh"),
    [
        ((count_with_sampler(False), DEALT), "counted twice", "数了两次"),
        ((count_with_sampler(True), DEALT), "never counted", "从未被数到"),
        ((accuracy_of_share, DEALT), "counts do", "计数可以"),
        ((count_ignoring_rank, DEALT), "counted twice", "数了两次"),
        ((count_correct, {False: 10, True: 10}), "what an even split would need", "平均分配"),
        ((count_correct, {False: 9, True: 12}), "swapped", "对调"),
        ((count_correct, [12, 9]), "a dict with the keys False and True", "为键的字典"),
    ],
)
def test_count_correct_mistakes_get_their_hint(answers, en, zh):
    assert_wrong(ex.q3, answers, en, zh)


def test_checks_leave_the_learners_random_numbers_alone():
    answers = {
        ex.q1: (train_epoch, None),
        ex.q2: (accumulate_gradients,),
        ex.q3: (count_correct, DEALT),
    }
    for q, given in answers.items():
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        assert q.outcome(*given, lang="en")[0] == "right"
        assert torch.equal(torch.rand(3), expected)  # as if the check had not run
