"""Structured replies: the policy a turn follows when its request carries a JSON Schema.

Each attempt streams one reply through the chat guardrail, then parses the visible content
as JSON and validates it with `jsonschema`. With the backend's grammar capability, decoding
is first constrained by a GBNF grammar built from the schema (`grammar_for`; an unusable one
falls back to free decoding, logged and said by a `Notice` event before the first attempt;
the schema is first bounded by `engine.turns.schema_limits`, and LlamaBackend's check runs
in a child process, `engine.llama.grammar_guard`). A failed attempt appends the reply and
`FEEDBACK` to the thread and asks again (a `StructuredRetry` event), at most `MAX_STRUCTURED_RETRIES` more
times: 3 model requests at worst, each with its own transport-retry budget. Success yields
`StructuredValue`; exhaustion raises `StructuredOutputError` with the LAST error. An empty
reply is one more failed attempt (the chat recovery line would contradict the JSON
instruction), and the attempts' deltas are not passed on: a structured turn shows its value.

An API request (`Request.verbatim`) is the prompt: no instruction is folded in unless it asks
(`schema_hint`), and a reply cut by its length limit is not retried but ends with its text so
far (a `ContentDelta`, finish reason "length"), as a cut chat reply does.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from engine.backends.base import (
    DEFAULT_MAX_TOKENS,
    Backend,
    Message,
    Request,
    Sampling,
    Schema,
    StreamInfo,
    make_request,
)
from engine.cancel import CancelToken
from engine.errors import ConfigError, StructuredOutputError
from engine.events import ContentDelta, Event, FinishReason, Notice, StructuredRetry, StructuredValue
from engine.json_files import read_json
from engine.turns.rounds import fold_system, stream_round
from engine.turns.schema_limits import bounded_for_grammar, schema_depth_problem
from engine.turns.schema_patterns import bounded_validator_class, checking, pattern_problem
from engine.turns.tally import Tally
from models.library.json_input import bounded_loads

if TYPE_CHECKING:  # jsonschema is imported by the functions that use it: the window starts without it
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

log = logging.getLogger("engine.structured")

MAX_STRUCTURED_RETRIES = 2
FEEDBACK = (
    "Your previous reply could not be parsed: {error}. Reply again with ONLY valid JSON matching the required schema."
)
INSTRUCTION = "Reply with ONLY a JSON value, and no other text, that matches this JSON Schema:\n{schema}"
STOPPED = "the request was stopped before a valid reply"


# -- schemas -------------------------------------------------------------------------------


def compile_schema(schema: Schema) -> Validator:
    """A validator for `schema`; ConfigError (one line) when it is not a valid JSON Schema.

    The empty registry keeps validation offline: jsonschema would otherwise fetch a remote
    `$ref` over the network.
    """
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    deep = schema_depth_problem(schema) or pattern_problem(schema)
    if deep:
        raise ConfigError(f"not a usable JSON Schema: {deep}")
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)  # pyright: ignore[reportArgumentType] - booleans are schemas too
    except SchemaError as exc:
        raise ConfigError(f"not a valid JSON Schema: {exc.message}") from exc
    except RecursionError as exc:
        raise ConfigError("not a usable JSON Schema: it refers to itself without end") from exc
    # Patterns are matched by a bounded engine, not `re` (engine.turns.schema_patterns).
    validator = bounded_validator_class(cls)(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)
    try:  # a reference loop ({"$ref": "#"}) recurses on any value: find out now, not mid-run
        validator.is_valid(None)
    except RecursionError as exc:
        raise ConfigError("not a usable JSON Schema: it refers to itself without end") from exc
    except Unresolvable:
        pass  # reported when a reply is checked, with the reference named
    return validator


def load_schema(path: str | Path) -> Schema:
    """Read and check a JSON Schema file; ConfigError (one line) for any problem with it."""
    p = Path(path)
    data: Any = read_json(p, "schema")
    if not isinstance(data, (dict, bool)):
        raise ConfigError(f"schema {p} is not a valid JSON Schema: it must be an object or a boolean")
    schema = cast(Schema, data)
    try:
        compile_schema(schema)
    except ConfigError as exc:
        raise ConfigError(f"schema {p} is {exc}") from exc
    return schema


# -- grammar -------------------------------------------------------------------------------


def grammar_for(backend: Backend, schema: Schema, notes: list[str] | None = None) -> str | None:
    """A GBNF grammar constraining decoding to `schema`, or None to decode freely.

    Why a grammar is not used is logged and appended to `notes` (the turn shows it as a Notice).
    """
    if not backend.capabilities.grammar:
        return None
    try:
        gbnf = _schema_to_gbnf(schema)
    except Exception as exc:  # any converter failure just means "no grammar"
        log.warning(
            "structured: the schema does not convert to a grammar (%s: %s); decoding unconstrained",
            type(exc).__name__,
            exc,
        )
        _note(notes, f"the schema cannot be turned into a grammar ({type(exc).__name__})")
        return None
    # llama.cpp may crash the process on a grammar it cannot parse, so ask before using it
    # (LlamaBackend asks a child process: engine.llama.grammar_guard).
    problem = backend.check_grammar(gbnf)
    if problem:
        log.warning("structured: the schema's grammar is unusable (%s); decoding unconstrained", problem)
        _note(notes, problem)
        return None
    return gbnf


def _note(notes: list[str] | None, why: str) -> None:
    if notes is not None:
        notes.append(f"Decoding is not constrained to the schema: {why}; the reply is still checked against it.")


def _schema_to_gbnf(schema: Schema) -> str:
    # Imported here: llama_cpp loads a native library, and other backends never need it.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    # Large repetition counts are loosened (they crash llama.cpp); jsonschema still validates.
    return str(json_schema_to_gbnf(json.dumps(bounded_for_grammar(schema))))


# -- parsing -------------------------------------------------------------------------------


class ReplyError(ValueError):
    """Why one reply is not an acceptable value; its text is fed back to the model."""


_FENCE = re.compile(r"\A```[\w-]*[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def parse_reply(text: str, validator: Validator) -> Any:
    """The reply's JSON value if it matches the schema; ReplyError otherwise.

    A reply wrapped whole in one Markdown code fence is unwrapped (small models do it even
    when told not to); prose around the JSON is not accepted.
    """
    from referencing.exceptions import Unresolvable

    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    if not body:
        raise ReplyError("the reply was empty")
    try:
        value = bounded_loads(body, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, or a NaN/Infinity constant
        raise ReplyError(f"invalid JSON ({exc})") from exc
    try:
        with checking():
            error = _best_error(validator, value)
    except Unresolvable as exc:
        raise ConfigError(f"the schema has a reference that cannot be resolved offline: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError("the schema refers to itself without end") from exc
    if error is not None:
        raise ReplyError(_describe(error))
    return value


def _best_error(validator: Validator, value: Any) -> ValidationError | None:
    """The most relevant of the value's validation errors, if any (one is enough to fix)."""
    from jsonschema import exceptions

    # jsonschema leaves best_match's return type unannotated.
    pick = cast(Callable[[Iterable["ValidationError"]], "ValidationError | None"], exceptions.best_match)  # pyright: ignore[reportUnknownMemberType]
    return pick(validator.iter_errors(value))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _describe(error: ValidationError) -> str:
    where = error.json_path
    return error.message if where == "$" else f"{error.message} at {where}"


