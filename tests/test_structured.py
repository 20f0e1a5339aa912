"""Structured replies: parse + validate, bounded retry with feedback, grammar, audit, titles."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
from engine.trim import trim_messages

from engine.backend import CancelToken, Message, Sampling
from engine.errors import ConfigError, ScriptExhaustedError, StructuredOutputError
from engine.events import StructuredRetry
from engine.history import TITLE_MAX_CHARS, title_from_text
from engine.scripted import ScriptedBackend
from engine.structured import (
    FEEDBACK,
    MAX_STRUCTURED_RETRIES,
    MemoryAudit,
    StructuredRunner,
    grammar_for,
    load_schema,
    run_structured,
)
from engine.titles import make_title

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# Valid JSON Schema that llama-cpp-python's converter rejects ("Unrecognized schema").
UNCONVERTIBLE = {"not": {"type": "string"}}
USER: list[Message] = [{"role": "user", "content": "What is the capital of France?"}]


class GrammarBackend(ScriptedBackend):
    """A scripted backend that claims grammar support, with a configurable grammar check."""

    supports_grammar = True

    def __init__(self, *replies: str, grammar_problem: str | None = None) -> None:
        super().__init__([[r] for r in replies])
        self.grammar_problem = grammar_problem
        self.checked: list[str] = []

    def check_grammar(self, gbnf: str) -> str | None:
        self.checked.append(gbnf)
        return self.grammar_problem


def _feedback_messages(messages: tuple[Message, ...]) -> list[Message]:
    return [m for m in messages if "could not be parsed" in str(m["content"])]


def _words(text: str) -> int:
    return len(text.split())


# -- retry with feedback ---------------------------------------------------------------------


def test_a_malformed_reply_then_a_valid_one() -> None:
    backend = ScriptedBackend.from_texts('{"city": Paris}', '{"city": "Paris"}')
    retries: list[StructuredRetry] = []
    value = run_structured(backend, USER, CITY, on_event=retries.append)
    assert value == {"city": "Paris"}
    second = backend.requests[1].messages
    assert len(_feedback_messages(second)) == 1
    error = retries[0].error
    assert second[-2:] == (
        {"role": "assistant", "content": '{"city": Paris}'},
        {"role": "user", "content": FEEDBACK.format(error=error)},
    )
    assert second[-1]["content"] == (
        f"Your previous reply could not be parsed: {error}. "
        "Reply again with ONLY valid JSON matching the required schema."
    )
    assert retries == [StructuredRetry(2, error)]
    assert error.startswith("invalid JSON")


def test_a_valid_first_reply_sends_no_feedback() -> None:
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    audit = MemoryAudit()
    assert run_structured(backend, USER, CITY, audit=audit) == {"city": "Paris"}
    assert len(backend.requests) == 1
    assert not _feedback_messages(backend.requests[0].messages)
    assert audit.calls == ["started", "completed"]


def test_the_schema_is_stated_in_the_single_system_message() -> None:
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    run_structured(backend, [{"role": "system", "content": "Be brief."}, *USER], CITY)
    messages = backend.requests[0].messages
    assert [m["role"] for m in messages] == ["system", "user"]
    assert str(messages[0]["content"]).startswith("Be brief.")
    assert '"required": ["city"]' in messages[0]["content"]


def test_three_failures_raise_the_last_error_not_the_first() -> None:
    backend = ScriptedBackend.from_texts("not json", '{"city": 5}', '{"town": "Paris"}')
    retries: list[StructuredRetry] = []
    with pytest.raises(StructuredOutputError) as info:
        run_structured(backend, USER, CITY, on_event=retries.append)
    assert info.value.last_error == "'city' is a required property" == str(info.value)
    assert len(backend.requests) == 1 + MAX_STRUCTURED_RETRIES == 3
    assert [r.attempt for r in retries] == [2, 3]
    assert retries[0].error.startswith("invalid JSON")
    assert retries[1].error == "5 is not of type 'string' at $.city"
    # Each retry carries every earlier failure and its own feedback, in order.
    assert len(_feedback_messages(backend.requests[2].messages)) == 2


def test_exactly_one_completion_on_retry_then_success() -> None:
    audit = MemoryAudit()
    backend = ScriptedBackend.from_texts("", '{"city": 1}', '{"city": "Paris"}')
    assert run_structured(backend, USER, CITY, audit=audit) == {"city": "Paris"}
    assert audit.calls == ["started", "completed"]


def test_no_completion_on_exhaustion() -> None:
    audit = MemoryAudit()
    backend = ScriptedBackend.from_texts("a", "b", "c")
    with pytest.raises(StructuredOutputError):
        run_structured(backend, USER, CITY, audit=audit)
    assert audit.calls == ["started"]


def test_a_backend_error_propagates_without_completion() -> None:
    audit = MemoryAudit()
    backend = ScriptedBackend.from_texts("nope")  # the retry finds the script exhausted
    with pytest.raises(ScriptExhaustedError):
        run_structured(backend, USER, CITY, audit=audit)
    assert audit.calls == ["started"]


def test_a_bad_schema_is_a_config_error_and_records_nothing() -> None:
    audit = MemoryAudit()
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        run_structured(backend, USER, {"type": "frobnicate"}, audit=audit)
    assert audit.calls == []
    assert backend.requests == []


def test_a_stopped_run_does_not_retry() -> None:
    cancel = CancelToken()
    cancel.cancel()
    backend = ScriptedBackend.from_texts("{", '{"city": "Paris"}')
    with pytest.raises(StructuredOutputError, match="stopped"):
        run_structured(backend, USER, CITY, cancel=cancel)
    assert len(backend.requests) == 1


def test_a_reply_cut_off_at_the_limit_says_so() -> None:
    backend = ScriptedBackend.from_texts(['{"city": ', '"Par', 'is"}'], '{"city": "Paris"}')
    retries: list[StructuredRetry] = []
    run_structured(backend, USER, CITY, max_tokens=2, on_event=retries.append)
    assert retries[0].error.endswith("the reply was cut off at the length limit")


# -- the guardrail and parsing -------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        ["<think>France… Paris.</think>", '{"city": "Paris"}'],
        ["<|tool_call_start|>", "[lookup(q='France')]", "<|tool_call_end|>", '{"city": "Paris"}'],
        [{"text": "<|tool_call_start|>", "special": True}, "[x()]", {"text": "<|tool_call_end|>", "special": True},
         '{"city":', ' "Paris"}', {"text": "<|im_end|>", "special": True}],
        ['```json\n{"city": "Paris"}\n```'],
    ],
    ids=["thinking", "spelled-scaffolding", "special-scaffolding", "code-fence"],
)
def test_scaffolding_and_thinking_are_removed_before_parsing(reply: list[Any]) -> None:
    backend = ScriptedBackend.from_texts(reply)
    assert run_structured(backend, USER, CITY) == {"city": "Paris"}
    assert len(backend.requests) == 1


def test_the_failed_reply_fed_back_is_the_visible_text() -> None:
    backend = ScriptedBackend.from_texts(["<think>hmm</think>", "Paris", "<|tool_call|>"], '{"city": "Paris"}')
    run_structured(backend, USER, CITY)
    assert backend.requests[1].messages[-2] == {"role": "assistant", "content": "Paris"}


@pytest.mark.parametrize("reply", ["NaN", 'The answer: {"city": "Paris"}', "[1, 2"])
def test_not_quite_json_is_refused(reply: str) -> None:
    with pytest.raises(StructuredOutputError, match="invalid JSON"):
        run_structured(ScriptedBackend.from_texts(reply, reply, reply), USER, True)


# -- trimming ------------------------------------------------------------------------------


def _long_conversation() -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "You are Ember."}]
    for i in range(5):
        messages += [{"role": "user", "content": f"question {i} " * 20},
                     {"role": "assistant", "content": f"answer {i} " * 20}]
    return [*messages, *USER]


def test_trimming_keeps_the_system_message_and_drops_the_oldest_turns() -> None:
    messages = _long_conversation()
    trimmed = trim_messages(messages, 110, _words)
    assert trimmed[0] == messages[0]
    assert trimmed[1:] == messages[-3:]  # the last whole exchange, then the question
    assert trim_messages(messages, 10_000, _words) == messages


def test_trimming_never_drops_the_newest_turn() -> None:
    messages = _long_conversation()
    assert trim_messages(messages, 1, _words) == [messages[0], messages[-1]]
    assert trim_messages(USER, 0, _words) == USER


def test_retries_are_never_trimmed_so_the_feedback_reaches_the_model() -> None:
    backend = ScriptedBackend.from_texts("Paris!", '{"city": "Paris"}')
    value = run_structured(backend, _long_conversation(), CITY, trim=1, count_tokens=_words)
    assert value == {"city": "Paris"}
    first, second = (r.messages for r in backend.requests)
    assert [m["role"] for m in first] == ["system", "user"]  # the budget cut every earlier turn
    assert second[:2] == first  # the retry grows from what the model saw...
    assert second[2]["content"] == "Paris!"  # ...with its failed reply...
    assert len(_feedback_messages(second)) == 1
    assert second[-1] == _feedback_messages(second)[0]


# -- grammar -------------------------------------------------------------------------------


def test_a_grammar_backend_decodes_under_the_schema_grammar() -> None:
    backend = GrammarBackend('{"city": "Paris"}')
    result = StructuredRunner(backend).run(USER, CITY)
    grammar = backend.requests[0].grammar
    assert grammar is not None
    assert "root ::=" in grammar
    assert "city" in grammar
    assert backend.checked == [grammar]
    assert result.grammar


def test_an_unconvertible_schema_logs_why_and_decodes_unconstrained(caplog: pytest.LogCaptureFixture) -> None:
    backend = GrammarBackend("42")
    with caplog.at_level(logging.WARNING, logger="engine.structured"):
        assert run_structured(backend, USER, UNCONVERTIBLE) == 42
    assert backend.requests[0].grammar is None
    assert backend.checked == []
    assert "does not convert to a grammar (AssertionError: Unrecognized schema" in caplog.text


def test_a_grammar_llama_cpp_rejects_is_never_used(caplog: pytest.LogCaptureFixture) -> None:
    backend = GrammarBackend('{"city": "Paris"}', grammar_problem="the grammar does not parse")
    with caplog.at_level(logging.WARNING, logger="engine.structured"):
        result = StructuredRunner(backend).run(USER, CITY)
    assert backend.requests[0].grammar is None
    assert not result.grammar
    assert "grammar is unusable (the grammar does not parse)" in caplog.text


def test_backends_without_grammar_never_import_the_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", None)  # any import now fails
    assert grammar_for(ScriptedBackend.from_texts(), CITY) is None
    assert grammar_for(GrammarBackend(), CITY) is None  # converter missing: logged fallback, no crash


@pytest.mark.slow
def test_the_real_model_is_valid_on_the_first_attempt_under_the_grammar(smollm: Any) -> None:
    retries: list[StructuredRetry] = []
    result = StructuredRunner(smollm, on_event=retries.append).run(
        USER, CITY, sampling=Sampling.greedy(), max_tokens=48)
    assert result.grammar
    assert result.attempts == 1
    assert retries == []
    assert isinstance(result.value["city"], str)
    assert result.value["city"].strip()


# -- schema files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read schema"), ("{nope", "is not valid JSON"), ('"a string"', "not a valid JSON Schema"),
     ('{"type": 5}', "not a valid JSON Schema")],
)
def test_bad_schema_files_are_one_line_config_errors(tmp_path: Any, content: str | None, message: str) -> None:
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_schema(path)
    assert "\n" not in str(info.value)


# -- titles --------------------------------------------------------------------------------


def test_a_title_comes_from_the_model_greedily() -> None:
    backend = ScriptedBackend.from_texts('{"title": "Sourdough at home."}')
    assert make_title(backend, "How do I bake sourdough?", "Start with a starter.") == "Sourdough at home"
    request = backend.requests[0]
    assert request.sampling == Sampling.greedy()
    assert request.max_tokens == 32


def test_a_failed_title_falls_back_to_the_first_words() -> None:
    question = "How do I bake a really good sourdough bread at home with a starter I made myself last week?"
    backend = ScriptedBackend.from_texts("nope", '{"title": ""}', '{"name": "x"}')
    title = make_title(backend, question, "Start with a starter.")
    assert title == title_from_text(question) == "How do I bake a really…"


@pytest.mark.slow
def test_the_real_model_writes_a_short_title(smollm: Any) -> None:
    title = make_title(smollm, "How do I bake sourdough bread at home?", "Start with an active starter.")
    assert 0 < len(title) <= TITLE_MAX_CHARS
    assert "\n" not in title
