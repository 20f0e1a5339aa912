"""The documents of the conversation open in the window (no Qt): attached files and its collection.

Files attached in the composer wait in `pending` and go with the next message; once sent they
belong to the conversation (remembered in its settings, like `ember chat`'s), so later questions
are answered from them too. `prepare` reads what is new on a worker thread (extraction and
indexing never block the window), then puts the passages that fit into the turn's last user
message, measured by the backend, and returns the `Sources` event the turn starts with.
The composer's token meter counts the same documents (`counted`), reading them as soon as they
are attached; the message then reuses that reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from desktop.core.documents import (
    ATTACH_KEY,
    TurnDocuments,
    attachments_for,
    collection_for,
    with_collection,
)
from desktop.core.history_session import HISTORY_ERRORS, HistorySession
from engine.backends.base import Message
from engine.errors import EngineError
from engine.events import SourceRef, Sources
from engine.history.recorder import TurnRecorder
from engine.runtime import Engine
from engine.turns.context_window import WithDocuments

log = logging.getLogger("desktop.documents")


@dataclass(frozen=True, slots=True)
class Prepared:
    messages: list[Message]
    sources: Sources | None
    problems: list[str] = field(default_factory=list[str])  # attached files that could not be read


class ConversationDocs:
    def __init__(self, index_path: Path | None = None) -> None:
        self.index_path = index_path
        self.pending: list[Path] = []
        self.attached: list[Path] = []
        self.collection: str | None = None
        self._docs: TurnDocuments | None = None
        self._key: tuple[tuple[Path, ...], str | None] | None = None
        self._problems: list[str] = []  # files of `_docs` that could not be read
        self._opening = asyncio.Lock()
        self.on_change: Callable[[], None] | None = None  # the window's paperclip refreshes itself

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- what the conversation uses ----------------------------------------------------------

    def load(self, settings: Mapping[str, Any] | None) -> None:
        """Another conversation was opened (None: a new one): take its documents."""
        self.attached = attachments_for(settings, [])
        self.collection = collection_for(settings, None)
        self.pending = [p for p in self.pending if p not in self.attached]
        self._changed()

    def attach(self, paths: Sequence[Path | str]) -> None:
        for raw in paths:
            path = Path(raw).expanduser().resolve()
            if path not in self.pending and path not in self.attached:
                self.pending.append(path)

    def detach(self, path: Path) -> None:
        """Take a file out of the next message, or out of the conversation."""
        self.pending = [p for p in self.pending if p != path]
        self.attached = [p for p in self.attached if p != path]

    def choose_collection(self, name: str | None) -> None:
        self.collection = name or None

    @property
    def active(self) -> bool:
        return bool(self.pending or self.attached or self.collection)

    def settings_with(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The conversation's settings remembering its attached files and collection."""
        out = with_collection(settings, self.collection)
        out.pop(ATTACH_KEY, None)
        if self.attached:
            out[ATTACH_KEY] = [str(p) for p in self.attached]
        return out

    # -- a turn ------------------------------------------------------------------------------

    async def prepare(self, engine: Engine, messages: Sequence[Message], max_tokens: int) -> Prepared:
        """`messages` with the documents' passages in the last one.

        Files are read on a worker thread; the passages are measured (and a collection's query
        embedded) on the engine's counting thread, like every other count.
        """
        if not self.active:
            return Prepared(list(messages), None)
        docs = await self._opened()
        problems, self._problems = self._problems, []  # reported with the message that sent them
        self.attached = list(docs.attached)
        self.pending.clear()
        self._key = (tuple(self.attached), self.collection)
        self._changed()
        if not docs:
            return Prepared(list(messages), None, problems)
        applied = await engine.measure(lambda backend: docs.apply(backend, messages, max_tokens))
        if applied is None:  # the model went away meanwhile: the turn reports that
            return Prepared(list(messages), None, problems)
        return Prepared(applied[0], applied[1], problems)

    async def counted(self) -> WithDocuments | None:
        """What the token meter adds for the next message's documents (None: it has none, or they fail).

        The files are read once, off the UI thread, and the turn that sends them reuses the reading.
        """
        if not self.active:
            return None
        try:
            docs = await self._opened()
        except EngineError as exc:  # an unknown collection, an embedder that fails: the turn says so
            log.info("documents not counted: %s", exc)
            return None
        if not docs:
            return None
        return lambda backend, messages, max_tokens: docs.apply(backend, messages, max_tokens)[0]

    async def _opened(self) -> TurnDocuments:
        """The documents for the files and collection chosen now, read on a worker thread when they changed."""
        async with self._opening:  # the meter and a turn may ask at once: read once
            wanted = (tuple(self.attached + self.pending), self.collection)
            if self._docs is None or self._key != wanted:
                self.close()
                self._docs, self._problems = await asyncio.to_thread(
                    TurnDocuments.open, list(wanted[0]), self.collection, index_path=self.index_path)
                self._key = wanted
            return self._docs

    def close(self) -> None:
        if self._docs is not None:
            self._docs.close()
        self._docs = None
        self._key = None
        self._problems = []




@runtime_checkable
class SourcesSink(Protocol):
    """A reply view that shows its sources (the window's; other sinks simply do not)."""

    def set_sources(self, sources: tuple[SourceRef, ...]) -> None: ...


async def prepare_turn(docs: ConversationDocs | None, engine: Engine, messages: Sequence[Message],
                       max_tokens: int, history: HistorySession | None) -> Prepared:
    """The turn's messages with its documents, the conversation's settings remembering them."""
    if docs is None or engine.backend is None or not docs.active:
        return Prepared(list(messages), None)
    prepared = await docs.prepare(engine, messages, max_tokens)
    if history is not None and history.conversation_id is not None:
        try:
            await history.io(lambda: history.update_settings(docs.settings_with(history.settings)))
        except HISTORY_ERRORS as exc:
            log.warning("history: could not remember the conversation's documents: %s", exc)
    return prepared


def show_sources(prepared: Prepared, sink: object, recorder: TurnRecorder | None) -> None:
    """Record the turn's sources with its reply and show them (and any unreadable file) on it."""
    if prepared.sources is not None:
        if recorder is not None:
            recorder.on_event(prepared.sources)
        if isinstance(sink, SourcesSink):
            sink.set_sources(prepared.sources.sources)
    note = getattr(sink, "note", None)
    if prepared.problems and callable(note):
        note("; ".join(prepared.problems))
