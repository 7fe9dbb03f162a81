"""Notebook 01's exercise checks (utils/exercises/tensors.py), in English and in Chinese: each
solution is right, each placeholder is "not done yet", and the mistakes learners make are
"not right yet" with the hint that points at that mistake."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tools.authoring import i18n
from utils.exercises import tensors as ex

LANGS = ("en", "zh")
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _assert_wrong(exercise, answers: tuple, hints: dict[str, str], lang: str) -> None:
    status, message = exercise.outcome(*answers, lang=lang)
    assert status == "wrong", message
    assert hints[lang] in message, message
    if lang == "zh":
        assert CHINESE.search(message), message
        # The glossary's style rules, as for the catalogs: short sentences, one colon each,
        # no nested brackets, full-width punctuation beside Chinese.
        hint = message.split("提示：", 1)[1]
        assert i18n.style(hint, breaks=False) == [], hint
        assert not i18n._HALF_WIDTH.search(hint), hint


# --- 1. Centre the columns, then the rows ------------------------------------------------------

X = torch.arange(12.0).reshape(4, 3)
CENTRED = (X - X.mean(dim=0), X - X.mean(dim=1, keepdim=True))


@pytest.mark.parametrize("lang", LANGS)
def test_centring_the_solution_is_right_and_the_placeholder_not_done(lang: str) -> None:
    assert ex.q1.outcome(*CENTRED, lang=lang)[0] == "right"
    assert ex.q1.outcome(..., ..., lang=lang)[0] == "todo"
    assert ex.q1.outcome(CENTRED[0], ..., lang=lang)[0] == "todo"  # half done is not done


@pytest.mark.parametrize("lang", LANGS)
def test_centring_accepts_the_right_numbers_in_any_form(lang: str) -> None:
    # Issue 44, case 3: the question asks for numbers, not a type; NumPy arrays were refused.
    A = X.numpy()
    for answers in (
        (A - A.mean(axis=0), A - A.mean(axis=1, keepdims=True)),
        (X - X.mean(dim=0, keepdim=True), X - X.mean(dim=1)[:, None]),
        (X.double() - X.double().mean(0), (X.T - X.T.mean(0)).T),
        (torch.tensor(A - A.mean(axis=0)), A - A.mean(axis=1, keepdims=True)),
    ):
        status, message = ex.q1.outcome(*answers, lang=lang)
        assert status == "right", message


CENTRING_MISTAKES = {
    "the mean of the whole X": (
        (X - X.mean(), CENTRED[1]),
        {"en": "Which dimension does your `mean` reduce?", "zh": "归约的是哪一维"},
    ),
    "the rows centred with the columns' means": (
        (CENTRED[0], X - X.mean(dim=0, keepdim=True)),
        {"en": "each of the rows of `centred_rows` should sum to 0", "zh": "每一行之和应为 0"},
    ),
    "standardised instead of centred": (
        (CENTRED[0] / X.std(dim=0), CENTRED[1]),
        {"en": "subtract the mean, do not rescale", "zh": "只减均值，不要缩放"},
    ),
    "the means instead of the centred X": (
        (X.mean(dim=0), CENTRED[1]),
        {"en": "has shape (3,)", "zh": "形状是 (3,)"},
    ),
    "a list": (
        (CENTRED[0].tolist(), CENTRED[1]),
        {"en": "should be a tensor; it is a list", "zh": "应该是一个张量"},
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", CENTRING_MISTAKES)
def test_centring_mistakes_get_their_hint(case: str, lang: str) -> None:
    answers, hints = CENTRING_MISTAKES[case]
    _assert_wrong(ex.q1, answers, hints, lang)


# --- 2. Images from NumPy ----------------------------------------------------------------------

IMAGES = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
AS_TENSOR = torch.from_numpy(IMAGES)
IMAGES_X = AS_TENSOR.permute(0, 3, 1, 2).float() / 255


@pytest.mark.parametrize("lang", LANGS)
def test_images_the_solution_is_right_and_the_placeholder_not_done(lang: str) -> None:
    assert ex.q2.outcome(IMAGES_X, False, lang=lang)[0] == "right"
    assert ex.q2.outcome(IMAGES_X, np.shares_memory(IMAGES, IMAGES_X.numpy()), lang=lang)[0] == (
        "right"
    )
    # another correct route: scale in NumPy, then move the colour dimension
    other = torch.tensor(IMAGES / np.float32(255)).movedim(-1, 1)
    assert ex.q2.outcome(other, False, lang=lang)[0] == "right"
    assert ex.q2.outcome(..., ..., lang=lang)[0] == "todo"
    assert ex.q2.outcome(IMAGES_X, ..., lang=lang)[0] == "todo"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "shares_memory", [torch.tensor(False), np.bool_(False), np.array(False), False]
)
def test_images_accepts_false_in_any_form(shares_memory, lang: str) -> None:
    # Issue 44, case 3: `shares_memory = torch.tensor(False)` was refused.
    status, message = ex.q2.outcome(IMAGES_X, shares_memory, lang=lang)
    assert status == "right", message


IMAGE_MISTAKES = {
    "the forgotten / 255": (
        (AS_TENSOR.permute(0, 3, 1, 2).float(), False),
        {"en": "What is the largest value a uint8 can hold?", "zh": "uint8 能表示的最大值"},
    ),
    "reshape instead of moving the colour dimension": (
        (AS_TENSOR.reshape(2, 3, 32, 32).float() / 255, False),
        {"en": "the right numbers in the wrong places", "zh": "数对了，位置却不对"},
    ),
    "height and width swapped": (
        (AS_TENSOR.permute(0, 3, 2, 1).float() / 255, False),
        {"en": "the right numbers in the wrong places", "zh": "数对了，位置却不对"},
    ),
    "the colour dimension left last": (
        (AS_TENSOR.float() / 255, False),
        {"en": "has shape (2, 32, 32, 3), not (2, 3, 32, 32)", "zh": "颜色维应紧跟在批量维之后"},
    ),
    "float64": (
        (AS_TENSOR.permute(0, 3, 1, 2).double() / 255, False),
        {"en": "has dtype torch.float64", "zh": "数据类型是 torch.float64"},
    ),
    "divided by 256": (
        (AS_TENSOR.permute(0, 3, 1, 2).float() / 256, False),
        {"en": "0 stays 0 and 255 becomes 1", "zh": "255 变为 1"},
    ),
    "a NumPy array": (
        (IMAGES.transpose(0, 3, 1, 2) / np.float32(255), False),
        {"en": "`X` should be a tensor; it is a NumPy array", "zh": "`X` 应该是一个张量"},
    ),
    "it shares memory": (
        (IMAGES_X, True),
        {"en": "`shares_memory` is not right", "zh": "`shares_memory` 不对"},
    ),
    "a word instead of True or False": (
        (IMAGES_X, "no"),
        {"en": "should be True or False; it is a str", "zh": "应该是 True 或 False"},
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", IMAGE_MISTAKES)
def test_image_mistakes_get_their_hint(case: str, lang: str) -> None:
    answers, hints = IMAGE_MISTAKES[case]
    _assert_wrong(ex.q2, answers, hints, lang)


# --- 3. A device-safe to_numpy ------------------------------------------------------------------


def to_numpy(t):
    """The solution's function."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"to_numpy expects a torch.Tensor, got {type(t).__name__}")
    return t.detach().cpu().numpy()


