"""The documents database's schema (`docs.sqlite3`, beside the history), versioned by `user_version`.

Collections hold roots (the files and folders the user added); each file found under them
has one row with its content hash and a status. A file is `indexing` from the moment its old
passages are dropped until its last passage is written, and only `ready` files are ever
searched, so a crash or a kill mid-file never leaves a half-indexed file in use: the next run
sees it is not ready and indexes it again. Passages live in `chunks`, their text indexed by an
external-content FTS5 table, their vectors (when the collection has an embedding model) in
`vectors`, in the same file.

New passages are added to the FTS5 table by the writer (`DocIndex.add_chunks`), one statement
per batch, not by a trigger: FTS5 writes its pending terms out at the start of every statement
(its savepoint), and a trigger runs one statement per row, so an insert trigger wrote one index
segment per passage and made indexing three times as slow (0.093 s against 0.030 s for 900
passages). Deletes stay with a trigger, so a cascade (a file or a collection removed) can never
leave a passage's terms behind.
"""

from __future__ import annotations

import sqlite3

from engine.errors import EngineError

SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE collections (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        embedder TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )
    """,
    """
    CREATE TABLE roots (
        collection_id INTEGER NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        PRIMARY KEY (collection_id, path)
    )
    """,
    """
    CREATE TABLE files (
        id INTEGER PRIMARY KEY,
        collection_id INTEGER NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        hash TEXT NOT NULL DEFAULT '',
        size INTEGER NOT NULL DEFAULT 0,
        mtime_ns INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL CHECK (status IN ('indexing', 'ready', 'failed')),
        error TEXT NOT NULL DEFAULT '',
        pages INTEGER NOT NULL DEFAULT 0,
        chunks INTEGER NOT NULL DEFAULT 0,
        indexed_at REAL,
        UNIQUE (collection_id, path)
    )
    """,
    """
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files (id) ON DELETE CASCADE,
        page INTEGER,
        start_off INTEGER NOT NULL,
        end_off INTEGER NOT NULL,
        text TEXT NOT NULL
    )
    """,
    "CREATE INDEX chunks_file ON chunks (file_id)",
    """
    CREATE VIRTUAL TABLE chunks_fts USING fts5 (
        text, content = 'chunks', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
        INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END
    """,
    """
    CREATE TABLE vectors (
        chunk_id INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
        vec BLOB NOT NULL
    )
    """,
)
# Each step takes a database from the version before it: version 1 had the insert trigger.
UPGRADES: dict[int, tuple[str, ...]] = {2: ("DROP TRIGGER IF EXISTS chunks_fts_insert",)}
SCHEMA_VERSION = 2


class DocsDatabaseError(EngineError):
    """The documents database cannot be used; one readable line."""


def migrate(conn: sqlite3.Connection) -> None:
    """Create the schema in a new database, bring an older one up to date; refuse one from a newer Ember."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise DocsDatabaseError(f"the documents database has schema version {version}, newer than this Ember "
                                f"understands ({SCHEMA_VERSION}); it was left untouched")
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # another process may have done it
        if version < SCHEMA_VERSION:
            for statement in SCHEMA if version == 0 else _upgrades(version):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _upgrades(version: int) -> list[str]:
    return [statement for v in range(version + 1, SCHEMA_VERSION + 1) for statement in UPGRADES[v]]
