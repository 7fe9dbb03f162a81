"""The grader's judge (tools/teaching/judge.py, utils/exercises/_wire.py): verdicts computed in
the grader's process from values the submission's kernel hands over as data (issue 44 item 2,
cases 12-14). Fast: the transport against a plain kernel. e2e: cheating submissions of lessons
01 (English and Chinese) and 05 through the real, sandboxed grader get 0 for what they target,
and the lessons' own solutions full marks."""

from __future__ import annotations

import base64
import copy
import csv
import io
import os
import pickle
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from tools.teaching import assignments, sandbox
from tools.teaching.judge import Kernel, RemoteFunction, Unanswered, read_marker, verdict
from utils.exercises import _wire

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kernel():
    """A plain local kernel (no sandbox: the transport is tested) and the grader's side of it."""
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT), env=env)
    judge_side = Kernel(km.get_connection_info(session=False), 60, interrupt=km.interrupt_kernel)

    def run(code: str) -> None:
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]

    yield judge_side, run
    judge_side.close()
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def test_a_function_is_called_with_data_and_its_error_comes_back(kernel) -> None:
    judge_side, run = kernel
    run(
        "import torch\n"
        "def to_numpy(t, scale=1):\n"
        "    if not isinstance(t, torch.Tensor):\n"
        "        raise TypeError(f'to_numpy takes a tensor, not {type(t).__name__}')\n"
        "    return t.detach().numpy() * scale\n"
        "def placeholder(t):\n    ...\n"
    )
    (function, placeholder), state = judge_side.export(["to_numpy", "placeholder"], False)
    assert isinstance(function, RemoteFunction) and state is None
    assert (function.does_nothing, placeholder.does_nothing) == (False, True)
    given = torch.randn(3, 2, requires_grad=True)
    got = function(given, scale=2)
    assert type(got) is np.ndarray and np.array_equal(got, given.detach().numpy() * 2)
    with pytest.raises(TypeError, match="takes a tensor, not list"):
        function([1, 2, 3])


def test_values_come_back_as_what_they_were(kernel) -> None:
    judge_side, run = kernel
    run(
        "import numpy as np, torch\n"
        "g = torch.Generator().manual_seed(7); torch.rand(2, generator=g)\n"
        "w = torch.ones(2, requires_grad=True); (w * 3).sum().backward()\n"
        "values = {'a': (1, 2.5, True, None, 'x'), 'arr': np.arange(6).reshape(2, 3)}\n"
        "net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())\n"
        "params = list(net.parameters())\n"
    )
    (g, w, values, net, params), state = judge_side.export(
        ["g", "w", "values", "net", "params"], True
    )
    mine = torch.Generator().manual_seed(7)
    torch.rand(2, generator=mine)
    assert torch.equal(g.get_state(), mine.get_state()) and g.initial_seed() == 7
    assert w.requires_grad and torch.equal(w.grad, torch.full((2,), 3.0))
    assert values["a"] == (1, 2.5, True, None, "x")
    assert np.array_equal(values["arr"], np.arange(6).reshape(2, 3))
    assert isinstance(net, torch.nn.Sequential) and isinstance(net[0], torch.nn.Linear)
    assert net[0].in_features == 3 and type(net[1]).__name__ == "ReLU"
    assert params[0] is list(net.parameters())[0]  # the same tensor, as in the kernel
    x = torch.randn(4, 3)
    with torch.no_grad():
        want = torch.relu(x @ net[0].weight.T + net[0].bias)
        assert torch.allclose(net(x), want)  # run in the kernel, on the judge's input
    assert state is not None and state.dtype == torch.uint8


