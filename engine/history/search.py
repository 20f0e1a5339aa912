"""Full-text search over the history: the FTS5 query, the lookup, and snippets around the match.

Snippets are cut here rather than with FTS5's snippet(): snippet() re-runs the whole
match for each hit, which costs milliseconds per hit for a common word over a large
history, while cutting a window out of 50 already-fetched texts costs microseconds.
Matching mirrors the index's tokenizer (unicode61, diacritics removed, case folded).
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata

from engine.history.types import HIGHLIGHT_END, HIGHLIGHT_START, SearchHit

_WORD = re.compile(r"[^\W_]+")  # unicode61's token characters: letters and digits
SNIPPET_BEFORE = 4  # words of context before the first match
SNIPPET_WORDS = 16  # words in a snippet


def query_words(text: str) -> list[str]:
    return _WORD.findall(text)


def fts_query(text: str) -> str:
    """The user's words as an FTS5 query: every word must match, each as a prefix.

    Words are quoted, so FTS5 syntax typed by the user (AND, NEAR, quotes) is plain text.
    """
    return " ".join(f'"{word}"*' for word in query_words(text))


def fold(text: str) -> str:
    """Case-fold and drop diacritics, like the index's `remove_diacritics 2`."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _matches(word: str, prefixes: tuple[str, ...]) -> bool:
    # Most words are ASCII, where lower() is the whole fold and far cheaper.
    return (word.lower() if word.isascii() else fold(word)).startswith(prefixes)


def make_snippet(text: str, query: str) -> str:
    """About SNIPPET_WORDS words of `text` around the first match, matches marked, ends elided."""
    prefixes = tuple(fold(w) for w in query_words(query))
    tokens = list(_WORD.finditer(text))
    if not tokens:
        return ""
    first_hit = next((i for i, t in enumerate(tokens) if prefixes and _matches(t.group(), prefixes)), 0)
    first = max(0, first_hit - SNIPPET_BEFORE)
    last = min(len(tokens), first + SNIPPET_WORDS) - 1
    pieces: list[str] = []
    cursor = tokens[first].start()
    for token in tokens[first : last + 1]:
        pieces.append(text[cursor : token.start()])
        word = token.group()
        pieces.append(f"{HIGHLIGHT_START}{word}{HIGHLIGHT_END}" if prefixes and _matches(word, prefixes) else word)
        cursor = token.end()
    body = " ".join("".join(pieces).split())  # one line: newlines and runs of spaces collapse
    head = "…" if first > 0 else ""
    tail = "…" if last < len(tokens) - 1 else " ".join(text[cursor:].split())
    return f"{head}{body}{tail}"


def search_conversations(conn: sqlite3.Connection, text: str, limit: int) -> list[SearchHit]:
    """One hit per matching conversation, by last activity (see HistoryStore.search)."""
    query = fts_query(text)
    if not query or limit <= 0:
        return []
    # Ranking (bm25) is left out on purpose: it costs more than the match itself for a
    # common word, and recency is the order the sidebar already uses.
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    rows = cursor.execute(
        "WITH msg AS (SELECT m.conversation_id AS cid, max(m.id) AS mid"
        "  FROM messages_fts JOIN messages AS m ON m.id = messages_fts.rowid"
        "  WHERE messages_fts MATCH ? GROUP BY m.conversation_id),"
        " ttl AS (SELECT rowid AS cid FROM conversations_fts WHERE conversations_fts MATCH ?)"
        " SELECT c.id, c.title, c.updated_at, c.archived_at, c.id IN ttl AS title_hit, msg.mid"
        " FROM conversations AS c LEFT JOIN msg ON msg.cid = c.id"
        " WHERE c.deleted_at IS NULL AND (c.id IN ttl OR msg.mid IS NOT NULL)"
        " ORDER BY c.updated_at DESC, c.id DESC LIMIT ?",
        (query, query, limit),
    ).fetchall()
    texts = _contents(conn, [int(r["mid"]) for r in rows if not r["title_hit"]])
    return [
        SearchHit(
            r["id"],
            r["title"],
            None if r["title_hit"] else r["mid"],
            make_snippet(r["title"] if r["title_hit"] else texts[r["mid"]], text),
            r["updated_at"],
            r["archived_at"] is not None,
        )
        for r in rows
    ]


def _contents(conn: sqlite3.Connection, message_ids: list[int]) -> dict[int, str]:
    if not message_ids:
        return {}
    marks = ", ".join("?" * len(message_ids))
    rows = conn.execute(f"SELECT id, content FROM messages WHERE id IN ({marks})", message_ids)
    return {int(r[0]): str(r[1]) for r in rows}
