"""Keeping a collection's index in step with its files: incremental, resumable, cancellable.

    report = index_collection(index, coll, embedder=None, progress=print_progress, cancel=token)

- Incremental by content hash: an unchanged file (same size and modification time, or the same
  BLAKE2 hash) is skipped, a changed one is indexed again, one no longer under the roots is dropped.
- Resumable: a file's old passages are dropped and it is marked `indexing` before its new ones
  are written in batches; it becomes `ready` (searchable) only after the last batch. A crash or a
  kill leaves it `indexing`, so the next run indexes it again; files already done stay done.
- Cancellable between batches (about 64 passages) and between PDF pages; progress is reported
  in files, bytes, pages and passages, with the recent passages/s and time left (`engine.docs.pace`).
- Bounded memory: text is streamed in 1 MiB blocks and passages are written in small batches,
  so a 1 GB text file never sits in memory whole.
- Overlapped: a file is read on a worker thread up to two groups of blocks (16 PDF pages each)
  ahead of the chunking and writes (`engine.docs.read_ahead`), so PDFium's extraction and
  SQLite's FTS5 inserts can run side by side.

A file that cannot be read is recorded as `failed` with its one-line reason (reported, never
fatal: the other files are indexed) and retried only when it changes.

In a folder only regular files are taken: a symbolic link is never followed (the file tools'
rule: a link could lead anywhere, e.g. to a private key), and a pipe, device or socket is never
opened (a FIFO blocks, `/dev/zero` never ends); each is listed with its reason. A folder that cannot
be listed (no permission) is listed too, never skipped silently. Names that are
not UTF-8 are kept as the file system's bytes (`engine.docs.names`) and shown escaped.

One indexer per collection at a time (`engine.docs.collection_lock`): a second one, in this
process or another, is refused in one line. A file whose passages disagree with its recorded
count (duplicates an older Ember's concurrent indexers left) is indexed again.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cancel import CancelToken
from engine.docs.chunk import Chunk, chunk_blocks, title_of
from engine.docs.collection_lock import collection_lock
from engine.docs.embed import Embedder, embed_in_groups
from engine.docs.errors import DocumentError
from engine.docs.extract import Block, extract, kind_by_name, kind_of
from engine.docs.index import Collection, DocIndex, FileRow
from engine.docs.pace import Pace
from engine.docs.read_ahead import ReadAhead
from engine.docs.regular import NotRegular, kind_reason, open_regular
from engine.errors import Cancelled

if TYPE_CHECKING:
    from engine.docs.vectors import Vector

BATCH = 64  # passages per write (embedded a few at a time, cancel looked at between)
GROUP_BLOCKS = 16  # blocks handed from the reading thread at a time (PDF pages)…
GROUP_CHARS = 1 << 18  # …until they hold this much text (a 1 MiB block of a text file goes alone)
HASH_BYTES = 1 << 20
NOT_A_DOCUMENT = "is not a document Ember reads (a picture, an archive, a binary file…); skipped"
MAX_FILES = 100_000  # files found under a collection's roots at most (a root of "/" is a mistake)


@dataclass(slots=True)
class Progress:
    files_total: int = 0
    files_done: int = 0
    pages: int = 0
    chunks: int = 0
    current: str = ""
    bytes_total: int = 0  # the files to look at, by size
    bytes_done: int = 0  # the files looked at so far (indexed, unchanged or left out)
    passages_per_s: float | None = None  # lately (`engine.docs.pace`); None while too early to say
    seconds_left: float | None = None


@dataclass(slots=True)
class IndexReport:
    indexed: list[str] = field(default_factory=list[str])
    unchanged: int = 0
    removed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (path, one-line reason)
    # Files in a folder that are not documents Ember reads (pictures, archives, binaries): said, not failed
    skipped: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    notes: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # files read in part
    repaired: int = 0  # files indexed again because their passages disagreed with their count
    cancelled: bool = False
    chunks: int = 0
    pages: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": [{"path": p, "error": e} for p, e in self.failed],
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "notes": [{"path": p, "note": n} for p, n in self.notes],
            "repaired": self.repaired,
            "cancelled": self.cancelled,
            "chunks": self.chunks,
            "pages": self.pages,
        }


def find_files(roots: Iterable[Path]) -> tuple[list[Path], list[tuple[str, str]], list[tuple[str, str]]]:
    """Every document under the roots (a file root is taken as given), the ones left out and the
    regular files that are not documents (skipped), each with why.

    Nothing is opened but what a regular file's name does not explain (sniffed for text).
    """
    found: dict[str, Path] = {}
    left_out: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for root in roots:
        try:
            mode = os.stat(root).st_mode
        except (OSError, ValueError):
            left_out.append((str(root), str(DocumentError(root, "not found"))))
            continue
        if stat.S_ISDIR(mode):
            for path, reason in _walk(root):
                if reason:
                    into = skipped if reason == NOT_A_DOCUMENT else left_out
                    into.append((str(path), str(DocumentError(path, reason))))
                    continue
                found.setdefault(str(path), path)
                if len(found) >= MAX_FILES:
                    break
        elif stat.S_ISREG(mode):
            found.setdefault(str(root), root)
        else:
            left_out.append((str(root), str(DocumentError(root, kind_reason(mode)))))
    return sorted(found.values()), left_out, skipped


def _walk(root: Path) -> Iterator[tuple[Path, str]]:
    """(path, '') for each document found below `root`; (path, reason) for one left out that says why.

    Links are looked at, never followed: a link to a folder is not entered (os.walk), and a link
    to a file is left out, listed when its name says it is a document.
    """
    unlisted: list[OSError] = []  # folders that cannot be listed: said, never skipped silently
    for folder, dirs, files in os.walk(root, onerror=unlisted.append):
        yield from _unlisted(unlisted)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__"))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(folder) / name
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISREG(mode):
                # In a folder, only what Ember can read is taken, the rest is listed as skipped
                # (named files are tried and reported).
                yield path, "" if kind_of(path, follow=False) is not None else NOT_A_DOCUMENT
            elif not stat.S_ISLNK(mode) or kind_by_name(path) is not None:
                yield path, kind_reason(mode)
    yield from _unlisted(unlisted)


def _unlisted(errors: list[OSError]) -> Iterator[tuple[Path, str]]:
    while errors:
        exc = errors.pop(0)
        reason = f"is a folder that cannot be read ({exc.strerror or exc}); its files are left out"
        yield Path(exc.filename if exc.filename is not None else "?"), reason


def file_digest(path: Path, follow: bool = True, stop: CancelToken | None = None) -> str:
    h = hashlib.blake2b(digest_size=20)
    with open_regular(path, follow=follow) as f:
        while chunk := f.read(HASH_BYTES):
            if stop is not None:
                stop.check()
            h.update(chunk)
    return h.hexdigest()


def prune(index: DocIndex, coll: Collection, paths: list[Path] | None = None) -> int:
    """Drop the files no longer under the collection's roots (or gone); how many were dropped."""
    if paths is None:
        paths, _, _ = find_files(index.roots(coll))
    wanted = {str(p) for p in paths}
    gone = [row.id for path, row in index.files(coll).items() if path not in wanted]
    if gone:
        index.drop_files(gone)
    return len(gone)


