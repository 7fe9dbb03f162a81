"""The test contract (tools/contract.py) for every pytest run, and the fixtures tests share.

Applied before any test module imports torch, so that ``pytest --nbval notebooks/...``
from a fresh shell runs the notebooks as ``make test`` does.
"""

from __future__ import annotations

from tools import contract

contract.apply()
