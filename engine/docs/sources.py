"""Where a turn's passages come from: files attached to a message, or a collection.

Both answer `search(question, k)` with ranked `SourceRef`s; attachments also offer their
text `whole()`, which `engine.docs.context` sends instead when it fits the context.
Attachments are indexed into an in-memory index (nothing written to disk), with the same
extraction, chunking and limits as a collection; a file that cannot be read is reported in
one line naming it and left out, the others still used.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from engine.cancel import CancelToken
from engine.docs.chunk import OVERLAP_CHARS, TARGET_CHARS
from engine.docs.embed import Embedder
from engine.docs.index import Collection, DocIndex, Hit
from engine.docs.indexer import index_collection
from engine.docs.names import shown
from engine.docs.regular import kind_reason
from engine.events import SourceRef

MAX_ATTACH_BYTES = 256 << 20  # larger files belong in a collection (indexed once, kept)


class DocSource(Protocol):
    def search(self, question: str, k: int) -> list[SourceRef]: ...

    def whole(self, max_chars: int) -> list[SourceRef] | None:
        """Every passage of the documents in reading order, or None when over `max_chars` (or not offered)."""
        ...


def _ref(hit: Hit) -> SourceRef:
    return SourceRef(0, hit.path, hit.page, hit.start, hit.end, hit.score, hit.text)


class CollectionSource:
    """A collection kept by `ember docs`: always retrieved from, with vectors when it has an embedder."""

    def __init__(self, index: DocIndex, coll: Collection, embedder: Embedder | None = None) -> None:
        self.index = index
        self.coll = coll
        self.embedder = embedder
        self.scope = f"'{shown(coll.name)}'"

    def search(self, question: str, k: int) -> list[SourceRef]:
        vector = self.embedder.embed([question])[0] if self.embedder is not None else None
        return [_ref(h) for h in self.index.search(self.coll, question, k, vector)]

    def whole(self, max_chars: int) -> list[SourceRef] | None:
        return None


class Attachments:
    """Files attached to a message: indexed in memory for retrieval, kept whole when small."""

    def __init__(self) -> None:
        self.index = DocIndex.memory()
        self.coll = self.index.create_collection("attached")
        self.scope = "the attached files"
        self.paths: list[Path] = []

    @classmethod
    def load(cls, paths: Sequence[Path], cancel: CancelToken | None = None) -> tuple[Attachments, list[str]]:
        """Attachments from `paths` and the one-line problems of the files that were left out."""
        attachments = cls()
        return attachments, attachments.add(paths, cancel)

    def add(self, paths: Sequence[Path], cancel: CancelToken | None = None) -> list[str]:
        problems: list[str] = []
        ok: list[Path] = []
        for path in paths:
            problem = _attach_problem(path)
            if problem:
                problems.append(problem)
            else:
                ok.append(path.resolve())
        if ok:
            self.index.add_roots(self.coll, ok)
            report = index_collection(self.index, self.coll, cancel=cancel)
            problems.extend(reason for _, reason in report.failed)
            problems.extend(note for _, note in report.notes)
            failed = {p for p, _ in report.failed}
            self.paths.extend(p for p in ok if str(p) not in failed and p not in self.paths)
        return problems

    def __len__(self) -> int:
        return len(self.paths)

    def search(self, question: str, k: int) -> list[SourceRef]:
        return [_ref(h) for h in self.index.search(self.coll, question, k)]

    def whole(self, max_chars: int) -> list[SourceRef] | None:
        # The passages overlap by at most OVERLAP_CHARS each, so their sum bounds the text from above.
        if self.index.text_chars(self.coll) > max_chars * (1 + OVERLAP_CHARS / TARGET_CHARS) + OVERLAP_CHARS:
            return None
        merged = _merge([(h.path, h.page, h.start, h.end, h.text) for h in self.index.passages(self.coll)])
        if sum(len(m.text) for m in merged) > max_chars:
            return None
        return merged

    def close(self) -> None:
        self.index.close()


def _attach_problem(path: Path) -> str:
    name = shown(path.name)
    try:
        st = path.stat()
    except (OSError, ValueError):
        return f"{name}: not found"
    if stat.S_ISDIR(st.st_mode):
        return f"{name}: is a folder; add folders to a collection (ember docs add)"
    if not stat.S_ISREG(st.st_mode):  # a pipe, a device, a socket: never opened
        return f"{name}: {kind_reason(st.st_mode)}"
    if st.st_size > MAX_ATTACH_BYTES:
        return (
            f"{name}: too large to attach ({st.st_size / (1 << 20):,.0f} MB); add it to a collection "
            "instead (ember docs add), which indexes it once"
        )
    return ""


def _merge(rows: list[tuple[str, int | None, int, int, str]]) -> list[SourceRef]:
    """Overlapping passages of each page (or file) joined back into its text, one SourceRef each."""
    out: list[SourceRef] = []
    key: tuple[str, int | None] | None = None
    parts: list[str] = []
    start = end = 0
    for path, page, s, e, text in rows:
        if (path, page) != key:
            if key is not None:
                out.append(SourceRef(0, key[0], key[1], start, end, 0.0, "".join(parts)))
            key, parts, start, end = (path, page), [], s, s
        if e <= end:
            continue
        if s >= end:
            parts.append(("\n\n" if parts else "") + text)
        else:
            parts.append(text[end - s :])
        end = e
    if key is not None:
        out.append(SourceRef(0, key[0], key[1], start, end, 0.0, "".join(parts)))
    return out
