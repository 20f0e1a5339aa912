"""The documents index: collections, their files and passages in one SQLite database.

    index = DocIndex.open(path)              # or DocIndex.memory() for a message's attachments
    coll = index.create_collection("Tax 2026")
    index.add_roots(coll, [folder])          # then engine.docs.indexer.index_collection(...)
    hits = index.search(coll, "question", k=8, query_vector=None)

Search is hybrid: SQLite FTS5's BM25 always (no model needed; `engine.docs.bm25` leaves very
common words out and lets SQLite cut the ranking off), plus cosine similarity over the
collection's vectors when it has an embedding model (`engine.docs.vectors`: one contiguous
float32 matrix read once, exact top-k by one matrix-vector product and argpartition), the two
top-10 lists (`WINDOW`, or top k when k is larger) merged by reciprocal-rank fusion. A third
list joins them when 1 to 10 passages hold every word of the question (`Keywords.exact`): an
identifier, an error code or a rare name means nothing to the embedder, and with two lists a
passage only BM25 found (at best 1/61) ranked under every passage both found (at least 2/70).
As a third list, the best exact match, which BM25 ranks first, scores 2/61 and more: no passage
missing a word outranks it (at most 1/62 + 1/61); the vectors still order the exact matches
among themselves, and none is dropped by the relevance cut-off. Only passages of `ready` files
are ever returned. Every sqlite3 error becomes a `DocsDatabaseError` (one line) at this boundary.

Paths are stored as text when they are UTF-8 and as the file system's bytes when not
(`engine.docs.names.db_path`), and always come back as the `str` Python uses for them.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from engine.docs.bm25 import Keywords
from engine.docs.chunk import Chunk
from engine.docs.names import check_collection_name, db_path, path_of
from engine.docs.schema import DocsDatabaseError, drop_fts_statements, fts_statements, fts_table, migrate

if TYPE_CHECKING:  # numpy (engine.docs.vectors) is imported only where vectors are used
    from engine.docs.vectors import Matrix, Vector

RRF_K = 60  # the constant of reciprocal-rank fusion (Cormack et al.): 1 / (RRF_K + rank)
# Each ranking's top WINDOW (or top k, if more) go into the fusion, as Elasticsearch's RRF
# retriever does by default (its rank window is the result size). Deeper windows let passages
# that sit low in both rankings outrank the best of either: with SmolLM2's mean-pooled vectors
# (no better than chance alone) needle recall@5 on 50 files was 1.0 with a window of 10,
# 0.36 with 16 and 0.56 with 50; BM25 alone, 1.0 (docs/performance.md).
WINDOW = 10
# With vectors, a passage less similar than this to the question is not relevant (all-MiniLM-L6-v2:
# the best passage of a retrieval-set answer scores 0.16-0.91, unrelated questions 0.13-0.22: a loose cut).
MIN_COSINE = 0.15

P = ParamSpec("P")
R = TypeVar("R")


def _translated(method: Callable[Concatenate[DocIndex, P], R]) -> Callable[Concatenate[DocIndex, P], R]:
    @functools.wraps(method)
    def wrapper(self: DocIndex, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise DocsDatabaseError(f"the documents database failed: {exc}") from exc

    return wrapper


@dataclass(frozen=True, slots=True)
class Collection:
    id: int
    name: str
    embedder: str  # the GGUF embedding model's path; '' for BM25 alone


@dataclass(frozen=True, slots=True)
class FileRow:
    id: int
    path: str
    hash: str
    size: int
    mtime_ns: int
    status: str  # indexing | ready | failed
    error: str
    pages: int
    chunks: int


@dataclass(frozen=True, slots=True)
class Hit:
    chunk_id: int
    path: str
    page: int | None
    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    collection: Collection
    roots: tuple[str, ...]
    files: int
    ready: int
    failed: int
    indexing: int
    chunks: int
    vectors: int


class DocIndex:
    """One documents database. Use it from one thread at a time (the indexer's worker, or the caller's)."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._matrices: dict[int, Matrix] = {}
        self._keywords = Keywords(conn)
        self._writes = 0

    @classmethod
    def open(cls, path: Path) -> DocIndex:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        except (OSError, sqlite3.Error) as exc:
            raise DocsDatabaseError(f"cannot open the documents database {path}: {exc}") from exc
        return cls._setup(conn, str(path), wal=True)

    @classmethod
    def memory(cls) -> DocIndex:
        """A throwaway index (a message's attachments): nothing is written to disk."""
        return cls._setup(
            sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False), ":memory:", wal=False
        )

    @classmethod
    def _setup(cls, conn: sqlite3.Connection, path: str, *, wal: bool) -> DocIndex:
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            if wal:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise DocsDatabaseError(f"cannot use the documents database {path}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> DocIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Generator[None]:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if self.conn.in_transaction:  # SQLite rolls back itself on a full disk (SQLITE_FULL)
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self._writes += 1

    # -- collections ------------------------------------------------------------------

    @_translated
    def create_collection(self, name: str, embedder: str = "") -> Collection:
        """The collection `name`, made with `embedder` if new; an existing one keeps its own (see
        `set_embedder`). CollectionNameError for a name with controls or too long."""
        name = check_collection_name(name)
        with self.transaction():
            self.conn.execute(
                "INSERT OR IGNORE INTO collections (name, embedder, created_at) VALUES (?, ?, ?)",
                (name, embedder, time.time()),
            )
            coll = self.collection(name)
            for statement in fts_statements(coll.id):  # its own BM25 statistics
                self.conn.execute(statement)
        return coll

    @_translated
    def set_embedder(self, coll: Collection, embedder: str) -> Collection:
        """Change the collection's embedder ('' for BM25 alone). Its vectors go (another model's
        have another width and meaning: mixed, they were skipped), and with a new embedder every
        ready file is marked changed, so the next index run reads and embeds it again."""
        if self.collection(coll.name).embedder == embedder:
            return coll
        with self.transaction():
            self.conn.execute("UPDATE collections SET embedder = ? WHERE id = ?", (embedder, coll.id))
            self.conn.execute(
                "DELETE FROM vectors WHERE chunk_id IN (SELECT c.id FROM chunks c JOIN files f "
                "ON f.id = c.file_id WHERE f.collection_id = ?)",
                (coll.id,),
            )
            if embedder:  # no hash and an impossible mtime: never taken as unchanged
                self.conn.execute(
                    "UPDATE files SET hash = '', mtime_ns = -1 WHERE collection_id = ? AND status = 'ready'",
                    (coll.id,),
                )
        self._matrices.pop(coll.id, None)
        return self.collection(coll.name)

    @_translated
    def find_collection(self, name: str) -> Collection | None:
        row = self.conn.execute("SELECT id, name, embedder FROM collections WHERE name = ?", (name,)).fetchone()
        return None if row is None else Collection(row["id"], row["name"], row["embedder"])

    def collection(self, name: str) -> Collection:
        found = self.find_collection(name)
        if found is None:
            raise DocsDatabaseError(f"no collection named {name!r} (see `ember docs list`)")
        return found

    @_translated
    def collections(self) -> list[Collection]:
        rows = self.conn.execute("SELECT id, name, embedder FROM collections ORDER BY name COLLATE NOCASE")
        return [Collection(r["id"], r["name"], r["embedder"]) for r in rows]

    @_translated
    def info(self, coll: Collection) -> CollectionInfo:
        roots = tuple(
            path_of(r[0])
            for r in self.conn.execute("SELECT path FROM roots WHERE collection_id = ? ORDER BY path", (coll.id,))
        )
        counts = self.conn.execute(
            "SELECT count(*), coalesce(sum(status = 'ready'), 0), coalesce(sum(status = 'failed'), 0), "
            "coalesce(sum(status = 'indexing'), 0), coalesce(sum(CASE WHEN status = 'ready' THEN chunks END), 0) "
            "FROM files WHERE collection_id = ?",
            (coll.id,),
        ).fetchone()
        vectors = self.conn.execute(
            "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id "
            "WHERE f.collection_id = ? AND f.status = 'ready'",
            (coll.id,),
        ).fetchone()[0]
        return CollectionInfo(coll, roots, counts[0], counts[1], counts[2], counts[3], counts[4], vectors)

    @_translated
    def remove_collection(self, coll: Collection) -> None:
        with self.transaction():
            for statement in drop_fts_statements(coll.id):  # first: the cascade need not delete term by term
                self.conn.execute(statement)
            self.conn.execute("DELETE FROM collections WHERE id = ?", (coll.id,))
        self._matrices.pop(coll.id, None)

    @_translated
    def add_roots(self, coll: Collection, paths: Iterable[Path]) -> None:
        with self.transaction():
            self.conn.executemany(
                "INSERT OR IGNORE INTO roots (collection_id, path) VALUES (?, ?)",
                [(coll.id, db_path(str(p))) for p in paths],
            )

    @_translated
    def remove_root(self, coll: Collection, path: Path) -> bool:
        """Forget a root (its files go at the next index run); False when it was not a root."""
        with self.transaction():
            cur = self.conn.execute(
                "DELETE FROM roots WHERE collection_id = ? AND path = ?", (coll.id, db_path(str(path)))
            )
        return cur.rowcount > 0

    @_translated
    def roots(self, coll: Collection) -> list[Path]:
        rows = self.conn.execute("SELECT path FROM roots WHERE collection_id = ? ORDER BY path", (coll.id,))
        return [Path(path_of(r[0])) for r in rows]

    # -- files and passages (the indexer's side) ---------------------------------------

    @_translated
    def files(self, coll: Collection) -> dict[str, FileRow]:
        rows = self.conn.execute(
            "SELECT id, path, hash, size, mtime_ns, status, error, pages, chunks FROM files WHERE collection_id = ?",
            (coll.id,),
        )
        return {path_of(r["path"]): FileRow(r[0], path_of(r[1]), *r[2:]) for r in rows}

    @_translated
    def miscounted_files(self, coll: Collection) -> list[str]:
        """Ready files whose passages disagree with their recorded count (two indexers wrote them)."""
        rows = self.conn.execute(
            "SELECT f.path FROM files f WHERE f.collection_id = ? AND f.status = 'ready' AND f.chunks != "
            "(SELECT count(*) FROM chunks c WHERE c.file_id = f.id)",
            (coll.id,),
        )
        return [path_of(r[0]) for r in rows]

    @_translated
    def begin_file(self, coll: Collection, path: str, digest: str, size: int, mtime_ns: int) -> int:
        """Drop a file's old passages and mark it `indexing` (never searched until `finish_file`)."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO files (collection_id, path, hash, size, mtime_ns, status) VALUES (?, ?, ?, ?, ?, "
                "'indexing') ON CONFLICT (collection_id, path) DO UPDATE SET hash = excluded.hash, "
                "size = excluded.size, mtime_ns = excluded.mtime_ns, status = 'indexing', error = '', pages = 0, "
                "chunks = 0",
                (coll.id, db_path(path), digest, size, mtime_ns),
            )
            file_id = int(
                self.conn.execute(
                    "SELECT id FROM files WHERE collection_id = ? AND path = ?", (coll.id, db_path(path))
                ).fetchone()[0]
            )
            self.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        self._matrices.pop(coll.id, None)
        return file_id

    @_translated
    def add_chunks(self, file_id: int, chunks: Sequence[Chunk], vectors: Vector | None = None) -> None:
        """Write a batch of a file's passages (and their vectors), in one transaction."""
        blobs: list[bytes] | None = None
        if vectors is not None:  # numpy only when there are vectors
            from engine.docs.vectors import blob

            blobs = [blob(v) for v in vectors[: len(chunks)]]
        with self.transaction():
            # Ids are given, so the batch's text goes to FTS5 in one statement (see engine.docs.schema).
            first = int(self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0])
            coll_id = int(self.conn.execute("SELECT collection_id FROM files WHERE id = ?", (file_id,)).fetchone()[0])
            ids = range(first, first + len(chunks))
            self.conn.executemany(
                "INSERT INTO chunks (id, file_id, page, start_off, end_off, text, collection_id, head) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (i, file_id, c.page, c.start, c.end, c.text, coll_id, c.head)
                    for i, c in zip(ids, chunks, strict=True)
                ],
            )
            self.conn.executemany(  # the head too: a passage is found by its file's title and headings
                f"INSERT INTO {fts_table(coll_id)} (rowid, text) VALUES (?, ?)",
                [(i, c.indexed) for i, c in zip(ids, chunks, strict=True)],
            )
            if blobs is not None:
                self.conn.executemany(
                    "INSERT INTO vectors (chunk_id, vec) VALUES (?, ?)", list(zip(ids, blobs, strict=False))
                )

    @_translated
    def finish_file(self, file_id: int, *, pages: int, chunks: int) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE files SET status = 'ready', pages = ?, chunks = ?, indexed_at = ? WHERE id = ?",
                (pages, chunks, time.time(), file_id),
            )
        self._matrices.clear()

    @_translated
    def fail_file(self, coll: Collection, path: str, digest: str, size: int, mtime_ns: int, error: str) -> None:
        """Record why a file cannot be indexed (it is retried only once it changes)."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO files (collection_id, path, hash, size, mtime_ns, status, error) VALUES (?, ?, ?, ?, ?, "
                "'failed', ?) ON CONFLICT (collection_id, path) DO UPDATE SET hash = excluded.hash, "
                "size = excluded.size, mtime_ns = excluded.mtime_ns, status = 'failed', error = excluded.error, "
                "pages = 0, chunks = 0",
                (coll.id, db_path(path), digest, size, mtime_ns, error),
            )
            self.conn.execute(
                "DELETE FROM chunks WHERE file_id IN (SELECT id FROM files WHERE collection_id = ? AND path = ?)",
                (coll.id, db_path(path)),
            )

    @_translated
    def touch_file(self, file_id: int, mtime_ns: int) -> None:
        with self.transaction():
            self.conn.execute("UPDATE files SET mtime_ns = ? WHERE id = ?", (mtime_ns, file_id))

    @_translated
    def drop_files(self, file_ids: Iterable[int]) -> None:
        with self.transaction():
            self.conn.executemany("DELETE FROM files WHERE id = ?", [(i,) for i in file_ids])
        self._matrices.clear()

    # -- search -----------------------------------------------------------------------

    @_translated
    def search(
        self,
        coll: Collection,
        query: str,
        k: int = 8,
        query_vector: Vector | None = None,
        min_cosine: float = MIN_COSINE,
    ) -> list[Hit]:
        """The `k` best passages for `query`: BM25, fused with vector similarity when given a query vector."""
        window = max(k, WINDOW)
        rankings = [self._bm25(coll, query, window)]
        if query_vector is None:
            return self._hits(fuse(rankings)[:k])
        matrix = self._matrix(coll)
        scores = matrix.scores(query_vector)
        rankings.append(matrix.top(scores, window))
        exact = self._keywords.exact(self._version(), coll.id, query, window)
        rankings.append(exact)  # the passages holding every word of the question, when few do
        cosine = matrix.similarity(scores)
        # The relevance cut-off: a passage the embedding model finds unrelated to the question is
        # left out, even when it shares a word with it (BM25 matches any word); not one that holds
        # every word (an identifier or a code means nothing to the embedder).
        held = set(exact)
        relevant = [(i, s) for i, s in fuse(rankings) if i in held or not cosine or cosine.get(i, 1.0) >= min_cosine]
        return self._hits(relevant[:k])

    def _bm25(self, coll: Collection, query: str, limit: int) -> list[int]:
        return self._keywords.ranked(self._version(), coll.id, query, limit)

    def _version(self) -> int:
        """Changes whenever the database does (another connection's commits, or this one's)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0]) * 1_000_003 + self._writes

    def _matrix(self, coll: Collection) -> Matrix:
        """The collection's vectors as one matrix, read once and kept until the database changes."""
        from engine.docs.vectors import Matrix

        version = self._version()
        cached = self._matrices.get(coll.id)
        if cached is not None and cached.version == version:
            return cached
        rows = self.conn.execute(
            "SELECT v.chunk_id, v.vec FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f "
            "ON f.id = c.file_id WHERE f.collection_id = ? AND f.status = 'ready'",
            (coll.id,),
        )
        matrix = self._matrices[coll.id] = Matrix.load(version, ((int(r[0]), bytes(r[1])) for r in rows))
        return matrix

    def _hits(self, fused: list[tuple[int, float]]) -> list[Hit]:
        if not fused:
            return []
        marks = ",".join("?" * len(fused))
        rows = self.conn.execute(
            f"SELECT c.id, f.path, c.page, c.start_off, c.end_off, c.text FROM chunks c JOIN files f "
            f"ON f.id = c.file_id WHERE c.id IN ({marks})",
            [i for i, _ in fused],
        )
        by_id: dict[int, Any] = {int(r[0]): r for r in rows}
        return [
            Hit(i, path_of(by_id[i][1]), by_id[i][2], by_id[i][3], by_id[i][4], by_id[i][5], round(score, 6))
            for i, score in fused
            if i in by_id
        ]

    @_translated
    def text_chars(self, coll: Collection) -> int:
        """Characters in the collection's searchable passages (overlaps counted twice)."""
        return int(
            self.conn.execute(
                "SELECT coalesce(sum(length(c.text)), 0) FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE f.collection_id = ? AND f.status = 'ready'",
                (coll.id,),
            ).fetchone()[0]
        )

    @_translated
    def passages(self, coll: Collection) -> list[Hit]:
        """Every searchable passage in reading order: by file, page, then offset."""
        rows = self.conn.execute(
            "SELECT c.id, f.path, c.page, c.start_off, c.end_off, c.text FROM chunks c JOIN files f "
            "ON f.id = c.file_id WHERE f.collection_id = ? AND f.status = 'ready' "
            "ORDER BY f.path, c.page, c.start_off",
            (coll.id,),
        )
        return [Hit(int(r[0]), path_of(r[1]), r[2], r[3], r[4], r[5], 0.0) for r in rows]

    @_translated
    def chunk_texts(self, coll: Collection) -> list[tuple[int, str]]:
        """Every searchable passage's (id, text) — for benches and tests."""
        rows = self.conn.execute(
            "SELECT c.id, c.text FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.collection_id = ? AND "
            "f.status = 'ready' ORDER BY c.id",
            (coll.id,),
        )
        return [(int(r[0]), str(r[1])) for r in rows]


def fuse(rankings: Sequence[Sequence[int]]) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: each id scores the sum of 1 / (RRF_K + rank) over the rankings."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def default_path() -> Path:
    """The documents database beside the history (`EMBER_HOME` moves both)."""
    from models.library.paths import ember_paths

    return ember_paths().data_dir / "docs.sqlite3"