def index_collection(
    index: DocIndex,
    coll: Collection,
    *,
    embedder: Embedder | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: CancelToken | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> IndexReport:
    """Bring `coll`'s index up to date with its roots; stops cleanly (nothing half-used) on cancel.

    Each `progress` report says how fast the run goes lately and how long it has left (`clock`'s seconds).
    """
    stop = cancel or CancelToken()
    progress = _paced(progress, Pace(clock))
    report = IndexReport()
    with collection_lock(index, coll):
        roots = index.roots(coll)
        named = {str(r) for r in roots}  # files the user named are opened as named (links followed)
        paths, left_out, skipped = find_files(roots)
        report.failed.extend(left_out)
        report.skipped.extend(skipped)
        report.removed = prune(index, coll, paths)
        known = index.files(coll)
        for path in index.miscounted_files(coll):  # duplicates left by older Embers' concurrent runs
            if path in known:
                known.pop(path)
                report.repaired += 1
        sizes = [_size(p) for p in paths]
        state = Progress(files_total=len(paths), bytes_total=sum(sizes))
        try:
            for path, size in zip(paths, sizes, strict=True):
                stop.check()
                state.current = str(path)
                if progress:
                    progress(state)
                _index_one(
                    index,
                    coll,
                    path,
                    known.get(str(path)),
                    embedder,
                    state,
                    report,
                    stop,
                    progress,
                    follow=str(path) in named,
                )
                state.files_done += 1
                state.bytes_done += size
        except Cancelled:
            report.cancelled = True
    state.current = ""
    if progress:
        progress(state)
    return report


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0  # said when it is indexed


def _paced(progress: Callable[[Progress], None] | None, pace: Pace) -> Callable[[Progress], None] | None:
    """`progress` with each report's passages/s and time left filled in."""
    if progress is None:
        return None

    def report(state: Progress) -> None:
        pace.note(state.chunks, state.bytes_done, state.bytes_total)
        state.passages_per_s, state.seconds_left = pace.passages_per_s(), pace.seconds_left()
        progress(state)

    return report


def _index_one(
    index: DocIndex,
    coll: Collection,
    path: Path,
    row: FileRow | None,
    embedder: Embedder | None,
    state: Progress,
    report: IndexReport,
    stop: CancelToken,
    progress: Callable[[Progress], None] | None,
    *,
    follow: bool,
) -> None:
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError as exc:
        report.failed.append((str(path), str(DocumentError(path, f"cannot be read ({exc.strerror or exc})"))))
        return
    if not stat.S_ISREG(st.st_mode):  # replaced since it was found
        report.failed.append((str(path), str(DocumentError(path, kind_reason(st.st_mode)))))
        return
    if (
        row is not None
        and row.status in ("ready", "failed")
        and row.size == st.st_size
        and row.mtime_ns == st.st_mtime_ns
    ):
        _count_unchanged(row, report)
        return
    try:
        digest = file_digest(path, follow, stop)
    except NotRegular as exc:
        report.failed.append((str(path), str(DocumentError(path, str(exc)))))
        return
    except OSError as exc:
        report.failed.append((str(path), str(DocumentError(path, f"cannot be read ({exc.strerror or exc})"))))
        return
    if row is not None and row.status in ("ready", "failed") and row.hash == digest:
        index.touch_file(row.id, st.st_mtime_ns)  # touched, not changed
        _count_unchanged(row, report)
        return
    file_id = index.begin_file(coll, str(path), digest, st.st_size, st.st_mtime_ns)
    try:
        pages, chunks = _write_passages(
            index,
            file_id,
            lambda cancel: extract(
                path, cancel, follow=follow, note=lambda line: report.notes.append((str(path), line))
            ),
            embedder,
            state,
            stop,
            progress,
            title=title_of(path),
        )
    except DocumentError as exc:
        index.fail_file(coll, str(path), digest, st.st_size, st.st_mtime_ns, str(exc))
        report.failed.append((str(path), str(exc)))
        return
    stop.check()  # the file stays `indexing`: never searched, redone next time
    index.finish_file(file_id, pages=pages, chunks=chunks)
    report.indexed.append(str(path))
    report.chunks += chunks
    report.pages += pages


def _count_unchanged(row: FileRow, report: IndexReport) -> None:
    if row.status == "failed":
        report.failed.append((row.path, row.error))
    else:
        report.unchanged += 1


def _write_passages(
    index: DocIndex,
    file_id: int,
    read: Callable[[CancelToken], Iterator[Block]],
    embedder: Embedder | None,
    state: Progress,
    stop: CancelToken,
    progress: Callable[[Progress], None] | None,
    *,
    title: str = "",
) -> tuple[int, int]:
    """Write a file's passages: read on a worker thread, chunked, written (and embedded) on this one."""
    pages: set[int] = set()
    written = 0

    def counted(blocks: Iterator[Block]) -> Iterator[Block]:
        for block in blocks:
            if block.page is not None and block.page not in pages:
                pages.add(block.page)
                state.pages += 1
            yield block

    def flush(batch: list[Chunk]) -> None:
        nonlocal written
        stop.check()
        vectors = _embedded(embedder, batch, stop) if embedder is not None else None
        index.add_chunks(file_id, batch, vectors)
        written += len(batch)
        state.chunks += len(batch)
        batch.clear()
        if progress:
            progress(state)

    # Only the reading (PDFium, the UTF-8 decoder) runs on the worker: it is the longest part and
    # the one that lets go of the GIL. Blocks cross in groups (up to 16 PDF pages, or one 1 MiB
    # block of text), two groups ahead: handing over each page alone cost a thread switch or two
    # per page, about 3 % of the time when both threads share one core.
    reader = ReadAhead(lambda gone: _grouped(counted(read(gone))), depth=2, name="ember-docs-read", cancel=stop)
    try:
        batch: list[Chunk] = []
        for chunk in chunk_blocks(itertools.chain.from_iterable(reader), title=title):
            batch.append(chunk)
            if len(batch) >= BATCH:
                flush(batch)
        if batch:
            flush(batch)
    finally:
        reader.close()
    return len(pages), written


def _embedded(embedder: Embedder, batch: list[Chunk], stop: CancelToken) -> Vector:
    return embed_in_groups(embedder, [c.indexed for c in batch], stop)  # Cancelled when `stop` says so


def _grouped(blocks: Iterator[Block]) -> Iterator[list[Block]]:
    group: list[Block] = []
    chars = 0
    for block in blocks:
        group.append(block)
        chars += len(block.text)
        if len(group) >= GROUP_BLOCKS or chars >= GROUP_CHARS:
            yield group
            group, chars = [], 0
    if group:
        yield group
