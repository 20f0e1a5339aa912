"""The chat controller: conversation state and turn driving, with no Qt in it.

The window hands the controller a `ChatView` (the widgets implement it); the controller
runs turns with `async for` over the engine's events and tells the view what to show.
With a `HistorySession` every turn is recorded as it streams (the user's message before
generation, the reply about once a second, the outcome at the end) and conversations can
be opened, regenerated, edited and switched between versions; without one (the database
could not be opened) the conversation lives in memory only. `history_view`, when set,
shows whole branches and keeps the sidebar in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from desktop.core.context_keeper import ContextKeeper, ContextView
from desktop.core.conversation_docs import ConversationDocs, prepare_turn, show_sources
from desktop.core.history_session import HISTORY_ERRORS, Branch, HistorySession
from desktop.core.model_choice import ModelChoice, ModelInfo, describe_backend, remember_model
from desktop.core.reply_format import ReplyFormat, with_format
from desktop.core.settings_resolver import TurnSettings, resolve
from desktop.core.titling import ConversationTitler
from engine.backends.base import Message, make_request
from engine.errors import ConfigError, ContextOverflowError, EngineError, MalformedReplyError
from engine.events import (
    ContentDelta,
    Event,
    Notice,
    PromptProgress,
    Recovery,
    StructuredRetry,
    StructuredValue,
    ThinkingDelta,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
)
from engine.history.recorder import TurnRecorder
from engine.runtime import Engine
from engine.turns.context_policy import ContextFullError, ContextPolicy, Fit, MessageTooLongError
from engine.turns.context_window import Meter
from engine.turns.runner import error_kind
from engine.turns.structured import MAX_STRUCTURED_RETRIES, fenced_json
from engine.turns.tool_events import ToolEvent
from models.library.settings import ModelSettings

if TYPE_CHECKING:
    from desktop.core.tool_turns import ToolTurns

log = logging.getLogger("desktop.controller")

FLUSH_EVERY_S = 1.0  # the recorder also throttles itself; this covers a stream that pauses


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """What the view shows when a turn ends without an answer."""

    kind: str
    text: str
    action: str | None = None  # "retry" | "new_conversation" | None


CONTEXT_STOP, MESSAGE_TOO_LONG = "context_stop", "message_too_long"
# Readable copy for each kind of failure, and the banner's action; the malformed copy is exact by contract.
_FAILURES: dict[str, tuple[str, str | None]] = {
    TurnErrorKind.MALFORMED_REPLY: (MalformedReplyError.MESSAGE, "retry"),
    TurnErrorKind.CONTEXT_FULL: ("This conversation no longer fits in the model's context window. "
                                 "Start a new conversation to keep chatting.", "new_conversation"),
    TurnErrorKind.NO_MODEL: ("No model is loaded{reason}", None),
    TurnErrorKind.SCRIPT: ("The scripted backend has no reply for this message. ({message})", None),
    TurnErrorKind.CONFIG: ("Ember could not send this request: {message}", None),
    TurnErrorKind.STRUCTURED_OUTPUT: (f"The model did not return valid JSON after {1 + MAX_STRUCTURED_RETRIES} "
                                      "attempts. Last error: {message}", "retry"),
    TurnErrorKind.BACKEND: ("The model stopped with an error: {message}", "retry"),
    # The context policy's refusals (front-end kinds; recorded as context_full or config).
    CONTEXT_STOP: ("This conversation has reached the model's context limit: {message}. "
                   "Keep chatting by leaving older messages out of what the model sees.", "drop_older"),
    MESSAGE_TOO_LONG: ("This message was not sent: {message}. Your draft is kept.", None),
}


def _context_kind(exc: ContextOverflowError | ConfigError) -> str:
    """The failure kind the view shows for the context policy's refusal `exc`."""
    if isinstance(exc, ContextFullError):
        return CONTEXT_STOP
    if isinstance(exc, MessageTooLongError):
        return MESSAGE_TOO_LONG
    return error_kind(exc)


