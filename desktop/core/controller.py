"""The chat controller: the window's side of a conversation, with no Qt in it.

The window builds it with its view and parts (history view, tools, documents); gestures become
calls on the one `ChatSession` (the same turn as `ember chat`'s), whose events it shows. The
session's history work runs on its history thread: the GUI thread never waits on the disk.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from desktop.core.chat_views import ChatView, HistoryView, NoTools, QuietHistory, ReplySink, ToolOffer
from desktop.core.conversation_docs import ConversationDocs
from desktop.core.conversation_screen import ConversationScreen
from desktop.core.failures import HISTORY_PROBLEM, FailureAction, TurnFailure, failure_for, refusal_kind
from desktop.core.history_session import HISTORY_ERRORS, HistorySession
from desktop.core.model_slot import ModelSlot
from desktop.core.pending_images import PendingImages
from desktop.core.reply_events import play
from engine.api.conversations import error_kind
from engine.api.errors import ConfigError, ContextOverflowError
from engine.api.session import Ask, ChatSession, ConversationTitler, Engine, Turn
from engine.api.tools import ToolSet
from engine.api.values import FinishReason, TurnDone, TurnError, TurnErrorKind

log = logging.getLogger("desktop.controller")
TITLE_AFTER_IDLE_S = 1.5  # the first reply has been in this long with no new message: the title turn runs


class ChatController:
    """Runs one conversation at a time against one engine, through one session, and keeps the view in step."""

    def __init__(
        self,
        engine: Engine,
        view: ChatView,
        *,
        session: ChatSession | None = None,
        history_view: HistoryView | None = None,
        tool_turns: ToolOffer | None = None,
        documents: ConversationDocs | None = None,
    ) -> None:
        self.engine = engine
        self.view = view
        self.session = session if session is not None else ChatSession.unsaved()
        self.session.offload()  # its store work on a thread of its own, never on the GUI thread
        self.history = HistorySession(self.session) if self.session.saved else None  # the sidebar's
        self.tool_turns = tool_turns or NoTools()
        self.documents = documents or ConversationDocs()
        self.models = ModelSlot(engine, view)
        self.screen = ConversationScreen(
            engine, self.models, self.session, view, history_view or QuietHistory(), self.tool_turns, self.documents
        )
        self._retry = self.screen.retry
        self.images = PendingImages()  # the window's attachment chips fill it; a send takes them
        self._turn: asyncio.Task[None] | None = None
        self._opening = False  # a message is being checked against the context and stored
        self._stop_requested = False
        self._titler = ConversationTitler(engine, self.session, self.screen.list_changed)
        self._title_due: asyncio.TimerHandle | None = None  # the title turn, waiting for a quiet moment
        self.refusal = ""  # why the last message was not sent (its draft stays in the composer)

    # -- state -----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A message is being checked and stored, or its turn runs."""
        return self._opening or (self._turn is not None and not self._turn.done())

    @property
    def can_retry(self) -> bool:
        return self._retry.pending and not self.busy

    # -- turns -----------------------------------------------------------------------------

    async def send(self, text: str) -> bool:
        """Send a user message and stream the reply; False when it was not sent (the reason is shown)."""
        text = text.strip()
        self.refusal = ""
        if not text or self.busy:
            return False
        turn = await self._open(self.documents.ask(text, self.images.items))
        if turn is None:
            return False  # refused before it was stored: the draft and its pictures stay
        self.view.show_user_message(text)
        self.images.sent()
        await self._start_turn(turn, title=True)
        return True

    async def retry(self) -> bool:
        """Run the failed last turn again (the banner's Try again): another answer to its question."""
        if not self.can_retry or self._retry.user_id is None:
            return False
        self._retry.pending = False
        return await self._rerun(Ask.regenerate(self._retry.user_id))

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
            branch = await self.screen.branch(upto=turn.user_message_id)
        except HISTORY_ERRORS as exc:
            await turn.close_async()
            self.screen.problem(f"Couldn't read the conversation: {exc}")
            return False
        self.screen.show_branch(branch)
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
        tools = await self.tool_turns.for_turn() if self.screen.reply_format.schema is None else None
        try:
            turn = await self.session.open_turn_async(
                self.engine,
                ask,
                self.models.turn_settings(),
                tools=tools,
                schema=self.screen.reply_format.schema,
                model=self.models.name,
                approver=self.tool_turns.approver(),
                documents=partial(self.documents.prepare, self.session, ask),
            )
        except (ContextOverflowError, ConfigError) as exc:
            return self._refuse(refusal_kind(exc), str(exc), tools)
        except HISTORY_ERRORS as exc:
            return self._refuse(HISTORY_PROBLEM, str(exc), tools)
        self._retry.pending = False
        self.view.clear_turn_failure(remove=False)
        self.screen.list_changed()
        return turn

    def _refuse(self, kind: str, message: str, tools: ToolSet | None) -> None:
        if tools is not None:
            self.tool_turns.turn_ended(tools)
        self.refusal = message
        self.view.clear_turn_failure(remove=True)
        self._retry.failure = failure = failure_for(kind, message)
        self.view.show_turn_failure(failure)

    # -- running ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the reply in progress; the engine ends it within one token."""
        if self.busy:
            self._stop_requested = True  # also covers a turn still waiting for the model
            self.models.stop_waiting()
            self.engine.stop()
            self.tool_turns.stop()  # an open approval question is answered "deny"

    async def stop_and_wait(self) -> None:
        turn = self._turn
        if turn is not None and not turn.done():
            self.stop()
            await asyncio.wait([turn])

    async def aclose(self) -> None:
        """Stop the reply and any title, shut the engine down, close the history (window closing)."""
        await self.stop_and_wait()
        self._hold_title()
        await self._titler.aclose()
        await self.engine.aclose()
        self.session.close()

    async def _start_turn(self, turn: Turn, *, title: bool = False) -> None:
        # The turn runs as its own task so stop_and_wait/aclose can await it from elsewhere.
        task = self._turn = asyncio.ensure_future(self._run_turn(turn, title))
        await asyncio.wait([task])
        task.result()  # a bug in the turn code surfaces in the caller's slot

    async def _run_turn(self, turn: Turn, title: bool) -> None:
        self._retry.failure = None
        self._hold_title()  # the user's turn first: a title never makes a message wait
        self._set_busy(True)
        try:
            if await self._ready_for(turn) and await self._reply(turn) and title:
                self._title_when_idle()
        finally:
            await turn.close_async()  # a turn cut off by an exception is recorded as interrupted
            if turn.tools is not None:
                self.tool_turns.turn_ended(turn.tools.tools)
            self._set_busy(False)
            await self.screen.after_turn()

    def _title_when_idle(self) -> None:
        """Title the conversation after a quiet moment: a follow-up sent right after the first
        reply runs at once, and the title is then left to the first words (as without a grammar)."""
        self._title_due = asyncio.get_running_loop().call_later(TITLE_AFTER_IDLE_S, self._title_now)

    def _title_now(self) -> None:
        self._title_due = None
        if not self.busy:
            self._titler.after_reply()

    def _hold_title(self) -> None:
        if self._title_due is not None:
            self._title_due.cancel()
            self._title_due = None
        self._titler.step_aside()

    def _set_busy(self, busy: bool) -> None:
        self.view.set_busy(busy)
        self.screen.history_view.set_actions_enabled(not busy)  # no regenerate or edit mid-reply

    async def _ready_for(self, turn: Turn) -> bool:
        await self.models.wait_for_first()
        if self._stop_requested:
            await turn.close_async("stopped")
            return False  # stopped while the model was still loading (the waiting reply says so)
        if self.engine.backend is None:
            await turn.record_async(TurnError(TurnErrorKind.NO_MODEL, self.models.load_error))
            self._fail(failure_for(TurnErrorKind.NO_MODEL, self.models.load_error), turn)
            return False
        await self.models.settle(turn, self.session)
        try:
            await turn.refit_async(self.engine)  # stored before a model was there to measure it
        except (ContextOverflowError, ConfigError) as exc:
            await turn.record_async(TurnError(error_kind(exc), str(exc)))
            self._fail(failure_for(refusal_kind(exc), str(exc)), turn)
            return False
        return True

    async def _reply(self, turn: Turn) -> bool:
        """Run the reply (chat, structured or with tools: one turn API); True when it completed."""
        self.screen.show_cut(turn.fit)
        sink = self.models.take_waiting() or self.view.start_reply()
        if notes := self.documents.take_notes():  # files it could not read, no passage that matches
            sink.note("; ".join(notes))
        return self._settle(await play(turn, self.engine, sink, self.tool_turns), sink, turn)

    def _settle(self, outcome: TurnDone | TurnError, sink: ReplySink, turn: Turn) -> bool:
        if isinstance(outcome, TurnError):
            log.warning("turn failed: %s: %s", outcome.kind, outcome.message)
            self._fail(failure_for(outcome.kind, outcome.message), turn)
            return False
        sink.finish(outcome.stats)
        self.view.show_stats(outcome.stats)
        return outcome.stats.finish_reason != FinishReason.CANCELLED

    def _fail(self, failure: TurnFailure, turn: Turn) -> None:
        self._retry.failure = failure
        self._retry.pending = failure.action is FailureAction.RETRY
        self._retry.user_id = turn.user_message_id
        self.view.show_turn_failure(failure)

    # -- conversations ---------------------------------------------------------------------

    async def new_conversation(self) -> None:
        """Stop any reply, then start over with an empty conversation (stored at its first message)."""
        await self.stop_and_wait()
        self.screen.new()

    async def open_conversation(self, conversation_id: int, *, reveal: int | None = None) -> bool:
        """Show a stored conversation's active branch (or the branch of message `reveal`)."""
        if self.history is None:
            return False
        await self.stop_and_wait()
        return await self.screen.open(conversation_id, reveal)

    async def switch_version(self, message_id: int) -> bool:
        """Show the branch through another version of a message (the ‹ n/m › navigator)."""
        return not self.busy and await self.screen.switch_version(message_id)
