"""The chat controller: the window's side of a conversation, with no Qt in it.

The window hands the controller a `ChatView` (the widgets implement it); the controller
turns gestures into calls on the one `ChatSession` (engine/session: the same turn as
`ember chat`'s, from the check before anything is stored to the recorded answer) and
shows the events it streams. `history_view`, when set, shows whole branches and keeps the
sidebar in step; `tool_turns`, when set, offers tools and asks for approvals. The session's
history work (the branch before and after a turn, the recorded events, opening a
conversation) runs on its history thread (`ChatSession.io`): the GUI thread never waits on
the disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from desktop.core.async_tasks import spawn
from desktop.core.conversation_docs import ConversationDocs, SourcesSink, prepare_turn
from desktop.core.failures import HISTORY_PROBLEM, FailureAction, TurnFailure, failure_for, refusal_kind
from desktop.core.history_session import HISTORY_ERRORS, Branch, HistorySession
from desktop.core.model_choice import ModelChoice, ModelInfo, describe_backend, remember_model
from engine.backends.base import Message
from engine.errors import ConfigError, ContextOverflowError, EngineError
from engine.events import (
    ContentDelta,
    Event,
    FinishReason,
    Notice,
    PromptProgress,
    Recovery,
    Sources,
    StructuredRetry,
    StructuredValue,
    ThinkingDelta,
    ToolCall,
    ToolDenied,
    ToolLimit,
    ToolResult,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
    fenced_json,
)
from engine.runtime import Engine
from engine.session.reply_format import ReplyFormat
from engine.session.session import Ask, ChatSession, Turn
from engine.session.settings import ConversationSettings, TurnSettings, resolve
from engine.session.titling import ConversationTitler
from engine.tools.permissions import Approver, deny_all
from engine.tools.registry import ToolSet
from engine.turns.context_policy import ContextPolicy, Fit
from engine.turns.context_window import Meter
from engine.turns.runner import error_kind
from models.library.settings import ModelSettings

if TYPE_CHECKING:
    from desktop.core.tool_turns import ToolTurns

log = logging.getLogger("desktop.controller")


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


@runtime_checkable
class ContextView(Protocol):
    """A view that shows where the model's context begins (the window implements it)."""

    def show_context_cut(self, resume_turn: int | None, kept_head: int = 0) -> None: ...


class HistoryView(Protocol):
    """What the controller asks of the history side of the window (sidebar, stored messages)."""

    def show_branch(self, branch: Branch) -> None: ...
    def tag_branch(self, branch: Branch) -> bool: ...
    async def conversations_changed(self) -> None: ...  # re-read the list and the title (off the GUI thread)
    def show_reply_format(self, fmt: ReplyFormat) -> None: ...
    def show_history_problem(self, text: str) -> None: ...
    def set_actions_enabled(self, enabled: bool) -> None: ...


