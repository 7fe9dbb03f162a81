"""The tests every lesson's exercise checks get (tests/test_exercises_NN.py): from its cases.

A lesson's test file lists, per exercise (``"q1"``, ...), a function building the solution's
answers (``right``), the answer cell's placeholder (``placeholders``) and, per recorded mistake,
``(exercise, answers, English hint fragment, Chinese hint fragment)`` (``wrong``), then takes
the tests from :func:`outcome_tests`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

import pytest

HAN = re.compile(r"[\u4e00-\u9fff]")
LANGS = ("en", "zh")


def outcome_tests(
    ex: ModuleType,
    right: dict[str, Callable[[], tuple]],
    placeholders: dict[str, Callable[[], tuple]],
    wrong: dict[str, tuple[str, Callable[[], tuple], str, str]],
) -> tuple[Callable[..., None], ...]:
    """Four tests: right, not done yet, each mistake with its hint (both languages), and
    that every exercise has at least two recorded mistakes."""

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("name", sorted(right))
    def test_the_solutions_answer_is_right(name, lang):
        status, message = getattr(ex, name).outcome(*right[name](), lang=lang)
        assert status == "right", message

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("name", sorted(placeholders))
    def test_the_answer_cells_placeholder_is_not_done_yet(name, lang):
        status, message = getattr(ex, name).outcome(*placeholders[name](), lang=lang)
        assert status == "todo", message

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("case", sorted(wrong))
    def test_a_learners_mistake_gets_its_hint(case, lang):
        name, answers, en, zh = wrong[case]
        status, message = getattr(ex, name).outcome(*answers(), lang=lang)
        assert status == "wrong", message
        assert (en if lang == "en" else zh) in message
        assert bool(HAN.search(message)) == (lang == "zh"), message

    def test_every_exercise_has_two_recorded_mistakes():
        counts = {name: sum(case[0] == name for case in wrong.values()) for name in right}
        assert set(placeholders) == set(right)
        assert min(counts.values()) >= 2, counts

    return (
        test_the_solutions_answer_is_right,
        test_the_answer_cells_placeholder_is_not_done_yet,
        test_a_learners_mistake_gets_its_hint,
        test_every_exercise_has_two_recorded_mistakes,
    )
