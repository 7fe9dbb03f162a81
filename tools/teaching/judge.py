"""The class grader's judge: each exercise's verdict computed in the grader's own process, from
values the submission's kernel hands over as data (utils/exercises/_wire.py).

nbgrader would run the teacher's tests in the student's own kernel, after the student's code,
where that code can rewrite them (``print``, IPython's input transformers, import hooks,
``sys.settrace``, a replaced ``ex``...). Here the check cells' hidden tests are inert markers
(tools/teaching/assignments.py ``hidden_test``); :class:`JudgedExecute`, nbgrader's execute step
for the grader's course, runs the submission cell by cell in its sandboxed kernel
(tools/teaching/sandbox.py) and, right after each check cell, asks the kernel for the values
of that check's arguments (a request on the kernel's shell channel whose answer is one string:
base64 of ``torch.save`` bytes, read with ``weights_only=True``). A function comes as a handle:
calling it sends the judge's inputs (chosen now, by the judge) as data and reads the outputs
back as data; a check that hands the function objects of its own (a model, an optimizer,
a DDP model) runs that part as a "trial" in the kernel (``RemoteFunction.via`` a helper of
``utils.exercises``), which reports what the function did as data. Anything else is refused
and scores 0. The same judge
(``utils.exercises.<lesson>.qN``) that the learner's ``ex.qN.check(...)`` runs in the notebook
then decides, here; the cell's outputs are replaced by its verdict, and the points
(``<student>.verdicts.json``) are written into nbgrader's gradebook by tools/teaching/grade.py.

What it does not guarantee: the values are whatever the kernel sends. A submission can send
the right values without computing them the lesson's way (a hard-coded tensor is as good as
one computed); for a function, the judge picks fresh inputs at grading time, so the right
outputs take a right function, wherever it hides.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import importlib
import json
import os
import signal
import time
from pathlib import Path

import zmq
from jupyter_client.blocking import BlockingKernelClient
from jupyter_core.utils import run_sync
from nbformat.v4 import new_output
from traitlets import Integer, List, Unicode

from tools.teaching import needed
from tools.teaching.sandbox import SandboxedExecute
from tools.teaching.words import in_lang
from utils.exercises import _wire

MARKER = "# judged by the grader, outside this kernel: "
MAX_REPLY = 256 * 2**20  # bytes of one reply from the kernel
WIRE = "__import__('utils.exercises._wire', fromlist=['_'])"


class Unanswered(RuntimeError):
    """The kernel gave no readable answer to a request (time, size, not data)."""


def marker(module: str, question: str, args: list[str]) -> str:
    """The hidden test's one line: what the grader judges, as JSON after :data:`MARKER`."""
    return MARKER + json.dumps({"module": module, "question": question, "args": args})


def read_marker(source: str) -> dict | None:
    for line in source.splitlines():
        if line.startswith(MARKER):
            try:
                found = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            if (
                isinstance(found, dict)
                and isinstance(found.get("module"), str)
                and found["module"].isidentifier()
                and isinstance(found.get("question"), str)
                and found["question"].isidentifier()
                and isinstance(found.get("args"), list)
                and all(isinstance(a, str) for a in found["args"])
            ):
                return found
    return None


