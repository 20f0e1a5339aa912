"""The documents of the conversation open in the window (no Qt): attached files and its collection.

Files attached in the composer wait in `pending` and go with the next message (`Ask.attach`);
once sent they belong to the conversation (its typed `ConversationSettings.attachments`, like
`ember chat`'s), so later questions are answered from them too. A turn's documents are the ones
the session names (`ChatSession.documents_for`, the CLI's path too): `prepare` reads what is new
on a worker thread (extraction and indexing never block the window), then puts the passages that
fit into the turn's last user message, measured by the backend, and returns the `Sources` event
the turn starts with. The composer's token meter counts the same documents (`counted`), reading
them as soon as they are attached; the message then reuses that reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from desktop.core.documents import TurnDocuments
from desktop.core.history_session import HISTORY_ERRORS
from engine.backends.base import Message
from engine.backends.image_input import ImageData
from engine.errors import EngineError
from engine.events import SourceRef, Sources
from engine.runtime import Engine
from engine.session.session import Ask, ChatSession
from engine.session.settings import ConversationSettings
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

    def load(self, settings: ConversationSettings | None) -> None:
        """Another conversation was opened (None: a new one): take its documents."""
        self.attached = [Path(p) for p in settings.attachments] if settings is not None else []
        self.collection = settings.docs if settings is not None else None
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

    # -- a turn ------------------------------------------------------------------------------

    def ask(self, text: str, images: Sequence[ImageData]) -> Ask:
        """A new message carrying the files attached for it and the collection chosen."""
        return Ask.send(text, images, attach=self.pending, collection=self.collection)

    async def prepare(
        self, session: ChatSession, engine: Engine, ask: Ask, messages: Sequence[Message], max_tokens: int
    ) -> Prepared:
        """`messages` with the passages of the documents `ask` is answered from in the last one.

        Files are read on a worker thread; the passages are measured (and a collection's query
        embedded) on the engine's counting thread, like every other count. The conversation
        remembers the window's choices and the files that could be read.
        """
        await _remember(session, self.attached, self.collection)  # a file taken out, another collection
        if not self.active:
            return Prepared(list(messages), None)
        files, collection = session.documents_for(ask)
        docs = await self._opened(files, collection)
        problems, self._problems = self._problems, []  # reported with the message that sent them
        self.attached = list(docs.attached)
        self.pending = [p for p in self.pending if p not in files]
        if not self.pending:  # the readable files give the same passages: the meter reuses this reading
            self._key = (tuple(self.attached), collection)
        self._changed()
        await _remember(session, self.attached, collection)
        if not docs:
            return Prepared(list(messages), None, problems)
        applied = await engine.measure(lambda backend: docs.apply(backend, messages, max_tokens))
        if applied is None:  # the model went away meanwhile: the turn reports that
            return Prepared(list(messages), None, problems)
        no_match = [docs.no_match] if docs.no_match else []  # "No passage in … matches this question"
        return Prepared(applied[0], applied[1], problems + no_match)

    async def counted(self) -> WithDocuments | None:
        """What the token meter adds for the next message's documents (None: it has none, or they fail).

        The files are read once, off the UI thread, and the turn that sends them reuses the reading.
        """
        if not self.active:
            return None
        try:
            docs = await self._opened(self.attached + self.pending, self.collection)
        except EngineError as exc:  # an unknown collection, an embedder that fails: the turn says so
            log.info("documents not counted: %s", exc)
            return None
        if not docs:
            return None
        return lambda backend, messages, max_tokens: docs.apply(backend, messages, max_tokens)[0]

    async def _opened(self, files: Sequence[Path], collection: str | None) -> TurnDocuments:
        """The documents for `files` and `collection`, read on a worker thread when they changed."""
        async with self._opening:  # the meter and a turn may ask at once: read once
            wanted = (tuple(files), collection)
            if self._docs is None or self._key != wanted:
                self.close()
                self._docs, self._problems = await asyncio.to_thread(
                    TurnDocuments.open, list(files), collection, index_path=self.index_path
                )
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


async def _remember(session: ChatSession, attached: Sequence[Path], collection: str | None) -> None:
    """Store `attached` and `collection` as the open conversation's documents, when they changed."""
    changes = TurnDocuments.remembered(attached, collection)
    if session.settings.with_(**changes) == session.settings:
        return
    write = session.update_settings_soon(**changes)
    if write is None:  # a fresh conversation: kept until it is stored
        return
    try:
        await write
    except HISTORY_ERRORS as exc:
        log.warning("history: could not remember the conversation's documents: %s", exc)
