"""The window's serve toggle: start on a port (the next free one when 8080 is busy), count requests, stop;
the chosen port remembered; no free port is one line."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import httpx
from PySide6.QtWidgets import QStatusBar
from pytestqt.qtbot import QtBot

from desktop.qt.frame.serve_toggle import PORT_TRIES, PREFS_FILE, ServeToggle
from desktop.serve import DEFAULT_PORT
from engine.backends.scripted import ScriptedBackend
from engine.runtime import Engine
from models.library.paths import ember_paths


def _toggle(
    qtbot: QtBot, engine: Engine, port: int | None = 0, tries: int = PORT_TRIES
) -> tuple[ServeToggle, QStatusBar]:
    bar = QStatusBar()
    qtbot.addWidget(bar)
    controller = SimpleNamespace(engine=engine, models=SimpleNamespace(choice=None))
    toggle = ServeToggle(controller, bar, port=port, tries=tries)  # type: ignore[arg-type]
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
        reply = httpx.post(
            f"{url}/chat/completions", timeout=20, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert reply.json()["choices"][0]["message"]["content"] == "Hello from the window's model."
        qtbot.waitUntil(lambda: toggle.text().endswith("· 1 request"), timeout=3000)
        assert toggle.text() == f"API server on · 127.0.0.1:{toggle.server.port} · 1 request"
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


def test_when_no_port_is_free_it_is_said_in_the_status_bar(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("x"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        toggle, bar = _toggle(qtbot, engine, port=taken.getsockname()[1], tries=1)
        try:
            assert not toggle.start()
            assert "in use" in toggle.problem and "in use" in bar.currentMessage()
            assert toggle.text() == "Serve"
        finally:
            engine.close_sync()


def _occupy(port: int) -> socket.socket | None:
    """A socket listening on `port`, or None when something else already holds it (busy either way)."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    sock.listen(1)
    return sock


def test_8080_busy_serves_on_the_next_free_port_and_shows_it(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("From the next port."))
    taken = _occupy(DEFAULT_PORT)
    toggle, bar = _toggle(qtbot, engine, port=None)  # the default: 8080, unless the user chose another
    try:
        assert toggle.port == DEFAULT_PORT
        assert toggle.start() and toggle.server is not None
        real = toggle.server.port
        assert DEFAULT_PORT < real < DEFAULT_PORT + PORT_TRIES
        assert toggle.server.address == f"http://127.0.0.1:{real}/v1"
        assert toggle.text().endswith(f":{real} · 0 requests")
        assert bar.currentMessage() == f"Port 8080 is in use: serving on http://127.0.0.1:{real}/v1"
        toggle._fill_menu()
        assert toggle.server.address in [a.text() for a in toggle.menu().actions()]
        reply = httpx.post(
            f"{toggle.server.address}/chat/completions",
            timeout=20,
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert reply.json()["choices"][0]["message"]["content"] == "From the next port."
    finally:
        toggle.stop()
        engine.close_sync()
        if taken is not None:
            taken.close()


def test_the_chosen_port_is_remembered(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("x"))
    try:
        toggle, _ = _toggle(qtbot, engine, port=None)
        toggle._fill_menu()
        assert [a.text() for a in toggle.menu().actions()] == ["Serve on localhost:8080", "Port…", "Web pages allowed…"]
        toggle.set_port(9123)
        again, _ = _toggle(qtbot, engine, port=None)
        assert again.port == 9123 and "localhost:9123" in again.toolTip()
        (ember_paths().config_dir / PREFS_FILE).write_text('{"port": "lots"}')
        assert _toggle(qtbot, engine, port=None)[0].port == DEFAULT_PORT  # a bad file: the default
    finally:
        engine.close_sync()


def test_web_pages_allowed_in_the_window_are_remembered_and_checked(qtbot: QtBot) -> None:
    engine = Engine(ScriptedBackend.from_texts("One.", "Two."))
    toggle, _ = _toggle(qtbot, engine)
    try:
        assert not toggle.set_origins(["*"]) and "API key" in toggle.problem  # no key in the window
        assert not toggle.set_origins(["chat.example.com"]) and "not an origin" in toggle.problem
        assert toggle.set_origins(["https://chat.example.com"])
        assert ServeToggle(toggle.controller, port=0).origins == ["https://chat.example.com"]  # remembered
        assert toggle.start() and toggle.server is not None
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        url = f"{toggle.server.address}/chat/completions"
        allowed = httpx.post(url, json=body, timeout=20, headers={"origin": "https://chat.example.com"})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://chat.example.com"
        assert httpx.post(url, json=body, timeout=20, headers={"origin": "https://evil.example"}).status_code == 403
        assert httpx.post(url, json=body, timeout=20, headers={"origin": "http://localhost:3000"}).status_code == 200
    finally:
        toggle.stop()
        engine.close_sync()
