"""`ember serve`'s turns go through the session, as the window's and `ember chat`'s do (#47): the same
`Plan`, the same defaults from the model's settings, the same recorder, one cancel token."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
from serve_helpers import Served, serve

from desktop.serve.record import ApiHistory
from engine.backends.base import Request
from engine.backends.receipt import request_receipt
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore
from engine.history.types import StoredMessage
from engine.runtime import Engine
from engine.session.session import Ask, ChatSession
from engine.session.settings import TurnSettings, resolve
from models.library.settings import ModelSettings

SETTINGS = resolve(ModelSettings(temperature=0.3, repeat_penalty=1.15, max_tokens=300, seed=7))


def _post(s: Served, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{s.url}/chat/completions", json=body, timeout=30)


def _window_request(settings: TurnSettings, text: str) -> Request:
    """The request the window's controller sends: `open_turn_async` on the engine, then `run_async`."""
    backend = ScriptedBackend([["Hi."]], n_ctx=4096)

    async def turn() -> None:
        engine, session = Engine(backend), ChatSession.unsaved()
        try:
            opened = await session.open_turn_async(engine, Ask.send(text), settings, model="m")
            [_ async for _ in opened.run_async(engine)]
        finally:
            session.close()
            await engine.aclose()

    asyncio.run(turn())
    [request] = backend.requests
    return request


def test_a_serve_turn_gets_the_receipt_of_the_windows_for_the_same_model(served: list[Served]) -> None:
    backend = ScriptedBackend([["Hi."]], n_ctx=4096)
    s = serve(backend, settings=SETTINGS, model_defaults=True)
    served.append(s)
    assert _post(s, {"messages": [{"role": "user", "content": "Hello"}]}).status_code == 200
    [sent] = backend.requests
    window = _window_request(SETTINGS, "Hello")
    served_receipt, window_receipt = (
        request_receipt(sent, sent.sampling.seed),
        request_receipt(window, window.sampling.seed),
    )
    # The API's prompt is the client's, sent as it is: no line about tools is added to it.
    assert served_receipt.pop("system") is None and window_receipt.pop("system")
    assert served_receipt == window_receipt
    assert sent.sampling.repeat_penalty == 1.15 and sent.max_tokens == 300  # the model's, not OpenAI's neutral ones


def _reply_rows(path: list[StoredMessage]) -> list[tuple[str, str, str, Any, Any]]:
    return [(m.role, m.content, m.status, m.stats.get("tokens"), m.stats.get("finish_reason")) for m in path]


def test_record_writes_the_history_ember_chat_writes(served: list[Served], tmp_path: Path) -> None:
    chat_db, serve_db = tmp_path / "chat.db", tmp_path / "serve.db"
    chat = ChatSession(HistoryStore(chat_db))
    backend = ScriptedBackend([["Green", " and", " lush."]], n_ctx=4096)
    try:  # `ember chat`: open_turn and run on this thread
        list(chat.open_turn(backend, Ask.send("Grass colour?"), SETTINGS, model=backend.name).run(backend))
        [chat_row] = chat.store.conversations()
        chat_path = chat.store.path(chat_row.id)
    finally:
        chat.close()
    s = serve(
        ScriptedBackend([["Green", " and", " lush."]], n_ctx=4096), history=ApiHistory(lambda: HistoryStore(serve_db))
    )
    served.append(s)
    assert _post(s, {"messages": [{"role": "user", "content": "Grass colour?"}]}).status_code == 200
    s.close()
    served.remove(s)
    store = HistoryStore(serve_db)
    try:
        [serve_row] = store.conversations()
        assert _reply_rows(store.path(serve_row.id)) == _reply_rows(chat_path)
        assert _reply_rows(chat_path)[-1][:3] == ("assistant", "Green and lush.", "complete")
    finally:
        store.close()


def test_a_client_that_leaves_stops_the_generation(served: list[Served], tmp_path: Path) -> None:
    words = [{"text": f" w{i}", "delay_ms": 20} for i in range(500)]  # 10 s if nobody stops it
    db = tmp_path / "history.db"
    s = serve(ScriptedBackend([words], n_ctx=4096), history=ApiHistory(lambda: HistoryStore(db)))
    served.append(s)
    body = {"messages": [{"role": "user", "content": "Count"}], "stream": True}
    with httpx.stream("POST", f"{s.url}/chat/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if "w3" in line:
                break  # the client leaves mid-reply
    started = time.monotonic()
    while s.state.jobs and time.monotonic() - started < 8:
        time.sleep(0.02)
    assert not s.state.jobs  # the turn ended: cancelled within a piece, not after the 500
    s.close()
    served.remove(s)
    store = HistoryStore(db)
    try:
        [row] = store.conversations()
        reply = store.path(row.id)[-1]
        assert reply.status == "stopped" and reply.content.startswith(" w0 w1 w2 w3")
        assert len(reply.content.split()) < 100
    finally:
        store.close()
