"""The one drift check: every generated file is what ``make generate`` writes now."""

from __future__ import annotations

from tools.authoring import generate


def test_every_generated_file_is_current() -> None:
    # Rule: a committed generated file never differs from what its generator writes.
    found = generate.check()
    assert not found, "\n".join(found)


def test_the_steps_run_in_the_order_their_inputs_need() -> None:
    order = [module for _, module, _, _ in generate.STEPS]
    # utils before anything imports it; i18n copies what slides and lesson_size wrote.
    assert order == [
        "tools.authoring.save_cells",
        "tools.authoring.slides",
        "tools.authoring.lesson_size",
        "tools.authoring.i18n",
    ]
