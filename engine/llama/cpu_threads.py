"""How many CPU threads llama.cpp decodes with when the user has not said.

llama.cpp's threads meet at a spinning barrier several hundred times a token, so a thread the
OS takes away for a moment stalls all the others for its whole time slice. Measured on the
2-core VM under other load (SmolLM2-135M, greedy, 48 tokens): 1 thread 2.2–3.0 tok/s,
2 threads 0.2 tok/s. A desktop app always has that other load: its own UI thread renders the
reply while it streams. So the default is the physical cores this process may run on, less
one for the window (at least one); hyper-threads are not counted, as in llama.cpp's own
default. The per-model "CPU threads" setting and `--threads` override it.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_cpuinfo() -> str:
    """/proc/cpuinfo's text; empty where there is none (not Linux)."""
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def physical_cores(cpuinfo: str | None = None) -> int | None:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo; None where it does not say."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
    cores: set[tuple[str, str]] = set()
    package = core = ""
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip() and core:  # the end of one processor's block
            cores.add((package, core))
            package = core = ""
    return len(cores) or None


def usable_cpus() -> int:
    """CPUs this process may run on (taskset, cgroups' cpusets), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads(cpuinfo: str | None = None, cpus: int | None = None) -> int:
    usable = cpus or usable_cpus()
    cores = min(physical_cores(cpuinfo) or usable, usable)
    return max(1, cores - 1)
