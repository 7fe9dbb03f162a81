"""Benchmark: a class on one JupyterHub, students working at a learner's pace (not in `make test`).

    .venv/bin/python -m bench.classroom --students 1,10,20 --pace 0.05 --lessons 01,02,03,04

Starts the hub as ``make hub`` does (its configuration file, on its own port and in a
temporary state folder, plus one service token that this benchmark owns), then, for each
class size N in ``--students``, in turn:

* creates N students through the hub's REST API with that token and signs them in at once
  (the hub issues each an API token, as a login does), and each starts their own server;
* each pulls the lessons with the nbgitpuller link (``/hub/user-redirect/git-pull?repo=...``:
  the link is opened, then the pull it starts is followed to its end);
* each opens notebooks 01, 02 and 03 and runs them top to bottom, and 04's core path (its
  cells without the tags ``optional``, ``exercise`` or ``solution``), in a kernel of their
  own server, through jupyter_server's REST API and kernel websocket, one notebook after the
  other, shutting each kernel down when the notebook is done;
* **at a learner's pace**: before each code cell the student reads the prose before it, for
  the reading time of the lesson-time formula (``tools/authoring/lesson_size.py``: its words
  and formulas), times ``--pace`` (so a run takes minutes, not an hour), times the student's
  own speed (drawn once per student, seeded, within ``--spread`` of 1: a class does not read
  in lockstep).

It prints, for each N: students finished / failed, the median and 95th-percentile cell
latency (execute request to reply) and each as a multiple of one student alone, the time per
notebook, and the memory per student (peak RSS of the student's processes: their server and
kernel; pages shared between processes are counted in each). The load average before and
after each round is printed too: on a shared machine, other work slows every number. At the
end, and on Ctrl-C, the students' servers, hub users and Unix accounts are removed and the
hub is stopped. Every wait is bounded (``--cell-timeout``, ``--start-timeout``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pwd
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import nbformat
import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from tools.authoring import lesson_size
from tools.lessons import LessonError, lesson_notebooks
from utils.cli import number
from utils.data import SUBSET_ENV

ROOT = Path(__file__).resolve().parents[1]
# What each lesson's student runs: the whole notebook, or its core path only (04: its
# deep dives train for minutes, which a class does not do together).
PLANS = {"01": "whole", "02": "whole", "03": "whole", "04": "core"}
SHARED_SUBSET = ROOT.parent / "shared" / "data" / "cifar10-subset.npz"  # the Makefile's default
# The students' names: bench<tag><N>x<i>, the tag this run's own. Only the accounts this run
# recorded as made are ever removed: a prefix also matches another run's (a concurrent bench).
PREFIX = "bench"
GOAL_LATENCY = 3.0  # the goal: at N=20, p95 cell latency within 3x one student alone


# ----------------------------------------------------------------------------- arguments
def _list_of(kind):
    def parse(text: str):
        values = [kind(part) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list (not {text!r})")
        return values

    return parse


def _lesson(text: str) -> str:
    key = text.strip()[:2]
    if key not in PLANS:
        raise argparse.ArgumentTypeError(
            f"must be one of {', '.join(PLANS)} (not {text.strip()!r}): 05 launches torchrun"
        )
    return key


# ----------------------------------------------------------------------------- the lessons
@dataclass
class Cell:
    source: str
    pause_s: float  # the prose before it, read at the formula's speed


def plan(lesson: str) -> tuple[str, list[Cell]]:
    """The notebook's file name and the code cells a student runs, each with its reading time."""
    found = [p for p in lesson_notebooks(ROOT / "notebooks") if p.name.startswith(lesson)]
    if not found:
        raise LessonError(f"no lesson {lesson} in _toc.yml (it lists the lessons)")
    path = found[0]
    nb = nbformat.read(path, as_version=4)
    cells, reading = [], lesson_size.Size()
    for i, cell in enumerate(nb.cells):
        if PLANS[lesson] == "core" and lesson_size.part_of(cell) != "core":
            continue  # a learner on the core path neither reads nor runs it
        if cell.cell_type == "markdown":
            # the header is read as the formula reads it: without its learner/run-time lines
            prose = lesson_size.size(lesson_size._without_times(cell) if i == 0 else cell)
            reading += lesson_size.Size(words=prose.words, formulas=prose.formulas)
        elif cell.cell_type == "code":
            cells.append(Cell(cell.source, reading.exact_minutes * 60))
            reading = lesson_size.Size()
    return path.name, cells


