"""One logging setup on the real start path, and it installs the crash-logging excepthook."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import pytest

import desktop.qt.app
from desktop.cli.main import main
from engine.logsetup import LoggingExceptHook
from models.library.paths import ember_paths


def test_the_window_start_path_logs_unhandled_exceptions(monkeypatch: pytest.MonkeyPatch, ember_home: Path) -> None:
    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: seen.append(exc))
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # restored after the test
    monkeypatch.setattr(desktop.qt.app, "run_gui", lambda args: 0 if isinstance(args, argparse.Namespace) else 1)
    assert main([]) == 0  # `ember` with no subcommand: the GUI path, as a user starts it
    assert isinstance(sys.excepthook, LoggingExceptHook)
    main([])  # configured again (e.g. a second start in one process): still one hook
    assert isinstance(sys.excepthook, LoggingExceptHook) and not isinstance(sys.excepthook.previous, LoggingExceptHook)
    boom = ValueError("boom in an async slot")
    sys.excepthook(ValueError, boom, None)
    assert seen == [boom]  # handed on (pytest-qt and the default hook still see it)
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = (ember_paths().log_dir / "ember.log").read_text(encoding="utf-8")
    assert "unhandled exception" in text and "boom in an async slot" in text