def placeholder(t): ...


def placeholder_with_a_docstring(t):
    """Return t as a NumPy array."""
    ...


def _refusing(convert):
    def to_numpy(t):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"not a tensor: {type(t).__name__}")
        return convert(t)

    return to_numpy


def _silent_type_error(t):
    if not isinstance(t, torch.Tensor):
        raise TypeError
    return t.detach().cpu().numpy()


def _exactly_a_tensor(t):
    # Issue 44, case 1: refused while the check's GPU stand-in was a Tensor subclass.
    if type(t) is not torch.Tensor:
        raise TypeError(f"to_numpy expects a torch.Tensor, got {type(t).__name__}")
    return t.detach().cpu().numpy()


def _fixed(t):
    # Issue 44, case 9: ignores its input and gives the array the old check always asked for.
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"not a tensor: {type(t).__name__}")
    return np.arange(6.0).reshape(2, 3).astype(np.float32)


def _forgets_return(t):
    if not isinstance(t, torch.Tensor):
        raise TypeError("not a tensor")
    t.detach().cpu().numpy()


@pytest.mark.parametrize("lang", LANGS)
def test_to_numpy_the_solution_is_right_and_the_placeholder_not_done(lang: str) -> None:
    assert ex.q3.outcome(to_numpy, lang=lang)[0] == "right"
    for also_right in (
        _refusing(lambda t: t.detach().to("cpu").numpy()),
        _refusing(lambda t: t.numpy(force=True)),
        _refusing(lambda t: np.asarray(t.cpu().detach())),
        _refusing(lambda t: t.cpu().detach().clone().numpy()),
        _refusing(lambda t: np.array(t.tolist())),
        _refusing(
            lambda t: t.detach().numpy() if t.device.type == "cpu" else t.detach().cpu().numpy()
        ),
        _exactly_a_tensor,
    ):
        status, message = ex.q3.outcome(also_right, lang=lang)
        assert status == "right", message
    for not_done in (..., placeholder, placeholder_with_a_docstring):
        assert ex.q3.outcome(not_done, lang=lang)[0] == "todo"


