"""The history database's schema: DDL and forward migrations, versioned by `PRAGMA user_version`.

Every database, new or old, is brought up to date by the same chain of steps, so the
migrations are exercised on every fresh install and not only on upgrades. Step N takes a
database at version N-1 to version N inside one transaction (SQLite DDL is transactional,
`user_version` included), so a crash mid-migration leaves the old version intact.

Version 1 was a linear history: conversations and their messages in order.
Version 2 turns messages into a tree (each message has a parent; siblings are versions),
adds the per-turn audit record, soft delete, full-text search and the writer-liveness
columns crash recovery needs.
Version 3 adds the images a message carries.
Version 4 adds archiving: a conversation set aside from the list, not deleted.
"""

from __future__ import annotations

import sqlite3

from engine.history.types import HistoryError
from engine.migrations import Step, latest
from engine.migrations import migrate as run_migrations

SCHEMA_V1: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        settings TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
    """
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL DEFAULT '',
        thinking TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'complete'
            CHECK (status IN ('streaming', 'complete', 'stopped', 'interrupted', 'error')),
        stats TEXT,
        created_at REAL NOT NULL
    )
    """,
    "CREATE INDEX messages_conversation ON messages (conversation_id, id)",
    "CREATE INDEX conversations_updated ON conversations (updated_at)",
)

_V2_COLUMNS: tuple[str, ...] = (
    # The active branch is stored as its leaf; ON DELETE SET NULL keeps a dangling leaf impossible.
    "ALTER TABLE conversations ADD COLUMN active_leaf_id INTEGER REFERENCES messages (id) ON DELETE SET NULL",
    "ALTER TABLE conversations ADD COLUMN deleted_at REAL",
    # A title the user typed is never overwritten by an automatic one.
    "ALTER TABLE conversations ADD COLUMN title_is_auto INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages (id) ON DELETE CASCADE",
    "ALTER TABLE messages ADD COLUMN model TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE messages ADD COLUMN updated_at REAL NOT NULL DEFAULT 0",
    # When this version was last chosen: descending a branch follows the latest choice.
    "ALTER TABLE messages ADD COLUMN selected_at REAL NOT NULL DEFAULT 0",
    "CREATE INDEX messages_parent ON messages (parent_id)",
    # Crash recovery looks for rows still streaming at every start: keep that lookup tiny.
    "CREATE INDEX messages_streaming ON messages (id) WHERE status = 'streaming'",
    "CREATE INDEX conversations_leaf ON conversations (active_leaf_id)",
)

_V2_TURNS: tuple[str, ...] = (
    """
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        user_message_id INTEGER REFERENCES messages (id) ON DELETE SET NULL,
        assistant_message_id INTEGER REFERENCES messages (id) ON DELETE SET NULL,
        kind TEXT NOT NULL DEFAULT 'send' CHECK (kind IN ('send', 'edit', 'regenerate')),
        writer TEXT NOT NULL DEFAULT '',
        started_at REAL NOT NULL,
        ended_at REAL,
        outcome TEXT CHECK (outcome IN ('completed', 'malformed', 'error', 'stopped', 'interrupted')),
        error_kind TEXT NOT NULL DEFAULT '',
        error_message TEXT NOT NULL DEFAULT '',
        attempts INTEGER NOT NULL DEFAULT 0,
        retries INTEGER NOT NULL DEFAULT 0,
        scaffold_stripped INTEGER NOT NULL DEFAULT 0,
        stats TEXT
    )
    """,
    "CREATE INDEX turns_conversation ON turns (conversation_id, id)",
    "CREATE INDEX turns_user_message ON turns (user_message_id)",
    "CREATE INDEX turns_assistant_message ON turns (assistant_message_id)",
    "CREATE INDEX turns_open ON turns (writer) WHERE outcome IS NULL",
    # A turn's outcome is written once: "completed exactly once" is enforced by the schema,
    # not only by the recorder.
    """
    CREATE TRIGGER turns_outcome_once BEFORE UPDATE OF outcome ON turns
    WHEN OLD.outcome IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'turn already finished'); END
    """,
)


def _search_index(table: str, column: str) -> tuple[str, ...]:
    """An external-content FTS5 index of `table.column`, kept in step by triggers: the text is stored once."""
    fts = f"{table}_fts"
    old = f"INSERT INTO {fts} ({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column});"
    new = f"INSERT INTO {fts} (rowid, {column}) VALUES (new.id, new.{column});"
    return (
        f"CREATE VIRTUAL TABLE {fts} USING fts5 ({column}, content = '{table}', content_rowid = 'id', "
        "tokenize = 'unicode61 remove_diacritics 2')",
        f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} BEGIN {new} END",
        f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} BEGIN {old} END",
        f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {column} ON {table} BEGIN {old} {new} END",
    )


_V2_SEARCH = _search_index("messages", "content") + _search_index("conversations", "title")

# Version 1 rows: a linear history becomes a chain (each message's parent is the one
# before it), the last message is the active leaf, and a reply a v1 build was streaming
# when it died is marked interrupted.
_V2_BACKFILL: tuple[str, ...] = (
    """
    UPDATE messages SET parent_id = (
        SELECT p.id FROM messages AS p
        WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id
        ORDER BY p.id DESC LIMIT 1
    )
    """,
    "UPDATE messages SET updated_at = created_at, selected_at = created_at",
    "UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'",
    """
    UPDATE conversations SET active_leaf_id = (
        SELECT max(m.id) FROM messages AS m WHERE m.conversation_id = conversations.id
    )
    """,
    # Version 1 did not say where a title came from: keep any existing one as the user's.
    "UPDATE conversations SET title_is_auto = 0 WHERE title != ''",
    "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
    "INSERT INTO conversations_fts (conversations_fts) VALUES ('rebuild')",
)

SCHEMA_V2: tuple[str, ...] = _V2_COLUMNS + _V2_TURNS + _V2_SEARCH + _V2_BACKFILL

# Version 3: the images a message carries, by content address (the files live beside the
# database, `engine.history.images`); a message's rows go with it.
SCHEMA_V3: tuple[str, ...] = (
    """
    CREATE TABLE message_images (
        message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        mime TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (message_id, position)
    )
    """,
    "CREATE INDEX message_images_sha256 ON message_images (sha256)",
)

# Version 4: archiving. An archived conversation leaves the sidebar's list but keeps everything;
# the partial index keeps "how many are archived" cheap however long the history grows.
SCHEMA_V4: tuple[str, ...] = (
    "ALTER TABLE conversations ADD COLUMN archived_at REAL",
    "CREATE INDEX conversations_archived ON conversations (archived_at) WHERE archived_at IS NOT NULL",
)

# The step keyed n takes a database from version n to n + 1 (engine.migrations runs them).
MIGRATIONS: dict[int, Step] = {0: SCHEMA_V1, 1: SCHEMA_V2, 2: SCHEMA_V3, 3: SCHEMA_V4}
SCHEMA_VERSION = latest(MIGRATIONS)


class SchemaTooNewError(HistoryError):
    """The database was written by a newer Ember; it is left untouched."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"the history database has schema version {found}, newer than this Ember understands "
            f"({supported}); it was left untouched — update Ember to open it"
        )


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the missing steps up to `target`, each in its own transaction; return the start version."""
    return run_migrations(conn, MIGRATIONS, too_new=SchemaTooNewError, target=target)
