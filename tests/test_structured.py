"""Structured turns: parse + validate, bounded retry with feedback, grammar, events, titles."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from engine.backends.base import Capabilities, Message, Sampling, Schema, make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.errors import ConfigError, ScriptExhaustedError, StructuredOutputError
from engine.events import Event, StructuredRetry, StructuredValue, TurnDone, TurnError, TurnErrorKind
from engine.history.store import TITLE_MAX_CHARS, title_from_text
from engine.turns.runner import TurnRunner
from engine.turns.structured import FEEDBACK, MAX_STRUCTURED_RETRIES, grammar_for, load_schema, run_structured
from engine.turns.titles import title_from, title_request

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# Valid JSON Schema that llama-cpp-python's converter rejects ("Unrecognized schema").
UNCONVERTIBLE = {"not": {"type": "string"}}
USER: list[Message] = [{"role": "user", "content": "What is the capital of France?"}]


class GrammarBackend(ScriptedBackend):
    """A scripted backend that claims grammar support, with a configurable grammar check."""

    capabilities = Capabilities(grammar=True)

    def __init__(self, *replies: str, grammar_problem: str | None = None) -> None:
        super().__init__([[r] for r in replies])
        self.grammar_problem = grammar_problem
        self.checked: list[str] = []

    def check_grammar(self, gbnf: str) -> str | None:
        self.checked.append(gbnf)
        return self.grammar_problem


def _feedback_messages(messages: tuple[Message, ...]) -> list[Message]:
    return [m for m in messages if "could not be parsed" in str(m["content"])]


def turn(backend: ScriptedBackend, schema: Schema = CITY, **kwargs: Any) -> list[Event]:
    """The events of one structured turn, as every front end sees them."""
    return list(TurnRunner(backend).run(make_request(USER, schema=schema, **kwargs)))


# -- retry with feedback ---------------------------------------------------------------------


def test_a_malformed_reply_then_a_valid_one() -> None:
    backend = ScriptedBackend.from_texts('{"city": Paris}', '{"city": "Paris"}')
    retries: list[StructuredRetry] = []
    value = run_structured(backend, USER, CITY, on_retry=retries.append)
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
    events = turn(backend)
    assert events[0] == StructuredValue({"city": "Paris"})
    assert isinstance(events[1], TurnDone) and len(events) == 2
    assert len(backend.requests) == 1
    assert not _feedback_messages(backend.requests[0].messages)


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
        run_structured(backend, USER, CITY, on_retry=retries.append)
    assert info.value.last_error == "'city' is a required property" == str(info.value)
    assert len(backend.requests) == 1 + MAX_STRUCTURED_RETRIES == 3
    assert [r.attempt for r in retries] == [2, 3]
    assert retries[0].error.startswith("invalid JSON")
    assert retries[1].error == "5 is not of type 'string' at $.city"
    # Each retry carries every earlier failure and its own feedback, in order.
    assert len(_feedback_messages(backend.requests[2].messages)) == 2


def test_retries_then_success_are_events_of_one_turn() -> None:
    backend = ScriptedBackend.from_texts("", '{"city": 1}', '{"city": "Paris"}')
    events = turn(backend)
    assert [type(e) for e in events] == [StructuredRetry, StructuredRetry, StructuredValue, TurnDone]
    assert events[2] == StructuredValue({"city": "Paris"})
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.attempts == 3


def test_exhaustion_ends_the_turn_with_the_last_error_and_no_value() -> None:
    events = turn(ScriptedBackend.from_texts("a", "b", '{"town": 1}'))
    assert not any(isinstance(e, StructuredValue) for e in events)
    end = events[-1]
    assert isinstance(end, TurnError)
    assert (end.kind, end.message) == (TurnErrorKind.STRUCTURED_OUTPUT, "'city' is a required property")


def test_a_backend_error_propagates_without_a_value() -> None:
    backend = ScriptedBackend.from_texts("nope")  # the retry finds the script exhausted
    with pytest.raises(ScriptExhaustedError):
        run_structured(backend, USER, CITY)
    events = turn(ScriptedBackend.from_texts("nope"))
    assert isinstance(events[-1], TurnError) and events[-1].kind is TurnErrorKind.SCRIPT


def test_a_bad_schema_is_a_config_error_before_any_model_call() -> None:
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        run_structured(backend, USER, {"type": "frobnicate"})
    assert backend.requests == []
    events = turn(backend, {"type": "frobnicate"})
    assert isinstance(events[-1], TurnError) and events[-1].kind is TurnErrorKind.CONFIG


def test_a_stopped_run_does_not_retry() -> None:
    cancel = CancelToken()
    cancel.cancel()
    backend = ScriptedBackend.from_texts("{", '{"city": "Paris"}')
    with pytest.raises(StructuredOutputError, match="stopped"):
        run_structured(backend, USER, CITY, cancel=cancel)
    assert len(backend.requests) == 1
    events = list(TurnRunner(ScriptedBackend.from_texts("{")).run(make_request(USER, schema=CITY), cancel))
    assert len(events) == 1 and isinstance(events[0], TurnDone)  # ends stopped, with no value
    assert events[0].stats.finish_reason == "cancelled"


def test_a_reply_cut_off_at_the_limit_says_so() -> None:
    backend = ScriptedBackend.from_texts(['{"city": ', '"Par', 'is"}'], '{"city": "Paris"}')
    retries: list[StructuredRetry] = []
    run_structured(backend, USER, CITY, max_tokens=2, on_retry=retries.append)
    assert retries[0].error.endswith("the reply was cut off at the length limit")


# -- the guardrail and parsing -------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        ["<think>France… Paris.</think>", '{"city": "Paris"}'],
        ["<|tool_call_start|>", "[lookup(q='France')]", "<|tool_call_end|>", '{"city": "Paris"}'],
        [
            {"text": "<|tool_call_start|>", "special": True},
            "[x()]",
            {"text": "<|tool_call_end|>", "special": True},
            '{"city":',
            ' "Paris"}',
            {"text": "<|im_end|>", "special": True},
        ],
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


# -- grammar -------------------------------------------------------------------------------


def test_a_grammar_backend_decodes_under_the_schema_grammar() -> None:
    backend = GrammarBackend('{"city": "Paris"}')
    assert run_structured(backend, USER, CITY) == {"city": "Paris"}
    grammar = backend.requests[0].grammar
    assert grammar is not None
    assert "root ::=" in grammar
    assert "city" in grammar
    assert backend.checked == [grammar]


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
        assert run_structured(backend, USER, CITY) == {"city": "Paris"}
    assert backend.requests[0].grammar is None
    assert "grammar is unusable (the grammar does not parse)" in caplog.text


def test_backends_without_grammar_never_import_the_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", None)  # any import now fails
    assert grammar_for(ScriptedBackend.from_texts(), CITY) is None
    assert grammar_for(GrammarBackend(), CITY) is None  # converter missing: logged fallback, no crash


@pytest.mark.slow
def test_the_real_model_is_valid_on_the_first_attempt_under_the_grammar(smollm: Any) -> None:
    events = list(TurnRunner(smollm).run(make_request(USER, schema=CITY, sampling=Sampling.greedy(), max_tokens=48)))
    assert [type(e) for e in events] == [StructuredValue, TurnDone]  # valid at once, under the grammar
    assert isinstance(events[0], StructuredValue)
    value = events[0].value
    assert isinstance(value["city"], str) and value["city"].strip()


# -- schema files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read schema"),
        ("{nope", "is not valid JSON"),
        ('"a string"', "not a valid JSON Schema"),
        ('{"type": 5}', "not a valid JSON Schema"),
    ],
)
def test_bad_schema_files_are_one_line_config_errors(tmp_path: Any, content: str | None, message: str) -> None:
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_schema(path)
    assert "\n" not in str(info.value)


# -- titles --------------------------------------------------------------------------------


def make_title(backend: Any, question: str, answer: str) -> str:
    return title_from(TurnRunner(backend).run(title_request(question, answer)), question, answer)


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


def test_a_title_that_copies_the_reply_or_runs_long_gives_way_to_the_question() -> None:
    question, answer = "What is the capital of France?", "The capital of France is Paris, capital city of Europe."
    copied = ScriptedBackend.from_texts('{"title": "The capital of France is Paris"}')
    assert make_title(copied, question, answer) == title_from_text(question)
    rambling = ScriptedBackend.from_texts('{"title": "A very long title that goes on and on past eight words"}')
    assert make_title(rambling, question, answer) == title_from_text(question)
    short = ScriptedBackend.from_texts('{"title": "The capital of France"}')  # a copy, but a title too
    assert make_title(short, question, answer) == "The capital of France"
    assert make_title(ScriptedBackend.from_texts('{"title": "French capital"}'), question, answer) == "French capital"


@pytest.mark.slow
def test_the_real_model_writes_a_short_title(smollm: Any) -> None:
    title = make_title(smollm, "How do I bake sourdough bread at home?", "Start with an active starter.")
    assert 0 < len(title) <= TITLE_MAX_CHARS
    assert "\n" not in title
