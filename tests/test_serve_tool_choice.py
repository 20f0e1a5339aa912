"""`tool_choice` honoured by `ember serve`: "required" and a named function force a call (a grammar of the
family's markup where the backend takes one, else one bounded retry, else a clear 500); "none" offers nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from desktop.serve.forced_calls import RETRY_LINE
from engine.backends.base import Capabilities
from engine.backends.scripted import ScriptedBackend
from engine.turns.tool_grammar import call_grammar

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
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
HI: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


class GrammarScripted(ScriptedBackend):
    """A scripted model that takes grammars (as llama.cpp does) and writes Hermes calls."""

    capabilities = Capabilities(device="Scripted", grammar=True, tool_markup="hermes")

    def check_grammar(self, gbnf: str) -> str | None:
        return None


def _named(reply: Any) -> list[tuple[str, str]]:
    """(name, arguments) of each function call in a completion's message."""
    from openai.types.chat import ChatCompletionMessageToolCall  # here, not at collection (#53)

    calls = reply.choices[0].message.tool_calls or []
    return [(c.function.name, c.function.arguments) for c in calls if isinstance(c, ChatCompletionMessageToolCall)]


def _client(served: list[Served], backend: Any, timeout: float = 20, **kwargs: Any) -> openai.OpenAI:
    s = serve(backend, **kwargs)
    served.append(s)
    return openai.OpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=timeout)


def test_required_answered_in_prose_gets_one_retry_told_to_call(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("It is sunny, I think.", CALL)
    reply = _client(served, backend).chat.completions.create(
        model="m", messages=HI, tools=TOOLS, tool_choice="required"
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None  # the prose never shows
    assert _named(reply) == [("get_weather", '{"city": "Paris"}')]
    assert len(backend.requests) == 2
    assert backend.requests[0].grammar is None  # no grammar capability: decoded freely, checked after
    assert RETRY_LINE in str(backend.requests[1].messages[0].get("content"))
    assert reply.usage is not None and reply.usage.completion_tokens == 2  # both attempts are counted


def test_required_with_a_call_at_once_is_one_request(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CALL)
    reply = _client(served, backend).chat.completions.create(
        model="m", messages=HI, tools=TOOLS, tool_choice="required"
    )
    assert reply.choices[0].message.tool_calls and len(backend.requests) == 1
    assert backend.requests[0].messages == ({"role": "user", "content": "Weather in Paris?"},)  # no added line


def test_required_never_answered_is_a_clear_error_streamed_or_not(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("Sunny.", "Still sunny.", "Sunny.", "Still sunny.")
    client = _client(served, backend)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="required")
    assert "without calling a tool" in info.value.message and "tool_choice" in info.value.message
    with pytest.raises(openai.APIError) as streamed:
        for _ in client.chat.completions.create(
            model="m", messages=HI, tools=TOOLS, tool_choice="required", stream=True
        ):
            pass
    assert "without calling a tool" in streamed.value.message
    assert len(backend.requests) == 4  # two attempts each, no more


def test_a_named_function_is_the_only_tool_offered_and_must_be_called(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(
        "I would rather chat.", '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    )
    reply = _client(served, backend).chat.completions.create(
        model="m", messages=HI, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}}
    )
    assert _named(reply) == [("add", '{"a": 2, "b": 3}')]
    assert [t["function"]["name"] for t in backend.requests[0].tools or ()] == ["add"]
    assert "without calling add" not in str(reply)


def test_with_a_grammar_backend_the_call_is_forced_from_the_first_token(served: list[Served]) -> None:
    backend = GrammarScripted.from_texts(CALL)
    chunks = list(
        _client(served, backend).chat.completions.create(
            model="m", messages=HI, tools=TOOLS, tool_choice="required", stream=True
        )
    )
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls if c.function] == ["get_weather"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    grammar = backend.requests[0].grammar or ""
    assert grammar.startswith("root ::= think? tool-call\n")  # exactly one call: parallel_tool_calls not asked
    assert '"<tool_call>\\n" call "\\n</tool_call>"' in grammar
    assert '\\"get_weather\\"' in grammar and '\\"add\\"' in grammar


def test_parallel_tool_calls_lets_the_grammar_take_several(served: list[Served]) -> None:
    backend = GrammarScripted.from_texts(CALL)
    _client(served, backend).chat.completions.create(
        model="m", messages=HI, tools=TOOLS, tool_choice="required", parallel_tool_calls=True
    )
    assert '("\\n" tool-call){0,3}' in (backend.requests[0].grammar or "")


def test_a_named_function_grammar_names_only_it() -> None:
    grammar = call_grammar(GrammarScripted.from_texts("x"), TOOLS[1:], max_calls=1) or ""
    assert '\\"add\\"' in grammar and "get_weather" not in grammar


def test_no_grammar_without_the_capability_or_a_known_markup() -> None:
    assert call_grammar(ScriptedBackend.from_texts("x"), TOOLS) is None

    class Other(GrammarScripted):
        capabilities = Capabilities(device="Scripted", grammar=True, tool_markup="")

    assert call_grammar(Other.from_texts("x"), TOOLS) is None


def test_required_without_tools_is_a_400(served: list[Served]) -> None:
    client = _client(served, ScriptedBackend.from_texts("x"))
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=HI, tool_choice="required")
    assert info.value.param == "tool_choice"  # pyright: ignore[reportAttributeAccessIssue]


@pytest.mark.slow
@pytest.mark.timeout(600)  # real-model replies under a grammar; minutes on a loaded shared machine
def test_the_built_in_model_is_made_to_call(served: list[Served], smollm_path: Path) -> None:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=2048)
    assert backend.capabilities.tool_markup == "hermes"  # its template ignores tools: it is told Hermes markup
    client = _client(served, backend, timeout=280, max_tokens=40, context_size=2048)
    reply = client.chat.completions.create(
        model="m", messages=HI, tools=TOOLS, tool_choice="required", temperature=0, max_tokens=40
    )
    calls = _named(reply)
    assert len(calls) == 1 and calls[0][0] in ("get_weather", "add")
    named = client.chat.completions.create(
        model="m",
        messages=HI,
        tools=TOOLS,
        temperature=0,
        max_tokens=40,
        tool_choice={"type": "function", "function": {"name": "add"}},
    )
    calls = _named(named)
    assert len(calls) == 1 and calls[0][0] == "add"
    assert sorted(json.loads(calls[0][1])) == ["a", "b"]  # the schema held