@pytest.mark.parametrize(
    "code, said",
    [
        (
            "class Always(torch.Tensor):\n"
            "    def __eq__(self, other):\n        return True\n"
            "answer = torch.zeros(4, 3).as_subclass(Always)",
            "a subclass of torch.Tensor (Always)",
        ),
        (
            "import os\nclass Evil:\n"
            "    def __reduce__(self):\n        return (os.mkdir, (PROBE,))\n"
            "answer = Evil()",
            "an Evil",
        ),
        ("answer = type('Fake', (), {})", "a type"),
        ("del answer", "NameError"),
    ],
)
def test_a_value_that_is_not_data_is_no_answer(kernel, tmp_path, code, said) -> None:
    judge_side, run = kernel
    probe = tmp_path / "pwned"
    run(f"import torch\nPROBE = {str(probe)!r}\nanswer = 1\n{code}")
    status, message = verdict(
        judge_side, {"module": "tensors", "question": "q1", "args": ["answer", "answer"]}, "en"
    )
    assert status == "unanswered" and said in message, message
    assert not probe.exists()


def test_a_forged_reply_runs_nothing_in_the_grader(kernel, tmp_path) -> None:
    judge_side, run = kernel
    probe = tmp_path / "pwned"
    run(
        "import base64, os, pickle, utils.exercises._wire as _w\n"
        "class Evil:\n"
        f"    def __reduce__(self):\n        return (os.mkdir, ({str(probe)!r},))\n"
        "_kept = _w.serve_export\n"
        "_w.serve_export = lambda *a, **k: base64.b64encode(pickle.dumps(Evil())).decode()\n"
    )
    try:
        status, message = verdict(
            judge_side, {"module": "tensors", "question": "q3", "args": ["to_numpy"]}, "en"
        )
    finally:
        run("_w.serve_export = _kept")
    assert status == "unanswered" and "not data" in message, message
    assert not probe.exists()
    # and the grader's own reading of such bytes refuses them, whatever the kernel
    raw = pickle.dumps(type("E", (), {"__reduce__": lambda s: (os.mkdir, (str(probe),))})())
    with pytest.raises(_wire.NotData):
        _wire.decode(raw, None)
    assert not probe.exists()


def test_an_oversized_reply_is_refused(kernel) -> None:
    from jupyter_client.manager import KernelManager  # noqa: F401 (the fixture's kind)

    judge_side, run = kernel
    small = Kernel(judge_side.client.get_connection_info(session=False), 5, max_reply=2**20)
    run(
        "import utils.exercises._wire as _w\n_kept = _w.serve_export\n"
        "_w.serve_export = lambda *a, **k: 'QUFB' * (2**21)\n"
    )
    try:
        with pytest.raises(Unanswered):
            small.export(["1"], False)
    finally:
        small.close()
        run("_w.serve_export = _kept")
    # and on the data itself: a reply over the limit is not read
    buffer = io.BytesIO()
    torch.save({"kind": "export", "values": [torch.zeros(2**18)]}, buffer)
    with pytest.raises(_wire.NotData, match="more than"):
        _wire.decode_export(buffer.getvalue(), None, 2**16)
    assert base64  # (used by the kernel's side above)


def test_every_check_of_every_lesson_is_judged_outside_the_kernel() -> None:
    for lang in assignments.LANGS:
        for number in ("01", "02", "03", "04", "05"):
            nb = assignments.source_notebook(assignments.lesson_for(number, lang), lang)
            for cell in nb.cells:
                if (cell.metadata.get("nbgrader") or {}).get("grade"):
                    hidden = cell.source.split("### BEGIN HIDDEN TESTS", 1)[1]
                    spec = read_marker(hidden)
                    assert spec is not None and spec["args"], cell.source
                    # nothing but the marker: no code of the grader's runs in the kernel
                    lines = [x for x in hidden.splitlines() if x.strip()]
                    assert lines[1:] == ["### END HIDDEN TESTS"], cell.source


# ---- through the real grader ------------------------------------------------------------

