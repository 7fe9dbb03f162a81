"""Notebook 05 on Apple's GPU (MPS), checked on any machine against a fake MPS device.

The cells that run a model on the kernel's ``device`` -- the whole core path, the deep dives
on ``DataParallel`` in a training loop, on the functional ``data_parallel`` and on data
parallelism from scratch, and the solution of exercise 1 -- are executed in this process
(IPython), as on a Mac:

* ``torch.backends.mps.is_available()`` is True and there is no CUDA GPU, and
  ``torch.accelerator`` names ``mps`` as available, so the set-up cell picks ``mps``;
  ``torch.mps.device_count()`` is 1, and
  ``torch._C._scatter`` is missing, as in PyTorch's builds for the Mac (no CUDA);
* a recording shim (a ``TorchFunctionMode``) makes the ``mps`` device usable on the CPU: a
  tensor created on or moved to ``mps`` stays on the CPU but reports ``mps:0``, and every
  operation that mixes it with a CPU tensor raises as PyTorch does ("Expected all tensors to
  be on the same device"). Every module call is recorded with the device of its parameters
  and of its input.

So a cell that feeds CPU inputs to a model on ``mps`` (or the reverse) fails here as it would
on a Mac; a cell that quietly runs everything on the CPU is caught by the records. The deep
dives that launch ``scripts/train_ddp.py`` are left out: their processes see no fake.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from tools.authoring import lesson_size

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_data_parallel.ipynb"
# The deep dives (by their headings) and the solution whose cells use the kernel's device.
DEVICE_DEEP_DIVES = re.compile(
    r"## Deep dive: (`DataParallel` in a training|the functional|data par)"
)
DEVICE_SOLUTIONS = re.compile(r"### 1\. A DataParallel training step")
WRAP_MOVES = "    model = model.to(device)  # DataParallel moves nothing to MPS or the CPU itself\n"

pytestmark = pytest.mark.e2e  # about half a minute: the core path launches torchrun

MPS = torch.device("mps", 0)
# What PyTorch allows across devices: copies, and checks of metadata.
MIXED_OK = {"copy_", "_has_compatible_shallow_copy_type", "__set__", "set_", "is_same_size"}


def _device(t: torch.Tensor) -> str:
    return getattr(t, "_fake_device", "cpu")


def _put(t: torch.Tensor, device: str) -> None:
    t._fake_device = device


def _property(func) -> str:
    return getattr(getattr(func, "__self__", None), "__name__", "")


class FakeMPS(TorchFunctionMode):
    """An ``mps`` device that lives on the CPU; tensors on it say ``mps:0``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, str]] = []  # (module class, parameters, input)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name == "__get__" and _property(func) == "device":
            return MPS if _device(args[0]) == "mps" else func(*args, **kwargs)
        if name == "__set__" and _property(func) == "data":  # Module.to sets param.data
            func(*args, **kwargs)
            _put(args[0], _device(args[1]))
            return None
        if func is torch.Tensor.to:
            return self._to(func, args, kwargs)
        if func is torch.Tensor.get_device and _device(args[0]) == "mps":
            return 0  # the index of the one MPS device (-1 would say "on the CPU")
        if func is torch.Tensor.cpu:
            return self._moved(args[0], func(*args, **kwargs), "cpu")
        if "device" in kwargs:  # a factory: torch.randn(..., device=...), torch.zeros(...)
            wanted = kwargs["device"]
            target = "mps" if wanted is not None and torch.device(wanted).type == "mps" else "cpu"
            if target == "mps":
                kwargs["device"] = "cpu"
            out = func(*args, **kwargs)
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    _put(t, target)
            return out
        tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        # a CPU scalar (0-dim) may meet tensors of any device, as in PyTorch
        devices = {_device(t) for t in tensors if not (t.dim() == 0 and _device(t) == "cpu")}
        if len(devices) > 1 and name not in MIXED_OK:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two "
                f"devices, {' and '.join(sorted(devices))}! (in {name})"
            )
        out = func(*args, **kwargs)
        target = devices.pop() if len(devices) == 1 else "cpu"
        if name == "__get__" and _property(func) == "grad" and isinstance(out, torch.Tensor):
            _put(out, _device(args[0]))  # a gradient lives where its parameter does
            return out
        inputs = {id(t) for t in tensors}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(t) not in inputs:
                _put(t, target)
        return out

    def _to(self, func, args, kwargs):
        t = args[0]
        if len(args) > 1 and isinstance(args[1], torch.Tensor):  # t.to(other)
            return self._moved(t, func(t, args[1].dtype, *args[2:], **kwargs), _device(args[1]))
        parse = {k: v for k, v in kwargs.items() if k != "copy"}
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **parse)
        if device is None:  # a change of dtype only
            return self._moved(t, func(*args, **kwargs), _device(t))
        if device.type != "mps":
            return self._moved(t, func(*args, **kwargs), "cpu")
        options = {"dtype": dtype, "non_blocking": non_blocking, "copy": kwargs.get("copy", False)}
        if memory_format is not None:
            options["memory_format"] = memory_format
        return self._moved(t, func(t, "cpu", **options), "mps")

    @staticmethod
    def _moved(source: torch.Tensor, out: torch.Tensor, target: str) -> torch.Tensor:
        if out is source and _device(source) != target:
            out = out.clone()  # a move to another device makes a new tensor
        _put(out, target)
        return out

    def record(self, module: torch.nn.Module, inputs: tuple) -> None:
        params = next(module.parameters(), None)
        x = next((t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)), None)
        if params is not None and x is not None:
            self.calls.append((type(module).__name__, _device(params), _device(x)))


