"""The window's side of the history store (no Qt): the sidebar's calls and the branch it shows.

The controller's `ChatSession` (engine/session) owns the open conversation and every turn;
`HistorySession` gives the sidebar the store's list, search, rename, delete, export and
import, and the open branch with each message's versions. The calls are synchronous; the
window makes its reads through `io` (the session's history thread), never on the GUI thread.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.api.conversations import (
    IMPORT_MAX_BYTES,
    DamagedImage,
    HistoryStore,
    JsonInputError,
    export_json,
    export_markdown,
    import_json,
    read_json_input,
)
from engine.api.program import ember_paths, write_text_atomic
from engine.api.session import ChatSession
from engine.api.text import strict_dumps
from engine.api.values import Conversation, HistoryError, ImageData, SearchHit, StoredMessage, Versions

log = logging.getLogger("desktop.history")
T = TypeVar("T")

# What a failed history call can raise: the store's own error, SQLite's, the file system's.
HISTORY_ERRORS = (HistoryError, OSError)  # the store translates sqlite3 errors


@dataclass(frozen=True, slots=True)
class BranchItem:
    """One message of the active branch with its place among its versions."""

    message: StoredMessage
    versions: Versions
    images: Sequence[ImageData] = ()  # a question's pictures, in order
    damaged: Sequence[DamagedImage] = ()  # its pictures missing or changed on disk (shown as placeholders)


Branch = list[BranchItem]


def _versions(message: StoredMessage, siblings: dict[int | None, tuple[int, ...]]) -> Versions:
    ids = siblings.get(message.parent_id, (message.id,))
    return Versions(ids.index(message.id), len(ids), ids)


def open_history(path: Path | None = None) -> tuple[ChatSession, str]:
    """The session on the history database; when it cannot be used, an unsaved one and a one-line notice.

    A folder Ember cannot write (a read-only mount, a full disk) is found before the first
    message, not by it: the chat then lives in memory, so nothing the user types is refused.
    """
    try:
        target = path or ember_paths().ensure().history_db
        _check_writable(target.parent)
        store = HistoryStore(target)
    except _ReadOnly as exc:
        log.warning("history read-only: %s", exc)
        return ChatSession.unsaved(), (
            f"History is read-only ({exc}): this chat is kept in memory and will not be saved."
        )
    except HISTORY_ERRORS as exc:
        log.warning("history unavailable: %s", exc)
        return ChatSession.unsaved(), f"History is off for this session (conversations will not be saved): {exc}"
    return ChatSession(store), ""


class _ReadOnly(Exception):
    pass


def _check_writable(folder: Path) -> None:
    """Raise `_ReadOnly` naming `folder` and why when a file cannot be created in it (as root too)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise _ReadOnly(f"{folder}: {exc.strerror or exc}") from exc


class HistorySession:
    """The sidebar's calls on the session's store, and the open branch with its versions."""

    def __init__(self, session: ChatSession) -> None:
        self.session = session
        self.store = session.store

    @property
    def conversation_id(self) -> int | None:
        return self.session.conversation_id

    async def io(self, fn: Callable[[], T]) -> T:
        """`fn()` (calls on this object) on the session's history thread."""
        return await self.session.io(fn)

    def branch(self, *, upto: int | None = None) -> Branch:
        """The open conversation's active branch (or the one ending at `upto`), with versions."""
        if self.conversation_id is None:
            return []
        path = self.session.path(upto=upto)
        siblings = self.store.sibling_ids(self.conversation_id)  # one query, not one per message
        images = self.session.stored_images(path)
        return [
            BranchItem(m, _versions(m, siblings), images.found.get(m.id, ()), images.damaged.get(m.id, ()))
            for m in path
        ]

    # -- the sidebar's calls ------------------------------------------------------------

    def conversations(self, limit: int | None = None, offset: int = 0, *, archived: bool = False) -> list[Conversation]:
        """The most recently active first; at most `limit`, after `offset` (the sidebar reads pages).

        `archived`: the archived ones instead of the list.
        """
        return self.store.conversations(limit=limit, offset=offset, archived=archived)

    def archived_count(self) -> int:
        return self.store.archived_count()

    def archive(self, conversation_id: int) -> None:
        self.store.archive(conversation_id)

    def unarchive(self, conversation_id: int) -> None:
        self.store.unarchive(conversation_id)

    def search(self, text: str) -> list[SearchHit]:
        return self.store.search(text)

    def title(self, conversation_id: int) -> str:
        return self.store.conversation(conversation_id).title

    def rename(self, conversation_id: int, title: str) -> None:
        self.store.rename(conversation_id, title)

    def delete(self, conversation_id: int) -> None:
        self.store.delete(conversation_id)

    def restore(self, conversation_id: int) -> None:
        self.store.restore(conversation_id)

    def export_text(self, conversation_id: int, fmt: str) -> str:
        """The conversation as Markdown ("md") or as Ember's JSON export ("json")."""
        if fmt == "json":
            return strict_dumps(export_json(self.store, conversation_id), ensure_ascii=False, indent=2) + "\n"
        return export_markdown(self.store, conversation_id)

    def export_file(self, conversation_id: int, path: Path, fmt: str) -> None:
        """Write the export to `path` atomically: a failure (a full disk) leaves an older file whole."""
        write_text_atomic(path, self.export_text(conversation_id, fmt))

    def import_file(self, path: Path) -> Conversation:
        """A new conversation from an Ember JSON export, read through the bounded JSON reader (no
        pipes, at most 1 GB); HistoryError (readable) for a bad file."""
        try:
            data: Any = read_json_input(path, max_bytes=IMPORT_MAX_BYTES)
        except JsonInputError as exc:
            raise HistoryError(str(exc)) from exc
        try:
            return import_json(self.store, data)
        except RecursionError as exc:
            raise HistoryError("it is nested too deeply to be a conversation") from exc
        except UnicodeEncodeError as exc:  # a JSON "\ud800" escape: not storable text
            raise HistoryError("it holds text that is not valid Unicode") from exc
