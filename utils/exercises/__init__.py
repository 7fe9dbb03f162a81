"""Checks for the lessons' exercises: the learner runs them, the class grader reuses them.

Each lesson has a module here (``tensors`` for 01, ``autograd`` for 02, ...) holding one
:class:`Exercise` per exercise. In the notebook a learner writes an answer in the cell
below the question, then runs the check cell::

    from utils.exercises import tensors as ex
    ...
    ex.q1.check(centred)

and reads one line back: right, not right yet with a hint (what to look at, never the
answer), or not done yet while the answer is still the placeholder ``...``. A check never
raises, so "Restart & Run All" always completes. The class grader runs the same judge in its
own process (:meth:`Exercise.outcome`), on the values the submission's kernel hands over as
data (tools/teaching/judge.py, ``_wire.py``): an unanswered or wrong exercise scores 0.
:meth:`Exercise.grade` raises ``AssertionError`` with the hint instead of printing it.

The checks speak the notebook's language: Chinese for a notebook run from a folder named
``zh`` (``notebooks/zh``, a Chinese assignment), English otherwise; ``BLITZ_LANG=zh`` or
``en`` overrides it. No lesson teaches this module: it is written by hand.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

LANGUAGES = ("en", "zh")

MESSAGES = {
    "right": {"en": "✓ Exercise {n}: right.", "zh": "✓ 练习 {n}：正确。"},
    "wrong": {
        "en": "✗ Exercise {n}: not right yet. Hint: {hint}",
        "zh": "✗ 练习 {n}：还不对。提示：{hint}",
    },
    "todo": {
        "en": "… Exercise {n}: not done yet: replace the ... in the answer cell with your answer.",
        "zh": "… 练习 {n}：还没做。请把答案单元格里的 ... 换成你的答案。",
    },
    "raised": {
        "en": "✗ Exercise {n}: your answer raised {error}. Hint: {hint}",
        "zh": "✗ 练习 {n}：你的答案抛出了 {error}。提示：{hint}",
    },
}


def language() -> str:
    """``BLITZ_LANG`` if set, else ``zh`` inside a folder named ``zh``, else ``en``."""
    chosen = os.environ.get("BLITZ_LANG", "").strip()
    if chosen:
        if chosen not in LANGUAGES:
            raise ValueError(f"BLITZ_LANG={chosen!r}: use one of {', '.join(LANGUAGES)}")
        return chosen
    return "zh" if "zh" in Path.cwd().parts else "en"


class Wrong(Exception):
    """An answer that is not right yet; ``en`` and ``zh`` say what to look at."""

    def __init__(self, en: str, zh: str):
        super().__init__(en)
        self.hints = {"en": en, "zh": zh}


class NotDone(Exception):
    """The answer is still a placeholder (e.g. for a function returning None)."""


def _is_placeholder(value: Any) -> bool:
    return value is Ellipsis


@contextlib.contextmanager
def kept_generators() -> Iterator[None]:
    """Run the block on forked generators: the CPU's and, where there is an accelerator (CUDA,
    MPS, XPU), every one of its devices', so that seeding inside (``torch.manual_seed`` seeds
    them all) leaves the learner's random numbers as they were."""
    devices: list[int] = []
    device_type = None
    if torch.accelerator.is_available():
        accelerator = torch.accelerator.current_accelerator()
        if accelerator is not None:
            device_type = accelerator.type
            devices = list(range(torch.accelerator.device_count()))
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(torch.random.fork_rng(devices=devices, device_type=device_type))
        except RuntimeError:
            # The accelerator's generator cannot be read (a backend this build of torch lacks,
            # as under a test's stand-in for MPS); torch.manual_seed cannot seed it either.
            stack.enter_context(torch.random.fork_rng(devices=[]))
        yield


@dataclass(frozen=True)
class Exercise:
    """One exercise: its number in the lesson and a judge that raises :class:`Wrong`."""

    number: int
    judge: Callable[..., None]
    # What a judge's unexpected exception means for the learner (e.g. "run the cells above").
    on_error: tuple[str, str] = (
        "run your answer on a small input and read the error; the question says what to return.",
        "用一个小输入运行你的答案并读一读报错；题目写明了要返回什么。",
    )
    # Whether the judge reads the learner's global CPU generator as the answer left it (passed
    # as ``global_state=``, read before the check forks and seeds its own).
    global_state: bool = False

    def outcome(
        self, *answers: Any, lang: str | None = None, global_state: torch.Tensor | None = None
    ) -> tuple[str, str]:
        """``(status, message)`` with status ``right``, ``wrong``, ``todo`` or ``raised``.
        ``global_state``: the learner's global CPU generator state, where the answers come from
        another process (the class grader); by default this process's."""
        lang = lang or language()
        n = self.number
        try:
            if any(_is_placeholder(a) for a in answers):
                raise NotDone
            if global_state is None and self.global_state:
                global_state = torch.get_rng_state()
            extra = {"global_state": global_state} if self.global_state else {}
            # A judge builds layers and loaders, which draw from PyTorch's global generator: it
            # runs on forked generators, seeded, so a check gives the same verdict on every run
            # and leaves the learner's later random numbers (and stored outputs) alone.
            with kept_generators():
                torch.manual_seed(0)
                self.judge(*answers, **extra)
        except NotDone:
            return "todo", MESSAGES["todo"][lang].format(n=n)
        except Wrong as wrong:
            return "wrong", MESSAGES["wrong"][lang].format(n=n, hint=wrong.hints[lang])
        except Exception as err:  # the learner's code failed inside the judge: say so, briefly
            hint = self.on_error[LANGUAGES.index(lang)]
            error = f"{type(err).__name__}: {err}"
            return "raised", MESSAGES["raised"][lang].format(n=n, error=error, hint=hint)
        return "right", MESSAGES["right"][lang].format(n=n)

    def check(self, *answers: Any) -> None:
        """Print one line about the answer. Never raises; returns nothing, so that a check
        cell shows that line alone (``outcome`` gives the status to code)."""
        print(self.outcome(*answers)[1])

    def grade(self, *answers: Any) -> None:
        """The grader's test: raise ``AssertionError`` (with the hint) unless it is right."""
        status, message = self.outcome(*answers)
        if status != "right":
            raise AssertionError(message)


def exercise(number: int, global_state: bool = False) -> Callable[[Callable[..., None]], Exercise]:
    """Decorator: turn a judge function into the lesson's :class:`Exercise` ``number``."""

    def wrap(judge: Callable[..., None]) -> Exercise:
        return Exercise(number, judge, global_state=global_state)

    return wrap
