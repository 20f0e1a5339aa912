"""A pytest plugin: a test that is slow but not marked `slow` fails (issue #53).

The fast lane (`pytest -m "not slow"`) stays fast only if every slow test says so. With
`--check-slow-marks` (or EMBER_CHECK_SLOW_MARKS=1, as .ci/run sets), a test without the `slow`
mark that

- uses the CPU for more than CPU_LIMIT_S seconds (doubled under coverage; this process's threads
  but those an earlier test left running, over setup, call and teardown: CPU time, not wall
  time, so a loaded machine does not make a test "slow"),
- takes more than WALL_LIMIT_S seconds of wall time (generous: only a test that really waits;
  stretched by the load per core, so a busy machine does not fail it),
- starts a process (the `subprocess.Popen`, `os.posix_spawn`, `os.fork` and `os.exec` audit
  events; not `uname`, which the platform module runs once for itself), or
- loads a real model (a `llama_cpp.Llama` of a file over REAL_MODEL_BYTES: synthetic test
  models are kilobytes) or uses the session's loaded one (the fixtures in MODEL_FIXTURES)

fails in its teardown, naming what it did and the mark to add. Without the option nothing fails,
so running a few tests by hand never trips on it. Works under pytest-xdist (each worker checks
its own tests; the report travels with the test's).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

CPU_LIMIT_S = 1.5  # "over a second", with room for a loaded machine's cache misses
# Coverage's tracer (pytest-cov: `uv run pytest` and CI) about doubles a test's CPU (collection
# measured 29.5 against 15.2 CPU s): under it the same test is held to twice the limit, or tests
# near 1.5 s would pass or fail by whether coverage ran.
COVERAGE_FACTOR = 2.0
WALL_LIMIT_S = 10.0
ENV = "EMBER_CHECK_SLOW_MARKS"
MODEL_FIXTURES = frozenset({"smollm", "minilm"})
REAL_MODEL_BYTES = 10_000_000
NOT_COUNTED = frozenset({"uname"})
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "os.spawn"})
EXEMPT = frozenset({"slow", "packaging", "display", "vulkan", "gpu"})  # tiers that never run in the fast lane

_started: list[str] = []  # what the current test started (the audit hook appends)
_models: list[str] = []  # the real models it loaded


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in PROCESS_EVENTS and len(_started) < 10:
        program = str(args[0]) if args else ""
        if os.path.basename(program) not in NOT_COUNTED:
            _started.append(f"{event} {program[:80]}".strip())


def _watch_model_loads() -> None:
    try:
        import llama_cpp
    except ImportError:  # nothing to watch
        return
    original = llama_cpp.Llama.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        path = kwargs.get("model_path") or (args[0] if args else "")
        with contextlib.suppress(OSError, TypeError, ValueError):
            if os.path.getsize(path) > REAL_MODEL_BYTES:
                _models.append(os.path.basename(path))
        original(self, *args, **kwargs)

    llama_cpp.Llama.__init__ = init
    _watch_shared_embedders()


def _watch_shared_embedders() -> None:
    """A test that reuses the embedder an earlier test loaded (engine.docs.embed keeps one per
    process) uses a real model as well: which test of a worker came first must not decide it."""
    from engine.docs import embed

    class Watched(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            found = super().get(key, default)
            path = getattr(getattr(found, "llama", None), "model_path", "")
            with contextlib.suppress(OSError, TypeError, ValueError):
                if path and os.path.getsize(path) > REAL_MODEL_BYTES:
                    _models.append(f"the shared embedder {os.path.basename(path)}")
            return found

    embed._shared = Watched(embed._shared)  # pyright: ignore[reportPrivateUsage]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--check-slow-marks", action="store_true", help="fail unmarked slow tests (tests/slow_marks.py)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--check-slow-marks") or os.environ.get(ENV) == "1":
        config.stash[_ON] = True
        sys.addaudithook(_audit)  # cannot be removed: it only appends while a test runs
        _watch_model_loads()


_ON = pytest.StashKey[bool]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The once-per-run CPU-variant probe (child processes) before any test, so that it is not
    charged to whichever test happens to load llama.cpp first."""
    if session.config.stash.get(_ON, False):
        with contextlib.suppress(Exception):  # a build where it fails: the tests say so themselves
            from engine.llama.cpu import ensure_backends

            ensure_backends()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hypothesis builds its Unicode tables and reads the constants of every local module at its
    first example in a process: 3.5 CPU s under coverage in a fresh clone (0.16 s once cached),
    which failed whichever test drew first. Drawn here once the tests are imported, uncharged."""
    if session.config.stash.get(_ON, False) and "hypothesis" in sys.modules:
        with contextlib.suppress(Exception):
            from hypothesis import given, settings
            from hypothesis import strategies as st

            @settings(max_examples=1, database=None, deadline=None)
            @given(st.text())
            def warm(_text: str) -> None:
                pass

            warm()


def _threads_cpu_s() -> dict[int, float]:
    """Each thread's CPU seconds so far, by native id, from /proc (empty where there is none)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    found: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for task in os.scandir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(task.path, "stat").read_text().rsplit(")", 1)[1].split()
                found[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return found


Snapshot = tuple[float, dict[int, float]]


def _snapshot() -> Snapshot:
    return time.process_time(), _threads_cpu_s()


def _cpu_s(start: Snapshot) -> float:
    """The CPU this test used: the process's, less what threads an earlier test left running
    used meanwhile (a server or engine thread winding down is not this test's work). Where such
    a thread ended during the test, its share cannot be told apart: then only the test's own
    thread and those it started count, a lower bound. Children do not count: starting one
    fails the test on its own."""
    process0, threads0 = start
    process, threads = _snapshot()
    mine = threading.get_native_id()
    others = [t for t in threads0 if t != mine]
    if all(t in threads for t in others):
        return process - process0 - sum(threads[t] - threads0[t] for t in others)
    born = sum(cpu for t, cpu in threads.items() if t not in threads0)
    return threads.get(mine, 0.0) - threads0.get(mine, 0.0) + born


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    if item.config.stash.get(_ON, False):
        _started.clear()
        _models.clear()
        item.stash[_START] = (_snapshot(), time.monotonic())
    yield


_START = pytest.StashKey[tuple[Snapshot, float]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.when != "teardown" or _START not in item.stash or report.failed:
        return
    if any(item.get_closest_marker(m) for m in EXEMPT):
        return
    why = reasons(item, *item.stash[_START])
    if why:
        report.outcome = "failed"
        report.longrepr = f"unmarked slow test ({'; '.join(why)}): mark it @pytest.mark.slow (tests/slow_marks.py)"


def _crowding() -> float:
    """How much a loaded machine stretches wall time: the load per core, at least 1."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0


def cpu_limit() -> float:
    """CPU_LIMIT_S, times COVERAGE_FACTOR while coverage measures this process."""
    coverage = sys.modules.get("coverage")
    measured = coverage is not None and coverage.Coverage.current() is not None
    return CPU_LIMIT_S * (COVERAGE_FACTOR if measured else 1.0)


def reasons(item: pytest.Item, cpu0: Snapshot, wall0: float) -> list[str]:
    """What made this test slow, if anything."""
    cpu, wall = _cpu_s(cpu0), time.monotonic() - wall0
    why: list[str] = []
    limit = cpu_limit()
    if cpu > limit:
        why.append(f"{cpu:.1f} s of CPU, limit {limit:g}")
    wall_limit = WALL_LIMIT_S * _crowding()
    if wall > wall_limit:
        why.append(f"{wall:.1f} s, limit {wall_limit:.0f}")
    if _started:
        why.append(f"started a process: {_started[0]}")
    if _models:
        why.append(f"loaded the model {_models[0]}")
    used = sorted(MODEL_FIXTURES & set(getattr(item, "fixturenames", ())))
    if used:
        why.append(f"uses the real model ({', '.join(used)})")
    return why
