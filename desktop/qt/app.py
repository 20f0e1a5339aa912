"""`ember` with no subcommand: the chat window on a qasync loop.

qasync runs asyncio on the Qt event loop, so the engine's `async for` events and the
widgets share one thread. Closing the window, SIGTERM and Ctrl+C all take the same path:
stop the reply, close the backend on its worker thread, end the worker, return.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

import qasync
from PySide6.QtCore import QObject, QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication

from desktop.core import idle_profile
from desktop.core.history_session import open_history
from desktop.core.model_choice import ModelChoice, choose_model
from desktop.core.platform_check import platform_problem
from desktop.qt.window import MainWindow, WindowOptions
from engine.api.errors import ConfigError
from engine.api.session import Engine

log = logging.getLogger("desktop.app")

EXIT_OK, EXIT_USAGE = 0, 2
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def run_gui(args: argparse.Namespace) -> int:
    """Open the window; returns the process exit status once it is closed."""
    problem = platform_problem()  # before QApplication: Qt would abort with seven lines instead
    if problem is not None:
        sys.stderr.write(problem.message + "\n")
        return EXIT_USAGE
    try:
        choice = choose_model(getattr(args, "model", None), getattr(args, "backend", None))
    except ConfigError as exc:
        sys.stderr.write(f"ember: {exc}\n")
        return EXIT_USAGE
    app = _application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(run_session(choice, prompt=getattr(args, "prompt", None)))
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def _application() -> QApplication:
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Ember")
    app.setApplicationDisplayName("Ember")
    app.setQuitOnLastWindowClosed(False)  # the session ends the loop, after a clean shutdown
    return app


def open_window(engine: Engine | None = None) -> MainWindow:
    """A window on `engine` (else a new one) and the history (unsaved, with a notice, when it cannot be used)."""
    session, history_notice = open_history()
    return MainWindow(engine or Engine(), session, WindowOptions(history_notice=history_notice))


async def run_session(choice: ModelChoice, *, prompt: str | None = None, window: MainWindow | None = None) -> int:
    """Show a window on `choice` (else `open_window()`), optionally send `prompt`, and return once it is closed."""
    window = window or open_window()
    controller = window.controller
    closed = asyncio.Event()
    window.closing.connect(closed.set)
    with SignalBridge(window.close):
        window.restore_state()
        window.show()
        log.info("window shown: %s", choice.label)
        warm_up()
        tasks = [asyncio.ensure_future(window.models.load(choice))]  # shows choice.notice once loaded
        profiling = idle_profile.start(tasks[0], lambda: controller.busy, kind=choice.spec.kind)
        last = window.state.conversation
        if prompt:
            tasks.append(asyncio.ensure_future(controller.send(prompt)))  # waits for the load
        elif last is not None and controller.history is not None:
            tasks.append(asyncio.ensure_future(controller.open_conversation(last)))  # where the user left off
        await closed.wait()
        for task in (*tasks, profiling):
            task.cancel()
        await asyncio.gather(profiling, return_exceptions=True)  # its child ends before the window does
        await controller.aclose()
    log.info("window closed, engine stopped")
    return EXIT_OK


# Imported on first use, not before the first paint; warmed up on a thread once the window is up.
WARM_UP = ("jsonschema.validators", "pygments.lexers")


def warm_up(modules: tuple[str, ...] = WARM_UP) -> threading.Thread:
    """Import `modules` on a daemon thread (the first structured reply or code block then finds them loaded)."""

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError as exc:  # a missing optional part is reported where it is used
                log.warning("warm-up: %s: %s", name, exc)

    thread = threading.Thread(target=run, name="ember-warm-up", daemon=True)
    thread.start()
    return thread


class SignalBridge(QObject):
    """Turns SIGTERM/SIGINT into a call on the GUI thread.

    Python runs signal handlers only when it gets control, which a Qt loop waiting in C++
    does not give it; the wakeup fd makes the signal also wake a socket notifier.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, on_signal: Callable[[], object]) -> None:
        super().__init__()
        self._on_signal = on_signal
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)
        self._old_fd = -1
        self._old_handlers: dict[signal.Signals, _Handler] = {}

    def __enter__(self) -> SignalBridge:
        self._old_fd = signal.set_wakeup_fd(self._writer.fileno())
        for sig in self.SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(self._old_fd)
        self._notifier.setEnabled(False)
        self._reader.close()
        self._writer.close()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: closing the window", signum)
        QTimer.singleShot(0, self._on_signal)

    def _drain(self) -> None:
        try:
            while self._reader.recv(512):
                pass
        except (BlockingIOError, InterruptedError):
            pass
