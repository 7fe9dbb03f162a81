"""pytest plugin (``-p tests.notebook_timing``): print each notebook's execution time.

nbval turns every code cell into a test item, and the kernel starts in the first item's
setup, so summing setup + call + teardown per ``.ipynb`` file gives the notebook's time.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

_durations: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _durations[path] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _durations:
        return
    tr = terminalreporter
    tr.section("notebook execution time")
    for path in sorted(_durations):
        tr.write_line(f"{_durations[path]:7.1f} s  {path}")
    tr.write_line(f"{sum(_durations.values()):7.1f} s  all notebooks")