# Code that a submission runs in an answer cell to change its grade (issue 44 cases 12-14),
# with no right answer anywhere: each must score 0.
CHEATS = {
    "prints_through_displayhook": "__builtins__.print = get_ipython().displayhook\nprint(4)",
    "empties_every_later_cell": "get_ipython().input_transformers_post = [lambda lines: []]",
    "replaces_import_module": (
        "import importlib\n"
        "class _Yes:\n"
        "    def __getattr__(self, name):\n        return self\n"
        "    def __call__(self, *a, **k):\n        return None\n"
        "importlib.import_module = lambda *a, **k: _Yes()\n"
        "__builtins__.__import__ = (lambda real: lambda name, *a, **k: _Yes() "
        "if name.startswith(('_graded', 'utils')) else real(name, *a, **k))(__import__)"
    ),
    "hooks_meta_path": (
        "import sys, types, importlib.abc, importlib.machinery\n"
        "class _F(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.startswith(('_graded', 'utils.exercises')):\n"
        "            return importlib.machinery.ModuleSpec(name, self)\n"
        "    def create_module(self, spec):\n        return types.ModuleType(spec.name)\n"
        "    def exec_module(self, module):\n"
        "        module.__getattr__ = lambda name: (lambda *a, **k: None)\n"
        "sys.meta_path.insert(0, _F())\n"
        "for _m in [m for m in sys.modules if m.startswith(('utils.exercises', '_graded'))]:\n"
        "    del sys.modules[_m]"
    ),
    "traces_past_every_raise": (
        "import sys, linecache\n"
        "def _skip(frame, event, arg):\n"
        "    if 'exercises' not in frame.f_code.co_filename:\n"
        "        return None\n"
        "    if event == 'line':\n"
        "        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)\n"
        "        if line.strip().startswith('raise'):\n"
        "            try:\n                frame.f_lineno = frame.f_lineno + 1\n"
        "            except ValueError:\n                pass\n"
        "    return _skip\n"
        "sys.settrace(_skip)"
    ),
    "says_right_before_each_cell": (
        "import utils.exercises as _u\n"
        "def _right(*a, **k):\n"
        "    _u.Exercise.outcome = lambda self, *a, **k: ('right', 'right')\n"
        "    _u.Exercise.grade = lambda self, *a: None\n"
        "get_ipython().events.register('pre_run_cell', _right)"
    ),
    "replaces_ex": (
        "class _Fake:\n"
        "    def __getattr__(self, name):\n        return self\n"
        "    def __call__(self, *a, **k):\n        return True\n"
        "ex = _Fake()"
    ),
    "forges_a_tensor": (
        "import torch\n"
        "class _Always(torch.Tensor):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def allclose(self, *a, **k):\n        return True\n"
        "centred_cols = centred_rows = torch.zeros(4, 3).as_subclass(_Always)"
    ),
    "pickles_code": (
        "import os\n"
        "class _Evil:\n"
        "    def __reduce__(self):\n"
        "        return (os.system, ('touch /tmp/pwned-by-a-submission',))\n"
        "centred_cols = centred_rows = _Evil()"
    ),
    "forges_the_reply": (
        "import base64, pickle, os\n"
        "import utils.exercises._wire as _w\n"
        "class _Evil:\n"
        "    def __reduce__(self):\n"
        "        return (os.system, ('touch /tmp/pwned-by-a-submission',))\n"
        "_w.serve_export = lambda *a, **k: base64.b64encode(pickle.dumps(_Evil())).decode()\n"
        "_w.serve_call = _w.serve_export"
    ),
}


def _class_of_cheats(course: Path, name: str, cheats: dict[str, str], first: str):
    """One submission per cheat, its code in the answer cell of exercise ``first`` and every
    other answer left as the release has it. (The grader grades the lesson's own solutions first
    and stops if they lose a point, so a right submission needs no row of its own here.)"""
    release = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
    made = {}
    for student, code in cheats.items():
        nb = copy.deepcopy(release)
        for cell in nb.cells:
            if (cell.metadata.get("nbgrader") or {}).get("grade_id") == f"{first}_answer":
                cell.source = code
        made[student] = nb
    return made


def _grade_class(
    tmp_path: Path,
    number: str,
    lang: str,
    cheats: dict[str, str],
    first: str,
    cell_s: int = 90,
    jobs: int = 1,
):
    from tools.teaching.grade import grade

    course = tmp_path / "course"
    lesson = assignments.lesson_for(number, lang)
    assignments.write_course(course, lang, [lesson])
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    for student, nb in _class_of_cheats(course, lesson.stem, cheats, first).items():
        nbformat.write(nb, submitted / f"{student}.ipynb")
    csv_path = grade(
        number, submitted, tmp_path / "out", lang, cell_timeout=cell_s, timeout=900, jobs=jobs
    )
    with csv_path.open(encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}, tmp_path / "out"


