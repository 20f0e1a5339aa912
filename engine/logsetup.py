"""Ember's log: one rotating file in the log directory, never the terminal by default.

The CLI's stdout/stderr carry answers and one-line errors only; the scaffolding filter's
warnings, the per-turn lines and llama.cpp's own log land in the file. This is the one
logging setup (`desktop.cli.main.main` calls it for every command, the window included); it also
installs the `sys.excepthook` that logs an exception escaping an async Qt slot.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Callable
from types import TracebackType

from models.library.paths import ember_paths

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_configured: list[logging.Handler] = []
log = logging.getLogger("ember")


def configure_logging(*, verbose: bool = False) -> None:
    """Route Ember's loggers to `<log_dir>/ember.log` (and stderr when verbose). Idempotent."""
    root = logging.getLogger()
    for handler in _configured:
        root.removeHandler(handler)
        handler.close()
    _configured.clear()
    try:
        log_dir = ember_paths().log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        file_handler: logging.Handler = logging.handlers.RotatingFileHandler(
            log_dir / "ember.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
        file_handler.setLevel(logging.INFO)
        _configured.append(file_handler)
    except OSError:
        pass  # an unwritable log folder must not stop the app
    if verbose:
        stream = logging.StreamHandler(sys.stderr)
        stream.setLevel(logging.DEBUG)
        _configured.append(stream)
    for handler in _configured:
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("engine.llama_cpp").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if not isinstance(sys.excepthook, LoggingExceptHook):
        sys.excepthook = LoggingExceptHook(sys.excepthook)


class LoggingExceptHook:
    """Logs an unhandled exception (one escaping an async slot lands here), then hands it on."""

    def __init__(self, previous: Callable[[type[BaseException], BaseException, TracebackType | None], object]) -> None:
        self.previous = previous

    def __call__(self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        log.error("unhandled exception", exc_info=(kind, exc, tb))
        self.previous(kind, exc, tb)
