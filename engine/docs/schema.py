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
from engine.migrations import InParts, Step, Work, latest
from engine.migrations import migrate as run_migrations

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
        text TEXT NOT NULL,
        collection_id INTEGER NOT NULL DEFAULT 0,
        head TEXT NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX chunks_file ON chunks (file_id)",
    "CREATE INDEX chunks_collection ON chunks (collection_id)",
    """
    CREATE TABLE vectors (
        chunk_id INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
        vec BLOB NOT NULL
    )
    """,
)
# A new database gets SCHEMA at once; the step keyed n takes an older one from version n to n + 1
# (engine.migrations runs them). Version 1 had the insert trigger; version 2 had one FTS5 table for
# every collection (`chunks_fts`, unicode61 without stemming); version 3 had no `head` (the title and
# headings indexed with a passage, engine.docs.chunk).
# Porter stemming over unicode61: "guardian" finds "guardians". Query and passage are stemmed
# alike, so an identifier (`parse_args`, `getUserName`) still matches itself exactly.
TOKENIZE = "porter unicode61 remove_diacritics 2"


def fts_table(collection_id: int) -> str:
    """The collection's own FTS5 table: its BM25 statistics (passage count, lengths, term frequencies) are its own."""
    return f"fts_{int(collection_id):d}"


def fts_statements(collection_id: int) -> list[str]:
    """Its FTS5 table and the trigger that takes a deleted passage's terms out of it (cascades included)."""
    t = fts_table(collection_id)
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {t} USING fts5 (text, content = 'chunks', content_rowid = 'id', "
        f"tokenize = '{TOKENIZE}')",
        f"CREATE TRIGGER IF NOT EXISTS {t}_delete AFTER DELETE ON chunks WHEN old.collection_id = "
        f"{int(collection_id):d} BEGIN INSERT INTO {t} ({t}, rowid, text) VALUES ('delete', old.id, "
        f"{INDEXED_OLD}); END",
    ]


# What a passage's FTS5 row holds: its head, then its text (a passage from before version 4 has no head).
INDEXED_OLD = "old.head || old.text"


def drop_fts_statements(collection_id: int) -> list[str]:
    t = fts_table(collection_id)
    return [f"DROP TRIGGER IF EXISTS {t}_delete", f"DROP TABLE IF EXISTS {t}"]


class DocsDatabaseError(EngineError):
    """The documents database cannot be used; one readable line."""


def migrate(conn: sqlite3.Connection) -> None:
    """Create the schema in a new database, bring an older one up to date; refuse one from a newer Ember."""
    run_migrations(conn, STEPS, too_new=_too_new, fresh=SCHEMA)


def _too_new(found: int, supported: int) -> DocsDatabaseError:
    return DocsDatabaseError(
        f"the documents database has schema version {found}, newer than this Ember "
        f"understands ({supported}); it was left untouched"
    )


def _to_3(conn: sqlite3.Connection) -> list[Work]:
    """Version 2 to 3 in place, one collection per transaction: an interrupted upgrade goes on where it stopped.

    Nothing is read again from the files: each collection's FTS5 table is filled from its passages,
    and the shared table goes only once every collection has its own.
    """
    ids = [int(row[0]) for row in conn.execute("SELECT id FROM collections").fetchall()]
    own: list[Work] = [lambda c, i=i: _own_table(c, i) for i in ids]
    return [_mark_collections, *own, _drop_shared_table]


def _mark_collections(conn: sqlite3.Connection) -> None:
    if "collection_id" not in _columns(conn):
        conn.execute("ALTER TABLE chunks ADD COLUMN collection_id INTEGER NOT NULL DEFAULT 0")
    _add_head(conn)  # the delete triggers made next name it
    conn.execute(
        "UPDATE chunks SET collection_id = (SELECT f.collection_id FROM files f WHERE f.id = "
        "chunks.file_id) WHERE collection_id = 0"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS chunks_collection ON chunks (collection_id)")


def _drop_shared_table(conn: sqlite3.Connection) -> None:
    conn.execute("DROP TRIGGER IF EXISTS chunks_fts_delete")
    conn.execute("DROP TABLE IF EXISTS chunks_fts")


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in conn.execute("PRAGMA table_info(chunks)")}


def _add_head(conn: sqlite3.Connection) -> None:
    if "head" not in _columns(conn):
        conn.execute("ALTER TABLE chunks ADD COLUMN head TEXT NOT NULL DEFAULT ''")


def _to_4(conn: sqlite3.Connection) -> None:
    """Passages get a head; each collection's delete trigger takes out what its rows hold (head + text).

    Nothing is re-indexed: old passages have an empty head, so their FTS5 rows are already right.
    """
    _add_head(conn)
    for (collection_id,) in conn.execute("SELECT id FROM collections").fetchall():
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (fts_table(int(collection_id)),)).fetchone():
            conn.execute(f"DROP TRIGGER IF EXISTS {fts_table(int(collection_id))}_delete")
            for statement in fts_statements(int(collection_id)):
                conn.execute(statement)


def _own_table(conn: sqlite3.Connection, collection_id: int) -> None:
    table = fts_table(collection_id)
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
        return
    for statement in fts_statements(collection_id):
        conn.execute(statement)
    conn.execute(
        f"INSERT INTO {table} (rowid, text) SELECT id, head || text FROM chunks WHERE collection_id = ?",
        (collection_id,),
    )


STEPS: dict[int, Step] = {1: ("DROP TRIGGER IF EXISTS chunks_fts_insert",), 2: InParts(_to_3), 3: _to_4}
SCHEMA_VERSION = latest(STEPS)
