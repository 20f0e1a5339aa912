"""`ember serve` with the official `openai` client on 127.0.0.1: chat, stream, reasoning, tools, JSON, stops, usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from desktop.serve.record import ApiHistory
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")

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


def _client(s: Served, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=s.url, api_key=key, max_retries=0, timeout=20)


def _scripted(served: list[Served], *replies: str | list[Any], **kwargs: Any) -> tuple[openai.OpenAI, ScriptedBackend]:
    backend = ScriptedBackend.from_texts(*replies)
    s = serve(backend, **kwargs)
    served.append(s)
    return _client(s), backend


HI: list[Any] = [{"role": "user", "content": "Hi"}]


def test_models_lists_the_served_model(served: list[Served]) -> None:
    client, _ = _scripted(served, "x")
    ids = [m.id for m in client.models.list()]
    assert ids == ["script"]


def test_a_chat_completion_answers_with_content_and_usage(served: list[Served]) -> None:
    client, backend = _scripted(served, ["Hello", " there."])
    reply = client.chat.completions.create(
        model="anything", messages=HI, temperature=0.5, top_p=0.9, seed=7, max_tokens=32
    )
    choice = reply.choices[0]
    assert choice.message.content == "Hello there."
    assert choice.finish_reason == "stop"
    assert reply.model == "script" and reply.object == "chat.completion"
    assert reply.usage is not None and reply.usage.completion_tokens == 2
    sent = backend.requests[0]
    assert sent.sampling.temperature == 0.5 and sent.sampling.top_p == 0.9 and sent.sampling.seed == 7
    assert sent.max_tokens == 32
    assert sent.messages[-1] == {"role": "user", "content": "Hi"}


def test_a_streamed_completion_ends_with_done_and_usage_when_asked(served: list[Served]) -> None:
    client, _ = _scripted(served, ["One", " two", " three."])
    chunks = list(
        client.chat.completions.create(model="m", messages=HI, stream=True, stream_options={"include_usage": True})
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One two three."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert len({c.id for c in chunks}) == 1


def test_no_usage_chunk_unless_asked(served: list[Served]) -> None:
    client, _ = _scripted(served, "Hi.")
    chunks = list(client.chat.completions.create(model="m", messages=HI, stream=True))
    assert all(c.usage is None for c in chunks) and all(c.choices for c in chunks)


def test_reasoning_goes_to_reasoning_content_never_content(served: list[Served]) -> None:
    client, _ = _scripted(
        served, ["<think>", "Let me think.", "</think>", "The answer is 4."], ["<think>", "Hmm.", "</think>", "Four."]
    )
    reply = client.chat.completions.create(model="m", messages=HI)
    message = reply.choices[0].message
    assert message.content == "The answer is 4."
    assert (message.model_extra or {}).get("reasoning_content") == "Let me think."
    chunks = list(client.chat.completions.create(model="m", messages=HI, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Four."
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == "Hmm."


def test_tool_markup_arrives_as_tool_calls_never_as_text(served: list[Served]) -> None:
    client, backend = _scripted(
        served, ["<tool_call>", '\n{"name": "get_weather", ', '"arguments": {"city": "Paris"}}', "\n</tool_call>"]
    )
    reply = client.chat.completions.create(model="m", messages=HI, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert not choice.message.content
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].type == "function"
    assert calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert calls[0].id.startswith("call_")
    assert backend.requests[0].tools is not None  # the template rendered the offered tools


def test_streamed_tool_calls_and_mistral_markup(served: list[Served]) -> None:
    client, _ = _scripted(
        served, ["Checking. ", "[TOOL_CALLS]", '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]']
    )
    chunks = list(client.chat.completions.create(model="m", messages=HI, tools=TOOLS, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    text = "".join(d.content or "" for d in deltas)
    assert "TOOL_CALLS" not in text and "get_weather" not in text
    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert [(c.index, c.function.name) for c in calls] == [(0, "get_weather")]  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments or "") == {"city": "Oslo"}  # type: ignore[union-attr]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_a_tool_result_goes_back_through_the_template(served: list[Served]) -> None:
    client, backend = _scripted(served, "It is sunny in Paris.")
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    reply = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert reply.choices[0].message.content == "It is sunny in Paris."
    sent = backend.requests[0].messages
    assert sent[1].get("tool_calls", [])[0]["function"]["arguments"] == {"city": "Paris"}  # an object for the template
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "get_weather"}


def test_a_call_to_a_tool_not_offered_is_stripped_not_shown(served: list[Served]) -> None:
    client, backend = _scripted(served, '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "Sorry.")
    reply = client.chat.completions.create(model="m", messages=HI, tools=TOOLS)
    assert reply.choices[0].message.content == ""  # no markup, no call
    assert not reply.choices[0].message.tool_calls
    assert len(backend.requests) == 1  # the request is the prompt: no recovery round re-prompts the model


def test_tool_choice_none_offers_no_tools(served: list[Served]) -> None:
    client, backend = _scripted(served, "Plain.")
    client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="none")
    assert backend.requests[0].tools is None


def test_json_schema_is_validated_with_a_bounded_retry(served: list[Served]) -> None:
    client, backend = _scripted(served, '{"name": "Ada"}', '{"name": "Ada", "age": 36}')
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    reply = client.chat.completions.create(
        model="m", messages=HI, response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}
    )
    assert json.loads(reply.choices[0].message.content or "") == {"name": "Ada", "age": 36}
    assert len(backend.requests) == 2 and backend.requests[0].schema == schema


def test_json_object_streams_the_value(served: list[Served]) -> None:
    client, _ = _scripted(served, ['{"ok": ', "true}"])
    chunks = list(
        client.chat.completions.create(model="m", messages=HI, stream=True, response_format={"type": "json_object"})
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(text) == {"ok": True}


def test_structured_exhaustion_is_a_server_error(served: list[Served]) -> None:
    client, _ = _scripted(served, "no", "still no", "never")
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="m", messages=HI, response_format={"type": "json_object"})
    assert info.value.code == "structured_output"


def test_stop_sequences_end_the_answer(served: list[Served]) -> None:
    client, _ = _scripted(served, ["Count: 1, 2", ", 3 ST", "OP 4, 5"], ["A", "B", "C"])
    reply = client.chat.completions.create(model="m", messages=HI, stop=["STOP"])
    assert reply.choices[0].message.content == "Count: 1, 2, 3 "
    assert reply.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model="m", messages=HI, stop="B", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "A"


def test_max_tokens_reports_length(served: list[Served]) -> None:
    client, _ = _scripted(served, ["a", "b", "c", "d"])
    reply = client.chat.completions.create(model="m", messages=HI, max_tokens=2)
    assert reply.choices[0].message.content == "ab" and reply.choices[0].finish_reason == "length"


def test_the_api_key_is_required_when_set(served: list[Served]) -> None:
    s = serve(ScriptedBackend.from_texts("Yes."), api_key="s3cret")
    served.append(s)
    with pytest.raises(openai.AuthenticationError):
        _client(s, "wrong").chat.completions.create(model="m", messages=HI)
    with pytest.raises(openai.AuthenticationError):
        _client(s, "wrong").models.list()
    assert _client(s, "s3cret").chat.completions.create(model="m", messages=HI).choices[0].message.content == "Yes."


def test_embeddings_are_refused_in_openai_shape(served: list[Served]) -> None:
    client, _ = _scripted(served, "x")
    with pytest.raises(openai.APIStatusError) as info:
        client.embeddings.create(model="m", input="hello")
    assert info.value.status_code == 501 and info.value.code == "embeddings_unavailable"


def test_a_context_overflow_is_a_400_with_openai_code(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("never", "never")  # each request takes a reply, even one refused
    backend.n_ctx = 8
    s = serve(backend)
    served.append(s)
    with pytest.raises(openai.BadRequestError) as info:
        _client(s).chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * 50}])
    assert info.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        list(
            _client(s).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "word " * 50}], stream=True
            )
        )


def test_requests_are_recorded_only_with_record(served: list[Served], tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    s = serve(
        ScriptedBackend.from_texts(["<think>", "Hm.", "</think>", "Blue."], "Green."),
        history=ApiHistory(lambda: HistoryStore(db)),
    )
    served.append(s)
    convo: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Sky colour?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Grass colour?"},
    ]
    _client(s).chat.completions.create(model="m", messages=convo[:2])
    _client(s).chat.completions.create(model="m", messages=convo)
    s.close()
    served.remove(s)
    store = HistoryStore(db)
    try:
        conversations = store.conversations()
        assert len(conversations) == 2
        latest = max(conversations, key=lambda c: c.id)
        path = store.path(latest.id)
        assert [(m.role, m.content) for m in path] == [
            ("user", "Sky colour?"),
            ("assistant", "Blue."),
            ("user", "Grass colour?"),
            ("assistant", "Green."),
        ]
        assert latest.settings.get("system") == "Be brief."
        first = store.path(min(conversations, key=lambda c: c.id).id)
        assert first[-1].thinking == "Hm." and first[-1].status == "complete"
    finally:
        store.close()
    plain = serve(ScriptedBackend.from_texts("x"))
    served.append(plain)
    assert plain.state.history is None  # the default: nothing is recorded
