"""How the CPU is shared between two students on the hub (TEACHING.md, issue 47 item 5).

bob runs one busy thread; alice runs one, then two. Without cgroups the scheduler shares the
CPU per process, so alice's second loop takes from bob; with make hub's per-student cpu
cgroups (tools/teaching/classroom.py: equal weight each) it is shared per student. Prints bob's
work rate beside two of alice's loops against beside one (goal: within 1.2x with cgroups), for
both. Needs root and a cpu cgroup controller; uses the cores this machine has (the goal is
about a machine with fewer free cores than busy loops, e.g. 2 cores).

    sudo .venv/bin/python -m bench.student_cpu [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from tools.teaching import classroom

LOOP = (
    "import time\nn, end = 0, time.monotonic() + {s}\n"
    "while time.monotonic() < end:\n    n += 1\nprint(n)"
)


def bob_rate(alice_loops: int, seconds: float, groups: classroom.Cgroups | None) -> float:
    """Loop iterations a second of bob's one thread while alice runs ``alice_loops`` more."""

    def start(name: str, s: float) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", LOOP.format(s=s)], stdout=subprocess.PIPE)
        if groups is not None:
            groups.confine(name, proc.pid, 2**30)
        return proc

    alice = [start("alice", seconds + 1) for _ in range(alice_loops)]
    time.sleep(0.2)
    bob = start("bob", seconds)
    count = int(bob.communicate()[0])
    for p in alice:
        p.wait()
    return count / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("student_cpu: run as root (it makes cgroups)", file=sys.stderr)
        return 2
    name = f"blitz-bench-cpu-{os.getpid()}"
    groups, line = classroom.class_cgroups(name, 2**34)
    if groups is None or "cpu" not in line:
        print(f"student_cpu: no cpu cgroup controller here ({line})", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start")
    try:
        for label, g in (("per process (no cgroups)", None), ("per student (make hub)", groups)):
            one = bob_rate(1, args.seconds, g)
            two = bob_rate(2, args.seconds, g)
            print(
                f"{label:26s} bob beside 1 loop: {one / 1e6:6.2f} M/s, beside 2: "
                f"{two / 1e6:6.2f} M/s, slower by {one / two:.2f}x"
            )
    finally:
        classroom.remove_class_cgroups(name)
    print(f"goal with per-student cgroups: within 1.2x; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
