"""The window measures the machine profile only once it has been idle (issue #48).

A fake measure step stands in for the child (it records when it starts and whether it was
ended); slow tests run a real child process and check that cancelling leaves none, that a real
window on a fresh data folder leaves no process after its close, and the child's peak memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS
from pytestqt.qtbot import QtBot

from desktop.core import idle_profile
from desktop.core.model_choice import choose_model
from desktop.qt.app import open_window, run_session

pytest_plugins = ["gui_helpers"]


class FakeMeasure:
    """Starts, then runs until `finish` is set (or it is cancelled)."""

    def __init__(self) -> None:
        self.starts = 0
        self.cancelled = False
        self.finish = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self) -> None:
        self.starts += 1
        self.started.set()
        try:
            await self.finish.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def _loaded(ok: bool = True) -> bool:
    return ok


def test_measures_once_after_the_model_loads_and_the_window_is_idle() -> None:
    async def scenario() -> tuple[bool, int]:
        fake = FakeMeasure()
        fake.finish.set()
        done = await idle_profile.when_idle(_loaded(), lambda: False, measure=fake, needed=lambda: True, idle_s=0.05)
        return done, fake.starts

    assert asyncio.run(scenario()) == (True, 1)


def test_no_measure_when_a_profile_is_cached_or_the_load_failed() -> None:
    async def scenario() -> list[bool]:
        fake = FakeMeasure()
        cached = await idle_profile.when_idle(_loaded(), lambda: False, measure=fake, needed=lambda: False, idle_s=0)
        failed = await idle_profile.when_idle(_loaded(False), lambda: False, measure=fake, needed=lambda: True)
        assert fake.starts == 0
        return [cached, failed]

    assert asyncio.run(scenario()) == [False, False]


def test_a_busy_window_postpones_it_and_a_sent_message_ends_it() -> None:
    polls: list[bool] = []
    state = {"sending": False}

    def busy() -> bool:  # a reply is written over the first 4 looks, then the window is quiet
        polls.append(len(polls) < 4 or state["sending"])
        return polls[-1]

    async def scenario() -> tuple[int, bool, bool]:
        fake = FakeMeasure()
        task = asyncio.ensure_future(
            idle_profile.when_idle(_loaded(), busy, measure=fake, needed=lambda: True, idle_s=0.05)
        )
        await fake.started.wait()
        assert polls[:4] == [True] * 4 and polls[4] is False  # it started only after the quiet looks
        state["sending"] = True  # the user sends a message while it measures
        result = await asyncio.wait_for(task, timeout=5)
        return fake.starts, fake.cancelled, result

    assert asyncio.run(scenario()) == (1, True, False)


@pytest.mark.slow  # starts a process
def test_cancelling_the_child_leaves_no_process() -> None:
    procs: list[subprocess.Popen[bytes]] = []

    async def scenario() -> None:
        spawned = asyncio.Event()

        def spawn() -> subprocess.Popen[bytes]:
            procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            spawned.set()
            return procs[-1]

        task = asyncio.ensure_future(idle_profile.measure_in_child(spawn))
        await spawned.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert procs[0].poll() is not None  # killed and reaped before the cancelled task ended


@pytest.mark.slow  # a window for a few seconds
def test_the_window_measures_when_idle_and_ends_it_on_close(
    qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeMeasure()
    monkeypatch.setattr(idle_profile, "measure_in_child", fake)
    monkeypatch.setattr(idle_profile, "_no_profile", lambda: True)
    monkeypatch.setattr(idle_profile, "IDLE_S", 0.3)
    monkeypatch.setattr(idle_profile, "LOCAL_KINDS", frozenset({"script"}))  # the scripted model stands in
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Hi."]]}), encoding="utf-8")
    window = open_window()
    qtbot.addWidget(window)
    session = asyncio.ensure_future(run_session(choose_model(None, f"script:{script}"), window=window))
    qtbot.waitUntil(lambda: fake.starts == 1, timeout=WAIT_MS)
    window.close()
    qtbot.waitUntil(session.done, timeout=WAIT_MS)
    assert fake.cancelled and session.result() == 0


def _processes_with(env_entry: bytes) -> list[int]:
    """The processes (but this one) whose environment holds `env_entry`: Ember's, for a test's own cache folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if env_entry in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:  # gone meanwhile, or not ours
                pass
    return found


