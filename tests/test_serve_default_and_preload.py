"""The name `default` and Ollama's preload requests (#40 audit).

Chat takes any model name and the README sends `model: "default"`, so the routes that look a
model up (`GET /v1/models/{id}`, Ollama's `/api/show`) resolve it to the served model too.
Ollama's clients preload with `/api/generate` and no prompt or `/api/chat` with `messages: []`;
Ollama answers `done: true, done_reason: "load"` without generating, and so does Ember: no turn
runs, nothing is queued, counted or recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from desktop.serve.record import ApiHistory
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore

if TYPE_CHECKING:
    import ollama
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")
    openai = lazy_module("openai")


def _base(s: Served) -> str:
    return s.url.removesuffix("/v1")


def _served(served: list[Served], *replies: str, **kwargs: Any) -> tuple[Served, ScriptedBackend]:
    backend = ScriptedBackend.from_texts(*replies)
    served.append(serve(backend, **kwargs))
    return served[-1], backend


def test_v1_models_default_is_the_served_model(served: list[Served]) -> None:
    s, _ = _served(served, "x")
    client = openai.OpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=20)
    assert client.models.retrieve("default").id == "script"
    assert client.models.retrieve("script").id == "script"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_ollama_show_resolves_default_and_the_served_id(served: list[Served]) -> None:
    s, _ = _served(served, "x")
    client = ollama.Client(host=_base(s), timeout=30)
    for name in ("default", "default:latest", "script", "script:latest"):
        assert "completion" in (client.show(name).capabilities or []), name
    with pytest.raises(ollama.ResponseError) as info:
        client.show("llama3:8b")
    assert info.value.status_code == 404


@pytest.mark.parametrize("body", [{"model": "default", "prompt": ""}, {"model": "default"}])
def test_generate_without_a_prompt_loads_without_a_turn(served: list[Served], body: dict[str, Any]) -> None:
    s, backend = _served(served, "never generated")
    reply = httpx.post(f"{_base(s)}/api/generate", json=body, timeout=20)
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert (out["done"], out["done_reason"], out["response"], out["model"]) == (True, "load", "", "default")
    assert backend.requests == [] and s.state.requests == 0


def test_chat_with_no_messages_loads_without_a_turn(served: list[Served]) -> None:
    s, backend = _served(served, "never generated")
    reply = httpx.post(f"{_base(s)}/api/chat", json={"model": "default", "messages": []}, timeout=20)
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert (out["done"], out["done_reason"], out["message"]) == (True, "load", {"role": "assistant", "content": ""})
    assert backend.requests == [] and s.state.requests == 0


def test_the_ollama_client_preloads_streamed_or_not(served: list[Served]) -> None:
    s, backend = _served(served, "Hello.")
    client = ollama.Client(host=_base(s), timeout=30)
    assert client.generate(model="default", prompt="", stream=False).done_reason == "load"
    [only] = list(client.chat(model="default", messages=[], stream=True))
    assert only.done and only.done_reason == "load"
    assert backend.requests == []
    assert client.chat(model="default", messages=[{"role": "user", "content": "Hi"}]).message.content == "Hello."


def test_a_preload_is_not_recorded(served: list[Served], tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    s, _ = _served(served, "Hello.", history=ApiHistory(lambda: HistoryStore(db)))
    base = _base(s)
    assert httpx.post(f"{base}/api/generate", json={"model": "m"}, timeout=20).json()["done_reason"] == "load"
    assert httpx.post(f"{base}/api/chat", json={"model": "m", "messages": []}, timeout=20).json()["done"]
    chat = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "Hi"}]}
    assert httpx.post(f"{base}/api/chat", json=chat, timeout=20).json()["message"]["content"] == "Hello."
    s.close()
    served.remove(s)
    store = HistoryStore(db)
    try:  # only the real turn: the preloads left nothing
        assert [[m.content for m in store.path(c.id)] for c in store.conversations()] == [["Hi", "Hello."]]
    finally:
        store.close()


def test_a_preload_still_needs_the_key(served: list[Served]) -> None:
    s, backend = _served(served, "x", api_key="sekrit")
    reply = httpx.post(f"{_base(s)}/api/generate", json={"model": "m"}, timeout=20)
    assert reply.status_code == 401 and isinstance(reply.json()["error"], str)
    assert backend.requests == []
