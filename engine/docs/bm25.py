"""Keyword search: SQLite FTS5's BM25 over the passages, ranked and cut off inside SQLite.

A question's words are weighed before the search: stopwords go, and so does any word found in
more than `COMMON` of all passages (in a 100k-passage collection such a word matches tens of
thousands of passages, ranking them all took seconds, and its BM25 weight is small anyway).
How many passages hold a word is counted only up to that threshold, and remembered until the
database changes. FTS5 ranks the matches itself and hands back only the best (`ORDER BY rank
LIMIT` on the virtual table); passages of another collection or of a file not yet `ready` are
dropped after, fetching further down the ranking only when too few remain.
"""

from __future__ import annotations

import re
import sqlite3

COMMON = 0.1  # a word in more than this share of the passages is left out of the query…
COMMON_FLOOR = 2000  # …once it is in more passages than this (a small collection keeps every word)
MAX_WORDS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i in is it its of on or that the this to was were what "
    "when where which who why will with you your does do did can could should would about into than then there "
    "these those they them he she we our us my me not no yes so if".split()
)
_RANKED = (
    "WITH m AS (SELECT rowid AS id, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?) "
    "SELECT m.id, coalesce(f.collection_id = ? AND f.status = 'ready', 0) FROM m LEFT JOIN chunks c ON c.id = m.id "
    "LEFT JOIN files f ON f.id = c.file_id ORDER BY m.rank"
)


def query_words(text: str) -> list[str]:
    """The question's distinct words without stopwords (all of them when it has nothing else)."""
    words = list(dict.fromkeys(_WORD.findall(text.lower())))
    kept = [w for w in words if w not in _STOPWORDS] or words
    return kept[:MAX_WORDS]


def _quoted(word: str) -> str:
    return f'"{word}"'  # a phrase: no word is read as FTS5 syntax (AND, NEAR, column filters)


class Keywords:
    """BM25 over one database's passages; remembers word counts until the database changes."""

    def __init__(self, conn: sqlite3.Connection, *, common: float = COMMON, floor: int = COMMON_FLOOR) -> None:
        self.conn = conn
        self.common = common
        self.floor = floor
        self._version = -1
        self._passages = 0
        self._counts: dict[str, int] = {}

    def ranked(self, version: int, collection_id: int, query: str, limit: int) -> list[int]:
        """The chunk ids of the collection's `limit` best passages for `query`, best first."""
        match = self.match(version, query)
        fetch = limit
        while match and limit > 0:
            rows = self.conn.execute(_RANKED, (match, fetch, collection_id)).fetchall()
            ranked = [int(r[0]) for r in rows if r[1]]
            if len(ranked) >= limit or len(rows) < fetch:
                return ranked[:limit]
            fetch *= 4  # other collections' passages took places in the ranking: look further down
        return []

    def match(self, version: int, query: str) -> str:
        """The FTS5 query: any of the selective words, or, when every word is common, all of them."""
        words = query_words(query)
        if not words:
            return ""
        self._refresh(version)
        most = max(int(self._passages * self.common), self.floor)
        counts = {w: self._count(w, most + 1) for w in words}
        selective = [w for w in words if 0 < counts[w] <= most]
        if selective:
            return " OR ".join(map(_quoted, selective))
        return " AND ".join(_quoted(w) for w in words if counts[w])

    def _refresh(self, version: int) -> None:
        if version != self._version or len(self._counts) > 100_000:
            self._version = version
            self._passages = int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
            self._counts.clear()

    def _count(self, word: str, cap: int) -> int:
        """How many passages hold `word`, counted no further than `cap` (a common word costs no more)."""
        count = self._counts.get(word)
        if count is None:
            count = self._counts[word] = int(self.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                (_quoted(word), cap)).fetchone()[0])
        return count
