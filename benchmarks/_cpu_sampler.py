"""Run a Python program under a CPU-time sampling profiler (for benchmarks/server_cpu.py --profile).

    python benchmarks/_cpu_sampler.py OUT.txt -m MODULE [ARGS...]
    python benchmarks/_cpu_sampler.py OUT.txt SCRIPT.py [ARGS...]

SIGUSR1 starts sampling, SIGUSR2 stops it and writes OUT.txt: collapsed stacks ("a;b;c COUNT"
per line, what flamegraph.pl, speedscope and py-spy's raw format use). The samples are taken by
ITIMER_PROF, which fires per millisecond of CPU time the process spends (user and system), so a
process that waits, or that another process has pushed off the core, is not sampled: on a busy
machine a wall-clock sampler such as py-spy puts the time a server spends preempted after a
socket write (the woken peer runs first) on that write. The stack is the main thread's (where
asyncio and uvicorn run); a sample that lands in a system call is counted at the Python line
that made it.
"""

from __future__ import annotations

import collections
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType

INTERVAL = 0.001  # seconds of CPU time between samples

_stacks: collections.Counter[str] = collections.Counter()


def _label(frame: FrameType) -> str:
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return f"{name} ({code.co_filename}:{frame.f_lineno})"


def _sample(signum: int, frame: FrameType | None) -> None:
    parts = []
    while frame is not None:
        parts.append(_label(frame))
        frame = frame.f_back
    _stacks[";".join(reversed(parts))] += 1


def main() -> None:
    out = Path(sys.argv[1])
    rest = sys.argv[2:]

    def start(signum: int, frame: FrameType | None) -> None:
        _stacks.clear()
        signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        out.write_text("".join(f"{stack} {n}\n" for stack, n in _stacks.most_common()))

    signal.signal(signal.SIGPROF, _sample)
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    if rest[0] == "-m":
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main()
