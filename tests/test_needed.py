"""Which deep dives the class grader leaves out (tools/teaching/needed.py): only those no cell
run after them needs, read the way Python scopes names, every doubt on the side of running."""

from __future__ import annotations

import pytest

from tools.teaching.needed import names, skippable

DEEP, CORE = True, False


def left_out(*cells: tuple[bool, str]) -> set[int]:
    return skippable([source for _, source in cells], [deep for deep, _ in cells])


def test_a_deep_dive_nothing_reads_is_left_out() -> None:
    assert left_out((CORE, "x = 1"), (DEEP, "y = x + 1\nprint(y)"), (CORE, "print(x)")) == {1}


def test_a_deep_dive_whose_function_an_answer_calls_runs_with_what_it_needs() -> None:
    cells = (
        (CORE, "import torch"),
        (DEEP, "width = 8"),  # read by conv_block's body, a global there
        (DEEP, "def conv_block(c):\n    return torch.nn.Conv2d(c, width, 3)"),
        (DEEP, "slow = sum(range(10**9))"),
        (CORE, "def answer(c):\n    return conv_block(c)"),
    )
    assert left_out(*cells) == {3}


def test_parameters_locals_and_loop_targets_are_not_read_from_the_deep_dives() -> None:
    cells = (
        (DEEP, "optimizer = 1\nname = 'x'\np = 2\nstep = 3"),
        (CORE, "def one_cycle(optimizer, steps):\n    step = steps\n    return optimizer, step"),
        (CORE, "for k, name in enumerate('ab'):\n    print(k, name)"),
        (CORE, "with open(__file__) as p:\n    p.read()"),
        (CORE, "print([p for p in range(3)])"),
    )
    assert left_out(*cells) == {0}


def test_a_plain_assignment_makes_an_older_binding_dead_and_a_branch_does_not() -> None:
    rebound = ((DEEP, "x = 1"), (CORE, "x = 2"), (CORE, "print(x)"))
    assert left_out(*rebound) == {0}
    in_a_branch = ((DEEP, "x = 1"), (CORE, "if flag:\n    x = 2"), (CORE, "print(x)"))
    assert left_out(*in_a_branch) == set()
    read_first = ((DEEP, "x = 1"), (CORE, "x = x + 1"))
    assert left_out(*read_first) == set()
    a_later_deep_dive_needs_none_before = ((CORE, "print(1)"), (DEEP, "x = 1"))
    assert left_out(*a_later_deep_dive_needs_none_before) == {1}


@pytest.mark.parametrize(
    "reader",
    [
        "!echo {x}",  # IPython expands names in shell and magic lines
        "out = !echo $x",
        "%time print(x)",
        "%%time\nprint(x)",  # a cell magic whose body is Python
        "print(globals()['x'])",  # names reached without a table: every word counts
        "eval('x')",
        "print(x",  # cannot be read: it may read anything
    ],
)
def test_a_reader_python_cannot_scope_keeps_what_it_may_read(reader) -> None:
    assert left_out((DEEP, "x = 1"), (CORE, reader)) == set()


def test_a_cell_magics_body_is_read_as_python_when_it_is_python() -> None:
    # %%writefile's body is a file's text, %%time's is run: as Python, its own import binds
    # os, and its free names (x) count, on the side of running
    script = "%%writefile demo.py\nimport os\nprint(os.getpid(), x)"
    assert "x" in names(script).reads and "os" not in names(script).reads
    assert left_out((DEEP, "import os"), (CORE, script)) == {0}


def test_a_deep_dive_that_cannot_be_read_runs() -> None:
    assert names("def broken(:") is None
    assert left_out((DEEP, "def broken(:"), (CORE, "print(1)")) == set()


def test_a_cell_too_deep_to_read_runs_and_reads_anything() -> None:
    too_deep = "y = " + "+".join(["x"] * 200_000)  # Python's own compiler gives up on it
    assert names(too_deep) is None
    assert left_out((DEEP, "x = 1"), (CORE, too_deep)) == set()


def test_markdown_is_given_as_no_code() -> None:
    # the grader passes "" for a markdown cell: it reads and binds nothing
    assert left_out((DEEP, "x = 1"), (CORE, ""), (CORE, "print(2)")) == {0}


@pytest.mark.parametrize(
    "change", ["model.fc = None", "model[-1] = None", "model.fc.weight.requires_grad_(False)"]
)
def test_a_deep_dive_that_changes_an_object_in_place_runs_for_its_readers(change) -> None:
    assert left_out((CORE, "model = []"), (DEEP, change), (CORE, "print(model)")) == set()


def test_an_in_place_method_on_a_new_object_changes_no_name() -> None:
    # torch.zeros(3) is a new tensor: torch itself is not changed
    assert left_out((DEEP, "torch.zeros(3).add_(1)"), (CORE, "print(torch.ones(1))")) == {0}


def test_a_function_reads_its_globals_when_it_is_called_in_a_later_cell() -> None:
    cells = (
        (CORE, "def answer():\n    return helper()"),
        (DEEP, "def helper():\n    return 1"),  # after the definition, before the call
        (CORE, "print(answer())"),
    )
    assert left_out(*cells) == set()
