"""The machine profile, measured by the window at a moment nobody waits for (issue #48).

When no profile is cached, the window measures one once per session: after its model has
loaded and it has been idle for `IDLE_S` (no message checked or answered), in a low-priority
child process (`engine.api.machine.child`). A message sent meanwhile ends the child at once,
and so does closing the window: the measurement is then left for another session. The
measure step is an argument, so tests pass a fake one.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

IDLE_S = 8.0  # quiet this long after the model loads: the user is reading, not typing a question
POLL_S = 0.25  # how often `busy` is looked at: a sent message ends the child within this

LOCAL_KINDS = frozenset({"llama"})  # backends that run on this machine (a remote one says nothing of it)

Measure = Callable[[], Awaitable[object]]


async def when_idle(
    loaded: Awaitable[bool],
    busy: Callable[[], bool],
    *,
    measure: Measure | None = None,
    needed: Callable[[], bool] | None = None,
    idle_s: float | None = None,
) -> bool:
    """Measure once, when `loaded` succeeded and `busy()` stayed False for `idle_s`; True when it ran to the end.

    `needed` (default: no profile cached) is asked once the model has loaded."""
    try:  # shielded: ending this wait (the window closes) is not for it to cancel the load
        if not await asyncio.shield(loaded) or not (needed or _no_profile)():
            return False
    except Exception:  # the load's own failure is the window's to show
        return False
    await _quiet_for(IDLE_S if idle_s is None else idle_s, busy)
    task = asyncio.ensure_future((measure or measure_in_child)())
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=POLL_S)
            if busy() and not task.done():
                log.info("machine profile: a message was sent, measuring stopped")
                return False
        return task.exception() is None
    finally:
        await _end(task)


async def _quiet_for(seconds: float, busy: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    while loop.time() - quiet_since < seconds:
        await asyncio.sleep(POLL_S)
        if busy():
            quiet_since = loop.time()


async def _end(task: asyncio.Future[object]) -> None:
    if task.done():
        return
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def start(loaded: Awaitable[bool], busy: Callable[[], bool], *, kind: str) -> asyncio.Future[bool]:
    """The window's hook: `when_idle` once a model of backend `kind` loads, if it runs here (`LOCAL_KINDS`)."""
    if kind not in LOCAL_KINDS:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        done.set_result(False)
        return done
    return asyncio.ensure_future(when_idle(loaded, busy))


def _no_profile() -> bool:
    from engine.api import machine

    return machine.cached() is None


async def measure_in_child(spawn: Callable[[], subprocess.Popen[bytes]] | None = None) -> int:
    """Run the profile's child (`spawn` starts it); cancelled, it kills the child and waits for it
    (no process outlives the window)."""
    proc = (spawn or _spawn)()
    try:
        await asyncio.to_thread(proc.wait)
    finally:
        if proc.poll() is None:  # cancelled: the waiting thread returns once the child is gone
            proc.kill()
            proc.wait()
    log.info("machine profile measured in the background (exit %s)", proc.returncode)
    return proc.returncode


def _spawn() -> subprocess.Popen[bytes]:
    from engine.api import machine

    child = machine.child()
    return subprocess.Popen(
        child.argv, env=child.env, cwd=child.cwd,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
