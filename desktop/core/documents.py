"""The documents a turn uses: files attached to the message and the conversation's collection (no Qt).

Shared by the window and `ember chat`. `TurnDocuments.open(attach, collection)` reads the
attached files (each unreadable one is a one-line problem; the rest are used) and opens the
collection (with its embedding model, when it has one); `apply` puts the passages that fit
into the turn's last user message and returns the `Sources` event the turn starts with.
Which files and collection a turn uses is the session's to say (`ChatSession.documents_for`);
the conversation remembers them in its typed settings (`remembered`): later messages are
answered from them too (each turn takes what fits for its own question).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.backends.base import Backend, Message
from engine.docs.embed import shared_embedder
from engine.docs.fit import with_documents
from engine.docs.index import DocIndex, default_path
from engine.docs.sources import Attachments, CollectionSource, DocSource
from engine.events import Sources


class TurnDocuments:
    def __init__(self) -> None:
        self.sources: list[DocSource] = []
        self.attached: list[Path] = []  # the attached files that could be read
        self.no_match = ""  # set by `apply` when nothing relevant was found
        self._closers: list[Callable[[], None]] = []

    @classmethod
    def open(
        cls,
        attach: Sequence[Path],
        collection: str | None,
        *,
        index_path: Path | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> tuple[TurnDocuments, list[str]]:
        """The documents for a turn and the one-line problems of attached files left out.

        Raises `DocsDatabaseError` for an unknown collection, `ModelLoadError` for its embedder.
        """
        docs = cls()
        problems: list[str] = []
        try:
            if collection:
                docs._open_collection(collection, index_path or default_path())
            if attach:
                attachments, problems = Attachments.load(attach, cancel)
                docs._closers.append(attachments.close)
                if len(attachments):
                    docs.sources.append(attachments)
                    docs.attached = list(attachments.paths)
        except BaseException:
            docs.close()
            raise
        return docs, problems

    def _open_collection(self, name: str, path: Path) -> None:
        index = DocIndex.open(path)
        self._closers.append(index.close)
        coll = index.collection(name)
        # Kept loaded for the process: the next question (or conversation) does not wait for it.
        embedder = shared_embedder(coll.embedder) if coll.embedder else None
        self.sources.append(CollectionSource(index, coll, embedder))

    @staticmethod
    def remembered(attached: Sequence[Path], collection: str | None) -> dict[str, Any]:
        """The conversation's settings changes that keep these documents for its next questions."""
        return {"attachments": tuple(str(p) for p in attached), "docs": collection}

    def __bool__(self) -> bool:
        return bool(self.sources)

    def apply(self, backend: Backend, messages: Sequence[Message], max_tokens: int) -> tuple[list[Message], Sources]:
        fitted, ctx = with_documents(backend, messages, self.sources, max_tokens)
        self.no_match = ctx.no_match  # "No passage in … matches this question", for the front end to say
        return fitted, Sources(ctx.passages)

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()
