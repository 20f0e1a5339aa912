"""`ember` (the window) as a user starts it, reporting when it first paints and when its model is ready.

Run in a child process by `ember bench` (desktop/cli/bench_startup.py), offscreen, in a
throwaway EMBER_HOME: `python -c "from tests.tools.startup_probe import main; main()"`. It
goes through the same entry point as `ember` (`desktop.cli.main.main([])`), with the window's
first paint and `model_ready` reported as lines on stdout (`painted`, `ready` or `failed`),
then closes the window. The parent times the lines from the moment it started the process.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> int:
    import desktop.qt.app as app  # what `ember` imports first for the window anyway

    run_session = app.run_session

    async def probed(choice: Any, **kwargs: Any) -> int:
        return await run_session(choice, window=_probe_window(), **kwargs)

    app.run_session = probed
    from desktop.cli.main import main as ember

    return ember([])


def _probe_window() -> Any:
    from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer

    from desktop.core.history_session import open_history
    from desktop.core.model_choice import ModelInfo
    from desktop.qt.window import MainWindow, WindowOptions
    from engine.api.errors import LoadFailure
    from engine.runtime import Engine

    class Probe(MainWindow):
        def __init__(self) -> None:
            session, notice = open_history()  # as app.open_window builds the window
            super().__init__(Engine(), session, WindowOptions(history_notice=notice))
            self._filter = _FirstPaint(self)
            app = QCoreApplication.instance()
            if app is not None:
                app.installEventFilter(self._filter)  # the first paint of any of its widgets

        def model_ready(self, info: ModelInfo) -> None:
            super().model_ready(info)
            _say("ready")
            QTimer.singleShot(0, self.close)

        def model_failed(self, label: str, message: str, cause: LoadFailure) -> None:
            super().model_failed(label, message, cause)
            _say(f"failed {message}")
            QTimer.singleShot(0, self.close)

    class _FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint:
                _say("painted")
                watched.removeEventFilter(self)
            return False

    return Probe()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
