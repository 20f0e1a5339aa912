"""The documents a turn is answered from: files attached to it and a collection.

`ChatSession.prepare_documents` names them for an `Ask` and opens them here: `open` reads the
attached files (each unreadable one is a one-line problem; the rest are used) and opens the
collection (with its embedding model, when it has one); `apply` puts the passages that fit
into the turn's last user message and returns the `Sources` event the turn starts with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.backends.base import Backend, Message
from engine.cancel import CancelToken
from engine.docs.embed import shared_embedder
from engine.docs.fit import with_documents
from engine.docs.index import DocIndex, default_path
from engine.docs.sources import Attachments, CollectionSource, DocSource
from engine.events import Sources


class TurnDocuments:
    def __init__(self, files: Sequence[Path] = (), collection: str | None = None) -> None:
        self.files = tuple(files)  # the files asked for, readable or not
        self.collection = collection
        self.sources: list[DocSource] = []
        self.attached: list[Path] = []  # the attached files that could be read
        self.problems: list[str] = []  # one line per attached file that could not be read
        self.no_match = ""  # set by `apply` when nothing relevant was found
        self._closers: list[Callable[[], None]] = []

    @classmethod
    def open(
        cls,
        files: Sequence[Path],
        collection: str | None,
        *,
        index_path: Path | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnDocuments:
        """The documents for a turn; attached files left out are its `problems`.

        Raises `DocsDatabaseError` for an unknown collection, `ModelLoadError` for its embedder.
        """
        docs = cls(files, collection)
        try:
            if collection:
                docs._open_collection(collection, index_path or default_path())
            if files:
                attachments, docs.problems = Attachments.load(files, cancel)
                docs._closers.append(attachments.close)
                if len(attachments):
                    docs.sources.append(attachments)
                    docs.attached = list(attachments.paths)
        except BaseException:
            docs.close()
            raise
        return docs

    def _open_collection(self, name: str, path: Path) -> None:
        index = DocIndex.open(path)
        self._closers.append(index.close)
        coll = index.collection(name)
        # Kept loaded for the process: the next question (or conversation) does not wait for it.
        embedder = shared_embedder(coll.embedder) if coll.embedder else None
        self.sources.append(CollectionSource(index, coll, embedder))

    def answers(self, files: Sequence[Path], collection: str | None) -> bool:
        """Whether these documents are `files` and `collection`: the files asked for, or only the
        readable ones (the unreadable give no passage)."""
        return collection == self.collection and tuple(files) in (self.files, tuple(self.attached))

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