class Kernel:
    """Requests to a running kernel on a shell channel of the grader's own (no output read)."""

    def __init__(
        self, connection_info: dict, timeout: float, interrupt=None, max_reply: int = MAX_REPLY
    ) -> None:
        self.timeout, self.interrupt, self.max_reply = timeout, interrupt, max_reply
        self.context = zmq.Context()
        # a reply larger than this is dropped by ZeroMQ before it reaches the grader's memory
        self.context.setsockopt(zmq.MAXMSGSIZE, max_reply * 4 // 3 + 2**16)
        self.client = BlockingKernelClient(context=self.context)
        self.client.load_connection_info(connection_info)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)

    def handshake(self) -> None:
        """Wait until the channel is connected (a kernel_info reply): from then on it stays
        connected even if the submission removes its socket files."""
        msg_id = self.client.kernel_info()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=min(5, self.timeout))
            except Exception:  # queue.Empty: ask on until the deadline
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return
        raise Unanswered(f"the kernel did not answer within {self.timeout:g} s")

    def close(self) -> None:
        self.client.stop_channels()
        self.context.destroy(linger=0)

    def ask(self, expression: str) -> bytes:
        """The bytes of the base64 text that ``expression`` evaluates to in the kernel."""
        msg_id = self.client.execute(
            "", silent=True, store_history=False, user_expressions={"r": expression}
        )
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if self.interrupt is not None:
                    self.interrupt()
                raise Unanswered(f"no answer within {self.timeout:g} s")
            try:
                reply = self.client.get_shell_msg(timeout=min(left, 5))
            except Exception:  # queue.Empty: wait on until the deadline
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                break
        result = (reply.get("content") or {}).get("user_expressions", {}).get("r")
        if not isinstance(result, dict) or result.get("status") != "ok":
            raise Unanswered("the kernel did not evaluate the request")
        text = (result.get("data") or {}).get("text/plain")
        if not isinstance(text, str) or len(text) > self.max_reply * 4 // 3 + 16:
            raise Unanswered("a reply that is not one bounded string")
        # a str's repr: base64 between quotes, nothing else (never parsed as Python)
        if len(text) < 2 or text[0] != "'" or text[-1] != "'":
            raise Unanswered("a reply that is not one string")
        try:
            return base64.b64decode(text[1:-1].encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise Unanswered("a reply that is not base64 text") from None

    def export(self, args: list[str], global_state: bool):
        getters = ", ".join(f"lambda: ({a})" for a in args)
        raw = self.ask(f"{WIRE}.serve_export([{getters}], {global_state!r})")
        return _wire.decode_export(raw, self.function, self.max_reply)

    def function(self, handle: int, name: str) -> RemoteFunction:
        return RemoteFunction(self, handle, name)


class RemoteError(RuntimeError):
    """An exception raised by an answer in the kernel, of a type that is not a builtin one."""


def _exception(name: str, message: str) -> Exception:
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception) and kind.__module__ == "builtins":
        try:
            return kind(message)
        except Exception:
            pass
    return RemoteError(f"{name}: {message}")


class RemoteFunction:
    """A function of the submission's, called with data: its inputs go to the kernel, its
    outputs come back (a builtin exception it raises is raised here with its message)."""

    def __init__(self, kernel: Kernel, handle: int, name: str) -> None:
        self._kernel, self._handle, self.__name__ = kernel, handle, name or "function"
        self.does_nothing: bool | None = None  # whether its body is only `...` (the kernel's word)

    def __repr__(self) -> str:
        return f"<the submission's {self.__name__}>"

    def __call__(self, *args, **kwargs):
        return self.via("", *args, **kwargs)

    def via(self, helper: str, *args, **kwargs):
        """``helper(the function, *args)`` run in the kernel (a function of utils.exercises:
        e.g. one that runs it under a stand-in for a GPU), or the function itself."""
        sent = base64.b64encode(_wire.to_bytes(_wire.encode([list(args), kwargs]))).decode()
        raw = self._kernel.ask(f"{WIRE}.serve_call({self._handle}, {sent!r}, {helper!r})")
        returned, value = _wire.decode_call(raw, self._kernel.function, self._kernel.max_reply)
        if not returned:
            raise _exception(*value)
        return value


def verdict(kernel: Kernel, spec: dict, lang: str) -> tuple[str, str]:
    """(status, message) of the check ``spec`` (a marker's), judged here on the kernel's
    values."""
    module = importlib.import_module(f"utils.exercises.{spec['module']}")
    exercise = getattr(module, spec["question"])
    try:
        values, state = kernel.export(spec["args"], exercise.global_state)
    except (Unanswered, _wire.NotData) as why:
        return "unanswered", _not_an_answer(exercise.number, str(why), lang)
    if len(values) != len(spec["args"]):
        return "unanswered", _not_an_answer(exercise.number, "not one value each", lang)
    for name, value in zip(spec["args"], values, strict=True):
        if isinstance(value, _wire.Refused):
            return "unanswered", _not_an_answer(exercise.number, f"`{name}`: {value.what}", lang)
    return exercise.outcome(*values, lang=lang, global_state=state)