# -- the policy -----------------------------------------------------------------------------


def structured_rounds(backend: Backend, request: Request, cancel: CancelToken, tally: Tally) -> Iterator[Event]:
    """The structured policy for `request` (its `schema` set); raises on failure, see the module."""
    assert request.schema is not None
    validator = compile_schema(request.schema)  # a bad schema fails before any model call
    thread = list(_instructed(request))
    notes: list[str] = []
    grammar, error = grammar_for(backend, request.schema, notes), ""
    for note in notes:  # an unusable grammar: the user sees why decoding is unconstrained
        yield Notice(note)
    for attempt in range(1, MAX_STRUCTURED_RETRIES + 2):
        if attempt > 1:
            log.info("structured: attempt %d after: %s", attempt, error)
            yield StructuredRetry(attempt, error)
        content, info = _attempt(backend, request.with_(messages=tuple(thread), grammar=grammar), cancel, tally)
        if cancel.cancelled:
            return  # stopped: the turn ends cancelled, with no value
        try:
            value = parse_reply(content, validator)
        except ReplyError as exc:
            cut_off = info.finish_reason == FinishReason.LENGTH
            if cut_off and request.verbatim:
                # An API reply cut by its length limit ends as any cut reply does, with what was
                # written (finish_reason "length"): the same limit would cut every retry too.
                log.info("structured: cut off at the length limit on attempt %d; answered as it is", attempt)
                yield ContentDelta(content)
                return
            error = f"{exc}; the reply was cut off at the length limit" if cut_off else str(exc)
            # The retry sees the failed reply and why it was refused (a shorter JSON, when cut off).
            feedback = FEEDBACK.format(error=error)
            thread += [{"role": "assistant", "content": content}, {"role": "user", "content": feedback}]
            if grammar is not None and info.prefilled_thinking:
                # The grammar can never emit the closing marker, so it would fill the thinking
                # block with the JSON and leave the visible answer empty on every attempt.
                log.warning("structured: the template opens a thinking block; decoding unconstrained from now on")
                grammar = None
            continue
        log.info("structured: accepted on attempt %d (grammar %s)", attempt, "on" if grammar else "off")
        yield StructuredValue(value)
        return
    raise StructuredOutputError(error)


def _instructed(request: Request) -> tuple[Message, ...]:
    """The messages the first attempt sends: a verbatim request's as they came (its grammar alone
    constrains the reply), unless it asked for the schema instruction (`schema_hint`)."""
    if request.verbatim and not request.schema_hint:
        return request.messages
    return fold_system(request.messages, INSTRUCTION.format(schema=json.dumps(request.schema)))


def _attempt(backend: Backend, request: Request, cancel: CancelToken, tally: Tally) -> tuple[str, StreamInfo]:
    """Stream one reply through the guardrail; its visible content (the deltas are dropped)."""
    rounds = stream_round(backend, request, cancel, tally)
    while True:
        try:
            next(rounds)
        except StopIteration as done:
            pipeline, info = done.value
            return (pipeline.content if pipeline is not None else ""), info


def run_structured(
    backend: Backend,
    messages: Sequence[Message],
    schema: Schema,
    *,
    sampling: Sampling | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_retry: Callable[[StructuredRetry], None] | None = None,
    cancel: CancelToken | None = None,
) -> Any:
    """The parsed, schema-valid JSON value of the model's reply to `messages`.

    A structured turn run to its value, on the thread that owns `backend`. Raises ConfigError
    for a bad schema, StructuredOutputError (with the LAST parse or validation error) when
    every attempt failed or the turn was stopped, and the backend's LLMError as is.
    """
    request = make_request(messages, sampling=sampling or Sampling(), max_tokens=max_tokens, schema=schema)
    for event in structured_rounds(backend, request, cancel or CancelToken(), Tally()):
        if isinstance(event, StructuredValue):
            return event.value
        if isinstance(event, StructuredRetry) and on_retry is not None:
            on_retry(event)
    raise StructuredOutputError(STOPPED)