def failure_for(kind: str, message: str) -> TurnFailure:
    """What the view shows for a turn that failed with `kind`."""
    text, action = _FAILURES.get(kind, _FAILURES[TurnErrorKind.BACKEND])
    return TurnFailure(kind, text.format(message=message, reason=f": {message}" if message else "."), action)


class ReplySink(Protocol):
    """One assistant reply on screen, fed as the turn streams."""

    def add_thinking(self, text: str) -> None: ...
    def add_content(self, text: str) -> None: ...
    def restart(self, reason: str) -> None: ...
    def retrying(self, attempt: int, error: str) -> None: ...
    def note(self, text: str) -> None: ...  # e.g. "decoding is not constrained to the schema"
    def progress(self, done: int, total: int) -> None: ...  # the prompt is being read (PromptProgress)
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
class ChatThread:
    """The active branch in the shape `engine.chat` takes: the window's in-memory copy.

    Named apart from `engine.history.types.Conversation` (a stored conversation's record).
    Without history it is the whole conversation; with history it mirrors the stored branch.
    """

    system: str | None = None
    messages: list[Message] = field(default_factory=list)

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def add_assistant(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def request_messages(self) -> list[Message]:
        head: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        return head + [dict(m) for m in self.messages]

    def replace(self, messages: list[Message]) -> None:
        self.messages = [dict(m) for m in messages]

    def clear(self) -> None:
        self.messages.clear()


class HistoryView(Protocol):
    """What the controller asks of the history side of the window (sidebar, stored messages)."""

    def show_branch(self, branch: Branch) -> None: ...
    def tag_branch(self, branch: Branch) -> bool: ...
    def conversations_changed(self) -> None: ...
    def show_reply_format(self, fmt: ReplyFormat) -> None: ...
    def show_history_problem(self, text: str) -> None: ...
    def set_actions_enabled(self, enabled: bool) -> None: ...


class ChatController:
    """Runs one conversation at a time against one engine and keeps the view in step."""

    def __init__(self, engine: Engine, view: ChatView, *, history: HistorySession | None = None,
                 conversation: ChatThread | None = None) -> None:
        self.engine = engine
        self.view = view
        self.history = history
        self.history_view: HistoryView | None = None
        self.conversation = conversation or ChatThread()
        self.reply_format = ReplyFormat()
        self.choice: ModelChoice | None = None
        self.model: ModelInfo | None = describe_backend(engine.backend) if engine.backend else None
        self._load_error = ""
        self._loading: asyncio.Task[bool] | None = None
        self._turn: asyncio.Task[None] | None = None
        self._retry_pending = False
        self._retry_user_id: int | None = None  # the stored question a failed turn left unanswered
        self._last_failure: TurnFailure | None = None
        self._stop_requested = False
        self._titler = ConversationTitler(engine, history, self._list_changed) if history is not None else None
        self.context = ContextKeeper(engine)
        self.refusal = ""  # why the last message was not sent (its draft stays in the composer)
        self.tool_turns: ToolTurns | None = None  # set by desktop.qt.tool_card.install_tools
        self.documents: ConversationDocs | None = None  # set by desktop.qt.documents_ui.install_documents

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
        self.choice = choice
        self._load_error = ""
        remember_model(choice)
        self.view.model_ready(self.model)
        return True

    # -- turns -----------------------------------------------------------------------------

    async def send(self, text: str) -> bool:
        """Send a user message and stream the reply; False when it was not sent."""
        text = text.strip()
        self.refusal = ""
        if not text or self.busy:
            return False
        if not await self._fits(text):
            return False
        self._retry_pending = False
        self.view.clear_turn_failure(remove=False)
        recorder = self._record(lambda h: h.record_send(text, model=self._model_name()))
        self.conversation.add_user(text)
        self.view.show_user_message(text)
        await self._start_turn(recorder, title=True)
        return True

    async def _fits(self, text: str) -> bool:
        """Refuse, before it is stored, a message that cannot be sent (the reason is shown)."""
        settings = self._turn_settings()
        preview = settings.messages([*self.conversation.request_messages(), {"role": "user", "content": text}])
        problem = await self.context.check(preview, self.context_policy, settings.max_tokens)
        if problem is None:
            return True
        self.refusal = str(problem)
        self.view.clear_turn_failure(remove=True)
        self._last_failure = failure = failure_for(_context_kind(problem), str(problem))
        self.view.show_turn_failure(failure)
        return False

    # -- context policy --------------------------------------------------------------------

    @property
    def context_policy(self) -> ContextPolicy:
        """This conversation's policy (else the model's default)."""
        return self.context.policy(self._conversation_settings(), self._model_settings())

    def set_context_policy(self, policy: ContextPolicy) -> None:
        """Use `policy` for this conversation from its next message (saved in its settings)."""
        if self.history is None:
            self.context.unsaved = policy
            return
        try:
            self.history.update_settings(self.context.updated(self.history.settings, policy))
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't save the context policy: {exc}")

    async def measure_draft(self, draft: str) -> Meter | None:
        """The composer meter for `draft` (None when the model cannot count or none is loaded)."""
        settings = self._turn_settings()
        messages = settings.messages(self.conversation.request_messages())
        return await self.context.meter(messages, draft, self.context_policy, settings.max_tokens)

    async def refresh_context(self) -> None:
        """Show where the model's view of the open conversation begins (after opening it)."""
        settings = self._turn_settings()
        messages = settings.messages(self.conversation.request_messages())
        try:
            fit = await self.context.fit(messages, self.context_policy, settings.max_tokens)
        except (ContextOverflowError, ConfigError):
            return  # the next message reports it
        self._show_context(fit)

    def _show_context(self, fit: Fit) -> None:
        if isinstance(self.view, ContextView):
            self.view.show_context_cut(fit.resume_turn)

    def _conversation_settings(self) -> dict[str, object] | None:
        if self.history is None:
            return None
        try:
            return dict(self.history.settings)
        except HISTORY_ERRORS:
            return {}

    def _model_settings(self) -> ModelSettings | None:
        return self.choice.settings if self.choice is not None else None

    def _turn_settings(self) -> TurnSettings:
        return resolve(self._model_settings())

    async def retry(self) -> bool:
        """Run the failed last turn again (the banner's Try again)."""
        if not self.can_retry:
            return False
        self._retry_pending = False
        target = self._retry_user_id
        recorder = None if target is None else self._record(
            lambda h: h.record_regenerate(target, model=self._model_name()))
        if recorder is not None:
            # Recorded: the question gets another answer, shown (like Regenerate) in place of
            # whatever the failed turn kept.
            return await self._rerun(recorder)
        self.view.clear_turn_failure(remove=True)
        await self._start_turn(None)
        return True

    async def regenerate(self, message_id: int) -> bool:
        """Answer again: a new version of answer `message_id` (or of the answer to question `message_id`)."""
        if self.busy or self.history is None:
            return False
        recorder = self._record(lambda h: h.record_regenerate(message_id, model=self._model_name()))
        return recorder is not None and await self._rerun(recorder)

    async def edit(self, message_id: int, text: str) -> bool:
        """Store `text` as a new version of question `message_id` and answer it; the old branch stays."""
        text = text.strip()
        if not text or self.busy or self.history is None:
            return False
        recorder = self._record(lambda h: h.record_edit(message_id, text, model=self._model_name()))
        return recorder is not None and await self._rerun(recorder)

    async def _rerun(self, recorder: TurnRecorder) -> bool:
        assert self.history is not None
        try:
            branch = self.history.branch(upto=recorder.user_message_id)
            thread = self.history.thread(upto=recorder.user_message_id)
        except HISTORY_ERRORS as exc:
            recorder.abandon("interrupted")
            self._history_problem(f"Couldn't read the conversation: {exc}")
            return False
        self._show_branch(branch, thread)
        await self._start_turn(recorder)
        return True

    def stop(self) -> None:
        """Stop the reply in progress; the engine ends it within one token."""
        if self.busy:
            self._stop_requested = True  # also covers a turn still waiting for the model
            self.engine.stop()
            if self.tool_turns is not None:
                self.tool_turns.stop()  # an open approval question is answered "deny"

    async def stop_and_wait(self) -> None:
        turn = self._turn
        if turn is not None and not turn.done():
            self.stop()
            await asyncio.wait([turn])

    async def aclose(self) -> None:
        """Stop the reply and any title, shut the engine down, close the history (window closing)."""
        await self.stop_and_wait()
        if self._titler is not None:
            await self._titler.aclose()
        await self.engine.aclose()
        if self.history is not None:
            self.history.close()

    async def _start_turn(self, recorder: TurnRecorder | None, *, title: bool = False) -> None:
        # The turn runs as its own task so stop_and_wait/aclose can await it from elsewhere.
        turn = self._turn = asyncio.ensure_future(self._run_turn(recorder, title))
        await asyncio.wait([turn])
        turn.result()  # a bug in the turn code surfaces in the caller's slot

    async def _run_turn(self, recorder: TurnRecorder | None, title: bool) -> None:
        self._stop_requested = False
        self._last_failure = None
        self._set_busy(True)
        try:
            if await self._ready_for(recorder) and await self._reply(recorder) and title and self._titler:
                self._titler.after_reply()
        finally:
            if recorder is not None:
                recorder.close()  # a turn cut off by an exception is recorded as interrupted
            self._set_busy(False)
            self._after_turn(recorder)

    def _set_busy(self, busy: bool) -> None:
        self.view.set_busy(busy)
        if self.history_view is not None:
            self.history_view.set_actions_enabled(not busy)  # no regenerate or edit mid-reply

    async def _ready_for(self, recorder: TurnRecorder | None) -> bool:
        if self._loading is not None and not self._loading.done() and self.engine.backend is None:
            # With no model yet, a message typed while loading waits for it; otherwise the
            # current model answers while the next one loads.
            await asyncio.wait([self._loading])
        if self._stop_requested:
            if recorder is not None:
                recorder.abandon("stopped")
            return False  # stopped while the model was still loading: nothing to show
        if self.engine.backend is None:
            _record(recorder, TurnError(TurnErrorKind.NO_MODEL, self._load_error))
            self._fail(failure_for(TurnErrorKind.NO_MODEL, self._load_error), recorder)
            return False
        return True

    async def _reply(self, recorder: TurnRecorder | None) -> bool:
        """Run the reply (chat, structured or with tools: one turn API); True when it completed."""
        settings = self._turn_settings()
        # Attached files and the conversation's collection: their passages go into the question.
        docs = await prepare_turn(self.documents, self.engine, settings.messages(
            self._request_messages(recorder)), settings.max_tokens, self.history)
        try:
            fit = await self.context.fit(docs.messages, self.context_policy, settings.max_tokens)
        except (ContextOverflowError, ConfigError) as exc:
            _record(recorder, TurnError(error_kind(exc), str(exc)))
            self._fail(failure_for(_context_kind(exc), str(exc)), recorder)
            return False
        self._show_context(fit)
        request = make_request(fit.messages, sampling=settings.sampling, max_tokens=settings.max_tokens,
                               schema=self.reply_format.schema)
        sink = self.view.start_reply()
        show_sources(docs, sink, recorder)
        answer: list[str] = []
        outcome: TurnDone | TurnError = TurnError(TurnErrorKind.BACKEND, "the reply ended without a result")
        tools = self.tool_turns if request.schema is None and self.tool_turns is not None \
            and self.tool_turns.enabled else None
        events = tools.run(self.engine, request, recorder) if tools is not None else self.engine.run_turn(request)
        # Run the stream to its end (the result is its last event) and close it on any exit,
        # so the engine's worker is never left with a half-consumed generator.
        try:
            async with _flushing(recorder):
                async for event in events:
                    if isinstance(event, ToolEvent):  # a tool turn's calls: the approval cards
                        if tools is not None:
                            tools.show(event)
                        continue
                    _record(recorder, event)
                    outcome = _show(event, sink, answer) or outcome
        except EngineError as exc:
            log.warning("turn failed: %s", exc)
            outcome = TurnError(error_kind(exc), str(exc))
            _record(recorder, outcome)
        finally:
            await events.aclose()
        return self._settle(outcome, "".join(answer), sink, recorder)

    def _request_messages(self, recorder: TurnRecorder | None) -> list[Message]:
        if recorder is not None:
            try:
                return recorder.prompt_messages(system=self.conversation.system, join_roles=False)
            except HISTORY_ERRORS as exc:  # the in-memory copy holds the same branch
                log.warning("history: could not read the branch back: %s", exc)
        return self.conversation.request_messages()

    def _settle(self, outcome: TurnDone | TurnError, answer: str, sink: ReplySink,
                recorder: TurnRecorder | None) -> bool:
        if isinstance(outcome, TurnError):
            log.warning("turn failed: %s: %s", outcome.kind, outcome.message)
            self._fail(failure_for(outcome.kind, outcome.message), recorder)
            return False
        if answer:
            self.conversation.add_assistant(answer)
        sink.finish(outcome.stats)
        self.view.show_stats(outcome.stats)
        return outcome.stats.finish_reason != "cancelled"

    def _fail(self, failure: TurnFailure, recorder: TurnRecorder | None) -> None:
        self._last_failure = failure
        self._retry_pending = failure.action == "retry"
        self._retry_user_id = recorder.user_message_id if recorder is not None else None
        self.view.show_turn_failure(failure)

    # -- conversations ---------------------------------------------------------------------

    async def new_conversation(self) -> None:
        """Stop any reply, then start over with an empty conversation (stored at its first message)."""
        await self.stop_and_wait()
        self._retry_pending = False
        self.conversation.clear()
        if self.history is not None:
            self.history.new()
        if self.documents is not None:
            self.documents.load(None)
        self.view.clear_conversation()
        self._show_format(ReplyFormat())
        self._list_changed()

    async def open_conversation(self, conversation_id: int, *, reveal: int | None = None) -> bool:
        """Show a stored conversation's active branch (or the branch of message `reveal`)."""
        if self.history is None:
            return False
        await self.stop_and_wait()
        try:
            branch = self.history.open(conversation_id, reveal=reveal)
            thread = self.history.thread_of(branch)
            fmt = ReplyFormat.from_settings(self.history.settings)
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't open that conversation: {exc}")
            return False
        self._show_branch(branch, thread)
        self._show_format(fmt)
        if self.documents is not None:
            self.documents.load(self._conversation_settings())
        self._list_changed()
        await self.refresh_context()
        return True

    async def switch_version(self, message_id: int) -> bool:
        """Show the branch through another version of a message (the ‹ n/m › navigator)."""
        if self.busy or self.history is None:
            return False
        try:
            branch = self.history.switch_version(message_id)
            thread = self.history.thread_of(branch)
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't show that version: {exc}")
            return False
        self._show_branch(branch, thread)
        return True

    def set_reply_format(self, fmt: ReplyFormat) -> None:
        """Use `fmt` for this conversation's next replies (saved in its settings)."""
        self.reply_format = fmt
        if self.history is None:
            return
        try:
            self.history.update_settings(with_format(self.history.settings, fmt))
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't save the reply format: {exc}")

    def _show_branch(self, branch: Branch, thread: list[Message]) -> None:
        self._retry_pending = False
        self.conversation.replace(thread)
        self.view.clear_conversation()
        if self.history_view is not None:
            self.history_view.show_branch(branch)

    def _show_format(self, fmt: ReplyFormat) -> None:
        if self.tool_turns is not None:
            self.tool_turns.conversation_changed()
        self.reply_format = fmt
        if self.history_view is not None:
            self.history_view.show_reply_format(fmt)

    # -- history bookkeeping ---------------------------------------------------------------

    def _model_name(self) -> str:
        return self.model.label if self.model is not None else ""

    def _record(self, start: Callable[[HistorySession], TurnRecorder]) -> TurnRecorder | None:
        """Start recording a turn; None (after saying why) when history is off or failing."""
        if self.history is None:
            return None
        try:
            recorder = start(self.history)
        except (*HISTORY_ERRORS, ValueError) as exc:
            log.warning("history: not recording this turn: %s", exc)
            self._history_problem(f"This message is not being saved: {exc}")
            return None
        self._list_changed()
        return recorder

    def _after_turn(self, recorder: TurnRecorder | None) -> None:
        """Bring the in-memory copy and the message widgets' ids in step with what was stored."""
        if self.history is None or recorder is None:
            return
        try:
            branch = self.history.branch()
            thread = self.history.thread_of(branch)
        except HISTORY_ERRORS as exc:
            log.warning("history: could not read the conversation back: %s", exc)
            return
        self.conversation.replace(thread)
        if self.history_view is None:
            return
        if not self.history_view.tag_branch(branch):
            self._show_stored(branch, thread)
        self.history_view.conversations_changed()

    def _show_stored(self, branch: Branch, thread: list[Message]) -> None:
        """Show what was stored when the screen differs, keeping the failure banner under it.

        A failed turn can store what the screen does not show: a reply cut off by an error
        (its partial text is kept), or after a regenerate that kept nothing, the old answer
        again. The next message follows what is stored, so the screen must show it.
        """
        failure, retry = self._last_failure, self._retry_pending
        self._show_branch(branch, thread)
        if failure is not None:
            self.view.show_turn_failure(failure)
            self._retry_pending = retry

    def _list_changed(self) -> None:
        if self.history_view is not None:
            self.history_view.conversations_changed()

    def _history_problem(self, text: str) -> None:
        if self.history_view is not None:
            self.history_view.show_history_problem(text)


def _record(recorder: TurnRecorder | None, event: Event) -> None:
    if recorder is not None:
        recorder.on_event(event)


def _show(event: Event, sink: ReplySink, answer: list[str]) -> TurnDone | TurnError | None:
    """Show one event on the reply; return it when it ends the turn."""
    match event:
        case ThinkingDelta(text=text):
            sink.add_thinking(text)
        case ContentDelta(text=text):
            answer.append(text)
            sink.add_content(text)
        case Recovery(reason=reason):
            answer.clear()  # what follows belongs to the new attempt
            sink.restart(reason)
        case StructuredRetry(attempt=attempt, error=error):
            sink.retrying(attempt, error)
        case Notice(text=text):
            sink.note(text)
        case PromptProgress(done=done, total=total):
            sink.progress(done, total)
        case StructuredValue(value=value):
            answer.append(fenced_json(value))
            sink.add_content(answer[-1])
        case TurnDone() | TurnError():
            return event


@contextlib.asynccontextmanager
async def _flushing(recorder: TurnRecorder | None) -> AsyncIterator[None]:
    """Flush the recorder about once a second while the body runs, so a pause loses nothing."""
    task = asyncio.ensure_future(_flush_forever(recorder)) if recorder is not None else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()


async def _flush_forever(recorder: TurnRecorder) -> None:
    while True:
        await asyncio.sleep(FLUSH_EVERY_S)
        recorder.flush()
