"""The open conversation on screen (no Qt): its stored branch, reply format, documents and tool switch.

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
from desktop.core.chat_views import ChatView, HistoryView, ToolOffer
from desktop.core.conversation_docs import ConversationDocs
from desktop.core.failures import TurnFailure
from desktop.core.history_session import HISTORY_ERRORS, Branch, HistorySession
from engine.api.session import ChatSession, ConversationSettings, ReplyFormat

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
        session: ChatSession,
        view: ChatView,
        history_view: HistoryView,
        tools: ToolOffer,
        documents: ConversationDocs,
    ) -> None:
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

    async def open(self, conversation_id: int, reveal: int | None) -> Branch | None:
        """Show a stored conversation's active branch (or the branch of message `reveal`); None: not opened."""

        def read() -> tuple[Branch, ConversationSettings]:
            self.session.open(conversation_id, reveal=reveal)
            return self.read_branch(), self.session.settings

        try:
            branch, settings = await self.session.io(read)
        except HISTORY_ERRORS as exc:
            self.problem(f"Couldn't open that conversation: {exc}")
            return None
        self.show_branch(branch)
        self.show_format(settings.reply_format)
        self.documents.load(settings)
        self.list_changed()
        return branch

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

    def save_settings(self, failure: str, **changes: object) -> None:
        """The open conversation's settings change now; they are written on the history thread."""
        write = self.session.update_settings_soon(**changes)
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
