"""Launching the window: model choice, --prompt, a clean shutdown on close and on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS
from pytestqt.qtbot import QtBot

from desktop.cli.main import main
from desktop.core.model_choice import choose_model, remember_model
from desktop.qt.app import open_window, run_session
from desktop.qt.window import MainWindow
from engine.runtime import Engine
from models.library.default_model import DEFAULT_NAME
from models.library.scan import load_library_state

pytest_plugins = ["gui_helpers"]


def write_script(path: Path, *replies: list[str]) -> Path:
    path.write_text(json.dumps({"replies": [list(r) for r in replies]}), encoding="utf-8")
    return path


def reply_text(window: MainWindow, *, finished: bool = False) -> str | None:
    reply = window.last_reply()
    if reply is None or (finished and not reply.finished):
        return None
    return reply.answer_text()


def model_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ember-model")]


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_prompt_is_sent_on_start_and_closing_stops_the_engine(
    qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "s.json", ["Hello ", "from ", "the script."])
    window = open_window()
    qtbot.addWidget(window)
    session = asyncio.ensure_future(run_session(choose_model(None, f"script:{script}"), prompt="hi", window=window))
    qtbot.waitUntil(lambda: reply_text(window, finished=True) is not None, timeout=WAIT_MS)
    reply = window.last_reply()
    assert reply is not None and reply.answer_text() == "Hello from the script."
    assert window.header.model_label == "Script: s.json"
    window.close()
    qtbot.waitUntil(session.done, timeout=WAIT_MS)
    assert session.result() == 0
    qtbot.waitUntil(lambda: not model_threads(), timeout=WAIT_MS)


def test_closing_mid_reply_stops_it(qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"replies": [[{"text": f"t{i} ", "delay_ms": 20} for i in range(500)]]}))
    engine = Engine()
    window = open_window(engine)
    qtbot.addWidget(window)
    session = asyncio.ensure_future(run_session(choose_model(None, f"script:{script}"), prompt="go", window=window))
    qtbot.waitUntil(lambda: "t3" in (reply_text(window) or ""), timeout=WAIT_MS)
    window.close()
    qtbot.waitUntil(session.done, timeout=WAIT_MS)
    assert engine.backend is None and not engine.busy


def test_bad_backend_spec_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--backend", "nope:x"]) == 2
    assert "unknown backend" in capsys.readouterr().err


def test_model_choice_prefers_flags_then_last_used_then_default(tmp_path: Path) -> None:
    assert choose_model(None, None).path is None
    assert choose_model(None, None).label == DEFAULT_NAME
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    choice = choose_model(str(model), None)
    assert choice.path == model and choice.label == "tiny.gguf"
    remember_model(choice)
    assert load_library_state().last_used == model.resolve()  # kept with the library, not on its own
    assert choose_model(None, None).path == model.resolve()
    assert choose_model(None, None).notice is None
    assert choose_model("default", None).path is None  # an explicit default wins
    model.unlink()
    fallback = choose_model(None, None)
    assert fallback.path is None  # a vanished file falls back to the default, with a notice
    assert fallback.notice is not None and "tiny.gguf" in fallback.notice


@pytest.mark.slow
def test_sigterm_shuts_the_window_down_cleanly(tmp_path: Path, ember_home: Path) -> None:
    script = write_script(tmp_path / "s.json", ["hello"])
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "EMBER_HOME": str(ember_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "--backend", f"script:{script}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    log = ember_home / "logs" / "ember.log"
    try:
        deadline = time.monotonic() + 30
        while "window shown" not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the window never came up"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "engine stopped" in log.read_text()
