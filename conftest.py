"""pytest, whatever it collects (``pytest --nbval notebooks/04_cifar10.ipynb`` too): run under
the test contract of tools/harness/contract.py. It is applied here, before any test imports torch
and before nbval starts a kernel, which inherits this environment. nbval collects only the
lessons _toc.yml lists (tools/lessons.py): a learner's copy in notebooks/ is no lesson."""

from functools import cache
from pathlib import Path

import pytest

from tools import lessons
from tools.harness import contract

contract.apply()


@cache
def _lessons() -> frozenset[Path]:
    try:
        return frozenset(p.resolve() for p in lessons.lesson_notebooks())
    except lessons.LessonError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_configure(config: pytest.Config) -> None:
    """A table of contents the tools cannot use stops pytest in one line, before collection:
    the test modules list the lessons at import, and each would raise its own traceback."""
    _lessons()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out a notebook in notebooks/ that is not a listed lesson (None: pytest decides)."""
    path = collection_path.resolve()
    if path.suffix == ".ipynb" and path.parent == lessons.NOTEBOOKS.resolve():
        return True if path not in _lessons() else None
    return None
