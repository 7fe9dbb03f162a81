"""Command-line numbers with a range, which no lesson teaches: ``type=number(int, least=1)``
makes argparse refuse ``0``, ``-1``, ``nan`` or ``abc`` in its own one-line error, naming the
option, before a script does any work."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(
    kind: type = int,
    least: float | None = None,
    most: float | None = None,
    above: float | None = None,
) -> Callable[[str], int | float]:
    """An argparse ``type``: a finite ``kind`` (int or float) with ``least <= value <= most``
    and ``value > above``, each bound where given."""
    what = "an integer" if kind is int else "a number"
    if least is not None and most is not None:
        what += f" from {least} to {most}"
    else:
        what += f", {least} or more" if least is not None else ""
        what += f", {most} at most" if most is not None else ""
    what += f" above {above}" if above is not None else ""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan  # not a number: refused below, in the same words
        if not (
            math.isfinite(value)
            and (least is None or value >= least)
            and (most is None or value <= most)
            and (above is None or value > above)
        ):
            raise argparse.ArgumentTypeError(f"must be {what} (not {text})")
        return value

    return parse
