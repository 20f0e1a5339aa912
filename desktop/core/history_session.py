"""The window's side of the history store (no Qt): which conversation is open, and the calls on it.

The controller and the sidebar share one `HistorySession`. A conversation is created in
the store only when its first message is sent, so New and Ctrl+N never leave empty
conversations behind. Everything here runs on the GUI (event-loop) thread, the thread
that opened the store.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.backends.base import Message
from engine.history.conversation_lock import ConversationBusy, ConversationLock
from engine.history.export import export_json, export_markdown, import_json
from engine.history.recorder import TurnRecorder, prompt_messages
from engine.history.store import HistoryStore
from engine.history.types import Conversation, HistoryError, SearchHit, StoredMessage, Versions
from models.library.json_input import IMPORT_MAX_BYTES, JsonInputError, parse_json_input, read_json_input
from models.library.jsonstore import write_text_atomic
from models.library.paths import ember_paths

log = logging.getLogger("desktop.history")

# What a failed history call can raise: the store's own error, SQLite's, the file system's.
HISTORY_ERRORS = (HistoryError, OSError)  # the store translates sqlite3 errors


@dataclass(frozen=True, slots=True)
class BranchItem:
    """One message of the active branch with its place among its versions."""

    message: StoredMessage
    versions: Versions


Branch = list[BranchItem]


def _versions(message: StoredMessage, siblings: dict[int | None, tuple[int, ...]]) -> Versions:
    ids = siblings.get(message.parent_id, (message.id,))
    return Versions(ids.index(message.id), len(ids), ids)


def open_history(path: Path | None = None) -> tuple[HistorySession | None, str]:
    """The session on the history database, or (None, a one-line notice) when it cannot be used."""
    try:
        target = path or ember_paths().ensure().history_db
        store = HistoryStore(target)
    except HISTORY_ERRORS as exc:
        log.warning("history unavailable: %s", exc)
        return None, f"History is off for this session (conversations will not be saved): {exc}"
    return HistorySession(store), ""


class LockedTurnRecorder(TurnRecorder):
    """A TurnRecorder that releases its conversation lock when the turn is over."""

    def __init__(self, store: HistoryStore, conversation_id: int, *, model: str, lock: ConversationLock) -> None:
        super().__init__(store, conversation_id, model=model)
        self._lock = lock

    def abandon(self, status: Literal["stopped", "interrupted"] = "interrupted") -> None:
        try:
            super().abandon(status)  # also the end of close(), after a finished turn too
        finally:
            self._lock.release()


def _begun(recorder: TurnRecorder, begin: Callable[[], object]) -> TurnRecorder:
    try:
        begin()
    except BaseException:
        recorder.abandon("interrupted")  # releases the lock; nothing was opened
        raise
    return recorder


class HistorySession:
    """The open conversation (None: a fresh one, not stored yet) and the store calls the GUI makes."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store
        self.conversation_id: int | None = None
        self._pending_settings: dict[str, Any] = {}  # for the fresh conversation, until it is stored

    # -- the open conversation ----------------------------------------------------------

    def new(self) -> None:
        self.conversation_id = None
        self._pending_settings = {}

    def open(self, conversation_id: int, *, reveal: int | None = None) -> Branch:
        """Make `conversation_id` the open one (showing message `reveal`'s branch); its active branch."""
        self.store.conversation(conversation_id)  # NotFoundError before anything changes
        if reveal is not None:
            self.store.switch_version(reveal)
        self.conversation_id = conversation_id
        self._pending_settings = {}
        return self.branch()

    @property
    def settings(self) -> Mapping[str, Any]:
        if self.conversation_id is None:
            return self._pending_settings
        return self.store.conversation(self.conversation_id).settings

    def update_settings(self, settings: Mapping[str, Any]) -> None:
        if self.conversation_id is None:
            self._pending_settings = dict(settings)
        else:
            self.store.update_conversation(self.conversation_id, settings=settings)

    def branch(self, *, upto: int | None = None) -> Branch:
        """The open conversation's active branch (or the one ending at `upto`), with versions."""
        if self.conversation_id is None:
            return []
        path = self.store.path(self.conversation_id, leaf_id=upto)
        siblings = self.store.sibling_ids(self.conversation_id)  # one query, not one per message
        return [BranchItem(m, _versions(m, siblings)) for m in path]

    @staticmethod
    def thread_of(branch: Branch) -> list[Message]:
        """`thread()` for a branch already read (a long conversation is not read twice)."""
        return [{"role": item.message.role, "content": item.message.content} for item in branch
                if item.message.role != "assistant" or item.message.content.strip()]

    def thread(self, *, upto: int | None = None) -> list[Message]:
        """The branch as chat messages, without the system prompt (the controller's in-memory copy).

        Consecutive questions stay apart: the context policy drops or joins them.
        """
        if self.conversation_id is None:
            return []
        return prompt_messages(self.store, self.conversation_id, upto=upto, system="", join_roles=False)

    def switch_version(self, message_id: int) -> Branch:
        self.store.switch_version(message_id)
        return self.branch()

    # -- starting turns -----------------------------------------------------------------

    def record_send(self, text: str, *, model: str) -> TurnRecorder:
        """Commit the user's message (creating the conversation if it is fresh) and open its turn."""
        recorder = self._recorder(self._ensure_conversation(model), model)
        return _begun(recorder, lambda: recorder.begin(text))

    def record_edit(self, message_id: int, text: str, *, model: str) -> TurnRecorder:
        recorder = self._recorder(self._require_open(), model)
        return _begun(recorder, lambda: recorder.begin_edit(message_id, text))

    def record_regenerate(self, message_id: int, *, model: str) -> TurnRecorder:
        recorder = self._recorder(self._require_open(), model)
        return _begun(recorder, lambda: recorder.begin_regenerate(message_id))

    def _recorder(self, conversation_id: int, model: str) -> TurnRecorder:
        """A recorder holding the conversation's writer lock, so an `ember chat -c` waits for it.

        The window never waits: while `ember chat` is answering in this conversation the
        turn is not recorded (HistoryError, shown), so the stored thread stays what each
        model was given.
        """
        lock = ConversationLock(self.store.db_path, conversation_id, wait_s=0)
        try:
            lock.acquire()
        except ConversationBusy as exc:
            raise HistoryError("`ember chat` is answering in this conversation right now") from exc
        return LockedTurnRecorder(self.store, conversation_id, model=model, lock=lock)

    def _ensure_conversation(self, model: str) -> int:
        if self.conversation_id is None:
            conv = self.store.create_conversation(model=model, settings=self._pending_settings)
            self.conversation_id = conv.id
            self._pending_settings = {}
        return self.conversation_id

    def _require_open(self) -> int:
        if self.conversation_id is None:
            raise HistoryError("no conversation is open")
        return self.conversation_id

    # -- titles -------------------------------------------------------------------------

    def first_exchange(self) -> tuple[str, str] | None:
        """(question, answer) when the open conversation is its first complete exchange and auto-titled."""
        if self.conversation_id is None or not self.store.conversation(self.conversation_id).title_is_auto:
            return None
        path = self.store.path(self.conversation_id)
        if [m.role for m in path] != ["user", "assistant"] or path[1].status != "complete":
            return None
        return path[0].content, path[1].content

    def set_auto_title(self, conversation_id: int, title: str) -> bool:
        return self.store.set_auto_title(conversation_id, title)

    # -- the sidebar's calls ------------------------------------------------------------

    def conversations(self, limit: int | None = None, offset: int = 0) -> list[Conversation]:
        """The most recently active first; at most `limit`, after `offset` (the sidebar reads pages)."""
        return self.store.conversations(limit=limit, offset=offset)

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
            return json.dumps(export_json(self.store, conversation_id), ensure_ascii=False, indent=2) + "\n"
        return export_markdown(self.store, conversation_id)

    def export_file(self, conversation_id: int, path: Path, fmt: str) -> None:
        """Write the export to `path` atomically: a failure (a full disk) leaves an older file whole."""
        write_text_atomic(path, self.export_text(conversation_id, fmt))

    def import_file(self, path: Path) -> Conversation:
        """`import_text` of a file read through the bounded JSON reader (no pipes, at most 1 GB)."""
        try:
            data: Any = read_json_input(path, max_bytes=IMPORT_MAX_BYTES)
        except JsonInputError as exc:
            raise HistoryError(str(exc)) from exc
        return self._import_data(data)

    def import_text(self, text: str) -> Conversation:
        """A new conversation from an Ember JSON export; HistoryError (readable) for a bad file."""
        try:
            data: Any = parse_json_input(text)
        except JsonInputError as exc:
            raise HistoryError(str(exc)) from exc
        return self._import_data(data)

    def _import_data(self, data: Any) -> Conversation:
        try:
            return import_json(self.store, data)
        except RecursionError as exc:
            raise HistoryError("it is nested too deeply to be a conversation") from exc
        except UnicodeEncodeError as exc:  # a JSON "\ud800" escape: not storable text
            raise HistoryError("it holds text that is not valid Unicode") from exc

    def close(self) -> None:
        self.store.close()
