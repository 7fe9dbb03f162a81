"""What the tests share: the repository's paths, the lesson notebooks and a free port.

Import them as ``from tests.conftest import ROOT, NOTEBOOKS, free_port``.
"""

from __future__ import annotations

import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"


def lesson_notebooks() -> list[Path]:
    """The lessons nbval checks: ``notebooks/*.ipynb``, sorted (not subfolders)."""
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


NOTEBOOKS = lesson_notebooks()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
