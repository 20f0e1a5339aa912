"""The declared request models at their edges: wrong types, unknown fields, absurd sizes, nested junk
and bytes that are not text each get one bounded line and a 400 naming the field (OpenAI's shape on
`/v1`, Ollama's string on `/api`), and the server keeps serving."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serve_helpers import EchoBackend, Served, serve

from desktop.serve.errors import ApiError
from desktop.serve.ollama_wire import parse_ollama_chat
from desktop.serve.wire import NEUTRAL_SAMPLING, Defaults, parse_chat, parse_json

DEFAULTS = Defaults(NEUTRAL_SAMPLING, 64)
HI = [{"role": "user", "content": "hi"}]
DEEP: Any = "x"
for _ in range(200):
    DEEP = {"a": [DEEP]}


def _refusal(body: dict[str, Any], parse: Any = parse_chat) -> ApiError:
    raw = json.dumps(body).encode()
    started = time.perf_counter()
    with pytest.raises(ApiError) as caught:
        parse(parse_json(raw), DEFAULTS)
    assert time.perf_counter() - started < 1.0  # a refusal costs no more than a refusal
    error = caught.value
    assert error.status == 400 and "\n" not in error.message and len(error.message) < 200, error.message
    return error


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": HI, "temperature": True}, "temperature"),  # a boolean is no number
        ({"messages": HI, "top_k": 2.5}, "top_k"),
        ({"messages": HI, "n": "2"}, "n"),
        ({"messages": HI, "stop": ["ok", 5]}, "stop[1]"),
        ({"messages": HI, "stop": ["x" * 10_000]}, "stop[0]"),
        ({"messages": HI, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
        ({"messages": HI, "ember": {"model_defaults": 1}}, "ember.model_defaults"),
        ({"messages": [{"role": ["user"], "content": "hi"}]}, "messages[0].role"),  # was a 500
        ({"messages": [{"role": {"deep": DEEP}, "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": DEEP}]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": DEEP}]}, "messages[0].content"),
        ({"messages": [HI[0], 7]}, "messages[1]"),
        ({"messages": [{"role": "user", "content": ["hi", 7]}]}, "messages[0].content[0]"),
        ({"messages": [1] * 1_000_000}, "messages[0]"),  # the first bad item ends it: one error, not 10^6
        ({"messages": HI, "stop": [5] * 1_000_000}, "stop[0]"),  # was 11 s and 1 GB before fail_fast
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 5000}]}, "messages[0].content"),
        ({"messages": HI, "tools": [{"type": "function", "function": {"name": "f" * 65}}]}, "tools[0].function.name"),
        ({"messages": HI, "tools": [{"type": "function", "function": {"name": "f"}}] * 129}, "tools"),
        ({"messages": HI, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}, None),
        (
            {"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
            "messages[0].tool_calls[0].function.name",
        ),
        ({"messages": HI, "response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}, None),
    ],
)
def test_wrong_types_and_absurd_sizes_are_one_line_naming_the_field(body: dict[str, Any], param: str | None) -> None:
    error = _refusal(body)
    assert error.param == (param or error.param) and error.param  # every refusal names a field
    assert error.message.startswith(f"'{error.param}'")
    if param is not None:
        assert error.param == param


def test_the_input_is_quoted_short_whatever_its_size() -> None:
    error = _refusal({"messages": HI, "temperature": "hot" * 100_000})
    assert error.message.startswith("'temperature' must be a number, got \"hothot") and error.message.endswith("…")


def test_unknown_fields_are_ignored_at_every_level() -> None:
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {}}], "x": DEEP}],
        "tools": [{"type": "function", "function": {"name": "f", "strict": True}, "extra": 1}],
        "stream_options": {"include_usage": True, "other": 1},
        "metadata": DEEP,
        "user": "someone",
    }
    call = parse_chat(parse_json(json.dumps(body).encode()), DEFAULTS)
    assert call.messages == ({"role": "user", "content": "hi"},) and call.include_usage
    empty = {"type": "object", "properties": {}}
    assert call.tools == ({"type": "function", "function": {"name": "f", "parameters": empty}},)


def test_ollama_options_are_named_where_they_stand() -> None:
    error = _refusal({"messages": HI, "options": {"temperature": "hot"}}, parse_ollama_chat)
    assert error.param == "options.temperature"
    error = _refusal({"messages": HI, "options": {"num_predict": 0}}, parse_ollama_chat)
    assert error.param == "options.num_predict"
    error = _refusal({"messages": HI, "options": ["num_predict"]}, parse_ollama_chat)
    assert error.param == "options"


@pytest.fixture
def served() -> Iterator[Served]:
    s = serve(EchoBackend())
    yield s
    s.close()


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("v1/chat/completions", json.dumps({"messages": [{"role": ["user"], "content": "hi"}]}).encode()),
        ("v1/chat/completions", b'{"messages": [{"role": "user", "content": "caf\xe9"}]}'),
        ("api/chat", json.dumps({"model": "m", "messages": HI, "options": {"top_k": "many"}}).encode()),
        ("api/chat", b'{"model": "m", "messages": [{"role": "user", "content": "\xff"}]}'),
        ("api/generate", json.dumps({"model": "m", "prompt": ["hi"]}).encode()),
    ],
    ids=["openai-type", "openai-not-utf8", "ollama-type", "ollama-not-utf8", "ollama-generate-type"],
)
def test_over_http_each_is_a_400_in_the_routes_own_shape(served: Served, path: str, raw: bytes) -> None:
    base = served.url.removesuffix("/v1")
    reply = httpx.post(f"{base}/{path}", content=raw, headers={"content-type": "application/json"}, timeout=30)
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    message = error if path.startswith("api/") else error["message"]
    assert isinstance(message, str) and "\n" not in message and len(message) < 200
    chat = {"model": "m", "messages": [{"role": "user", "content": "still here"}], "max_tokens": 3}
    assert httpx.post(f"{served.url}/chat/completions", json=chat, timeout=30).status_code == 200
