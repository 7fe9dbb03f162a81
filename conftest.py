"""pytest, whatever it collects (``pytest --nbval notebooks/04_cifar10.ipynb`` too): run under
the test contract of tools/harness/contract.py. It is applied here, before any test imports torch
and before nbval starts a kernel, which inherits this environment."""

from tools.harness import contract

contract.apply()