def device_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells that use the kernel's device, in notebook order."""
    chosen, section, subsection = [], "", ""  # the last ## and ### headings
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            section = subsection = cell.source.splitlines()[0]
        elif cell.cell_type == "markdown" and cell.source.startswith("### "):
            subsection = cell.source.splitlines()[0]
        if cell.cell_type != "code":
            continue
        part = lesson_size.part_of(cell)
        if (
            part == "core"
            or (part == "deep dives" and DEVICE_DEEP_DIVES.match(section))
            or ("solution" in cell.metadata.get("tags", []) and DEVICE_SOLUTIONS.match(subsection))
            or cell.source.startswith("from utils.exercises import")  # the solution's check
        ):
            chosen.append(cell)
    return chosen


@pytest.fixture
def on_a_mac(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """This process as a Mac with Apple's GPU: no CUDA, MPS available; in a fresh folder."""
    import torch._dynamo  # noqa: F401 -- imported before the patches: it reads the real ones

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "device_count", lambda: 1)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("mps")
    )
    monkeypatch.delattr(torch._C, "_scatter")  # CUDA builds only
    monkeypatch.chdir(tmp_path)  # the notebook writes ddp_minimal.py and .runs/


def run(cells: list[nbformat.NotebookNode]) -> tuple[dict, FakeMPS]:
    """Execute ``cells`` in a fresh IPython shell under the fake MPS: its namespace, the shim."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="nocolor")
    fake = FakeMPS()
    hook = torch.nn.modules.module.register_module_forward_pre_hook(fake.record)
    try:
        with fake:
            for cell in cells:
                result = shell.run_cell(cell.source, store_history=False)
                if not result.success:
                    raise AssertionError(f"cell {cell.id} failed on MPS") from (
                        result.error_in_exec or result.error_before_exec
                    )
        return dict(shell.user_ns), fake
    finally:
        hook.remove()
        InteractiveShell.clear_instance()


def test_the_device_cells_are_the_core_and_the_device_deep_dives() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    chosen = {c.id for c in device_cells(nb)}
    core = {c.id for c in nb.cells if c.cell_type == "code" and lesson_size.part_of(c) == "core"}
    assert core <= chosen
    sources = [c.source for c in device_cells(nb)]
    for start in (
        "def wrap(",
        "loss_fn = nn.CrossEntropyLoss()",
        "model.eval()",
        "class PartlyParallelNet",
        "block = nn.Linear(4, 2)",
        "def train_epoch(",
    ):
        assert any(s.startswith(start) for s in sources), start
    assert not any("utils.launch" in s or "HashStore" in s for s in sources)  # other processes


def test_the_device_cells_run_on_mps(on_a_mac) -> None:
    cells = device_cells(nbformat.read(NOTEBOOK, as_version=4))
    ns, fake = run(cells)
    assert ns["device"] == torch.device("mps")
    mixed = [call for call in fake.calls if call[1] != call[2]]
    assert not mixed, f"a model and its input on different devices: {mixed}"
    on_mps = {name for name, params, x in fake.calls if params == x == "mps"}
    # the core model, the wrapper, the functional-form net, the solution's model
    assert {"Model", "DataParallel", "PartlyParallelNet", "QuietModel"} <= on_mps, on_mps
    assert Path("ddp_minimal.py").is_file() and Path(".runs/05/ddp_minimal.pt").is_file()
    with fake:  # exercise 1's check trains its own small model on the kernel's device
        outcome = ns["ex"].q1.outcome(ns["train_epoch"], ns["device"], lang="en")
    assert outcome[0] == "right", outcome


def test_a_wrap_that_does_not_move_the_model_fails_on_mps(on_a_mac) -> None:
    """DataParallel itself moves nothing to MPS: without wrap's .to(device), the inputs on
    mps meet a model on the CPU, and the notebook fails at its training step."""
    cells = device_cells(nbformat.read(NOTEBOOK, as_version=4))
    wrap = next(c for c in cells if c.source.startswith("def wrap("))
    assert WRAP_MOVES in wrap.source
    wrap.source = wrap.source.replace(WRAP_MOVES, "")
    with pytest.raises(AssertionError, match="failed on MPS") as failure:
        run(cells)
    assert "same device" in str(failure.value.__cause__)