def _not_an_answer(n: int, why: str, lang: str) -> str:
    if lang == "zh":
        return (
            f"✗ 练习 {n}：评分程序读不到可以评判的答案（{why}）。"
            "答案应是数据（张量、数、数组）或函数。"
        )
    return (
        f"✗ Exercise {n}: the grader could not read an answer it can judge ({why}). An answer "
        "is data (tensors, numbers, arrays) or a function."
    )


class JudgedExecute(SandboxedExecute):
    """SandboxedExecute whose check cells are judged here, right after each ran (module
    docstring): the cell's outputs become the verdict, and each verdict goes to
    ``<verdicts_dir>/<student>.verdicts.json`` ({grade_id: points})."""

    verdicts_dir = Unicode("", help="folder for <student>.verdicts.json").tag(config=True)
    request_timeout = Integer(120, help="seconds for one request to the kernel").tag(config=True)
    deep_dives = List(Unicode(), help="ids of the lesson's optional cells").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        self._verdicts: dict[str, int] = {}
        self._kernel: Kernel | None = None
        # the deep dives no later cell needs are not run (tools/teaching/needed.py); the
        # lesson says which cells are deep dives, a submission's own tags do not
        dives = set(self.deep_dives)
        self._skipped = needed.skippable(
            [c.source if c.cell_type == "code" else "" for c in nb.cells],
            [
                c.cell_type == "code" and c.get("id") in dives and not c.metadata.get("nbgrader")
                for c in nb.cells
            ],
        )
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            if self._kernel is not None:
                self._kernel.close()
            student = resources.get("nbgrader", {}).get("student")
            if self.verdicts_dir and student:
                path = Path(self.verdicts_dir) / f"{student}.verdicts.json"
                path.write_text(json.dumps(self._verdicts), encoding="utf-8")

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if self._kernel is None and self._stopped is None:
            # connected before the submission's first cell: its code may remove the kernel's
            # socket files (its own folder), which only stops new connections
            self._kernel = Kernel(
                self.km.get_connection_info(session=False),
                min(self.request_timeout, self.timeout),
                interrupt=self._interrupt,
            )
            with contextlib.suppress(Unanswered):  # a kernel that never answers: its checks say so
                self._kernel.handshake()
        if cell_index in self._skipped:
            note = in_lang(self.lang, "not run by the grader: a deep dive no later cell needs")
            cell.outputs = [new_output("stream", name="stdout", text=note + "\n")]
            return cell
        cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        meta = cell.metadata.get("nbgrader") or {}
        if cell.cell_type != "code" or not meta.get("grade"):
            return cell
        grade_id, points = meta.get("grade_id"), meta.get("points", 0)
        spec = read_marker(cell.source)
        if spec is None or self._stopped is not None:
            # no check named (not this grader's course), not run, or the kernel is gone: 0
            self._verdicts[grade_id] = 0
            return cell
        try:
            status, message = verdict(self._kernel, spec, self.lang)
        except Exception as err:  # the grader's own failure: 0 for this check, said, go on
            status = "unanswered"
            message = f"✗ the grader could not judge this check ({type(err).__name__}: {err})"
        right = status == "right"
        self._verdicts[grade_id] = points if right else 0
        # the kernel's own output of this cell is the submission's: the verdict replaces it
        cell.outputs = [
            new_output("stream", name="stdout", text=message + "\n")
            if right
            else new_output("error", ename="NotRight", evalue=message, traceback=[message])
        ]
        return cell

    execute_cell = run_sync(async_execute_cell)

    def _interrupt(self) -> None:
        """SIGINT to the kernel (a request that did not return: an answer looping forever)."""
        pid = self.km._kernel_pid() if hasattr(self.km, "_kernel_pid") else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