@pytest.mark.slow  # the built-in model in a real window, and the real child
@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_real_window_on_a_fresh_data_folder_leaves_no_process_after_close(
    qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The "Done when": closing the window ends every process it started (the profile's
    # child and whatever that child runs, e.g. its CPU-variant probe on a fresh cache folder).
    cache = tmp_path / "cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))  # fresh: no profile, so the window measures
    monkeypatch.setattr(idle_profile, "IDLE_S", 0.3)
    spawned: list[subprocess.Popen[bytes]] = []
    real_spawn = idle_profile._spawn  # pyright: ignore[reportPrivateUsage]

    def spawn() -> subprocess.Popen[bytes]:
        spawned.append(real_spawn())
        return spawned[-1]

    monkeypatch.setattr(idle_profile, "_spawn", spawn)
    window = open_window()
    qtbot.addWidget(window)
    session = asyncio.ensure_future(run_session(choose_model(None, None), window=window))
    qtbot.waitUntil(lambda: bool(spawned), timeout=120_000)
    entry = f"EMBER_CACHE_DIR={cache}".encode()
    qtbot.waitUntil(lambda: bool(_processes_with(entry)), timeout=WAIT_MS)  # the child is running
    window.close()
    qtbot.waitUntil(session.done, timeout=WAIT_MS)
    assert spawned[0].poll() is not None and _processes_with(entry) == []


@pytest.mark.slow  # runs the built-in model in a child (seconds)
@pytest.mark.timeout(300)
@pytest.mark.skipif(sys.platform == "win32", reason="resource is POSIX")
def test_the_profile_child_peaks_under_300_mb(tmp_path: Path) -> None:
    # The bound for any first-start child (the conversion it replaced peaked at 1-1.8 GB).
    # A fresh interpreter runs the child: RUSAGE_CHILDREN's peak is then the child's (or its own
    # child's) alone, as the OS counted it. Measured here: 171 MB.
    from engine.child_env import function_child

    # the child's work at this test's priority: at nice 19 beside busy cores it would wait, not measure
    child = function_child("engine.llama.machine_profile:measure_and_cache")
    env = {**child.env, "EMBER_CACHE_DIR": str(tmp_path)}
    probe = (
        "import json, resource, subprocess, sys\n"
        "argv, env, cwd = json.loads(sys.argv[1])\n"
        "code = subprocess.run(argv, env=env, cwd=cwd).returncode\n"
        "print(json.dumps([code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps([child.argv, env, child.cwd])],
        capture_output=True, text=True, timeout=280, check=True,
    )  # fmt: skip
    code, peak = json.loads(out.stdout.strip().splitlines()[-1])
    peak_bytes = peak * (1 if sys.platform == "darwin" else 1024)  # kB on Linux, bytes on macOS
    assert code == 0 and (tmp_path / "machine-profile.json").is_file(), out.stderr[-2000:]  # it measured
    assert 0 < peak_bytes <= 300 * 1024 * 1024


def test_the_profile_child_lowers_its_priority_before_it_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.llama import machine_profile

    calls: list[str] = []
    monkeypatch.setattr(os, "nice", lambda n: calls.append(f"nice {n}"))  # never this test process's own
    monkeypatch.setattr(machine_profile, "measure_and_cache", lambda: calls.append("measure") or 0)
    assert machine_profile.run_child() == 0 and calls == ["nice 19", "measure"]
    assert machine_profile.child().argv[-1].endswith("import run_child as main; raise SystemExit(main())")
