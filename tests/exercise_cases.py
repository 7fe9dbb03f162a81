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


def assert_right(q, *answers, langs=LANGS) -> None:
    for lang in langs:
        status, message = q.outcome(*answers, lang=lang)
        assert status == "right", message


def assert_todo(q, *answers, langs=LANGS) -> None:
    for lang in langs:
        status, message = q.outcome(*answers, lang=lang)
        assert status == "todo", message


def assert_wrong(q, answers, en_hint: str, zh_hint: str, langs=LANGS) -> None:
    """Not right yet, with the hint of this mistake, in each language (zh in Chinese)."""
    for lang in langs:
        status, message = q.outcome(*answers, lang=lang)
        assert status == "wrong", message
        assert (en_hint if lang == "en" else zh_hint) in message, message
        assert bool(HAN.search(message)) == (lang == "zh"), message


def other_right_tests(
    ex: ModuleType, others: dict[str, tuple[str, Callable[[], tuple]]], names: tuple[str, ...]
) -> tuple[Callable[..., None], ...]:
    """Two tests: each of ``others`` (``case: (exercise, answers)``, right answers other than
    the solution's: other routes, other types) is right in both languages, and each exercise
    in ``names`` has at least three of them."""

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("case", sorted(others))
    def test_another_right_answer_is_right(case, lang):
        name, answers = others[case]
        assert_right(getattr(ex, name), *answers(), langs=(lang,))

    def test_every_exercise_has_three_other_right_answers():
        counts = {name: sum(case[0] == name for case in others.values()) for name in names}
        assert min(counts.values()) >= 3, counts

    return test_another_right_answer_is_right, test_every_exercise_has_three_other_right_answers


def outcome_tests(
    ex: ModuleType,
    right: dict[str, Callable[[], tuple]],
    placeholders: dict[str, Callable[[], tuple]],
    wrong: dict[str, tuple[str, Callable[[], tuple], str, str]],
) -> tuple[Callable[..., None], ...]:
    """Four tests: right, not done yet, each mistake with its hint (both languages), and
    that every exercise has at least three recorded mistakes."""

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("name", sorted(right))
    def test_the_solutions_answer_is_right(name, lang):
        assert_right(getattr(ex, name), *right[name](), langs=(lang,))

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("name", sorted(placeholders))
    def test_the_answer_cells_placeholder_is_not_done_yet(name, lang):
        assert_todo(getattr(ex, name), *placeholders[name](), langs=(lang,))

    @pytest.mark.parametrize("lang", LANGS)
    @pytest.mark.parametrize("case", sorted(wrong))
    def test_a_learners_mistake_gets_its_hint(case, lang):
        name, answers, en, zh = wrong[case]
        assert_wrong(getattr(ex, name), answers(), en, zh, langs=(lang,))

    def test_every_exercise_has_three_recorded_mistakes():
        counts = {name: sum(case[0] == name for case in wrong.values()) for name in right}
        assert set(placeholders) == set(right)
        assert min(counts.values()) >= 3, counts

    return (
        test_the_solutions_answer_is_right,
        test_the_answer_cells_placeholder_is_not_done_yet,
        test_a_learners_mistake_gets_its_hint,
        test_every_exercise_has_three_recorded_mistakes,
    )
