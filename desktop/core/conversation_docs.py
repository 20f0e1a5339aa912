"""The documents of the conversation open in the window (no Qt): attached files and its collection.

Files attached in the composer wait in `pending` and go with the next message (`Ask.attach`);
once sent they belong to the conversation (its typed `ConversationSettings.attachments`, like
`ember chat`'s), so later questions are answered from them too. A turn opens them through the
session, as `ember chat` does (`ChatSession.prepare_documents`: read on a worker thread, so
extraction and indexing never block the window; the readable files remembered on the history
thread), and the session puts their passages into the question. The composer's token meter
counts the same documents (`counted`), reading them as soon as they are attached; the message
then reuses that reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from engine.api.conversations import WithDocuments
from engine.api.documents import TurnDocuments
from engine.api.errors import EngineError
from engine.api.session import Ask, ChatSession, ConversationSettings
from engine.api.values import AnswerFrom, ImageData, SourceRef

log = logging.getLogger("desktop.documents")


class ConversationDocs:
    def __init__(self, index_path: Path | None = None) -> None:
        self.index_path = index_path
        self.pending: list[Path] = []
        self.attached: list[Path] = []
        self.collection: str | None = None
        self._docs: TurnDocuments | None = None  # the last reading, reused while the documents are the same
        self._sent: TurnDocuments | None = None  # the documents of the message being sent: `take_notes`
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

    async def prepare(self, session: ChatSession, ask: Ask) -> TurnDocuments | None:
        """The documents `ask` is answered from, opened by the session (`open_turn_async` asks).

        The conversation remembers the window's choices first (a file taken out, another
        collection); the session reuses the reading the meter made when the documents are the same.
        """
        self._sent = None
        await session.state.remember_documents(self.attached, self.collection)
        if not self.active:
            return None
        async with self._opening:
            docs = await session.prepare_documents(ask, index_path=self.index_path, opened=self._docs)
            if docs is not self._docs:
                self.close()
                self._docs = docs
        self._sent = docs
        self.attached = list(docs.attached)
        self.pending = [p for p in self.pending if p not in ask.attach]
        self._changed()
        return docs

    def take_notes(self) -> list[str]:
        """What the reply says first: the attached files its message could not read (said once), and
        "No passage in … matches this question"."""
        docs, self._sent = self._sent, None
        if docs is None:
            return []
        notes, docs.problems = docs.problems, []
        return notes + ([docs.no_match] if docs.no_match else [])

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
            if self._docs is None or not self._docs.answers(files, collection):
                self.close()
                self._docs = await asyncio.to_thread(
                    TurnDocuments.open, list(files), collection, index_path=self.index_path
                )
            return self._docs

    def close(self) -> None:
        if self._docs is not None:
            self._docs.close()
        self._docs = None


@runtime_checkable
class SourcesSink(Protocol):
    """A reply view that shows its sources (the window's; other sinks simply do not)."""

    def set_sources(self, sources: tuple[SourceRef, ...], origin: AnswerFrom | None = None) -> None: ...
