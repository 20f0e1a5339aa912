"""SIGTERM and SIGINT that always stop a process: a stop request, then a watchdog that cannot be starved.

Python runs signal handlers on the main thread, between bytecodes. A thread stuck in C code
that never lets go of the GIL (a backtracking `re` match, SV-16) starves the main thread,
so no handler runs and the process ignores SIGTERM for good. The C-level handler still
runs: it writes the signal's number to the "wakeup fd". Here that fd is a pipe to a tiny
watchdog process (`python -I`, its own session so Ctrl+C in the terminal does not reach it),
which waits `grace_s` after a stop signal and then SIGKILLs the process if it is still
there. A normal stop ends well before that; the watchdog exits when the pipe closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

from engine.api.program import function_child

log = logging.getLogger("desktop.cli")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """What a stop signal does: set the server's event on its loop (nothing once that loop is gone)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def event_here(self) -> asyncio.Event:
        """The event to wait on, bound to the running loop."""
        self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
        return self._event

    def __call__(self) -> None:
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the watchdog is the stop now
                loop.call_soon_threadsafe(event.set)


@contextlib.contextmanager
def stop_on_signals(request_stop: Callable[[], None], grace_s: float) -> Iterator[None]:
    """Call `request_stop` (from the main thread) on SIGINT/SIGTERM; SIGKILL after `grace_s` regardless.

    `request_stop` must be safe to call from a signal handler (a `StopRequest`). A stop signal
    that comes before the server runs, or while it closes, leaves the stop to the watchdog.
    """
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    watchdog = _start_watchdog(read_end, grace_s)
    os.close(read_end)
    previous = {s: signal.signal(s, lambda *_: request_stop()) for s in STOP_SIGNALS}
    old_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False) if watchdog is not None else -1
    try:
        yield
    finally:
        if watchdog is not None:
            signal.set_wakeup_fd(old_fd)
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(write_end)  # the watchdog sees the end of the pipe and exits
        if watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                watchdog.wait(timeout=1)


def _start_watchdog(read_end: int, grace_s: float) -> subprocess.Popen[bytes] | None:
    if os.name != "posix":  # no fd passing nor SIGKILL: stops work unless a thread holds the GIL
        return None
    # Isolated (engine/child_env.py): nothing from the current folder or the environment is imported.
    child = function_child("desktop.cli.hard_stop:watchdog", str(os.getpid()), str(read_end), str(grace_s))
    try:
        return subprocess.Popen(
            child.argv,
            env=child.env,
            pass_fds=(read_end,),
            cwd=child.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # never holds a pipe open
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:  # no watchdog: stops still work unless a thread holds the GIL
        log.warning("no stop watchdog (%s): a stuck request may delay SIGTERM", exc)
        return None


def watchdog() -> int:
    """In the watchdog process: argv PARENT_PID FD GRACE_S. SIGKILLs the parent GRACE_S after a stop
    signal's number arrives on FD; exits when FD closes (the parent stopped, or is gone)."""
    import select
    import time

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    parent, fd, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    stops = {int(signal.SIGINT), int(signal.SIGTERM)}
    deadline = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([fd], [], [], wait)[0]:
            if os.getppid() == parent:
                os.kill(parent, signal.SIGKILL)
            return 0
        data = os.read(fd, 64)
        if not data:
            return 0
        if deadline is None and stops & set(data):
            deadline = time.monotonic() + grace