# ----------------------------------------------------------------------------- the hub
class Hub:
    """The hub as ``make hub`` starts it (``python -m tools.teaching.hub``), on its own ports
    and state folder, with the dummy authenticator (loopback only) and a teacher account of
    the benchmark's own, whose API token (an admin's) creates and removes the students."""

    def __init__(self, port: int, state: Path, class_size: int, timeout: float, log: Path):
        self.port, self.state, self.timeout, self.log_path = port, state, timeout, log
        self.url = f"http://127.0.0.1:{port}"
        self.password = secrets.token_urlsafe(16)
        # this run's tag: three letters, so another run's names never equal ours
        self.tag = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3))
        self.made: set[str] = set()  # the accounts this run asked the hub for (claim)
        self.teacher = f"{PREFIX}{self.tag}t"
        # The teacher's copy the link pulls from: a clone of this checkout's committed lessons
        # (a plain clone, as a teacher has; students may read the folder it is in).
        os.chmod(state, 0o755)
        lessons = state / "lessons"
        cloned = subprocess.run(
            ["git", "clone", "--quiet", str(ROOT), str(lessons)], capture_output=True, text=True
        )
        if cloned.returncode:
            raise BenchError(f"cannot clone {ROOT} for the link: {cloned.stderr.strip()}")
        branch = subprocess.run(
            ["git", "-C", str(lessons), "rev-parse", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        self.env = {
            **os.environ,
            "HUB_PORT": str(port),
            "HUB_SRV": str(state / "srv"),
            "HUB_AUTHENTICATOR": "dummy",
            "HUB_DUMMY_PASSWORD": self.password,
            "HUB_TEACHER": self.teacher,
            "HUB_CLASS_SIZE": str(class_size),
            "HUB_LESSONS": str(lessons),
            "HUB_BRANCH": branch or "main",  # the lessons this checkout has
        }
        if not self.env.get(SUBSET_ENV) and SHARED_SUBSET.is_file():  # as the Makefile does
            self.env[SUBSET_ENV] = str(SHARED_SUBSET)
        self.token = ""
        self.claim([self.teacher])
        self.process: subprocess.Popen | None = None
        self.http = AsyncHTTPClient(max_clients=1000)

    def claim(self, names: list[str]) -> None:
        """Record ``names`` as this run's before the hub makes them: an account of that name
        already there is someone else's, and the run stops rather than use or remove it."""
        if taken := sorted(set(names) & set(accounts())):
            raise BenchError(
                f"account {taken[0]} already exists and is not this run's: no bench "
                "account is made or removed; run again (another tag is drawn)"
            )
        self.made.update(names)

    def link(self, notebook: str) -> str:
        """The nbgitpuller link a teacher hands out, as ``make hub`` prints it."""
        from tools.teaching import classroom

        return classroom.settings(self.env).link(notebook, host=self.url)

    def start(self) -> None:
        self.log = self.log_path.open("xb")  # never over a file already there (main checks)
        self.process = subprocess.Popen(  # what `make hub` runs
            [sys.executable, "-m", "tools.teaching.hub"],
            env=self.env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"the hub exited ({self.process.returncode}): {self.log_tail()}")
            with contextlib.suppress(OSError, BenchError):  # not listening, or proxy only
                await self.api("GET", "/hub/api/", token="-")
                self.token = await sign_in(self, self.teacher)
                return
            await asyncio.sleep(0.5)
        raise BenchError(f"the hub did not answer within {self.timeout:.0f} s")

    async def api(
        self,
        method: str,
        path: str,
        body=None,
        token: str | None = None,
        timeout: float = 60,
        raw: bool = False,
        headers: dict | None = None,
    ):
        """One request with a token (the bench's own unless a student's is given); the
        answer's JSON, or its text with ``raw``."""
        request = HTTPRequest(
            self.url + path,
            method=method,
            headers={"Authorization": f"token {token or self.token}", **(headers or {})},
            body=None if body is None else body if isinstance(body, str) else json.dumps(body),
            allow_nonstandard_methods=True,
            request_timeout=timeout,
        )
        try:
            response = await self.http.fetch(request)
        except HTTPClientError as err:
            said = err.response.body.decode("utf-8", "replace")[:200] if err.response else ""
            raise BenchError(f"{method} {path.split('?')[0]}: {err} {said}".strip()) from None
        if raw:
            return response.body.decode("utf-8", "replace")
        return json.loads(response.body) if response.body and response.code != 204 else None

    def log_tail(self) -> str:
        """The hub log's last lines (its folder is removed at the end)."""
        lines = Path(self.log.name).read_text(errors="replace").splitlines()
        return " | ".join(line.strip() for line in lines[-3:])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        # The proxy runs in a session of its own; a hub stopped while it was starting leaves
        # it behind, so end it by the pid file the hub wrote in its state folder.
        from tools.teaching import classroom

        pid_file = classroom.settings(self.env).state_dir / "jupyterhub-proxy.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        # The class's cgroup folders, if the hub left any (it removes them as it exits).
        name = classroom.class_cgroup_name(classroom.settings(self.env))
        if any(Path("/sys/fs/cgroup", *c, name).is_dir() for c in (("memory",), ())):
            groups, _ = classroom.class_cgroups(name, classroom.mem_total())
            if groups is not None:
                groups.remove()
        # The accounts this run recorded (students, the bench's teacher), homes too.
        remove_accounts(self.made, self.made)


class BenchError(Exception):
    """Something the benchmark cannot go on without, in one line."""


# ----------------------------------------------------------------------------- one student
@dataclass
class Student:
    name: str
    speed: float  # multiplies every reading pause
    token: str = ""
    latencies: dict[str, list[float]] = field(default_factory=dict)  # lesson -> seconds
    wall: dict[str, float] = field(default_factory=dict)  # lesson -> seconds, pauses included
    # lesson -> peak bytes of the student's processes: unique to them (USS: what one more
    # student costs), and resident (RSS: also the libraries that students share)
    memory: dict[str, tuple[int, int]] = field(default_factory=dict)
    error: str = ""
    current: str = ""  # the lesson being worked on, for the memory sampler
    retries: int = 0  # starts the hub asked to retry (its concurrent spawn limit)


async def sign_in(hub: Hub, name: str) -> str:
    """Sign in through the hub's REST API: the name and password go to the hub's
    authenticator (``POST /hub/api/users/<name>/tokens`` with ``auth``), which answers with an
    API token for that user, as its login form answers with a cookie."""
    answer = await hub.http.fetch(
        HTTPRequest(
            f"{hub.url}/hub/api/users/{name}/tokens",
            method="POST",
            body=json.dumps(
                {"auth": {"username": name, "password": hub.password}, "note": "classroom bench"}
            ),
            request_timeout=60,
        ),
        raise_error=False,
    )
    if answer.code != 201:
        raise BenchError(f"sign-in of {name} refused (HTTP {answer.code})")
    return json.loads(answer.body)["token"]


async def sign_in_and_start(hub: Hub, student: Student, timeout: float) -> None:
    student.token = await sign_in(hub, student.name)
    deadline = time.monotonic() + timeout
    while True:  # the hub queues a class: "too many users starting", try again in a moment
        try:
            await hub.api("POST", f"/hub/api/users/{student.name}/server", {}, token=student.token)
            break
        except BenchError as err:
            if "HTTP 429" not in str(err) or time.monotonic() > deadline:
                raise
            student.retries += 1
            await asyncio.sleep(2)
    while time.monotonic() < deadline:
        user = await hub.api("GET", f"/hub/api/users/{student.name}", token=student.token)
        server = user.get("servers", {}).get("")
        if server and server.get("ready"):
            return
        await asyncio.sleep(1)
    raise BenchError(f"server not ready within {timeout:.0f} s")


async def pull(hub: Hub, student: Student, timeout: float) -> str:
    """Open the nbgitpuller link the teacher hands out, then follow the pull it starts to its
    end (what the page's script does). Returns the lessons' folder in the student's home."""
    link = hub.link("notebooks/01_tensors.ipynb")
    # The hub's user-redirect sends a signed-in browser to its own server; the hub's pages
    # take cookies, not tokens, so the bench opens the page the redirect leads to.
    own = link.replace("/hub/user-redirect/", f"/user/{student.name}/", 1)
    page = await hub.http.fetch(
        HTTPRequest(own, headers={"Authorization": f"token {student.token}"}, request_timeout=60),
        raise_error=False,
    )
    if page.code != 200 or b"git-pull" not in page.body:
        raise BenchError(f"the link's page answered HTTP {page.code}, not nbgitpuller's page")
    query = dict(parse_qsl(urlsplit(link).query))
    folder = query.get("targetpath") or query["repo"].rstrip("/").rsplit("/", 1)[-1]
    pulled = {k: v for k, v in query.items() if k in ("repo", "branch", "targetpath")}
    events = await hub.api(
        "GET",
        f"/user/{student.name}/git-pull/api?{urlencode(pulled)}",
        token=student.token,
        timeout=timeout,
        raw=True,
    )
    phases = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: ")]
    if not phases or phases[-1].get("phase") != "finished":
        last = phases[-1] if phases else {}
        raise BenchError(f"git-pull did not finish: {last.get('message', 'no events')}")
    return folder


async def run_notebook(
    hub: Hub,
    student: Student,
    folder: str,
    lesson: str,
    cells: list[Cell],
    notebook: str,
    pace: float,
    cell_timeout: float,
) -> None:
    base = f"/user/{student.name}/api"
    path = f"{folder}/notebooks/{notebook}"
    session = await hub.api(  # what JupyterLab does when a notebook is opened
        "POST",
        f"{base}/sessions",
        {"path": path, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}},
        token=student.token,
    )
    kernel = session["kernel"]["id"]
    url = f"ws://127.0.0.1:{hub.port}{base}/kernels/{kernel}/channels?session_id={uuid.uuid4()}"
    socket = await asyncio.wait_for(
        websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {student.token}"})),
        timeout=60,
    )
    times = student.latencies.setdefault(lesson, [])
    start = time.monotonic()
    try:
        for i, cell in enumerate(cells):
            await asyncio.sleep(cell.pause_s * pace * student.speed)
            times.append(await execute(socket, cell.source, cell_timeout, f"{notebook} cell {i}"))
        student.wall[lesson] = time.monotonic() - start  # only a notebook worked to its end
    finally:
        socket.close()
        with contextlib.suppress(Exception):
            await hub.api("DELETE", f"{base}/sessions/{session['id']}", token=student.token)


async def execute(socket, code: str, timeout: float, where: str) -> float:
    """Run ``code`` in the kernel; seconds from the request to the kernel's reply."""
    msg_id = uuid.uuid4().hex
    message = {
        "header": {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "username": "",
            "version": "5.3",
            "session": uuid.uuid4().hex,
            "date": "",
        },
        "parent_header": {},
        "metadata": {},
        "buffers": [],
        "channel": "shell",
        "content": {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    }
    sent = time.monotonic()
    await socket.write_message(json.dumps(message))
    deadline = sent + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"{where}: no reply within {timeout:.0f} s")
        raw = await asyncio.wait_for(socket.read_message(), timeout=left)
        if raw is None:
            raise BenchError(f"{where}: the kernel's websocket closed")
        reply = json.loads(raw)
        if reply.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if reply.get("msg_type") == "execute_reply":
            latency = time.monotonic() - sent
            content = reply["content"]
            if content.get("status") != "ok":
                raise BenchError(f"{where}: {content.get('ename')}: {content.get('evalue')}")
            return latency


async def student_works(hub: Hub, student: Student, lessons, args) -> None:
    try:
        await sign_in_and_start(hub, student, args.start_timeout)
        folder = await pull(hub, student, args.start_timeout)
        for lesson, (notebook, cells) in lessons.items():
            student.current = lesson
            await run_notebook(
                hub, student, folder, lesson, cells, notebook, args.pace, args.cell_timeout
            )
        student.current = ""
    except (TimeoutError, BenchError, HTTPClientError, OSError, KeyError) as err:
        student.error = f"{student.current or 'start'}: {type(err).__name__}: {err}"[:300]


# ----------------------------------------------------------------------------- measuring
class Sampler(threading.Thread):
    """Peak RSS of each student's processes (their Unix account's), per lesson, once a second;
    and the least memory the machine had available."""

    def __init__(self, students: list[Student]) -> None:
        super().__init__(daemon=True)
        self.students = {s.name: s for s in students}
        self.stop = threading.Event()
        self.least_available = psutil.virtual_memory().available
        self.loads: list[float] = []  # the 1-minute load average, once a second

    def run(self) -> None:
        while not self.stop.wait(1.0):
            totals: dict[str, list[int]] = {}
            for proc in psutil.process_iter(["username"]):
                name = proc.info["username"]
                if name not in self.students:
                    continue
                with contextlib.suppress(psutil.Error):  # a process that just ended
                    full = proc.memory_full_info()
                    total = totals.setdefault(name, [0, 0])
                    total[0], total[1] = total[0] + full.uss, total[1] + full.rss
            for name, (uss, rss) in totals.items():
                student = self.students[name]
                if student.current:
                    old_uss, old_rss = student.memory.get(student.current, (0, 0))
                    student.memory[student.current] = (max(old_uss, uss), max(old_rss, rss))
            self.least_available = min(self.least_available, psutil.virtual_memory().available)
            self.loads.append(os.getloadavg()[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass
class Round:
    n: int
    students: list[Student]
    seconds: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    least_available: int
    loads: list[float]


async def run_round(hub: Hub, n: int, lessons, args) -> Round:
    rng = random.Random(n)
    students = [
        Student(f"{PREFIX}{hub.tag}{n}x{i}", rng.uniform(1 - args.spread, 1 + args.spread))
        for i in range(n)
    ]
    hub.claim([s.name for s in students])
    await hub.api("POST", "/hub/api/users", {"usernames": [s.name for s in students]})
    sampler = Sampler(students)
    sampler.start()
    load_before, start = os.getloadavg(), time.monotonic()
    try:
        await asyncio.gather(*(student_works(hub, s, lessons, args) for s in students))
    finally:
        sampler.stop.set()
        sampler.join(timeout=10)
        seconds, load_after = time.monotonic() - start, os.getloadavg()
        await remove_students(hub, [s.name for s in students])
    return Round(
        n, students, seconds, load_before, load_after, sampler.least_available, sampler.loads
    )


async def remove_students(hub: Hub, names: list[str]) -> None:
    """Stop their servers, delete them from the hub, and remove their Unix accounts."""

    async def one(name: str) -> None:
        with contextlib.suppress(BenchError, OSError):
            await hub.api("DELETE", f"/hub/api/users/{name}/server", timeout=60)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # a pending stop must end before the delete
            with contextlib.suppress(BenchError, OSError):
                await hub.api("DELETE", f"/hub/api/users/{name}", timeout=60)
                return
            await asyncio.sleep(1)
        # still there: stopping the hub at the end stops its server, and its account goes then

    await asyncio.gather(*(one(name) for name in names))
    remove_accounts(names, hub.made)


def accounts() -> list[str]:
    return [entry.pw_name for entry in pwd.getpwall()]


def remove_accounts(names, made: set[str]) -> None:
    """Remove the Unix accounts (and homes) of these bench users, where they exist: only those
    this run recorded in ``made`` (Hub.claim)."""
    present = set(accounts())
    for name in sorted(names):
        if name.startswith(PREFIX) and name in made and name in present:
            subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)


# ----------------------------------------------------------------------------- report
def report(rounds: list[Round], lessons, args) -> None:
    alone = next((r for r in rounds if r.n == 1), None)
    gib = 1024**3
    print(
        f"\npace {args.pace:g} x the lesson-time formula's reading time (spread ±{args.spread:g}); "
        f"{os.cpu_count()} cores, {psutil.virtual_memory().total / gib:.1f} GiB"
    )
    for lesson, (notebook, cells) in lessons.items():
        reading = sum(c.pause_s for c in cells)
        print(
            f"  {notebook} ({PLANS[lesson]}): {len(cells)} code cells; reading "
            f"{reading / 60:.1f} min at pace 1, {reading * args.pace:.0f} s at this pace"
        )
    header = (
        "| N | finished / failed | lesson | cell latency p50 s (x alone) | p95 s (x alone) "
        "| time per notebook, median s (busy s) | memory per student MiB: unique, median (max) "
        "| resident, median |"
    )
    print("\n" + header + "\n|" + "---|" * 8)
    for r in rounds:
        done = [s for s in r.students if not s.error]
        for lesson in lessons:
            lat = [t for s in r.students for t in s.latencies.get(lesson, [])]
            walls = [s.wall[lesson] for s in r.students if lesson in s.wall]
            busy = [sum(s.latencies.get(lesson, [])) for s in r.students if lesson in s.wall]
            uss = [s.memory[lesson][0] / 2**20 for s in r.students if lesson in s.memory]
            rss = [s.memory[lesson][1] / 2**20 for s in r.students if lesson in s.memory]
            if not lat:
                print(f"| {r.n} | {len(done)} / {r.n - len(done)} | {lesson} |" + " - |" * 5)
                continue
            base = [t for s in alone.students for t in s.latencies.get(lesson, [])] if alone else []
            cols = []
            for q in (0.5, 0.95):
                value = percentile(lat, q)
                ratio = f" ({value / percentile(base, q):.2f}x)" if base else ""
                cols.append(f"{value:.3f}{ratio}")
            mem = (
                f"{statistics.median(uss):.0f} ({max(uss):.0f}) | {statistics.median(rss):.0f}"
                if uss
                else "- | -"
            )
            took = (
                f"{statistics.median(walls):.0f} ({statistics.median(busy):.1f})" if walls else "-"
            )
            print(
                f"| {r.n} | {len(done)} / {r.n - len(done)} | {lesson} | {cols[0]} | {cols[1]} "
                f"| {took} | {mem} |"
            )
    print()
    for r in rounds:
        failed = [s for s in r.students if s.error]
        print(
            f"N={r.n}: {r.seconds:.0f} s; 1-min load average before {r.load_before[0]:.1f}, "
            f"during {statistics.mean(r.loads or [0]):.1f} (max {max(r.loads or [0]):.1f}), "
            f"after {r.load_after[0]:.1f}; least memory available "
            f"{r.least_available / gib:.1f} GiB; starts the hub asked to retry (its limit on "
            f"servers starting at once): {sum(s.retries for s in r.students)}"
        )
        for s in failed:
            print(f"  {s.name} failed: {s.error}")
    for r in (r for r in rounds if r.n > 1):  # where the time goes: the median's slowest cells
        cells = []
        for lesson, (_, planned) in lessons.items():
            done = [
                s.latencies[lesson]
                for s in r.students
                if len(s.latencies.get(lesson, [])) == len(planned)
            ]
            cells += [
                (statistics.median(t[i] for t in done), lesson, i)
                for i in range(len(planned))
                if done
            ]
        slowest = sorted(cells, reverse=True)[:3]
        if slowest:
            shown = []
            for median, lesson, i in slowest:
                one = alone.students[0].latencies.get(lesson, []) if alone else []
                base = f", alone {one[i]:.2f} s" if i < len(one) else ""
                shown.append(f"{lesson} code cell {i} {median:.2f} s{base}")
            print(f"N={r.n}: slowest cells (median student): {'; '.join(shown)}")
    if alone:
        for r in rounds:
            early = [lesson for lesson in lessons if lesson in ("01", "02", "03")]
            lat = [t for s in r.students for le in early for t in s.latencies.get(le, [])]
            base = [t for s in alone.students for le in early for t in s.latencies.get(le, [])]
            if r.n > 1 and lat and base:
                print(goal_line(r, early, percentile(lat, 0.95) / percentile(base, 0.95)))
    for r in rounds:
        if "04" in lessons and r.n > 1:
            finished = sum(1 for s in r.students if "04" in s.wall and not s.error)
            print(f"goal, N={r.n}: {finished} of {r.n} students finished 04's core path")


def goal_line(r: Round, early: list[str], ratio: float) -> str:
    """The goal is every student finished within GOAL_LATENCY x one alone: a student the hub
    refused (HTTP 429, active server limit) or who failed never worked, so the goal is not met."""
    finished = sum(1 for s in r.students if not s.error)
    met = finished == r.n and ratio <= GOAL_LATENCY
    return (
        f"goal, N={r.n}: {finished} of {r.n} students finished (a refused or failed student "
        f"counts as failed); p95 cell latency of {', '.join(early)} is {ratio:.2f}x one student "
        f"alone: goal {'met' if met else 'NOT met'} (all finished, within {GOAL_LATENCY:g}x)"
    )


# ----------------------------------------------------------------------------- main
async def main_async(args, hub: Hub, lessons) -> list[Round]:
    await hub.wait_ready()
    rounds = []
    for n in args.students:
        print(f"N={n}: {n} student(s) signing in ...", flush=True)
        rounds.append(await run_round(hub, n, lessons, args))
        r = rounds[-1]
        failed = sum(1 for s in r.students if s.error)
        print(f"N={n}: {n - failed} finished, {failed} failed in {r.seconds:.0f} s", flush=True)
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--students",
        type=_list_of(number(int, least=1, most=200)),
        default=[1, 10, 20],
        help="class sizes, comma-separated, run in turn (1 is added first: the baseline)",
    )
    parser.add_argument(
        "--pace",
        type=number(float, least=0, most=10),
        default=0.05,
        help="factor on the formula's reading time before each code cell (1: a real learner)",
    )
    parser.add_argument(
        "--lessons",
        type=_list_of(_lesson),
        default=list(PLANS),
        help="lessons to work through: 01, 02, 03 whole, 04 its core path",
    )
    parser.add_argument(
        "--spread",
        type=number(float, least=0, most=0.9),
        default=0.25,
        help="students' reading speeds differ by up to this fraction (seeded)",
    )
    parser.add_argument("--cell-timeout", type=number(float, above=0), default=900)
    parser.add_argument("--start-timeout", type=number(float, above=0), default=300)
    parser.add_argument(
        "--hub-log", type=Path, default=None, help="keep the hub's log in this file (else removed)"
    )
    parser.add_argument("--port", type=number(int, least=1024, most=31999), default=20900)
    args = parser.parse_args()
    if (log := args.hub_log) is not None:
        if log.exists() or log.is_symlink():
            parser.error(f"--hub-log {log}: already exists; name a new file (it is not replaced)")
        if not log.parent.is_dir():
            parser.error(f"--hub-log {log}: no folder {log.parent}; make it or name another")
    try:
        lessons = {lesson: plan(lesson) for lesson in dict.fromkeys(args.lessons)}
    except LessonError as err:
        parser.error(f"--lessons: {err}")
    if os.geteuid() != 0:
        parser.error("needs root: the hub gives each student a Unix account of their own")
    sizes = list(dict.fromkeys([1, *args.students]))  # the baseline first, each size once
    args.students = sizes
    print(
        f"{os.cpu_count()} cores, load average {', '.join(f'{v:.1f}' for v in os.getloadavg())} "
        f"before the run; class sizes {sizes}; lessons {', '.join(lessons)}; pace {args.pace:g}",
        flush=True,
    )
    state = Path(tempfile.mkdtemp(prefix="classroom-bench-"))
    private = state / "private"  # the hub's log: root only (state itself is open to students)
    private.mkdir(mode=0o700)
    rounds: list[Round] = []
    hub: Hub | None = None

    def stopped(signum, _frame) -> None:
        # Ctrl-C or SIGTERM, wherever the run is (asyncio's own Ctrl-C handling can be lost
        # in a wait that ends at the same moment): clean up here, say so in one line, leave.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C does not cut the clean-up short
        if hub:
            hub.stop()
        shutil.rmtree(state, ignore_errors=True)
        print(
            f"{signal.Signals(signum).name}: hub and every student server stopped, "
            "bench users and Unix accounts removed",
            flush=True,
        )
        os._exit(130)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stopped)
    try:
        hub = Hub(args.port, state, max(sizes), args.start_timeout, args.hub_log or private / "log")
        hub.start()
    except (BenchError, OSError) as err:  # the log's folder went, or a name was taken
        print(f"bench/classroom.py: {err}", file=sys.stderr)
        if hub:
            hub.stop()
        shutil.rmtree(state, ignore_errors=True)
        return 1
    try:
        rounds = asyncio.run(main_async(args, hub, lessons))
    except BenchError as err:
        print(f"bench/classroom.py: {err}", file=sys.stderr)
        return 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        if hub:
            hub.stop()
        shutil.rmtree(state, ignore_errors=True)
    report(rounds, lessons, args)
    return 0 if all(not s.error for r in rounds for s in r.students) else 1


if __name__ == "__main__":
    sys.exit(main())
