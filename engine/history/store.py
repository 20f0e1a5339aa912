"""Conversation history in one SQLite file: crash-safe, searchable, never rewritten whole.

`HistoryStore(path)` opens (creating, migrating and recovering as needed) the database:
WAL journal, foreign keys on, `synchronous=FULL`, so a committed row survives a crash of
the app and of the machine. Every write is a small transaction touching the rows it
changes: a message, a turn record, a conversation's leaf pointer.

Messages form a tree per conversation: each message has a parent, siblings are versions
(a regenerated answer, an edited question), and the conversation stores the leaf of its
active branch. `path()` is that branch, `versions()` a message's place among its
siblings, `switch_version()` makes another branch active. Nothing is destroyed by an edit.

A store may be used from more than one thread (the window does its history work on a
thread of its own and a few small writes on the GUI thread): one lock serializes its calls
and transactions. Other processes open their own store on the same file, and WAL lets
them read while this one writes.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from engine.events import TurnStats
from engine.history.lock import WriterLock, forget_writer, sweep_stale, writer_alive
from engine.history.schema import SCHEMA_VERSION, SchemaTooNewError, migrate
from engine.history.search import search_conversations
from engine.history.types import (
    Conversation,
    HistoryError,
    NotFoundError,
    Outcome,
    Role,
    SearchHit,
    Status,
    StoredMessage,
    TurnKind,
    TurnRecord,
    Versions,
)
from engine.migrations import user_version as schema_version
from models.library.json_schema import strict_dumps

log = logging.getLogger("engine.history")
_P = ParamSpec("_P")
_R = TypeVar("_R")

BUSY_TIMEOUT_S = 5.0
TRASH_RETENTION_S = 7 * 24 * 3600.0  # deleted conversations stay restorable this long
TITLE_MAX_WORDS = 6
TITLE_MAX_CHARS = 48


# Markdown's markers, but not a "*" or "_" inside a word or between spaces: "6*7", "snake_case"
# and "2 * 3" keep theirs, so the title still says what was asked.
_MARKUP = re.compile(
    r"[#>`~\[\]]+"  # headings, quotes, code, strike-through, links
    r"|(?m:^\s*[*_]+\s)"  # a bullet
    r"|(?<!\w)[*_]+(?=\w)"  # emphasis opening
    r"|(?<=[\w.,;:!?)])[*_]+(?!\w)"  # emphasis closing
)


def title_from_text(text: str) -> str:
    """A sidebar title from the first words of a message (Markdown markers dropped)."""
    words = _MARKUP.sub(" ", text).split()
    title = ""
    for word in words[:TITLE_MAX_WORDS]:
        candidate = f"{title} {word}".strip()
        if len(candidate) > TITLE_MAX_CHARS:
            return (title or word[:TITLE_MAX_CHARS]).rstrip(",.;:") + "…"
        title = candidate
    if len(words) > TITLE_MAX_WORDS:
        title = title.rstrip(",.;:") + "…"
    return title or "New conversation"


def _dump(value: Mapping[str, Any] | None) -> str | None:
    if value is None:
        return None
    text = strict_dumps(dict(value), ensure_ascii=False, sort_keys=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a file name that is not UTF-8): "\udcff" escapes round-trip
        text = strict_dumps(dict(value), ensure_ascii=True, sort_keys=True)
    return text


class HistoryStore:
    """The history database: conversations, message trees, turn records, search."""

    def __init__(
        self,
        path: str | Path,
        *,
        now: Callable[[], float] = time.time,
        trash_retention_s: float = TRASH_RETENTION_S,
        read_only: bool = False,
    ) -> None:
        self.db_path = Path(path)
        self._now = now
        self._writers_dir = self.db_path.with_name(self.db_path.name + ".writers")
        self._writer: WriterLock | None = None
        self._depth = 0
        self._lock = threading.RLock()  # one call or transaction at a time, whichever thread makes it
        if read_only:  # a read-only disk, a backup, a snapshot: list, show and export still work
            self._conn = self._connect_read_only()
            return
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = self._connect()
        try:
            self._migrate()
            self.recover_interrupted()
            self.purge_deleted(older_than_s=trash_retention_s)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise HistoryError(f"cannot use the history database {self.db_path}: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    # -- connection, transactions, lifecycle ------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            # Autocommit mode: the only transactions are the explicit ones in transaction().
            conn = sqlite3.connect(
                self.db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )  # `_lock` serializes
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open the history database {self.db_path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = FULL")
            schema_version(conn)  # "file is not a database" surfaces at the first read
        except sqlite3.DatabaseError as exc:
            conn.close()
            reason = _reason(exc, self.db_path)
            raise HistoryError(f"cannot open the history database {self.db_path}: {reason}") from exc
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        # mode=ro still wants to create the WAL index next to the file; immutable=1 does not, and is
        # right for a file nothing can change (a read-only mount), so it is the fallback.
        uri = self.db_path.resolve().as_uri()
        failure: sqlite3.Error | None = None
        for options in ("mode=ro", "mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(
                    f"{uri}?{options}", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                failure = exc
                continue
            conn.row_factory = sqlite3.Row
            try:
                version = schema_version(conn)
            except sqlite3.Error as exc:
                conn.close()
                failure = exc
                continue
            if version != SCHEMA_VERSION:
                conn.close()
                raise HistoryError(
                    f"the history database {self.db_path} is read-only and needs an upgrade "
                    f"(schema {version}, this Ember uses {SCHEMA_VERSION})"
                )
            return conn
        raise HistoryError(f"cannot open the history database {self.db_path}: {failure}")

    def _migrate(self) -> None:
        version = schema_version(self._conn)
        if version > SCHEMA_VERSION:
            # Checked before anything, WAL included, writes to the file: a newer Ember's data stays as it was.
            raise HistoryError(str(SchemaTooNewError(version, SCHEMA_VERSION)))
        self._conn.execute("PRAGMA journal_mode = WAL")
        if 0 < version < SCHEMA_VERSION:
            self._backup(version)
        start = migrate(self._conn)
        if start != SCHEMA_VERSION:
            log.info("history database %s migrated from schema %d to %d", self.db_path, start, SCHEMA_VERSION)

    def _backup(self, version: int) -> None:
        """Copy an old-schema database aside before migrating it, once per version."""
        target = self.db_path.with_name(f"{self.db_path.name}.v{version}.bak")
        if target.exists():
            return
        dest = sqlite3.connect(target)
        try:
            self._conn.backup(dest)
        finally:
            dest.close()

    @contextmanager
    def transaction(self) -> Generator[sqlite3.Connection]:
        """One write transaction; nested uses join the outer one (no other thread's call runs meanwhile)."""
        with self._lock:
            yield from self._transaction()

    def _transaction(self) -> Generator[sqlite3.Connection]:
        if self._depth:
            self._depth += 1
            try:
                yield self._conn
            finally:
                self._depth -= 1
            return
        # IMMEDIATE takes the write lock up front, so two writers wait for each other
        # (busy timeout) instead of failing when a read would upgrade to a write.
        with _as_history_error(self.db_path):
            self._conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            with _as_history_error(self.db_path):  # the body may use the connection itself
                yield self._conn
                self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error as exc:  # e.g. a full disk: SQLite rolled back already
                    log.debug("history: rollback failed after an error: %s", exc)
            raise
        finally:
            self._depth = 0

    def close(self) -> None:
        """Close the database; turns still open here are recovered as interrupted at the next start."""
        self._conn.close()
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run one read query (tests, diagnostics)."""
        return self._conn.execute(sql, params).fetchall()

    # -- crash recovery ---------------------------------------------------------------

    def recover_interrupted(self) -> int:
        """Mark replies cut off by a dead process `interrupted`; return how many turns that closed."""
        closed = 0
        writers = [r[0] for r in self._conn.execute("SELECT DISTINCT writer FROM turns WHERE outcome IS NULL")]
        own = self._writer.token if self._writer is not None else None
        for writer in writers:
            if writer == own or writer_alive(self._writers_dir, writer):
                continue
            closed += self._close_turns_of(writer)
            forget_writer(self._writers_dir, writer)
        # A streaming row no open turn accounts for has no writer that could finish it.
        orphans = (
            "FROM messages WHERE status = 'streaming' AND id NOT IN "
            "(SELECT assistant_message_id FROM turns WHERE outcome IS NULL AND assistant_message_id IS NOT NULL)"
        )
        if self._conn.execute(f"SELECT 1 {orphans} LIMIT 1").fetchone():  # read first: no write lock for nothing
            with self.transaction() as c:
                c.execute(f"UPDATE messages SET status = 'interrupted' WHERE id IN (SELECT id {orphans})")
        sweep_stale(self._writers_dir, self._now())
        return closed

    def _close_turns_of(self, writer: str) -> int:
        now = self._now()
        with self.transaction() as c:
            c.execute(
                "UPDATE messages SET status = 'interrupted', updated_at = ? WHERE status = 'streaming' AND id IN "
                "(SELECT assistant_message_id FROM turns WHERE outcome IS NULL AND writer = ?)",
                (now, writer),
            )
            cur = c.execute(
                "UPDATE turns SET outcome = 'interrupted', ended_at = ? WHERE outcome IS NULL AND writer = ?",
                (now, writer),
            )
        if cur.rowcount:
            log.warning("history: %d reply(s) cut off by a crash marked interrupted", cur.rowcount)
        return cur.rowcount

    # -- conversations ----------------------------------------------------------------

    def create_conversation(
        self, *, title: str = "", model: str = "", settings: Mapping[str, Any] | None = None
    ) -> Conversation:
        now = self._now()
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO conversations (title, model, settings, created_at, updated_at, title_is_auto) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (title, model, _dump(settings or {}), now, now, 0 if title else 1),
            )
        return self.conversation(_rowid(cur))

    def conversation(self, conversation_id: int) -> Conversation:
        """One conversation, deleted or not."""
        row = self._conn.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no conversation {conversation_id}")
        return Conversation.from_row(row)

    def conversations(
        self, *, limit: int | None = None, deleted: bool = False, offset: int = 0, archived: bool = False
    ) -> list[Conversation]:
        """Conversations by last activity, newest first (`deleted=True`: the trash instead).

        Archived ones are left out, or only they are listed with `archived=True` (the trash
        holds both). `offset` skips that many first (a sidebar reads a page at a time).
        """
        if deleted:
            where = "deleted_at IS NOT NULL"
        else:
            where = f"deleted_at IS NULL AND archived_at IS {'NOT NULL' if archived else 'NULL'}"
        rows = self._conn.execute(
            f"SELECT * FROM conversations WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (-1 if limit is None else limit, max(0, offset)),
        )
        return [Conversation.from_row(r) for r in rows]

    def latest_conversation(self) -> Conversation | None:
        found = self.conversations(limit=1)
        return found[0] if found else None

    def rename(self, conversation_id: int, title: str) -> None:
        """A title the user chose: automatic titles never replace it."""
        self._update_conversation(conversation_id, "title = ?, title_is_auto = 0", (title.strip(),))

    def set_auto_title(self, conversation_id: int, title: str, *, only_if_untitled: bool = False) -> bool:
        """Set a generated title unless the user has named the conversation; return whether it was set.

        `only_if_untitled`: keep an automatic title already there (the first-words title
        is made once, from the first exchange).
        """
        extra = " AND title = ''" if only_if_untitled else ""
        with self.transaction() as c:
            cur = c.execute(
                f"UPDATE conversations SET title = ? WHERE id = ? AND title_is_auto = 1{extra}",
                (title, conversation_id),
            )
        return cur.rowcount == 1

    def update_conversation(
        self, conversation_id: int, *, model: str | None = None, settings: Mapping[str, Any] | None = None
    ) -> None:
        if model is not None:
            self._update_conversation(conversation_id, "model = ?", (model,))
        if settings is not None:
            self._update_conversation(conversation_id, "settings = ?", (_dump(settings),))

    def set_timestamps(self, conversation_id: int, *, created_at: float, updated_at: float) -> None:
        """Restore a conversation's own times (an import keeps the original ones)."""
        self._update_conversation(conversation_id, "created_at = ?, updated_at = ?", (created_at, updated_at))

    def delete(self, conversation_id: int) -> None:
        """Move a conversation to the trash; `restore` undoes it until it is purged."""
        self._update_conversation(conversation_id, "deleted_at = coalesce(deleted_at, ?)", (self._now(),))

    def restore(self, conversation_id: int) -> None:
        self._update_conversation(conversation_id, "deleted_at = NULL", ())

    def archive(self, conversation_id: int) -> None:
        """Set a conversation aside: out of the list, everything kept; `unarchive` brings it back."""
        self._update_conversation(conversation_id, "archived_at = coalesce(archived_at, ?)", (self._now(),))

    def unarchive(self, conversation_id: int) -> None:
        self._update_conversation(conversation_id, "archived_at = NULL", ())

    def archived_count(self) -> int:
        """How many archived conversations are not in the trash."""
        row = self._conn.execute(
            "SELECT count(*) FROM conversations WHERE archived_at IS NOT NULL AND deleted_at IS NULL"
        ).fetchone()
        return int(row[0])

    def purge(self, conversation_id: int) -> None:
        """Delete a conversation for good, with its messages and turn records."""
        with self.transaction() as c:
            cur = c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        if cur.rowcount == 0:
            raise NotFoundError(f"no conversation {conversation_id}")
        self._prune_images()

    def purge_deleted(self, *, older_than_s: float = 0.0) -> int:
        """Empty the trash of conversations deleted at least `older_than_s` ago; return how many."""
        cutoff = self._now() - older_than_s  # deleted_at is NULL for live conversations: never <= cutoff
        if not self._conn.execute("SELECT 1 FROM conversations WHERE deleted_at <= ? LIMIT 1", (cutoff,)).fetchone():
            return 0  # the usual case, answered without taking the write lock
        with self.transaction() as c:
            cur = c.execute("DELETE FROM conversations WHERE deleted_at <= ?", (cutoff,))
        self._prune_images()
        return cur.rowcount

    def _prune_images(self) -> None:
        """An image goes with the last conversation that held it (`engine.history.images`)."""
        from engine.history.images import prune

        prune(self)

    def _update_conversation(self, conversation_id: int, assignments: str, params: tuple[Any, ...]) -> None:
        # `assignments` is always a literal from this class; values travel as parameters.
        with self.transaction() as c:
            cur = c.execute(f"UPDATE conversations SET {assignments} WHERE id = ?", (*params, conversation_id))
        if cur.rowcount == 0:
            raise NotFoundError(f"no conversation {conversation_id}")

    # -- messages ---------------------------------------------------------------------

    def message(self, message_id: int) -> StoredMessage:
        row = self._conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no message {message_id}")
        return StoredMessage.from_row(row)

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        """Every message of a conversation, all versions, oldest first (parents before children)."""
        rows = self._conn.execute("SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,))
        return [StoredMessage.from_row(r) for r in rows]

    def add_message(
        self,
        conversation_id: int,
        role: Role,
        content: str,
        *,
        parent_id: int | None,
        thinking: str = "",
        status: Status = "complete",
        stats: Mapping[str, Any] | None = None,
        model: str = "",
        make_active: bool = True,
        created_at: float | None = None,
        updated_at: float | None = None,
    ) -> int:
        """Insert a message under `parent_id` (None: a root); by default its branch becomes active.

        `created_at`/`updated_at` default to now (an import passes the original times).
        """
        now = self._now()
        created = now if created_at is None else created_at
        updated = created if updated_at is None else updated_at
        with self.transaction() as c:
            self._check_parent(conversation_id, parent_id)
            cur = c.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, thinking, status, stats, model, "
                "created_at, updated_at, selected_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    parent_id,
                    role,
                    content,
                    thinking,
                    status,
                    _dump(stats),
                    model,
                    created,
                    updated,
                    created,
                ),
            )
            message_id = _rowid(cur)
            if make_active:
                self.set_active_leaf(conversation_id, message_id)
            # A new message is activity: an archived conversation taken up again is back in the list.
            c.execute(
                "UPDATE conversations SET updated_at = ?, archived_at = NULL WHERE id = ?", (now, conversation_id)
            )
        return message_id

    def _check_parent(self, conversation_id: int, parent_id: int | None) -> None:
        self.conversation(conversation_id)
        if parent_id is not None and self.message(parent_id).conversation_id != conversation_id:
            raise HistoryError(f"message {parent_id} is not in conversation {conversation_id}")

    def update_text(self, message_id: int, content: str, thinking: str) -> None:
        """The streaming write: one row's text, nothing else."""
        with self.transaction() as c:
            c.execute(
                "UPDATE messages SET content = ?, thinking = ?, updated_at = ? WHERE id = ?",
                (content, thinking, self._now(), message_id),
            )

    def finish_message(
        self, message_id: int, *, content: str, thinking: str, status: Status, stats: Mapping[str, Any] | None
    ) -> None:
        now = self._now()
        with self.transaction() as c:
            c.execute(
                "UPDATE messages SET content = ?, thinking = ?, status = ?, stats = ?, updated_at = ? WHERE id = ?",
                (content, thinking, status, _dump(stats), now, message_id),
            )
            c.execute(
                "UPDATE conversations SET updated_at = ?"
                " WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)",
                (now, message_id),
            )

    def remove_message(self, message_id: int) -> None:
        """Delete a message and everything under it (used for a reply that must leave no trace)."""
        with self.transaction() as c:
            c.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def edit_message(self, message_id: int, content: str) -> int:
        """Store an edit as a new version (sibling) of the message; the old one and its replies stay."""
        old = self.message(message_id)
        return self.add_message(old.conversation_id, old.role, content, parent_id=old.parent_id)

    # -- the message tree -------------------------------------------------------------

    def set_active_leaf(self, conversation_id: int, leaf_id: int | None) -> None:
        """Point the conversation at a branch (not activity: the sidebar order stays)."""
        with self.transaction() as c:
            c.execute("UPDATE conversations SET active_leaf_id = ? WHERE id = ?", (leaf_id, conversation_id))

    def path(self, conversation_id: int, *, leaf_id: int | None = None) -> list[StoredMessage]:
        """The active branch, root first (or the branch ending at `leaf_id`)."""
        if leaf_id is None:
            leaf_id = self.conversation(conversation_id).active_leaf_id
            if leaf_id is None:
                return []
        rows = self._conn.execute(
            "WITH RECURSIVE up (id, depth) AS ("
            " SELECT id, 0 FROM messages WHERE id = ? AND conversation_id = ?"
            " UNION ALL SELECT m.parent_id, up.depth + 1 FROM messages AS m JOIN up ON m.id = up.id"
            " WHERE m.parent_id IS NOT NULL)"
            " SELECT messages.* FROM up JOIN messages ON messages.id = up.id ORDER BY up.depth DESC",
            (leaf_id, conversation_id),
        )
        return [StoredMessage.from_row(r) for r in rows]

    def sibling_ids(self, conversation_id: int) -> dict[int | None, tuple[int, ...]]:
        """Every parent's children ids, oldest first: all versions of a conversation in one light query."""
        under: dict[int | None, list[int]] = {}
        rows = self._conn.execute(
            "SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        )
        for message_id, parent_id in rows:
            under.setdefault(parent_id, []).append(int(message_id))
        return {parent: tuple(ids) for parent, ids in under.items()}

    def versions(self, message_id: int) -> Versions:
        """Where a message stands among its versions (siblings with the same parent)."""
        msg = self.message(message_id)
        rows = self._conn.execute(
            "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id",
            (msg.conversation_id, msg.parent_id),
        )
        ids = tuple(int(r[0]) for r in rows)
        return Versions(ids.index(message_id), len(ids), ids)

    def switch_version(self, message_id: int) -> list[StoredMessage]:
        """Make the branch through `message_id` active; return the new active path.

        Below the message the branch follows, at each level, the version chosen most
        recently, so going back to an older answer shows the conversation that followed it.
        Also reveals a search hit on an inactive branch.
        """
        msg = self.message(message_id)
        with self.transaction() as c:
            c.execute("UPDATE messages SET selected_at = ? WHERE id = ?", (self._now(), message_id))
            leaf = self._descend(message_id)
            self.set_active_leaf(msg.conversation_id, leaf)
        return self.path(msg.conversation_id)

    def _descend(self, message_id: int) -> int:
        leaf = message_id
        while True:
            row = self._conn.execute(
                "SELECT id FROM messages WHERE parent_id = ? ORDER BY selected_at DESC, id DESC LIMIT 1", (leaf,)
            ).fetchone()
            if row is None:
                return leaf
            leaf = int(row[0])

    # -- turn records -----------------------------------------------------------------

    def start_turn(self, conversation_id: int, user_message_id: int, kind: TurnKind = "send") -> int:
        """Open a turn record stamped with this process's liveness token."""
        writer = self._writer_token()
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO turns (conversation_id, user_message_id, kind, writer, started_at) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, user_message_id, kind, writer, self._now()),
            )
        return _rowid(cur)

    def _writer_token(self) -> str:
        if self._writer is None:
            try:
                self._writer = WriterLock(self._writers_dir)
            except OSError as exc:
                # Without a lock another process could take our live turn for a crashed one;
                # history still works, so warn and go on.
                log.warning("history: no writer lock in %s (%s)", self._writers_dir, exc)
                return ""
        return self._writer.token

    def attach_reply(self, turn_id: int, message_id: int) -> None:
        with self.transaction() as c:
            c.execute("UPDATE turns SET assistant_message_id = ? WHERE id = ?", (message_id, turn_id))

    def finish_turn(
        self,
        turn_id: int,
        outcome: Outcome,
        *,
        stats: TurnStats | None = None,
        error_kind: str = "",
        error_message: str = "",
    ) -> None:
        """Record how a turn ended. A turn ends once: finishing it again raises HistoryError."""
        s = stats or TurnStats(attempts=0)
        with self.transaction() as c:
            cur = c.execute(
                "UPDATE turns SET outcome = ?, ended_at = ?, error_kind = ?, error_message = ?, attempts = ?, "
                "retries = ?, scaffold_stripped = ?, stats = ? WHERE id = ? AND outcome IS NULL",
                (
                    outcome,
                    self._now(),
                    error_kind,
                    error_message,
                    s.attempts,
                    s.retries,
                    s.scaffold_stripped,
                    _dump(s.to_dict()) if stats is not None else None,
                    turn_id,
                ),
            )
        if cur.rowcount != 1:
            raise HistoryError(f"turn {turn_id} is already finished or does not exist")

    def turn(self, turn_id: int) -> TurnRecord:
        row = self._conn.execute("SELECT * FROM turns WHERE id = ?", (turn_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no turn {turn_id}")
        return TurnRecord.from_row(row)

    def turns(self, conversation_id: int) -> list[TurnRecord]:
        rows = self._conn.execute("SELECT * FROM turns WHERE conversation_id = ? ORDER BY id", (conversation_id,))
        return [TurnRecord.from_row(r) for r in rows]

    # -- search -----------------------------------------------------------------------

    def search(self, text: str, *, limit: int = 50) -> list[SearchHit]:
        """Conversations whose title or messages contain every word of `text` (as word prefixes).

        Ordered like the sidebar, by last activity: searching filters the list. One hit per
        conversation: the title when it matches, else its latest matching message, which
        may lie on an inactive branch (`switch_version(hit.message_id)` shows it).
        """
        return search_conversations(self._conn, text, limit)


def _rowid(cur: sqlite3.Cursor) -> int:
    if cur.lastrowid is None:  # pragma: no cover - an INSERT always sets it
        raise HistoryError("insert returned no row id")
    return cur.lastrowid


def _reason(exc: sqlite3.Error, db_path: Path) -> str:
    """SQLite says "disk I/O error" when it cannot create its journal on a full disk: say so."""
    try:
        full = shutil.disk_usage(db_path.parent).free < 64 * 1024
    except OSError:
        full = False
    return "the disk is full (nothing saved was lost; free some space)" if full else str(exc)


@contextmanager
def _as_history_error(db_path: Path | None = None) -> Generator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        reason = _reason(exc, db_path) if db_path is not None else str(exc)
        raise HistoryError(f"history database error: {reason}") from exc


def _translated(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        store = args[0]
        assert isinstance(store, HistoryStore)
        with store._lock, _as_history_error(store.db_path):  # pyright: ignore[reportPrivateUsage]
            return method(*args, **kwargs)

    return call


# The store's boundary: no sqlite3 error leaves a public method, only HistoryError.
for _name, _method in list(vars(HistoryStore).items()):
    if inspect.isfunction(_method) and not _name.startswith("_") and _name != "transaction":
        setattr(HistoryStore, _name, _translated(_method))
