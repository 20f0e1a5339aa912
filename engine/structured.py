"""Structured replies: a JSON value that matches a JSON Schema, or a clear error.

    value = run_structured(backend, messages, schema)        # on the thread owning the backend

Each attempt streams one reply through the same guardrail as a chat turn
(`ReplyPipeline`: thinking set aside, scaffolding stripped), then parses the visible
content as JSON and validates it with `jsonschema`. Where the backend supports grammars
and the schema converts, decoding is constrained by a GBNF grammar built from the schema;
a grammar llama.cpp would reject (it crashes on an invalid one) or a schema the converter
cannot handle falls back to unconstrained decoding, with the reason logged.

A failed attempt appends the failed reply (assistant) and `FEEDBACK` (user) to the thread
and asks again, at most `MAX_STRUCTURED_RETRIES` more times. Only the first attempt is
trimmed to the caller's budget; retries grow from what it sent and are never trimmed, so
the feedback always reaches the model. Exhaustion raises `StructuredOutputError` with the
LAST error.

Unlike a chat turn, an empty reply gets no separate recovery round: it is one more failed
attempt, fed back like any other, and the plain-text correction lines of the turn policy
would contradict the JSON instruction anyway.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from engine.backend import Backend, CancelToken, Message, Request, Sampling, make_request
from engine.errors import ConfigError, StructuredOutputError
from engine.events import Notice, StructuredRetry, TurnStats
from engine.tally import Tally
from engine.trim import TokenCounter, approx_tokens, trim_messages
from engine.turn import fold_system, quiet_round
from engine.turns.schema_limits import bounded_for_grammar, schema_depth_problem

log = logging.getLogger("engine.structured")

MAX_STRUCTURED_RETRIES = 2
FEEDBACK = (
    "Your previous reply could not be parsed: {error}. "
    "Reply again with ONLY valid JSON matching the required schema."
)
INSTRUCTION = "Reply with ONLY a JSON value, and no other text, that matches this JSON Schema:\n{schema}"
STOPPED = "the request was stopped before a valid reply"

# jsonschema leaves best_match's return type unannotated.
_best_match = cast(
    Callable[[Iterable[ValidationError]], "ValidationError | None"],
    jsonschema_exceptions.best_match,  # pyright: ignore[reportUnknownMemberType]
)

Schema = Mapping[str, Any] | bool


# -- audit ---------------------------------------------------------------------------------


class StructuredAudit(Protocol):
    """Where a structured run is recorded: started once, completed only with a value."""

    def started(self) -> None: ...

    def completed(self) -> None: ...


class MemoryAudit:
    """An in-memory `StructuredAudit` for tests: the calls, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def started(self) -> None:
        self.calls.append("started")

    def completed(self) -> None:
        self.calls.append("completed")


class _NoAudit:
    def started(self) -> None:
        pass

    def completed(self) -> None:
        pass


# -- schemas -------------------------------------------------------------------------------


def compile_schema(schema: Schema) -> Validator:
    """A validator for `schema`; ConfigError (one line) when it is not a valid JSON Schema.

    The empty registry keeps validation offline: jsonschema would otherwise fetch a remote
    `$ref` over the network.
    """
    deep = schema_depth_problem(schema)
    if deep:
        raise ConfigError(f"not a usable JSON Schema: {deep}")
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)  # pyright: ignore[reportArgumentType] - booleans are schemas too
    except SchemaError as exc:
        raise ConfigError(f"not a valid JSON Schema: {exc.message}") from exc
    except RecursionError as exc:
        raise ConfigError("not a usable JSON Schema: it refers to itself without end") from exc
    validator = cls(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)
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
    try:
        data: Any = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read schema {p}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"schema {p} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"schema {p} is nested too deeply to read") from exc
    if not isinstance(data, (dict, bool)):
        raise ConfigError(f"schema {p} is not a valid JSON Schema: it must be an object or a boolean")
    schema = cast(Schema, data)
    try:
        compile_schema(schema)
    except ConfigError as exc:
        raise ConfigError(f"schema {p} is {exc}") from exc
    return schema


# -- grammar -------------------------------------------------------------------------------


@runtime_checkable
class GrammarChecker(Protocol):
    """A backend that can tell whether its decoder accepts a GBNF grammar."""

    def check_grammar(self, gbnf: str) -> str | None: ...