# The cheats that do not undo one another, in one answer cell: where every cheat was already
# graded on its own (lesson 01 in English), other lessons and languages are checked with these
# two submissions, each lesson's gradings being minutes of CI.
AT_ONCE = {
    "empties_every_later_cell": CHEATS["empties_every_later_cell"],
    "every_other_cheat_at_once": "\n".join(
        CHEATS[k]
        for k in (
            "says_right_before_each_cell",
            "prints_through_displayhook",
            "replaces_ex",
            "forges_a_tensor",
        )  # fmt: skip
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("lang", assignments.LANGS)
def test_no_cheat_changes_a_verdict_of_lesson_01(tmp_path, lang) -> None:
    if sandbox.check_host():
        pytest.skip(sandbox.check_host())
    probe = Path("/tmp/pwned-by-a-submission")
    cheats = CHEATS if lang == "en" else AT_ONCE
    # two side by side (grade --jobs 2), as a teacher on a 2-core machine would
    rows, out = _grade_class(tmp_path, "01", lang, cheats, "ex01_q1", jobs=2)
    checks = [f"ex01_q{n}" for n in range(1, 5)]
    assert set(rows) == set(cheats)
    for student in cheats:
        assert [rows[student][c] for c in checks] == ["0"] * 4, (student, rows[student])
    assert not probe.exists()
    # the feedback shows the judge's verdict, not what the kernel printed
    forger = "forges_a_tensor" if lang == "en" else "every_other_cheat_at_once"
    page = (out / "feedback" / f"{forger}.html").read_text(encoding="utf-8")
    assert "subclass of torch.Tensor" in page


@pytest.mark.e2e
def test_no_cheat_changes_a_verdict_of_lesson_05(tmp_path) -> None:
    if sandbox.check_host():
        pytest.skip(sandbox.check_host())
    # 05's torchrun cell took over 120 s beside other work on the shared 2-core machine
    rows, _ = _grade_class(tmp_path, "05", "en", AT_ONCE, "ex05_q1", cell_s=400)
    assert set(rows) == set(AT_ONCE)
    for student in AT_ONCE:
        assert rows[student]["ex05_q1"] == "0", (student, rows[student])


@pytest.mark.e2e
@pytest.mark.parametrize("lang", assignments.LANGS)
def test_an_answer_that_uses_a_deep_dives_helper_keeps_its_points(tmp_path, lang) -> None:
    """The grader leaves out the deep dives no later cell needs (tools/teaching/needed.py), so
    it runs the one whose helper an answer calls: lesson 01's ``seed_everything`` in exercise 4,
    where the solution seeds with ``torch.manual_seed``; the others say they were not run."""
    if sandbox.check_host():
        pytest.skip(sandbox.check_host())
    from tools.teaching.grade import grade
    from tools.teaching.words import in_lang

    course, submitted = tmp_path / "course", tmp_path / "submitted"
    lesson = assignments.lesson_for("01", lang)
    assignments.write_course(course, lang, [lesson])
    nb = nbformat.read(course / "source" / lesson.stem / f"{lesson.stem}.ipynb", as_version=4)
    (answer,) = [
        c
        for c in nb.cells
        if (c.metadata.get("nbgrader") or {}).get("grade_id") == "ex01_q4_answer"
    ]
    assert "_ = torch.manual_seed(0)" in answer.source
    answer.source = answer.source.replace("_ = torch.manual_seed(0)", "seed_everything(0)")
    submitted.mkdir()
    nbformat.write(nb, submitted / "dora.ipynb")
    csv_path = grade("01", submitted, tmp_path / "out", lang, cell_timeout=90, timeout=900)
    with csv_path.open(encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert row["total"] == "4", row
    page = (tmp_path / "out" / "feedback" / "dora.html").read_text(encoding="utf-8")
    note = in_lang(lang, "not run by the grader: a deep dive no later cell needs")
    assert note in page
