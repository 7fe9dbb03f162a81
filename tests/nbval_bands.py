"""pytest plugin: compare long floating-point results in tagged notebook cells within a band.

nbval compares every stored output character by character. Training losses and accuracies
come out different in the last digit on another CPU (oneDNN and MKL pick kernels per
processor; the thread count changes the order of sums), so a cell whose printed numbers come
from long floating-point work carries a band in its metadata::

    "metadata": {"nbval_band": {"abs": 0.05, "pct": 3.0}}

In such a cell (and only there), after the sanitizer has run:

* ``pct``: a decimal number followed by ``%`` may differ from the stored one by this many
  percentage points;
* ``abs``: any other decimal number (one with a fractional part) may differ by this much;
* everything else stays exact: the text of every line, integers (counts, shapes, indices),
  and decimal numbers of a kind the band does not name.

The stored numbers are still checked: one edited by hand, or a result that leaves the band,
fails the cell. The rule and when to use it are in CONTRIBUTING.md. Loaded for every pytest
run by ``addopts`` in pyproject.toml.
"""

from __future__ import annotations

import copy
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

BAND_KEY = "nbval_band"
BAND_KINDS = ("abs", "pct")
# A decimal number with a fractional part, optionally signed, and an optional "%" after it.
# Digits glued to letters or dots on the left (hex, version strings) are not numbers here.
_DECIMAL = re.compile(r"(?<![\w.])(-?\d+\.\d+)(%?)")
_PLACEHOLDER = "\u27e8\u2248\u27e9"  # a token no sanitizer rule or output contains
_TEXT_KEYS = ("text", "text/plain")


def check_band(band: Any) -> dict[str, float]:
    """The band of a cell's metadata as ``{kind: tolerance}``; ``ValueError`` if malformed."""
    if not isinstance(band, Mapping) or not band:
        raise ValueError(f"{BAND_KEY} must be a non-empty mapping like {{'pct': 2.0}}, got {band}")
    unknown = set(band) - set(BAND_KINDS)
    if unknown:
        raise ValueError(f"{BAND_KEY} has unknown keys {sorted(unknown)}; use {BAND_KINDS}")
    out = {}
    for kind, tol in band.items():
        # JSON allows Infinity and NaN: a band of Infinity would switch the comparison off
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 < tol < math.inf:
            raise ValueError(f"{BAND_KEY}[{kind!r}] must be a positive finite number, got {tol!r}")
        out[kind] = float(tol)
    return out


def _template(text: str, band: Mapping[str, float]) -> tuple[str, list[tuple[float, str]]]:
    """``text`` with every banded number replaced by a placeholder, and those numbers."""
    found: list[tuple[float, str]] = []

    def swap(m: re.Match) -> str:
        kind = "pct" if m.group(2) else "abs"
        if kind not in band:
            return m.group(0)  # a kind the band does not name stays exact
        found.append((float(m.group(1)), kind))
        return _PLACEHOLDER + m.group(2)

    return _DECIMAL.sub(swap, text), found


def _texts(outputs: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, str]]:
    for out in outputs:
        if isinstance(out.get("text"), str):
            yield out.get("name", "stream"), out["text"]
        data = out.get("data") or {}
        if isinstance(data.get("text/plain"), str):
            yield "text/plain", data["text/plain"]


def banded_numbers(
    outputs: Iterable[Mapping[str, Any]], band: Mapping[str, float], sanitize: Callable[[str], str]
) -> dict[str, list[tuple[float, str]]]:
    """The banded numbers of ``outputs`` (sanitized first), grouped by stream or MIME key."""
    numbers: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for key, text in _texts(outputs):
        numbers[key] += _template(sanitize(text), band)[1]
    return numbers


def templated(
    outputs: list[Mapping[str, Any]], band: Mapping[str, float], sanitize: Callable[[str], str]
) -> list[Any]:
    """A copy of ``outputs`` whose texts hold placeholders where the banded numbers were."""
    result = copy.deepcopy(outputs)
    for out in result:
        if isinstance(out.get("text"), str):
            out["text"] = _template(sanitize(out["text"]), band)[0]
        data = out.get("data") or {}
        if isinstance(data.get("text/plain"), str):
            data["text/plain"] = _template(sanitize(data["text/plain"]), band)[0]
    return result


def band_problems(
    stored: list[Mapping[str, Any]],
    produced: list[Mapping[str, Any]],
    band: Mapping[str, float],
    sanitize: Callable[[str], str] = lambda s: s,
) -> list[str]:
    """Why ``produced`` is outside ``band`` around ``stored`` (empty when within).

    Only the numbers are compared here; the caller compares the templated texts exactly.
    """
    want = banded_numbers(stored, band, sanitize)
    got = banded_numbers(produced, band, sanitize)
    problems = []
    for key in sorted(set(want) | set(got)):
        a, b = want.get(key, []), got.get(key, [])
        if len(a) != len(b):
            problems.append(f"{key}: {len(a)} banded number(s) stored, {len(b)} produced")
            continue
        for (old, kind), (new, _) in zip(a, b, strict=True):
            if abs(new - old) > band[kind] + 1e-9:
                unit = " points" if kind == "pct" else ""
                problems.append(
                    f"{key}: stored {old:g}{'%' if kind == 'pct' else ''}, this run gave "
                    f"{new:g}{'%' if kind == 'pct' else ''}: outside the band "
                    f"of \u00b1{band[kind]:g}{unit} ({BAND_KEY} in the cell's metadata)"
                )
    return problems


def _patch_nbval() -> None:
    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell.compare_outputs, "_banded", False):
        return
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        raw = self.cell.get("metadata", {}).get(BAND_KEY)
        if raw is None:
            return original(self, test, ref, skip_compare)
        try:
            band = check_band(raw)
        except ValueError as exc:  # one line naming the cell, not a plugin traceback
            raise ValueError(f"{self.nodeid}: {exc} (CONTRIBUTING.md: how to choose one)") from None
        # Exact comparison of everything but the banded numbers...
        if not original(
            self,
            templated(test, band, self.sanitize),
            templated(ref, band, self.sanitize),
            skip_compare,
        ):
            return False
        # ...then the numbers, each within its band.
        problems = band_problems(ref, test, band, self.sanitize)
        if problems:
            self.comparison_traceback.append("Banded numbers out of their band:")
            self.comparison_traceback.extend(problems)
            return False
        return True

    compare_outputs._banded = True
    IPyNbCell.compare_outputs = compare_outputs


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("nbval"):
        _patch_nbval()