class ChatController:
    """Runs one conversation at a time against one engine, through one session, and keeps the view in step."""

    def __init__(self, engine: Engine, view: ChatView, *, session: ChatSession | None = None,
                 history_view: HistoryView | None = None, tool_turns: ToolTurns | None = None) -> None:
        self.engine = engine
        self.view = view
        self.session = session if session is not None else ChatSession.unsaved()
        self.session.offload()  # its store work on a thread of its own, never on the GUI thread
        self.history = HistorySession(self.session) if self.session.saved else None  # the sidebar's
        self.history_view = history_view
        self.tool_turns = tool_turns
        self.documents: ConversationDocs | None = None  # set by desktop.qt.documents_ui.install_documents
        self._doc_problems: list[str] = []  # attached files the last message could not read
        self.reply_format = ReplyFormat()
        self.choice: ModelChoice | None = None
        self.model: ModelInfo | None = describe_backend(engine.backend) if engine.backend else None
        self._load_error = ""
        self._loading: asyncio.Task[bool] | None = None
        self._turn: asyncio.Task[None] | None = None
        self._opening = False  # a message is being checked against the context and stored
        self._retry_pending = False
        self._retry_user_id: int | None = None  # the stored question a failed turn left unanswered
        self._last_failure: TurnFailure | None = None
        self._stop_requested = False
        self._titler = ConversationTitler(engine, self.session, self._list_changed)
        self.refusal = ""  # why the last message was not sent (its draft stays in the composer)

    # -- state -----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A message is being checked and stored, or its turn runs."""
        return self._opening or (self._turn is not None and not self._turn.done())

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
        """Send a user message and stream the reply; False when it was not sent (the reason is shown)."""
        text = text.strip()
        self.refusal = ""
        if not text or self.busy:
            return False
        turn = await self._open(Ask.send(text))
        if turn is None:
            return False
        self.view.show_user_message(text)
        await self._start_turn(turn, title=True)
        return True

    async def retry(self) -> bool:
        """Run the failed last turn again (the banner's Try again): another answer to its question."""
        if not self.can_retry or self._retry_user_id is None:
            return False
        self._retry_pending = False
        return await self._rerun(Ask.regenerate(self._retry_user_id))

    async def regenerate(self, message_id: int) -> bool:
        """Answer again: a new version of answer `message_id` (or of the answer to question `message_id`)."""
        return not self.busy and await self._rerun(Ask.regenerate(message_id))

    async def edit(self, message_id: int, text: str) -> bool:
        """Store `text` as a new version of question `message_id` and answer it; the old branch stays."""
        text = text.strip()
        return bool(text) and not self.busy and await self._rerun(Ask.edit(message_id, text))

    async def _rerun(self, ask: Ask) -> bool:
        turn = await self._open(ask)
        if turn is None:
            return False
        try:
            branch = await self._branch(upto=turn.user_message_id)
        except HISTORY_ERRORS as exc:
            await turn.close_async()
            self._history_problem(f"Couldn't read the conversation: {exc}")
            return False
        self._show_branch(branch)
        await self._start_turn(turn)
        return True

    async def _open(self, ask: Ask) -> Turn | None:
        """The turn for `ask`: checked against the context and stored; None (the reason shown) when refused."""
        self._opening = True
        self._stop_requested = False  # from here: a stop while it is stored (history thread) still counts
        try:
            return await self._checked_and_stored(ask)
        finally:
            self._opening = False

    async def _checked_and_stored(self, ask: Ask) -> Turn | None:
        tools = await self.tool_turns.for_turn() if self._offers_tools() and self.tool_turns else None
        try:
            turn = await self.session.open_turn_async(
                self.engine, ask, self._turn_settings(), tools=tools, schema=self.reply_format.schema,
                model=self._model_name(), approver=self._approver(), documents=self._with_documents)
        except (ContextOverflowError, ConfigError) as exc:
            return self._refuse(refusal_kind(exc), str(exc), tools)
        except HISTORY_ERRORS as exc:
            return self._refuse(HISTORY_PROBLEM, str(exc), tools)
        self._retry_pending = False
        self.view.clear_turn_failure(remove=False)
        self._list_changed()
        return turn

    async def _with_documents(self, messages: list[Message], max_tokens: int) -> tuple[list[Message], Sources | None]:
        """Attached files and the conversation's collection: their passages go into the question."""
        prepared = await prepare_turn(self.documents, self.engine, messages, max_tokens, self.history)
        self._doc_problems = prepared.problems
        return prepared.messages, prepared.sources

    def _refuse(self, kind: str, message: str, tools: ToolSet | None) -> None:
        if tools is not None and self.tool_turns is not None:
            self.tool_turns.turn_ended(tools)
        self.refusal = message
        self.view.clear_turn_failure(remove=True)
        self._last_failure = failure = failure_for(kind, message)
        self.view.show_turn_failure(failure)

    def _offers_tools(self) -> bool:
        return self.reply_format.schema is None and self.tool_turns is not None and self.tool_turns.enabled

    def _approver(self) -> Approver:
        return self.tool_turns.approver() if self.tool_turns is not None else deny_all

    # -- context policy --------------------------------------------------------------------

    @property
    def context_policy(self) -> ContextPolicy:
        """This conversation's policy (else the model's default)."""
        try:
            return self.session.policy(self._turn_settings())
        except HISTORY_ERRORS:
            return self._turn_settings().context_policy

    def set_context_policy(self, policy: ContextPolicy) -> None:
        """Use `policy` for this conversation from its next message (saved in its settings)."""
        self._save_settings("Couldn't save the context policy", context_policy=policy)

    def _save_settings(self, failure: str, **changes: object) -> None:
        """The open conversation's settings change now; they are written on the history thread."""
        write = self.session.update_settings_soon(**changes)
        if write is not None:
            spawn(self._saved(write, failure))

    async def _saved(self, write: Awaitable[None], failure: str) -> None:
        try:
            await write
        except HISTORY_ERRORS as exc:
            self._history_problem(f"{failure}: {exc}")

    async def measure_draft(self, draft: str) -> Meter | None:
        """The composer meter for `draft` (None when the model cannot count or none is loaded)."""
        documents = await self.documents.counted() if self.documents is not None else None
        try:
            return await self.session.meter_async(self.engine, draft, self._turn_settings(), documents)
        except HISTORY_ERRORS:
            return None

    async def refresh_context(self, branch: Branch | None = None) -> None:
        """Show where the model's view of the open conversation begins (after opening it: its `branch`)."""
        path = None if branch is None else [item.message for item in branch]
        try:
            fitted = await self.session.context_cut_async(self.engine, self._turn_settings(), path)
        except HISTORY_ERRORS:
            return
        if fitted is not None:
            self._show_context(fitted)

    def _show_context(self, fit: Fit) -> None:
        if isinstance(self.view, ContextView):
            self.view.show_context_cut(fit.resume_turn, fit.kept_head)

    def _model_settings(self) -> ModelSettings | None:
        return self.choice.settings if self.choice is not None else None

    def _turn_settings(self) -> TurnSettings:
        return resolve(self._model_settings())

    # -- running ---------------------------------------------------------------------------

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
        await self._titler.aclose()
        await self.engine.aclose()
        self.session.close()

    async def _start_turn(self, turn: Turn, *, title: bool = False) -> None:
        # The turn runs as its own task so stop_and_wait/aclose can await it from elsewhere.
        task = self._turn = asyncio.ensure_future(self._run_turn(turn, title))
        await asyncio.wait([task])
        task.result()  # a bug in the turn code surfaces in the caller's slot

    async def _run_turn(self, turn: Turn, title: bool) -> None:
        self._last_failure = None
        self._set_busy(True)
        try:
            if await self._ready_for(turn) and await self._reply(turn) and title:
                self._titler.after_reply()
        finally:
            await turn.close_async()  # a turn cut off by an exception is recorded as interrupted
            if turn.tools is not None and self.tool_turns is not None:
                self.tool_turns.turn_ended(turn.tools.tools)
            self._set_busy(False)
            await self._after_turn()

    def _set_busy(self, busy: bool) -> None:
        self.view.set_busy(busy)
        if self.history_view is not None:
            self.history_view.set_actions_enabled(not busy)  # no regenerate or edit mid-reply

    async def _ready_for(self, turn: Turn) -> bool:
        if self._loading is not None and not self._loading.done() and self.engine.backend is None:
            # With no model yet, a message typed while loading waits for it; otherwise the
            # current model answers while the next one loads.
            await asyncio.wait([self._loading])
        if self._stop_requested:
            await turn.close_async("stopped")
            return False  # stopped while the model was still loading: nothing to show
        if self.engine.backend is None:
            await turn.record_async(TurnError(TurnErrorKind.NO_MODEL, self._load_error))
            self._fail(failure_for(TurnErrorKind.NO_MODEL, self._load_error), turn)
            return False
        try:
            await turn.refit_async(self.engine)  # stored before a model was there to measure it
        except (ContextOverflowError, ConfigError) as exc:
            await turn.record_async(TurnError(error_kind(exc), str(exc)))
            self._fail(failure_for(refusal_kind(exc), str(exc)), turn)
            return False
        return True

    async def _reply(self, turn: Turn) -> bool:
        """Run the reply (chat, structured or with tools: one turn API); True when it completed."""
        self._show_context(turn.fit)
        sink = self.view.start_reply()
        if self._doc_problems:
            sink.note("; ".join(self._doc_problems))
            self._doc_problems = []
        outcome: TurnDone | TurnError = TurnError(TurnErrorKind.BACKEND, "the reply ended without a result")
        try:
            async for event in turn.run_async(self.engine):
                outcome = self._show(event, sink) or outcome
        except EngineError as exc:
            log.warning("turn failed: %s", exc)
            outcome = TurnError(error_kind(exc), str(exc))
            await turn.record_async(outcome)
        return self._settle(outcome, sink, turn)

    def _show(self, event: Event, sink: ReplySink) -> TurnDone | TurnError | None:
        """Show one event; return it when it ends the turn."""
        match event:
            case ThinkingDelta(text=text):
                sink.add_thinking(text)
            case ContentDelta(text=text):
                sink.add_content(text)
            case Recovery(reason=reason):
                sink.restart(reason)
            case StructuredRetry(attempt=attempt, error=error):
                sink.retrying(attempt, error)
            case Notice(text=text):
                sink.note(text)
            case PromptProgress(done=done, total=total):
                sink.progress(done, total)
            case StructuredValue(value=value):
                sink.add_content(fenced_json(value))
            case Sources(sources=sources):
                if isinstance(sink, SourcesSink):
                    sink.set_sources(sources)
            case ToolCall() | ToolResult() | ToolDenied() | ToolLimit():
                if self.tool_turns is not None:
                    self.tool_turns.show(event)  # the approval cards
            case TurnDone() | TurnError():
                return event
            case _:
                pass
        return None

    def _settle(self, outcome: TurnDone | TurnError, sink: ReplySink, turn: Turn) -> bool:
        if isinstance(outcome, TurnError):
            log.warning("turn failed: %s: %s", outcome.kind, outcome.message)
            self._fail(failure_for(outcome.kind, outcome.message), turn)
            return False
        sink.finish(outcome.stats)
        self.view.show_stats(outcome.stats)
        return outcome.stats.finish_reason != FinishReason.CANCELLED

    def _fail(self, failure: TurnFailure, turn: Turn) -> None:
        self._last_failure = failure
        self._retry_pending = failure.action is FailureAction.RETRY
        self._retry_user_id = turn.user_message_id
        self.view.show_turn_failure(failure)

    # -- conversations ---------------------------------------------------------------------

    async def new_conversation(self) -> None:
        """Stop any reply, then start over with an empty conversation (stored at its first message)."""
        await self.stop_and_wait()
        self._retry_pending = False
        self.session.new()
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

        def read() -> tuple[Branch, ConversationSettings]:
            self.session.open(conversation_id, reveal=reveal)
            return self._read_branch(), self.session.settings

        try:
            branch, settings = await self.session.io(read)
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't open that conversation: {exc}")
            return False
        self._show_branch(branch)
        self._show_format(settings.reply_format)
        if self.documents is not None:
            self.documents.load(settings.to_stored())
        self._list_changed()
        await self.refresh_context(branch)
        return True

    async def switch_version(self, message_id: int) -> bool:
        """Show the branch through another version of a message (the ‹ n/m › navigator)."""
        if self.busy:
            return False
        def read() -> Branch:
            self.session.switch_version(message_id)
            return self._read_branch()

        try:
            branch = await self.session.io(read)
        except HISTORY_ERRORS as exc:
            self._history_problem(f"Couldn't show that version: {exc}")
            return False
        self._show_branch(branch)
        return True

    def set_reply_format(self, fmt: ReplyFormat) -> None:
        """Use `fmt` for this conversation's next replies (saved in its settings)."""
        self.reply_format = fmt
        self._save_settings("Couldn't save the reply format", reply_format=fmt)

    async def _branch(self, *, upto: int | None = None) -> Branch:
        return await self.session.io(partial(self._read_branch, upto=upto))

    def _read_branch(self, *, upto: int | None = None) -> Branch:
        return HistorySession(self.session).branch(upto=upto)

    def _show_branch(self, branch: Branch) -> None:
        self._retry_pending = False
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

    async def _after_turn(self) -> None:
        """Bring the message widgets' ids in step with what was stored."""
        if self.history_view is None:
            return
        try:
            branch = await self._branch()
        except HISTORY_ERRORS as exc:
            log.warning("history: could not read the conversation back: %s", exc)
            return
        if not self.history_view.tag_branch(branch):
            self._show_stored(branch)
        await self.history_view.conversations_changed()

    def _show_stored(self, branch: Branch) -> None:
        """Show what was stored when the screen differs, keeping the failure banner under it.

        A failed turn can store what the screen does not show: a reply cut off by an error
        (its partial text is kept), or after a regenerate that kept nothing, the old answer
        again. The next message follows what is stored, so the screen must show it.
        """
        failure, retry = self._last_failure, self._retry_pending
        self._show_branch(branch)
        if failure is not None:
            self.view.show_turn_failure(failure)
            self._retry_pending = retry

    def _list_changed(self) -> None:
        """The sidebar and the title re-read in the background (the caller does not wait for them)."""
        if self.history_view is not None:
            spawn(self.history_view.conversations_changed())

    def _history_problem(self, text: str) -> None:
        if self.history_view is not None:
            self.history_view.show_history_problem(text)
