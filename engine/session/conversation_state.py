"""The open conversation as a session knows it: which one, its settings, the documents it keeps.

Its settings are kept as read when it opened or last written here: a front end asks for them
often (tools on? which policy?) and the window must not read the disk for that on its GUI thread.
A fresh conversation keeps them here until its first message stores it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from engine.history.store import HistoryStore
from engine.history.types import Conversation, HistoryError
from engine.session.settings import ConversationSettings

Io = Callable[[Callable[[], None]], Awaitable[None]]  # the session's `io`: store work on its history thread
log = logging.getLogger("engine.session")


class ConversationState:
    """The open conversation's id (None: a fresh one), its settings as last read or written, its files."""

    def __init__(self, store: HistoryStore, conversation_id: int | None, io: Io) -> None:
        self.store, self.io = store, io
        self.conversation_id = conversation_id
        self._pending = ConversationSettings()  # a fresh conversation's settings, until it is stored
        self._known: tuple[int, ConversationSettings] | None = None

    def open(self, conversation: Conversation | None) -> None:
        """`conversation` (as just read or stored) is the open one now; None: a fresh one."""
        self._pending = ConversationSettings()
        self.conversation_id = None if conversation is None else conversation.id
        self._known = (
            None if conversation is None else (conversation.id, ConversationSettings.from_stored(conversation.settings))
        )

    @property
    def settings(self) -> ConversationSettings:
        """The open conversation's settings: as read when it opened or last written here."""
        open_id, known = self.conversation_id, self._known
        if open_id is None:
            return self._pending
        if known is not None and known[0] == open_id:
            return known[1]
        self._known = (open_id, ConversationSettings.from_stored(self.store.conversation(open_id).settings))
        return self._known[1]

    def update_settings(self, conversation_id: int | None = None, /, **changes: object) -> None:
        """Change some of a conversation's settings (the open one's by default; the others are kept)."""
        target = self.conversation_id if conversation_id is None else conversation_id
        if target is None:
            self._pending = self._pending.with_(**changes)
            return
        stored = ConversationSettings.from_stored(self.store.conversation(target).settings).with_(**changes)
        self.store.update_conversation(target, settings=stored.to_stored())
        if target == self.conversation_id:
            self._known = (target, stored)

    def update_settings_soon(self, **changes: object) -> Coroutine[Any, Any, None] | None:
        """Change the open conversation's settings as known now; the write (through `io`) to await, to
        the conversation open at the call. None: a fresh conversation keeps them until it is stored."""
        target = self.conversation_id
        if target is None:
            return self.update_settings(**changes)  # kept here until the conversation is stored
        self._known = (target, self.settings.with_(**changes))

        async def write() -> None:
            try:
                await self.io(partial(self.update_settings, target, **changes))
            except BaseException:
                self._known = None  # read them again: this change may not be stored
                raise

        return write()

    def documents(self, attach: Sequence[Path], collection: str | None) -> tuple[list[Path], str | None]:
        """A message's files (the remembered ones, then `attach`) and collection (else the remembered one)."""
        known = self.settings
        files = [Path(p) for p in known.attachments]
        for path in attach:
            if (absolute := path.expanduser().resolve()) not in files:
                files.append(absolute)
        return files, collection or known.docs

    async def remember_documents(self, attached: Sequence[Path], collection: str | None) -> None:
        """Keep `attached` and `collection` as the open conversation's documents (written through `io`
        when they changed); a write that fails is logged, the turn goes on with them."""
        changes = {"attachments": tuple(str(p) for p in attached), "docs": collection}
        if self.settings.with_(**changes) == self.settings:
            return
        write = self.update_settings_soon(**changes)
        try:
            if write is not None:  # None: a fresh conversation keeps them until it is stored
                await write
        except (HistoryError, OSError) as exc:
            log.warning("history: could not remember the conversation's documents: %s", exc)
