"""Ollama's API beside OpenAI's (#40), driven by the official `ollama` Python client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve
from test_serve_embeddings import FakeEmbedder

from engine.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    import ollama
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
HI: list[Any] = [{"role": "user", "content": "Hi"}]


def _ollama(served: list[Served], *replies: str, **kwargs: Any) -> tuple[ollama.Client, ScriptedBackend]:
    backend = ScriptedBackend.from_texts(*replies)
    served.append(serve(backend, **kwargs))
    return ollama.Client(host=served[-1].url.removesuffix("/v1"), timeout=30), backend


def test_tags_show_and_version(served: list[Served]) -> None:
    client, _ = _ollama(served, "x")
    assert [m.model for m in client.list().models] == ["script"]
    assert "completion" in (client.show("script").capabilities or [])
    assert httpx.get(f"{served[-1].url.removesuffix('/v1')}/api/version", timeout=10).json()["version"]
    with pytest.raises(ollama.ResponseError) as info:
        client.show("llama3:8b")
    assert info.value.status_code == 404 and "not found" in info.value.error


def test_chat_with_options(served: list[Served]) -> None:
    client, backend = _ollama(served, "Hello there.")
    reply = client.chat(
        model="script",
        messages=HI,
        stream=False,
        options={"temperature": 0.2, "num_predict": 7, "seed": 3, "top_k": 5, "stop": ["zz"]},
    )
    assert reply.message.content == "Hello there." and reply.done and reply.done_reason == "stop"
    sent = backend.requests[0]
    assert (sent.sampling.temperature, sent.sampling.seed, sent.sampling.top_k, sent.max_tokens) == (0.2, 3, 5, 7)
    assert sent.messages == ({"role": "user", "content": "Hi"},)  # the request is the prompt
    assert reply.eval_count is not None and reply.prompt_eval_count is not None


def test_chat_streams_ndjson(served: list[Served]) -> None:
    client, _ = _ollama(served, "Hello there, friend.")
    parts = list(client.chat(model="script", messages=HI, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Hello there, friend."
    assert parts[-1].done and not any(p.done for p in parts[:-1])


def test_chat_tool_calls_have_object_arguments(served: list[Served]) -> None:
    client, _ = _ollama(served, HERMES_CALL, "It is sunny.")
    reply = client.chat(model="script", messages=HI, tools=TOOLS, stream=False)
    calls = reply.message.tool_calls or []
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    history: list[Any] = [*HI, reply.message, {"role": "tool", "content": "sunny", "tool_name": "get_weather"}]
    assert client.chat(model="script", messages=history, tools=TOOLS).message.content == "It is sunny."


def test_format_json_and_a_schema(served: list[Served]) -> None:
    client, backend = _ollama(served, '{"city": "Paris"}', '{"n": 3}')
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert client.chat(model="script", messages=HI, format="json").message.content == '{"city": "Paris"}'
    assert client.generate(model="script", prompt="n?", format=schema).response == '{"n": 3}'
    assert backend.requests[0].schema == {"type": "object"} and backend.requests[1].schema == schema


def test_generate_templated_raw_and_streamed(served: list[Served]) -> None:
    client, backend = _ollama(served, "Paris.", " upon a time.", "Streamed reply.")
    assert client.generate(model="script", prompt="Capital of France?", system="Be brief.").response == "Paris."
    assert backend.requests[0].messages == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    )
    assert client.generate(model="script", prompt="Once", raw=True).response == " upon a time."
    assert backend.requests[1].prompt == "Once" and backend.requests[1].messages == ()
    parts = list(client.generate(model="script", prompt="go", stream=True))
    assert "".join(p.response or "" for p in parts) == "Streamed reply." and parts[-1].done


def test_embed(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("x")
    served.append(serve(backend, embedder=FakeEmbedder()))
    client = ollama.Client(host=served[-1].url.removesuffix("/v1"), timeout=30)
    reply = client.embed(model="fake-embed", input=["one", "two words"])
    assert len(reply.embeddings) == 2 and all(len(v) == 4 for v in reply.embeddings)


def test_errors_in_ollamas_shape(served: list[Served]) -> None:
    _ollama(served, "x")
    base = served[-1].url.removesuffix("/v1")
    reply = httpx.post(f"{base}/api/chat", json={"model": "m", "messages": "hi"}, timeout=10)
    assert reply.status_code == 400 and isinstance(reply.json()["error"], str)
    assert httpx.post(f"{base}/api/embed", json={"input": "x"}, timeout=10).status_code == 501
