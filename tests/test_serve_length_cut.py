"""A reply cut by `max_tokens` is answered as OpenAI answers it: `finish_reason: "length"` with
what was generated, never a 500 and never a retry (issue #40). A call cut mid-way is a
`tool_calls` entry whose arguments are the text written so far (what OpenAI returns, and
what LangChain's `ChatOpenAI` turns into an `invalid_tool_calls` entry); a reply cut
before naming a tool is its text so far."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from engine.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    import ollama
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")

PARAMETERS = {
    "properties": {
        "city": {"description": "city name", "type": "string"},
        "country": {"type": "string"},
        "population_millions": {"type": "number"},
    },
    "required": ["city", "country", "population_millions"],
    "type": "object",
}
CITY: list[Any] = [
    {"type": "function", "function": {"name": "City", "description": "Facts about a city.", "parameters": PARAMETERS}}
]
# What LangChain's with_structured_output(City, method="function_calling") sends (interop review 1.3).
LANGCHAIN = {
    "model": "default",
    "temperature": 0,
    "max_tokens": 4,
    "parallel_tool_calls": False,
    "messages": [{"role": "user", "content": "Give facts about Paris."}],
    "tool_choice": {"type": "function", "function": {"name": "City"}},
    "tools": CITY,
}
CUT_CALL = [
    '<tool_call>\n{"name": "City", ',
    '"arguments": {"city": ',
    '"Paris", ',
    '"coun',
    'try": "France", ',
    '"population_millions": 2.1}}\n</tool_call>',
]


def _post(served: list[Served], backend: ScriptedBackend, body: dict[str, Any]) -> httpx.Response:
    s = serve(backend)
    served.append(s)
    return httpx.post(f"{s.url}/chat/completions", json=body, timeout=20)


def _choice(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


def test_langchains_forced_call_cut_by_max_tokens_is_a_partial_call(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CUT_CALL, "never asked")
    choice = _choice(_post(served, backend, LANGCHAIN))
    assert choice["finish_reason"] == "length"
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "City", "arguments": '{"city": "Paris", "coun'}
    assert len(backend.requests) == 1  # no retry spent on a length cut


def test_the_cut_call_streams_with_finish_reason_length(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CUT_CALL)
    response = _post(served, backend, {**LANGCHAIN, "stream": True})
    assert response.status_code == 200
    chunks = [
        json.loads(line.removeprefix("data: ")) for line in response.text.splitlines() if line.startswith("data: {")
    ]
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    calls = [tc["function"] for c in choices for tc in c["delta"].get("tool_calls") or []]
    assert calls == [{"name": "City", "arguments": '{"city": "Paris", "coun'}]
    assert [c["finish_reason"] for c in choices if c["finish_reason"]] == ["length"]
    assert len(backend.requests) == 1


def test_a_named_function_cut_before_its_name_is_that_call_with_no_arguments_yet(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CUT_CALL)
    choice = _choice(_post(served, backend, {**LANGCHAIN, "max_tokens": 1}))
    assert choice["finish_reason"] == "length"
    assert [c["function"] for c in choice["message"]["tool_calls"]] == [{"name": "City", "arguments": ""}]
    assert len(backend.requests) == 1


def test_required_cut_before_any_call_answers_the_text_so_far(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(["Let", " me", " think", " about", " it."])
    choice = _choice(_post(served, backend, {**LANGCHAIN, "tool_choice": "required", "max_tokens": 3}))
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "Let me think" and "tool_calls" not in choice["message"]
    assert len(backend.requests) == 1


def test_an_offered_call_cut_by_max_tokens_is_partial_too_without_a_recovery_round(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CUT_CALL)
    body = {**LANGCHAIN, "tool_choice": "auto"}
    choice = _choice(_post(served, backend, body))
    assert choice["finish_reason"] == "length"
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "coun'
    assert len(backend.requests) == 1


def test_a_forced_call_the_model_really_refused_is_still_retried_then_a_500(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("Paris is nice.", "Still nice.")
    response = _post(served, backend, {**LANGCHAIN, "max_tokens": 48})
    assert response.status_code == 500 and "without calling City" in response.text
    assert len(backend.requests) == 2


@pytest.mark.slow
@pytest.mark.timeout(600)  # a real model under a grammar; minutes on a loaded shared machine
def test_langchains_request_on_the_built_in_model_cut_short_is_a_partial_call(
    served: list[Served], smollm_path: Path
) -> None:
    from engine.llama.llama import LlamaBackend

    s = serve(LlamaBackend(smollm_path, n_ctx=2048), context_size=2048)
    served.append(s)
    # Greedy, the whole call takes 46 tokens; 30 cut it inside the arguments.
    response = httpx.post(f"{s.url}/chat/completions", json={**LANGCHAIN, "max_tokens": 30}, timeout=280)
    choice = _choice(response)
    assert choice["finish_reason"] == "length"
    [call] = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "City" and call["function"]["arguments"].startswith('{"city": ')
    assert response.json()["usage"]["completion_tokens"] == 30  # one attempt: no retry spent


def _ollama_cut(served: list[Served], *, stream: bool) -> tuple[list[Any], str | None, ScriptedBackend]:
    backend = ScriptedBackend.from_texts(CUT_CALL)
    s = serve(backend)
    served.append(s)
    client = ollama.Client(host=s.url.removesuffix("/v1"), timeout=20)
    messages: list[Any] = [{"role": "user", "content": "Give facts about Paris."}]
    if not stream:
        reply = client.chat(model="default", messages=messages, tools=CITY, options={"num_predict": 4})
        return list(reply.message.tool_calls or []), reply.done_reason, backend
    parts = list(client.chat(model="default", messages=messages, tools=CITY, options={"num_predict": 4}, stream=True))
    return [c for p in parts for c in p.message.tool_calls or []], parts[-1].done_reason, backend


@pytest.mark.parametrize("stream", [False, True])
def test_ollamas_cut_call_keeps_the_fields_it_finished_and_says_length(served: list[Served], stream: bool) -> None:
    """Ollama's arguments are an object (its client refuses text), so the cut call carries the
    fields written in full; `done_reason: "length"` says it is cut, as OpenAI's finish_reason does."""
    calls, done_reason, backend = _ollama_cut(served, stream=stream)
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("City", {"city": "Paris"})]
    assert done_reason == "length"
    assert len(backend.requests) == 1