def grammar_for(backend: Backend, schema: Schema, notes: list[str] | None = None) -> str | None:
    """A GBNF grammar constraining decoding to `schema`, or None to decode freely.

    Why a grammar is not used is logged and appended to `notes` (shown to the user).
    """
    if not backend.supports_grammar:
        return None
    try:
        gbnf = _schema_to_gbnf(schema)
    except Exception as exc:  # any converter failure just means "no grammar"
        log.warning("structured: the schema does not convert to a grammar (%s: %s); decoding unconstrained",
                    type(exc).__name__, exc)
        _note(notes, f"the schema cannot be turned into a grammar ({type(exc).__name__})")
        return None
    # llama.cpp may crash the process on a grammar it cannot parse, so ask before using it.
    problem = backend.check_grammar(gbnf) if isinstance(backend, GrammarChecker) else None
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
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    if not body:
        raise ReplyError("the reply was empty")
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, or a NaN/Infinity constant
        raise ReplyError(f"invalid JSON ({exc})") from exc
    try:
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
    return _best_match(validator.iter_errors(value))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _describe(error: ValidationError) -> str:
    where = error.json_path
    return error.message if where == "$" else f"{error.message} at {where}"


# -- the run -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StructuredResult:
    value: Any
    text: str  # the accepted reply's visible content
    attempts: int
    grammar: bool  # whether the accepted reply was grammar-constrained
    stats: TurnStats


@dataclass(frozen=True, slots=True)
class _Reply:
    content: str
    finish_reason: str
    prefilled_thinking: bool


@dataclass
class _RunState:
    """One run's thread and grammar as they evolve over its attempts."""

    thread: list[Message]
    grammar: str | None
    tally: Tally = field(default_factory=Tally)
    last_error: str = ""
    outcome: str = "error"  # ok | exhausted | stopped | error (an exception from the backend)

    def failed(self, reply: _Reply, error: str) -> None:
        """Record a failed attempt: the retry sees the reply and why it was refused.

        The thread grows from what the failed attempt sent and is never trimmed again, so
        the feedback always reaches the model.
        """
        self.last_error = error
        self.thread = [*self.thread, {"role": "assistant", "content": reply.content},
                       {"role": "user", "content": FEEDBACK.format(error=error)}]
        if self.grammar is not None and reply.prefilled_thinking:
            # The grammar can never emit the closing marker, so it would fill the thinking
            # block with the JSON and leave the visible answer empty on every attempt.
            log.warning("structured: the template opens a thinking block; decoding unconstrained from now on")
            self.grammar = None


@runtime_checkable
class _CountsTokens(Protocol):
    def count_tokens(self, text: str) -> int: ...


