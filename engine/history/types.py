"""Plain values the history store hands out: conversations, messages, turns, versions, search hits."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from engine.errors import EngineError
from models.library.json_input import JsonInputError, parse_json_input

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Row = TypeVar("_Row", bound="DataclassInstance")

Role = Literal["system", "user", "assistant"]
# streaming: being written now (or cut off by a crash until the next start marks it interrupted).
Status = Literal["streaming", "complete", "stopped", "interrupted", "error"]
Outcome = Literal["completed", "malformed", "error", "stopped", "interrupted"]
TurnKind = Literal["send", "edit", "regenerate"]

# Search snippets mark matches with these control characters (never in chat text), so a
# view can escape the text first and then style the marked spans.
HIGHLIGHT_START = "\x02"
HIGHLIGHT_END = "\x03"
# A reply's stats hold its tool calls under this key (name, arguments, approval, result), so
# the JSON export carries them and a later turn with tools replays them.
TOOLS_STATS_KEY = "tools"


class HistoryError(EngineError):
    """The history database cannot be used; the message is one readable line."""


class NotFoundError(HistoryError, KeyError):
    """No conversation or message with that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def load_json(text: str | None) -> dict[str, Any]:
    """A stored JSON object column; anything unreadable (not JSON, nested past MAX_DEPTH) reads
    as empty rather than failing, so one bad row never hides its conversation."""
    if not text:
        return {}
    try:
        value: Any = parse_json_input(text)
    except JsonInputError:
        return {}
    return dict(value) if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownArgumentType]


def _from_row(cls: type[_Row], row: sqlite3.Row, **converted: Any) -> _Row:
    """A row as `cls`, each field from its column of the same name (`converted`: those read otherwise)."""
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name not in converted}, **converted)


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    title: str
    model: str
    settings: Mapping[str, Any]
    created_at: float
    updated_at: float  # last activity: the sidebar's order
    active_leaf_id: int | None
    deleted_at: float | None
    title_is_auto: bool
    archived_at: float | None = None  # set aside from the list (not deleted); None: listed

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Conversation:
        return _from_row(cls, row, settings=load_json(row["settings"]), title_is_auto=bool(row["title_is_auto"]))


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    conversation_id: int
    parent_id: int | None
    role: Role
    content: str
    thinking: str
    status: Status
    stats: Mapping[str, Any]
    model: str
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredMessage:
        return _from_row(cls, row, stats=load_json(row["stats"]))


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """The audit record of one generation: how it started, ended and what it took."""

    id: int
    conversation_id: int
    user_message_id: int | None
    assistant_message_id: int | None
    kind: TurnKind
    started_at: float
    ended_at: float | None
    outcome: Outcome | None  # None while the turn runs
    error_kind: str
    error_message: str
    attempts: int
    retries: int
    scaffold_stripped: int

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TurnRecord:
        return _from_row(cls, row)


class Versions(NamedTuple):
    """A message among its siblings: shown as ‹ index+1 / count ›."""

    # Shadowing tuple.index/count is deliberate: the brief's shape is (index, count, ids).
    index: int  # pyright: ignore[reportIncompatibleMethodOverride]  # 0-based position among `ids`
    count: int  # pyright: ignore[reportIncompatibleMethodOverride]
    ids: tuple[int, ...]  # the sibling versions, oldest first


@dataclass(frozen=True, slots=True)
class SearchHit:
    """The best match in one conversation: its title (message_id None) or one of its messages."""

    conversation_id: int
    title: str
    message_id: int | None
    snippet: str  # matches wrapped in HIGHLIGHT_START / HIGHLIGHT_END
    updated_at: float
    archived: bool = False  # found among the archived conversations (search covers them too)

    @property
    def plain_snippet(self) -> str:
        return self.snippet.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, "")

    def snippet_parts(self) -> list[tuple[str, bool]]:
        """The snippet as (text, is_match) runs, for views that style matches."""
        parts: list[tuple[str, bool]] = []
        for i, chunk in enumerate(self.snippet.split(HIGHLIGHT_START)):
            match, _, rest = chunk.partition(HIGHLIGHT_END) if i else ("", "", chunk)
            parts.extend((text, is_match) for text, is_match in ((match, True), (rest, False)) if text)
        return parts