TO_NUMPY_MISTAKES = {
    "the tensor itself": (
        _refusing(lambda t: t.cpu()),
        {"en": "returned a Tensor for a tensor on", "zh": "不是 NumPy 数组"},
    ),
    "no copy to the CPU first": (
        _refusing(lambda t: t.numpy()),
        {"en": "raises TypeError for a tensor on cuda:0", "zh": "NumPy 只能读取主机内存"},
    ),
    "NumPy reads the tensor directly": (
        _refusing(np.asarray),
        {"en": "raises TypeError for a tensor on cuda:0", "zh": "NumPy 只能读取主机内存"},
    ),
    "no type check": (
        lambda t: t.detach().cpu().numpy(),
        {"en": "`to_numpy([1, 2, 3])` raises AttributeError", "zh": "先检查参数的类型"},
    ),
    "a list turned into an array": (
        lambda t: np.asarray(t.detach().cpu() if isinstance(t, torch.Tensor) else t),
        {"en": "returned a NumPy array instead of refusing the list", "zh": "没有拒绝这个列表"},
    ),
    "a TypeError without a message": (
        _silent_type_error,
        {"en": "raises a TypeError without a message", "zh": "TypeError 没有说明"},
    ),
    "the forgotten return": (
        _forgets_return,
        {"en": "did the function `return` its result?", "zh": "是否用 `return` 返回了结果"},
    ),
    "other numbers": (
        _refusing(lambda t: t.detach().cpu().numpy().T),
        {"en": "with other numbers or in another shape", "zh": "数值或形状变了"},
    ),
    "a fixed array, whatever it is given": (
        _fixed,
        {"en": "Convert the tensor it is given", "zh": "只转换传进来的张量"},
    ),
    "no detach (the lesson's old solution)": (
        _refusing(lambda t: t.cpu().numpy()),
        {"en": "for a tensor that requires grad", "zh": "对需要梯度的张量"},
    ),
    "numpy(), no detach, after cpu()": (
        _refusing(lambda t: np.asarray(t.cpu().numpy())),
        {"en": "NumPy cannot keep autograd's graph", "zh": "不带计算图"},
    ),
    "not a function": (
        np.zeros(3),
        {"en": "should be a function", "zh": "应该是一个函数"},
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", TO_NUMPY_MISTAKES)
def test_to_numpy_mistakes_get_their_hint(case: str, lang: str) -> None:
    answer, hints = TO_NUMPY_MISTAKES[case]
    _assert_wrong(ex.q3, (answer,), hints, lang)


# --- 4. A generator of your own -------------------------------------------------------------------


def _generator_answers(mistake: str | None = None, five=lambda g: torch.rand(5, generator=g)):
    """``g, from_global, from_g, expected, after`` as the solution makes them, or with one
    learner's ``mistake``."""
    g = torch.Generator() if mistake == "unseeded" else torch.Generator().manual_seed(0)
    if mistake == "the global generator":
        g = torch.manual_seed(0)
    _ = torch.manual_seed(0)
    from_global = torch.rand(3)
    if mistake == "from_g from the global generator":
        _ = torch.manual_seed(0)
        from_g = torch.rand(3)
    elif mistake == "from_g drawn after from_global":
        from_g = torch.rand(3)
    else:
        from_g = torch.rand(3, generator=g)
    _ = torch.manual_seed(1)
    expected = torch.rand(2)
    _ = torch.manual_seed(1)
    if mistake == "five from the global generator":
        _ = torch.rand(5)
    elif mistake != "nothing drawn in between":
        _ = five(g)
    after = expected.clone() if mistake == "after copied from expected" else torch.rand(2)
    return g, from_global, from_g, expected, after


@pytest.mark.parametrize("lang", LANGS)
def test_generator_the_solution_is_right_and_the_placeholder_not_done(lang: str) -> None:
    assert ex.q4.outcome(*_generator_answers(), lang=lang)[0] == "right"
    assert ex.q4.outcome(..., ..., ..., ..., ..., lang=lang)[0] == "todo"
    g, *rest = _generator_answers()
    assert ex.q4.outcome(g, *rest[:3], ..., lang=lang)[0] == "todo"


FIVE_FROM_G = {  # issue 44, case 2: "five numbers drawn from g", each refused before
    "randn": lambda g: torch.randn(5, generator=g),
    "rand float64": lambda g: torch.rand(5, generator=g, dtype=torch.float64),
    "randperm": lambda g: torch.randperm(5, generator=g),
    "randint": lambda g: torch.randint(0, 100, (5,), generator=g),
    "normal_": lambda g: torch.empty(5).normal_(generator=g),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("draw", FIVE_FROM_G)
def test_generator_accepts_any_draw_of_five_from_g(draw: str, lang: str) -> None:
    answers = _generator_answers(five=FIVE_FROM_G[draw])
    status, message = ex.q4.outcome(*answers, lang=lang)
    assert status == "right", message


GENERATOR_MISTAKES = {
    "unseeded": {"en": "`g` was seeded with 67280421310721, not 0", "zh": "不是 0"},
    "the global generator": {"en": "`g` is the global generator itself", "zh": "全局生成器本身"},
    "from_g from the global generator": {
        "en": "`g` has not given `from_g` and then five numbers",
        "zh": "不是先 `from_g`、再五个数",
    },
    "after copied from expected": {  # issue 44, case 9
        "en": "`after` was not drawn from it",
        "zh": "`after` 不是从它抽取的",
    },
    "from_g drawn after from_global": {
        "en": "`from_g` differs from `from_global`",
        "zh": "`from_g` 与 `from_global` 不同",
    },
    "five from the global generator": {
        "en": "`after` differs from `expected`",
        "zh": "`after` 与 `expected` 不同",
    },
    "nothing drawn in between": {
        "en": "`g` has given no numbers after `from_g`",
        "zh": "`g` 再没有给出任何数",
    },
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", GENERATOR_MISTAKES)
def test_generator_mistakes_get_their_hint(case: str, lang: str) -> None:
    _assert_wrong(ex.q4, _generator_answers(case), GENERATOR_MISTAKES[case], lang)


def test_a_check_prints_one_line_and_the_grader_raises(capsys) -> None:
    # What the learner sees: one line, no traceback, nothing returned that Jupyter would show.
    assert ex.q1.check(*CENTRED) is None
    assert ex.q1.check(X, X) is None
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("✓") and lines[1].startswith("✗")
    ex.q1.grade(*CENTRED)  # the class grader's call: silent when right
    with pytest.raises(AssertionError, match="not done yet"):
        ex.q4.grade(..., ..., ..., ..., ...)


def test_the_generator_check_draws_nothing_from_the_global_generator() -> None:
    # The judge draws from private generators: the learner's next cell sees the same numbers.
    answers = _generator_answers()
    before = torch.get_rng_state()
    assert ex.q4.outcome(*answers, lang="en")[0] == "right"
    assert torch.equal(torch.get_rng_state(), before)
    assert ex.q3.outcome(to_numpy, lang="en")[0] == "right"  # its inputs: a private generator
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize(("kind", "count"), [("cuda", 2), ("mps", 1)])
def test_a_check_leaves_the_accelerators_generators_alone(monkeypatch, kind, count) -> None:
    # Issue 44, case 11: a check seeded every generator (torch.manual_seed seeds CUDA and MPS
    # too) but restored the CPU's only. Here a machine with two CUDA GPUs, or a Mac, is mocked:
    # the learner's accelerator generators must hold what they held before the check.
    states = {d: torch.tensor([d + 1], dtype=torch.uint8) for d in range(count)}
    learners = {d: s.clone() for d, s in states.items()}

    def seed_all(seed):
        for d in states:
            states[d] = torch.tensor([seed + 100], dtype=torch.uint8)

    def index(device) -> int:
        return 0 if isinstance(device, str) else int(device)

    module = getattr(torch, kind)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda *a, **k: torch.device(kind)
    )
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: count)
    monkeypatch.setattr(module, "device_count", lambda: count)
    monkeypatch.setattr(module, "get_rng_state", lambda device=kind: states[index(device)].clone())
    monkeypatch.setattr(
        module,
        "set_rng_state",
        lambda state, device=kind: states.__setitem__(index(device), state),
    )
    monkeypatch.setattr(module, "manual_seed_all" if kind == "cuda" else "manual_seed", seed_all)
    cpu = torch.get_rng_state()
    assert ex.q1.outcome(*CENTRED, lang="en")[0] == "right"
    assert {d: s.tolist() for d, s in states.items()} == {
        d: s.tolist() for d, s in learners.items()
    }
    assert torch.equal(torch.get_rng_state(), cpu)
