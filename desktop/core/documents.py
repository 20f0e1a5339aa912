"""The documents a turn uses: files attached to the message and the conversation's collection (no Qt).

Shared by the window and `ember chat`. `TurnDocuments.open(attach, collection)` reads the
attached files (each unreadable one is a one-line problem; the rest are used) and opens the
collection (with its embedding model, when it has one); `apply` puts the passages that fit
into the turn's last user message and returns the `Sources` event the turn starts with.
A conversation remembers the collection chosen for it in `settings["docs"]` and the files
attached to it in `settings["attachments"]`: later messages are answered from them too
(each turn takes what fits for its own question).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.backends.base import Backend, Message
from engine.docs.embed import LlamaEmbedder
from engine.docs.fit import with_documents
from engine.docs.index import DocIndex, default_path
from engine.docs.sources import Attachments, CollectionSource, DocSource
from engine.events import Sources

SETTINGS_KEY = "docs"
ATTACH_KEY = "attachments"


def collection_for(conversation: Mapping[str, Any] | None, asked: str | None) -> str | None:
    """The collection a turn searches: the one asked for, else the conversation's."""
    if asked:
        return asked
    stored = (conversation or {}).get(SETTINGS_KEY)
    return stored if isinstance(stored, str) and stored else None


def with_collection(settings: Mapping[str, Any], name: str | None) -> dict[str, Any]:
    """Conversation `settings` with its collection replaced (None: no collection)."""
    out = {k: v for k, v in settings.items() if k != SETTINGS_KEY}
    if name:
        out[SETTINGS_KEY] = name
    return out


def attachments_for(conversation: Mapping[str, Any] | None, new: Sequence[Path]) -> list[Path]:
    """The conversation's attached files, then `new` ones (absolute, each once)."""
    stored = (conversation or {}).get(ATTACH_KEY)
    paths = [Path(p) for p in stored if isinstance(p, str)] if isinstance(stored, list) else []  # pyright: ignore[reportUnknownVariableType]
    for path in new:
        absolute = path.expanduser().resolve()
        if absolute not in paths:
            paths.append(absolute)
    return paths


def remember_documents(settings: Mapping[str, Any], docs: TurnDocuments,
                            collection: str | None) -> dict[str, Any]:
    """Conversation `settings` remembering `docs`' attached files and the collection (when one is chosen)."""
    out = with_collection(settings, collection) if collection else dict(settings)
    if docs.attached:
        out[ATTACH_KEY] = [str(p) for p in docs.attached]
    return out


class TurnDocuments:
    def __init__(self) -> None:
        self.sources: list[DocSource] = []
        self.attached: list[Path] = []  # the attached files that could be read
        self._closers: list[Callable[[], None]] = []

    @classmethod
    def open(cls, attach: Sequence[Path], collection: str | None, *, index_path: Path | None = None,
             cancel: Callable[[], bool] | None = None) -> tuple[TurnDocuments, list[str]]:
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
        embedder = LlamaEmbedder.load(Path(coll.embedder)) if coll.embedder else None
        if embedder is not None:
            self._closers.append(embedder.close)
        self.sources.append(CollectionSource(index, coll, embedder))

    def __bool__(self) -> bool:
        return bool(self.sources)

    def apply(self, backend: Backend, messages: Sequence[Message], max_tokens: int) -> tuple[list[Message], Sources]:
        fitted, ctx = with_documents(backend, messages, self.sources, max_tokens)
        return fitted, Sources(ctx.passages)

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()
