"""The open conversation on screen (no Qt): its stored branch, reply format, documents, tool switch
and context (its policy, the composer's meter, where the model's view of it begins).

Opening a conversation, switching a message's version and starting over all end here, as
does the read-back after each turn that brings the message widgets' ids in step with what
was stored. The store work runs on the session's history thread; the GUI thread never waits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from functools import partial

from desktop.core.async_tasks import spawn
from desktop.core.chat_views import ChatView, ContextView, HistoryView, ToolOffer
from desktop.core.conversation_docs import ConversationDocs
from desktop.core.failures import TurnFailure
from desktop.core.history_session import HISTORY_ERRORS, Branch, HistorySession
from desktop.core.model_slot import ModelSlot
from engine.api.conversations import Meter
from engine.api.session import ChatSession, ConversationSettings, Engine, ReplyFormat
from engine.api.values import ContextPolicy, Fit

log = logging.getLogger("desktop.controller")


@dataclass(slots=True)
class RetryState:
    """The last failed turn: its banner, and the stored question a Try again answers."""

    pending: bool = False
    user_id: int | None = None
    failure: TurnFailure | None = None


class ConversationScreen:
    """Keeps the window showing the session's open conversation."""

    def __init__(
        self,
        engine: Engine,
        models: ModelSlot,
        session: ChatSession,
        view: ChatView,
        history_view: HistoryView,
        tools: ToolOffer,
        documents: ConversationDocs,
    ) -> None:
        self.engine = engine
        self.models = models
        self.session = session
        self.view = view
        self.history_view = history_view
        self.tools = tools
        self.documents = documents
        self.retry = RetryState()
        self.reply_format = ReplyFormat()

    def new(self) -> None:
        """An empty conversation (stored at its first message)."""
        self.retry.pending = False
        self.session.new()
        self.documents.load(None)
        self.view.clear_conversation()
        self.show_format(ReplyFormat())
        self.list_changed()

    async def open(self, conversation_id: int, reveal: int | None) -> bool:
        """Show a stored conversation's active branch (or the branch of message `reveal`), and where
        the model's view of it begins; False when it could not be opened."""

        def read() -> tuple[Branch, ConversationSettings]:
            self.session.open(conversation_id, reveal=reveal)
            return self.read_branch(), self.session.settings

        try:
            branch, settings = await self.session.io(read)
        except HISTORY_ERRORS as exc:
            self.problem(f"Couldn't open that conversation: {exc}")
            return False
        self.show_branch(branch)
        self.show_format(settings.reply_format)
        self.documents.load(settings)
        self.list_changed()
        try:
            fitted = await self.session.context_cut_async(
                self.engine, self.models.turn_settings(), [item.message for item in branch]
            )
        except HISTORY_ERRORS:
            return True
        if fitted is not None:
            self.show_cut(fitted)
        return True

    async def switch_version(self, message_id: int) -> bool:
        """Show the branch through another version of a message (the ‹ n/m › navigator)."""

        def read() -> Branch:
            self.session.switch_version(message_id)
            return self.read_branch()

        try:
            branch = await self.session.io(read)
        except HISTORY_ERRORS as exc:
            self.problem(f"Couldn't show that version: {exc}")
            return False
        self.show_branch(branch)
        return True

    async def branch(self, *, upto: int | None = None) -> Branch:
        return await self.session.io(partial(self.read_branch, upto=upto))

    def read_branch(self, *, upto: int | None = None) -> Branch:
        return HistorySession(self.session).branch(upto=upto)

    def show_branch(self, branch: Branch) -> None:
        self.retry.pending = False
        self.view.clear_conversation()
        self.history_view.show_branch(branch)

    def show_format(self, fmt: ReplyFormat) -> None:
        self.tools.conversation_changed()
        self.reply_format = fmt
        self.history_view.show_reply_format(fmt)

    def set_format(self, fmt: ReplyFormat) -> None:
        """Use `fmt` for this conversation's next replies (saved in its settings)."""
        self.reply_format = fmt
        self.save_settings("Couldn't save the reply format", reply_format=fmt)

    @property
    def policy(self) -> ContextPolicy:
        """This conversation's context policy (else the model's default)."""
        try:
            return self.session.policy(self.models.turn_settings())
        except HISTORY_ERRORS:
            return self.models.turn_settings().context_policy

    def set_policy(self, policy: ContextPolicy) -> None:
        """Use `policy` for this conversation from its next message (saved in its settings)."""
        self.save_settings("Couldn't save the context policy", context_policy=policy)

    async def measure_draft(self, draft: str) -> Meter | None:
        """The composer meter for `draft` (None when the model cannot count or none is loaded)."""
        documents = await self.documents.counted()
        try:
            return await self.session.meter_async(self.engine, draft, self.models.turn_settings(), documents)
        except HISTORY_ERRORS:
            return None

    def show_cut(self, fit: Fit) -> None:
        """Mark where the model's view of the conversation begins."""
        if isinstance(self.view, ContextView):
            self.view.show_context_cut(fit.resume_turn, fit.kept_head)

    def save_settings(self, failure: str, **changes: object) -> None:
        """The open conversation's settings change now; they are written on the history thread."""
        write = self.session.state.update_settings_soon(**changes)
        if write is not None:
            spawn(self._saved(write, failure))

    async def _saved(self, write: Awaitable[None], failure: str) -> None:
        try:
            await write
        except HISTORY_ERRORS as exc:
            self.problem(f"{failure}: {exc}")

    async def after_turn(self) -> None:
        """Bring the message widgets' ids in step with what was stored."""
        try:
            branch = await self.branch()
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
        failure, retry = self.retry.failure, self.retry.pending
        self.show_branch(branch)
        if failure is not None:
            self.view.show_turn_failure(failure)
            self.retry.pending = retry

    def list_changed(self) -> None:
        """The sidebar and the title re-read in the background (the caller does not wait for them)."""
        spawn(self.history_view.conversations_changed())

    def problem(self, text: str) -> None:
        self.history_view.show_history_problem(text)
