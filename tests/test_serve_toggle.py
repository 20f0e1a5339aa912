"""The window's serve toggle: start on a port, count requests, stop; a port in use is one line."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import httpx
from PySide6.QtWidgets import QStatusBar
from pytestqt.qtbot import QtBot

from desktop.qt.serve_toggle import ServeToggle
from engine.backends.scripted import ScriptedBackend
from engine.runtime import Engine


def _toggle(qtbot: QtBot, engine: Engine, port: int = 0) -> tuple[ServeToggle, QStatusBar]:
    bar = QStatusBar()
    qtbot.addWidget(bar)
    controller = SimpleNamespace(engine=engine, choice=None)
    toggle = ServeToggle(controller, bar, port=port)  # type: ignore[arg-type]
    bar.addPermanentWidget(toggle)
    return toggle, bar


def test_the_toggle_serves_counts_and_stops(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("Hello from the window's model."))
    toggle, _ = _toggle(qtbot, engine)
    try:
        assert toggle.text() == "Serve"
        assert toggle.start() and toggle.serving
        assert toggle.server is not None
        url = toggle.server.address
        assert url.startswith("http://127.0.0.1:")
        reply = httpx.post(f"{url}/chat/completions", timeout=20,
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.json()["choices"][0]["message"]["content"] == "Hello from the window's model."
        qtbot.waitUntil(lambda: toggle.text().endswith("· 1"), timeout=3000)
        assert toggle.text() == f"Serving :{toggle.server.port} · 1"
        toggle._fill_menu()
        labels = [a.text() for a in toggle.menu().actions()]
        assert url in labels and "1 request served" in labels and "Stop serving" in labels
        toggle.stop()
        assert not toggle.serving and toggle.text() == "Serve"
        try:
            httpx.get(f"{url}/models", timeout=2)
            raise AssertionError("the server is still answering")
        except httpx.ConnectError:
            pass
    finally:
        toggle.stop()
        engine.close_sync()


def test_a_port_in_use_is_said_in_the_status_bar(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("x"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        toggle, bar = _toggle(qtbot, engine, port=taken.getsockname()[1])
        try:
            assert not toggle.start()
            assert "in use" in toggle.problem and "in use" in bar.currentMessage()
            assert toggle.text() == "Serve"
        finally:
            engine.close_sync()
