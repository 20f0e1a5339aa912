"""Keyword search: SQLite FTS5's BM25 over the passages, ranked and cut off inside SQLite.

FTS5 ranks the matches itself and hands back only the best (`ORDER BY rank LIMIT` on the
virtual table); passages of another collection or of a file not yet `ready` are dropped after,
reading further down the ranking only when too few remain.

Ranking costs a few microseconds per matching passage (FTS5 reads each one's length for BM25),
so a question's words are weighed first. Stopwords go, and so does a word found in more than
`COMMON` of the passages (and in more than `COMMON_FLOOR`): in a 100k-passage collection such
a word matches thousands of passages, ranking them all took seconds, and its BM25 weight is
small anyway. The passages holding every remaining word are ranked first (few, and the best
under BM25 too), then those holding any of the rarest words, kept until the passages they match
add up to `BUDGET` (the words left out are commoner than every word kept, so weigh least).
How many passages hold a word is counted only up to the threshold, and remembered until the
database changes.

`exact` names the passages holding every word of the question when only a few do: the
question's words found together (an identifier, an error code, a name and the term beside it).
Hybrid search ranks them as a third list in the fusion (`engine.docs.index`).
"""

from __future__ import annotations

import re
import sqlite3

from engine.docs.schema import fts_table

COMMON = 0.1  # a word in more than this share of the passages is left out of the query…
COMMON_FLOOR = 2000  # …once it is in more passages than this (a small collection keeps every word)
BUDGET = 5000  # the rarest words are kept until the passages they match add up to this
MAX_WORDS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i in is it its of on or that the this to was were what "
    "when where which who why will with you your does do did can could should would about into than then there "
    "these those they them he she we our us my me not no yes so if".split()
)
_RANKED = (  # {t}: the collection's own FTS5 table (engine.docs.schema.fts_table)
    "WITH m AS (SELECT rowid AS id, rank FROM {t} WHERE {t} MATCH ? ORDER BY rank LIMIT ?) "
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

    def __init__(
        self, conn: sqlite3.Connection, *, common: float = COMMON, floor: int = COMMON_FLOOR, budget: int = BUDGET
    ) -> None:
        self.conn = conn
        self.common = common
        self.floor = floor
        self.budget = budget
        self._version = -1
        self._passages: dict[int, int] = {}  # per collection
        self._counts: dict[tuple[int, str], int] = {}

    def ranked(self, version: int, collection_id: int, query: str, limit: int) -> list[int]:
        """The chunk ids of the collection's `limit` best passages for `query`, best first."""
        found: dict[int, None] = {}
        for match in self.queries(version, query, collection_id):
            found.update(dict.fromkeys(self._ranked(match, collection_id, limit)))
            if len(found) >= limit:
                break
        return list(found)[:limit]

    def _ranked(self, match: str, collection_id: int, limit: int) -> list[int]:
        fetch = limit
        while limit > 0:
            ranked_sql = _RANKED.format(t=fts_table(collection_id))
            rows = self.conn.execute(ranked_sql, (match, fetch, collection_id)).fetchall()
            ranked = [int(r[0]) for r in rows if r[1]]
            if len(ranked) >= limit or len(rows) < fetch:
                return ranked[:limit]
            fetch *= 4  # passages of files not ready took places in the ranking: look further down
        return []

    def queries(self, version: int, query: str, collection_id: int) -> list[str]:
        """The FTS5 queries ranked in turn until enough passages are found.

        First the passages holding every selective word (few, so cheap to rank, and the best
        under BM25 too), then those holding any of the rarest ones, within the budget. When
        every word is common, only the passages holding them all.
        """
        words = query_words(query)
        if not words:
            return []
        most, counts = self._word_counts(version, collection_id, words)
        selective = sorted((w for w in words if 0 < counts[w] <= most), key=lambda w: counts[w])
        if not selective:
            common = [w for w in words if counts[w]]
            return [" AND ".join(map(_quoted, common))] if common else []
        kept, matched = selective[:1], counts[selective[0]]
        for word in selective[1:]:
            matched += counts[word]
            if matched > self.budget:
                break  # commoner than every word kept: the least BM25 weight, the most passages to rank
            kept.append(word)
        every, some = " AND ".join(map(_quoted, selective)), " OR ".join(map(_quoted, kept))
        return [every, some] if len(selective) > 1 else [some]

    def exact(self, version: int, collection_id: int, query: str, most: int) -> list[int]:
        """The passages holding every word of the question (stopwords aside), best first under BM25,
        when 1 to `most` passages of the collection do; [] otherwise (a word no passage holds, or
        words so common together that holding them all singles nothing out, or stopwords alone)."""
        words = query_words(query)
        if not words or all(w in _STOPWORDS for w in words):
            return []
        _, counts = self._word_counts(version, collection_id, words)
        if not all(counts.values()):
            return []
        t, every = fts_table(collection_id), " AND ".join(map(_quoted, words))
        # Counted before ranked: FTS5 ranks every match before its LIMIT, and common words
        # together can match thousands of passages.
        held = self.conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {t} WHERE {t} MATCH ? LIMIT ?)", (every, most + 1)
        )
        if not 0 < int(held.fetchone()[0]) <= most:
            return []
        rows = self.conn.execute(_RANKED.format(t=t), (every, most, collection_id))
        return [int(r[0]) for r in rows if r[1]]

    def _word_counts(self, version: int, collection_id: int, words: list[str]) -> tuple[int, dict[str, int]]:
        """The commonness threshold and each word's passage count (counted up to just past it)."""
        self._refresh(version)
        most = max(int(self._passage_count(collection_id) * self.common), self.floor)
        return most, {w: self._count(collection_id, w, most + 1) for w in words}

    def _refresh(self, version: int) -> None:
        if version != self._version or len(self._counts) > 100_000:
            self._version = version
            self._passages.clear()
            self._counts.clear()

    def _passage_count(self, collection_id: int) -> int:
        count = self._passages.get(collection_id)
        if count is None:
            count = self._passages[collection_id] = int(
                self.conn.execute("SELECT count(*) FROM chunks WHERE collection_id = ?", (collection_id,)).fetchone()[0]
            )
        return count

    def _count(self, collection_id: int, word: str, cap: int) -> int:
        """How many of the collection's passages hold `word`, counted no further than `cap`."""
        count = self._counts.get((collection_id, word))
        if count is None:
            t = fts_table(collection_id)
            count = self._counts[(collection_id, word)] = int(
                self.conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {t} WHERE {t} MATCH ? LIMIT ?)", (_quoted(word), cap)
                ).fetchone()[0]
            )
        return count
