"""The chat controller: conversation state and turn driving, with no Qt in it.

The window hands the controller a `ChatView` (the widgets implement it); the controller
owns the list of messages, loads models, runs turns with `async for` over the engine's
events and tells the view what to show. Keeping this Qt-free means the history and model
picker issues can plug in here (a store behind `Conversation`, `load_model` from a
picker) and the turn logic is testable without widgets.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from desktop.model_choice import ModelChoice, ModelInfo, describe_backend, remember_model
from engine.backend import Message, Sampling
from engine.errors import EngineError, MalformedReplyError
from engine.events import ContentDelta, Recovery, ThinkingDelta, TurnDone, TurnError, TurnStats
from engine.runtime import Engine

log = logging.getLogger("desktop.controller")

DEFAULT_MAX_TOKENS = 2048


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """What the view shows when a turn ends without an answer."""

    kind: str
    text: str
    action: str | None = None  # "retry" | "new_conversation" | None


def failure_for(kind: str, message: str) -> TurnFailure:
    """Readable copy for each way a turn can fail; the malformed copy is exact by contract."""
    if kind == "malformed_reply":
        return TurnFailure(kind, MalformedReplyError.MESSAGE, "retry")
    if kind == "context_full":
        return TurnFailure(
            kind, "This conversation no longer fits in the model's context window. "
            "Start a new conversation to keep chatting.", "new_conversation",
        )
    if kind == "no_model":
        reason = f": {message}" if message else "."
        return TurnFailure(kind, f"No model is loaded{reason}")
    if kind == "script":
        return TurnFailure(kind, f"The scripted backend has no reply for this message. ({message})")
    if kind == "config":
        return TurnFailure(kind, f"Ember could not send this request: {message}")
    return TurnFailure(kind, f"The model stopped with an error: {message}", "retry")


class ReplySink(Protocol):
    """One assistant reply on screen, fed as the turn streams."""

    def add_thinking(self, text: str) -> None: ...
    def add_content(self, text: str) -> None: ...
    def restart(self, reason: str) -> None: ...
    def finish(self, stats: TurnStats) -> None: ...


class ChatView(Protocol):
    """Everything the controller asks of the window."""

    def show_user_message(self, text: str) -> None: ...
    def start_reply(self) -> ReplySink: ...
    def show_turn_failure(self, failure: TurnFailure) -> None: ...
    def clear_turn_failure(self, *, remove: bool) -> None: ...
    def set_busy(self, busy: bool) -> None: ...
    def show_stats(self, stats: TurnStats) -> None: ...
    def clear_conversation(self) -> None: ...
    def model_loading(self, label: str) -> None: ...
    def model_ready(self, info: ModelInfo) -> None: ...
    def model_failed(self, label: str, message: str) -> None: ...


@dataclass
class Conversation:
    """The messages of one conversation, in the shape `engine.chat` takes."""

    system: str | None = None
    messages: list[Message] = field(default_factory=list)

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def add_assistant(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def request_messages(self) -> list[Message]:
        head: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        return head + [dict(m) for m in self.messages]

    def clear(self) -> None:
        self.messages.clear()


class ChatController:
    """Runs one conversation against one engine and keeps the view in step."""

    def __init__(self, engine: Engine, view: ChatView, *, conversation: Conversation | None = None,
                 sampling: Sampling | None = None, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.engine = engine
        self.view = view
        self.conversation = conversation or Conversation()
        self.sampling = sampling or Sampling()
        self.max_tokens = max_tokens
        self.model: ModelInfo | None = describe_backend(engine.backend) if engine.backend else None
        self._load_error = ""
        self._loading: asyncio.Task[bool] | None = None
        self._turn: asyncio.Task[None] | None = None
        self._retry_pending = False
        self._stop_requested = False

    # -- state -----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._turn is not None and not self._turn.done()

    @property
    def can_retry(self) -> bool:
        return self._retry_pending and not self.busy

    # -- models ----------------------------------------------------------------------------

    async def load_model(self, choice: ModelChoice) -> bool:
        """Load `choice` on the engine's worker; a failure is shown, never raised."""
        self._loading = asyncio.ensure_future(self._load(choice))
        return await self._loading

    async def _load(self, choice: ModelChoice) -> bool:
        self.view.model_loading(choice.label)
        try:
            backend = await self.engine.load(choice.factory)
        except (EngineError, OSError) as exc:
            self._load_error = str(exc)
            log.warning("model load failed: %s", exc)
            self.view.model_failed(choice.label, str(exc))
            return False
        self.model = describe_backend(backend, choice.label)
        self._load_error = ""
        remember_model(choice)
        self.view.model_ready(self.model)
        return True

    # -- turns -----------------------------------------------------------------------------

    async def send(self, text: str) -> bool:
        """Send a user message and stream the reply; False when it was not sent."""
        text = text.strip()
        if not text or self.busy:
            return False
        self._retry_pending = False
        self.view.clear_turn_failure(remove=False)
        self.conversation.add_user(text)
        self.view.show_user_message(text)
        await self._start_turn()
        return True

    async def retry(self) -> bool:
        """Run the failed last turn again (the banner's Try again)."""
        if not self.can_retry:
            return False
        self._retry_pending = False
        self.view.clear_turn_failure(remove=True)
        await self._start_turn()
        return True

    def stop(self) -> None:
        """Stop the reply in progress; the engine ends it within one token."""
        if self.busy:
            self._stop_requested = True  # also covers a turn still waiting for the model
            self.engine.stop()

    async def new_conversation(self) -> None:
        """Stop any reply, then start over with an empty conversation."""
        await self.stop_and_wait()
        self._retry_pending = False
        self.conversation.clear()
        self.view.clear_conversation()

    async def stop_and_wait(self) -> None:
        turn = self._turn
        if turn is not None and not turn.done():
            self.stop()
            await asyncio.wait([turn])

    async def aclose(self) -> None:
        """Stop the reply, wait for it, then shut the engine down (window closing)."""
        await self.stop_and_wait()
        await self.engine.aclose()

    async def _start_turn(self) -> None:
        # The turn runs as its own task so stop_and_wait/aclose can await it from elsewhere.
        self._turn = asyncio.ensure_future(self._run_turn())
        await asyncio.wait([self._turn])
        self._turn.result()  # a bug in the turn code surfaces in the caller's slot

    async def _run_turn(self) -> None:
        self._stop_requested = False
        self.view.set_busy(True)
        try:
            available = await self._model_available()
            if self._stop_requested:
                return  # stopped while the model was still loading: nothing to show
            if not available:
                self._fail(failure_for("no_model", self._load_error))
                return
            await self._stream_reply()
        finally:
            self.view.set_busy(False)

    async def _model_available(self) -> bool:
        if self._loading is not None and not self._loading.done():
            await asyncio.wait([self._loading])  # a message typed while loading waits for it
        return self.engine.backend is not None

    async def _stream_reply(self) -> None:
        sink = self.view.start_reply()
        answer: list[str] = []
        try:
            outcome = await self._consume(sink, answer)
        except EngineError as exc:
            log.warning("turn failed: %s", exc)
            outcome = TurnError("backend", str(exc))
        if isinstance(outcome, TurnError):
            self._fail(failure_for(outcome.kind, outcome.message))
            return
        if answer:
            self.conversation.add_assistant("".join(answer))
        sink.finish(outcome.stats)
        self.view.show_stats(outcome.stats)

    async def _consume(self, sink: ReplySink, answer: list[str]) -> TurnDone | TurnError:
        outcome: TurnDone | TurnError = TurnError("backend", "the reply ended without a result")
        events = self.engine.chat(self.conversation.request_messages(), sampling=self.sampling,
                                  max_tokens=self.max_tokens)
        # Run the stream to its end (the result is its last event) and close it on any exit,
        # so the engine's worker is never left with a half-consumed generator.
        try:
            async for event in events:
                match event:
                    case ThinkingDelta(text=text):
                        sink.add_thinking(text)
                    case ContentDelta(text=text):
                        answer.append(text)
                        sink.add_content(text)
                    case Recovery(reason=reason):
                        answer.clear()  # what follows belongs to the new attempt
                        sink.restart(reason)
                    case TurnDone() | TurnError():
                        outcome = event
                    case _:
                        pass
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        return outcome

    def _fail(self, failure: TurnFailure) -> None:
        self._retry_pending = failure.action == "retry"
        self.view.show_turn_failure(failure)

