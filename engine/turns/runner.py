"""One turn of any kind, as events: `TurnRunner(backend, tools).run(request, cancel)` on the model's thread.

Every turn ends with exactly one `TurnDone` or `TurnError` and one log line; the GUI, the
CLI, the API server, the recorder and the tests consume the same events. A chat turn
(`request.schema is None`) offers the tools it was given (`ToolUse`: rounds of approved
calls, engine/turns/tool_loop.py); tools only named in `request.tools` are offered, not run,
and their parsed calls end the turn as `ToolCall` events (the local API server's clients run
them). When its visible content is empty after the guardrail it gets exactly one recovery
request (the correction line folded into the system message, no tools, a fresh pipeline; a
`Recovery` event tells a view to reset the reply), else it ends `MALFORMED_REPLY`. No model
ever judges or repairs output. A structured turn (`request.schema` set) follows
`engine.turns.structured`'s policy.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from engine.backends.base import Backend, Message, Request
from engine.backends.image_input import refuse_unseen
from engine.cancel import CancelToken
from engine.errors import (
    BackendError,
    ConfigError,
    ContextOverflowError,
    EngineError,
    LLMError,
    MalformedReplyError,
    NoModelError,
    ScriptExhaustedError,
    StructuredOutputError,
)
from engine.events import Event, FinishReason, Recovery, TurnDone, TurnError, TurnErrorKind, TurnStats
from engine.llama import machine_profile
from engine.tools.permissions import ToolUse
from engine.turns.rounds import fold_system, raw_round, stream_round
from engine.turns.structured import structured_rounds
from engine.turns.tally import Tally
from engine.turns.tool_loop import ToolRounds, offered_round

log = logging.getLogger("engine.turn")

E = TypeVar("E")

NO_TOOLS_LINE = (
    "Answer in plain text. No tools are available in this conversation: never write tool calls or tool-call syntax."
)
CORRECTION_LINE = (
    "Your previous reply had no visible answer. Reply to the user directly in plain text, "
    "without tool calls, special tokens or markup."
)


def sent_messages(messages: tuple[Message, ...], tools: object) -> tuple[Message, ...]:
    """`messages` as a chat turn's first request sends them: with no tools offered, the
    no-tools line is folded into the system message. Context sizing measures exactly this
    (engine/turns/context_window.py), keeping room for the recovery round's correction line.

    The window and the CLI keep the line: without it the small models write tool-call
    markup into tool-less chats. A `verbatim` request (the API server's) goes without it:
    there the request is the prompt, as on any OpenAI-compatible server."""
    return messages if tools else fold_system(messages, NO_TOOLS_LINE)


@dataclass
class TurnEnd:
    """How a turn ended, for its log line: every runner ends its turns through `after`."""

    outcome: str
    kind: str = ""

    def after(self, rounds: Iterator[E], tally: Tally) -> Iterator[E | TurnDone | TurnError]:
        """Yield `rounds`, then exactly one TurnDone, or one TurnError for an engine failure."""
        try:
            yield from rounds
            self.outcome = "stopped" if tally.finish_reason == FinishReason.CANCELLED else "completed"
            yield TurnDone(tally.stats())
        except (LLMError, ConfigError) as exc:
            kind = error_kind(exc)
            self.kind = kind
            self.outcome = "malformed" if kind is TurnErrorKind.MALFORMED_REPLY else "error"
            yield TurnError(kind, str(exc), tally.stats())


class TurnRunner:
    """Runs turns against one backend, offering `tools` when given. Call `run` on the thread that owns the backend."""

    def __init__(self, backend: Backend, tools: ToolUse | None = None) -> None:
        self.backend = backend
        self.tools = tools if tools is not None and tools.tools else None  # no tool left: a plain turn
        self._calls = 0

    def run(self, request: Request, cancel: CancelToken | None = None) -> Iterator[Event]:
        """Yield the turn's events; always ends with exactly one TurnDone or TurnError."""
        cancel = cancel or CancelToken()
        tally = Tally()
        end = TurnEnd("completed")
        self._calls = 0
        try:
            yield from end.after(self.events(request, cancel, tally), tally)
        finally:
            _log_turn(tally.stats(), end.outcome, end.kind, request, self._calls)
            if end.outcome == "completed":
                _remember_speed(self.backend, tally.stats())

    def events(self, request: Request, cancel: CancelToken, tally: Tally) -> Iterator[Event]:
        """The turn's events before its end; a failure is raised (as an EngineError), not yielded."""
        caps = self.backend.capabilities
        refuse_unseen(caps.vision, self.backend.name, request.messages, caps.vision_note)
        if request.schema is not None:
            yield from structured_rounds(self.backend, request, cancel, tally)
        else:
            yield from self._chat_rounds(request, cancel, tally)

    def _chat_rounds(self, request: Request, cancel: CancelToken, tally: Tally) -> Iterator[Event]:
        if request.prompt is not None:  # a raw completion: the model's text, as it came
            yield from raw_round(self.backend, request, cancel, tally)
            return
        if self.tools is not None:
            rounds = ToolRounds(self.backend, self.tools)
            try:
                visible, last = yield from rounds.run(request.with_(tools=self.tools.tools.specs()), cancel, tally)
            finally:
                self._calls = rounds.calls
        elif request.tools:  # offered, not run here: the calls are the answer (the API server)
            last = request
            visible = yield from offered_round(self.backend, request, cancel, tally)
        else:
            last = request if request.verbatim else request.with_(messages=sent_messages(request.messages, None))
            visible = yield from self._round(last, cancel, tally)
        if visible or cancel.cancelled or request.verbatim:  # an API client gets the reply as it came
            return
        yield Recovery("empty_reply")
        retry = last.with_(messages=fold_system(last.messages, CORRECTION_LINE), tools=None, grammar=None)
        visible = yield from self._round(retry, cancel, tally)
        if not visible and not cancel.cancelled:
            raise MalformedReplyError()

    def _round(self, request: Request, cancel: CancelToken, tally: Tally) -> Generator[Event, None, bool]:
        """Stream one model request; return whether it produced visible content."""
        pipeline, _ = yield from stream_round(self.backend, request, cancel, tally)
        return pipeline is not None and bool(pipeline.content.strip())


_KINDS: tuple[tuple[type[EngineError], TurnErrorKind], ...] = (
    (MalformedReplyError, TurnErrorKind.MALFORMED_REPLY),
    (ContextOverflowError, TurnErrorKind.CONTEXT_FULL),
    (StructuredOutputError, TurnErrorKind.STRUCTURED_OUTPUT),
    (ScriptExhaustedError, TurnErrorKind.SCRIPT),
    (ConfigError, TurnErrorKind.CONFIG),
    (NoModelError, TurnErrorKind.NO_MODEL),
    (BackendError, TurnErrorKind.BACKEND),
)


def error_kind(exc: BaseException) -> TurnErrorKind:
    """The `TurnError.kind` for an engine error (any other model failure is the backend's)."""
    return next((kind for cls, kind in _KINDS if isinstance(exc, cls)), TurnErrorKind.BACKEND)


def _remember_speed(backend: Backend, stats: TurnStats) -> None:
    """A model file's first real decoding speed here replaces its predicted one (issue #48)."""
    path = getattr(backend, "path", None)
    placement = getattr(backend, "placement", None)
    offloaded, layers = getattr(placement, "offloaded", 0), getattr(placement, "n_layer", None)
    if not isinstance(path, Path) or (offloaded and offloaded != layers):  # split: neither device's speed
        return
    machine_profile.remember_once(path, stats.tokens_per_s, stats.tokens, on_gpu=bool(offloaded))


def _log_turn(stats: TurnStats, outcome: str, kind: str, request: Request, tool_calls: int) -> None:
    extra = f" error={kind}" if kind else ""
    structured = " structured=on" if request.schema is not None else ""
    tools = f" tool_calls={tool_calls}" if tool_calls else ""
    log.info(
        "turn outcome=%s%s%s%s attempts=%d tokens=%d ttft_ms=%d tokens_per_s=%.1f "
        "total_ms=%d retries=%d scaffold_stripped=%d",
        outcome,
        extra,
        structured,
        tools,
        stats.attempts,
        stats.tokens,
        stats.ttft_ms,
        stats.tokens_per_s,
        stats.total_ms,
        stats.retries,
        stats.scaffold_stripped,
    )
