"""The open conversation as the session knows it: which one, its settings, the documents it keeps.

A front end asks for the settings often (tools on? which policy?) and the window must not read
the disk for that on its GUI thread, so they are kept as read when the conversation opened or
last written here. A fresh conversation keeps its settings here until its first message stores
it. The files and the collection a conversation answers from are remembered in its settings.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from engine.history.store import HistoryStore
from engine.history.types import HistoryError
from engine.session.settings import ConversationSettings

T = TypeVar("T")
log = logging.getLogger("engine.session")


class Io(Protocol):
    """Where a session does its store work: `io(fn)` awaits `fn()` (on its history thread, if any)."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


class ConversationState:
    """The open conversation's id (None: a fresh one), its settings as last read or written, its documents."""

    def __init__(self, store: HistoryStore, conversation_id: int | None, io: Io) -> None:
        self.store = store
        self.io = io  # the session's: store work on its history thread when it has one
        self.conversation_id = conversation_id
        self._pending = ConversationSettings()  # a fresh conversation's settings, until it is stored
        self._known: tuple[int, ConversationSettings] | None = None

    def open(self, conversation_id: int | None, stored: Mapping[str, Any] | None = None) -> None:
        """`conversation_id` is the open one now (None: a fresh one), with its `stored` settings if read."""
        self.conversation_id = conversation_id
        self._pending = ConversationSettings()
        self._known = None
        if conversation_id is not None and stored is not None:
            self._known = (conversation_id, ConversationSettings.from_stored(stored))

    @property
    def settings(self) -> ConversationSettings:
        """The open conversation's settings: as read when it opened or last written here."""
        open_id, known = self.conversation_id, self._known
        if open_id is None:
            return self._pending
        if known is not None and known[0] == open_id:
            return known[1]
        settings = ConversationSettings.from_stored(self.store.conversation(open_id).settings)
        self._known = (open_id, settings)
        return settings

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
        """Change the open conversation's settings as this session knows them now; the write to await.

        The write (through `io`, on the history thread when there is one) goes to the
        conversation open at the call, even if another opens meanwhile. None when there is
        nothing to write: a fresh conversation keeps its settings until it is stored.
        """
        target = self.conversation_id
        if target is None:
            self._pending = self._pending.with_(**changes)
            return None
        self._known = (target, self.settings.with_(**changes))

        async def write() -> None:
            try:
                await self.io(partial(self.update_settings, target, **changes))
            except BaseException:
                self._known = None  # read them again: this change may not be stored
                raise

        return write()

    def documents(self, attach: Sequence[Path], collection: str | None) -> tuple[list[Path], str | None]:
        """The files (the remembered ones, then `attach`) and the collection (`collection`, else the
        remembered one) a message is answered from."""
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