class StructuredRunner:
    """Runs structured requests against one backend, on the thread that owns it.

    Worst case, one run makes `1 + MAX_STRUCTURED_RETRIES` = 3 model requests. Each
    attempt is one `backend.stream` call with its own transport-retry budget, so a remote
    backend allowing R retries per request may send up to 3 × (1 + R) HTTP requests
    (9 with OpenAIBackend's default R = 2); the in-process backend never retries, so 3.

    `on_notice` receives a `Notice` (before the first attempt) when the schema's grammar
    cannot be used and decoding runs unconstrained; the user should see it.
    """

    def __init__(self, backend: Backend, *, audit: StructuredAudit | None = None,
                 on_event: Callable[[StructuredRetry], None] | None = None,
                 count_tokens: TokenCounter | None = None,
                 on_notice: Callable[[Notice], None] | None = None) -> None:
        self.backend = backend
        self.audit: StructuredAudit = audit or _NoAudit()
        self._on_event = on_event
        self._on_notice = on_notice
        self._count = count_tokens or (backend.count_tokens if isinstance(backend, _CountsTokens) else approx_tokens)

    def run(self, messages: Sequence[Message], schema: Schema, *, sampling: Sampling | None = None,
            max_tokens: int = 1024, trim: int | None = None, cancel: CancelToken | None = None) -> StructuredResult:
        """Ask until a reply parses and validates; see `run_structured`."""
        # Bad input (schema, messages) is the caller's error, raised before anything is recorded.
        validator = compile_schema(schema)
        notes: list[str] = []
        state = _RunState(self._first_thread(messages, schema, trim), grammar_for(self.backend, schema, notes))
        for note in notes:
            if self._on_notice is not None:
                self._on_notice(Notice(note))
        first = make_request(state.thread, sampling=sampling or Sampling(), max_tokens=max_tokens)
        self.audit.started()
        try:
            result = self._until_valid(state, validator, first, cancel or CancelToken())
        finally:
            _log_run(state)
        self.audit.completed()
        return result

    def _until_valid(self, state: _RunState, validator: Validator, first: Request,
                     cancel: CancelToken) -> StructuredResult:
        for attempt in range(1, MAX_STRUCTURED_RETRIES + 2):
            if attempt > 1:
                self._emit(StructuredRetry(attempt, state.last_error))
            request = first.with_(messages=tuple(state.thread), grammar=state.grammar)
            reply = self._attempt(request, cancel, state.tally)
            if cancel.cancelled:
                state.outcome = "stopped"
                raise StructuredOutputError(STOPPED)
            try:
                value = parse_reply(reply.content, validator)
            except ReplyError as exc:
                state.failed(reply, _with_cut_off(str(exc), reply))
                continue
            state.outcome = "ok"
            return StructuredResult(value, reply.content, attempt, state.grammar is not None, state.tally.stats())
        state.outcome = "exhausted"
        raise StructuredOutputError(state.last_error)

    def _first_thread(self, messages: Sequence[Message], schema: Schema, trim: int | None) -> list[Message]:
        instructed = fold_system(tuple(dict(m) for m in messages), INSTRUCTION.format(schema=json.dumps(schema)))
        if trim is None:
            return list(instructed)
        return trim_messages(instructed, trim, self._count)

    def _attempt(self, request: Request, cancel: CancelToken, tally: Tally) -> _Reply:
        """Stream one reply through the guardrail; return its visible content."""
        pipeline, info = quiet_round(self.backend, request, cancel, tally)
        content = pipeline.content if pipeline is not None else ""
        return _Reply(content, info.finish_reason, info.prefilled_thinking)

    def _emit(self, event: StructuredRetry) -> None:
        log.info("structured: attempt %d after: %s", event.attempt, event.error)
        if self._on_event is not None:
            self._on_event(event)


def run_structured(backend: Backend, messages: Sequence[Message], schema: Schema, *,
                   sampling: Sampling | None = None, max_tokens: int = 1024, trim: int | None = None,
                   audit: StructuredAudit | None = None, on_event: Callable[[StructuredRetry], None] | None = None,
                   cancel: CancelToken | None = None, count_tokens: TokenCounter | None = None) -> Any:
    """The parsed, schema-valid JSON value of the model's reply to `messages`.

    Call it on the thread that owns `backend`. The schema is stated in the system message;
    `trim` (a token budget, None = no trimming) applies to the first attempt only.
    `audit.started()` is called once at entry (after the input checks), `audit.completed()`
    once, only when a value is returned. `on_event` receives `StructuredRetry(attempt,
    error)` before each retry: `attempt` is the 1-based number of the attempt starting now.

    Model calls: at most 3 (`1 + MAX_STRUCTURED_RETRIES`), each with its own transport-retry
    budget: 3 × (1 + R) requests for a remote backend allowing R retries (see StructuredRunner).

    Raises ConfigError for a bad schema, StructuredOutputError (with the LAST parse or
    validation error) when every attempt failed or the run was stopped, and the backend's
    LLMError (context full, transport failure) as is. Nothing is recorded completed then.
    """
    runner = StructuredRunner(backend, audit=audit, on_event=on_event, count_tokens=count_tokens)
    return runner.run(messages, schema, sampling=sampling, max_tokens=max_tokens, trim=trim, cancel=cancel).value


def _with_cut_off(error: str, reply: _Reply) -> str:
    """Tell the model when its reply hit the token limit: shorter JSON is then the fix."""
    if reply.finish_reason == "length":
        return f"{error}; the reply was cut off at the length limit"
    return error


def _log_run(state: _RunState) -> None:
    stats = state.tally.stats()
    log.info("structured outcome=%s attempts=%d grammar=%s tokens=%d total_ms=%d retries=%d scaffold_stripped=%d",
             state.outcome, stats.attempts, "on" if state.grammar else "off", stats.tokens, stats.total_ms,
             stats.retries, stats.scaffold_stripped)
