"""`ember docs`: collections of documents to chat with (`ember chat --docs NAME`).

    ember docs add "Tax 2026" ~/Documents/tax/ receipts.pdf   # create/extend, then index
    ember docs add Notes ~/notes --embedder ~/models/nomic-embed-text.gguf   # default: all-MiniLM-L6-v2
    ember docs add Logs ~/logs --embedder none                               # BM25 alone
    ember docs list [NAME]                                    # collections, or one's files
    ember docs reindex NAME                                   # only what changed
    ember docs search NAME "question" [-k 8]
    ember docs remove NAME [PATH ...]                         # the collection, or some of its roots

`--json` on every subcommand. Indexing shows progress on stderr (files, pages, passages, and
passages/s and time left once it can tell);
Ctrl+C stops it at the next batch, keeping every file already indexed (`reindex` goes on).
A file that cannot be read is one line naming it; the others are indexed. File and collection
names are shown escaped (`engine.docs.names.shown`): a newline or an undecodable byte in a name
cannot forge or break a line; in JSON, only the bytes that are not UTF-8 are escaped.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from desktop.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, fail, positive_int, warn
from engine.api.documents import (
    DEFAULT_EMBEDDER,
    Collection,
    CollectionInfo,
    CollectionSource,
    DocIndex,
    IndexReport,
    Progress,
    chat_model_warning,
    default_path,
    index_collection,
    label,
    no_match_line,
    numbered,
    pace_words,
    prune,
    shared_embedder,
)
from engine.api.errors import EngineError
from engine.api.text import escaped as shown
from engine.api.text import json_text
from engine.api.values import CancelToken


def register(sub: Any) -> None:
    p = sub.add_parser("docs", help="collections of documents to chat with (ember chat --docs NAME)")
    dsub = p.add_subparsers(dest="docs_command", metavar="ACTION", required=True)
    add = dsub.add_parser("add", help="add files and folders to a collection (created if new) and index them")
    add.add_argument("name", metavar="NAME")
    add.add_argument("paths", metavar="PATH", nargs="+", type=Path)
    add.add_argument(
        "--embedder",
        metavar="GGUF",
        default=None,
        help="embedding model (a GGUF) for the collection's vector search; 'default' (the "
        "default for a new collection): all-MiniLM-L6-v2; 'none': BM25 alone. Given for an existing "
        "collection with another model, its vectors are dropped and its files embedded again",
    )
    add.add_argument("--no-index", action="store_true", help="only record the paths; index later with reindex")
    ls = dsub.add_parser("list", help="the collections, or one collection's files")
    ls.add_argument("name", metavar="NAME", nargs="?")
    rm = dsub.add_parser("remove", help="remove a collection, or some of its files and folders")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument("paths", metavar="PATH", nargs="*", type=Path)
    rx = dsub.add_parser("reindex", help="index what changed since the last run (and finish an interrupted one)")
    rx.add_argument("name", metavar="NAME")
    se = dsub.add_parser("search", help="the passages a question would be given")
    se.add_argument("name", metavar="NAME")
    se.add_argument("query", metavar="QUESTION")
    se.add_argument("-k", type=positive_int, default=8, help="passages to show (default 8)")
    for parser in (add, ls, rm, rx, se):
        parser.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with DocIndex.open(default_path()) as index:
            match args.docs_command:
                case "add":
                    return _add(index, args)
                case "list":
                    return _list(index, args)
                case "remove":
                    return _remove(index, args)
                case "reindex":
                    return _reindex(index, index.collection(args.name), args)
                case _:
                    return _search(index, args)
    except EngineError as exc:  # the database failing (a full disk) is a command that failed, not bad input
        return fail(str(exc), EXIT_FAILED if isinstance(exc.__cause__, sqlite3.Error) else EXIT_USAGE)


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def _embedder_spec(spec: str | None) -> str:
    """What a collection stores: '' (BM25 alone), DEFAULT_EMBEDDER (also for None) or a GGUF path."""
    if spec is None:
        return DEFAULT_EMBEDDER
    if spec in ("none", DEFAULT_EMBEDDER):
        return "" if spec == "none" else DEFAULT_EMBEDDER
    path = Path(spec).expanduser().resolve()
    if not path.is_file():
        raise EngineError(f"embedding model not found: {spec}")
    if (warning := chat_model_warning(path)) is not None:
        warn(warning)
    return str(path)


def _add(index: DocIndex, args: argparse.Namespace) -> int:
    roots = [p.expanduser().resolve() for p in args.paths]
    for root in roots:
        if not root.exists():
            return fail(f"{shown(root.name)}: not found ({shown(str(root))})")
    embedder = _embedder_spec(args.embedder)
    coll = index.create_collection(args.name, embedder)
    if args.embedder is not None and coll.embedder != embedder:  # an existing collection, told to change
        coll = _change_embedder(index, coll, embedder)
    index.add_roots(coll, roots)
    if args.no_index:
        if args.json:
            _emit(_info_json(index.info(coll)))
        return EXIT_OK
    return _reindex(index, coll, args)


def _change_embedder(index: DocIndex, coll: Collection, embedder: str) -> Collection:
    """Its vectors go (another model's cannot be mixed with the new one's) and its files are embedded again."""
    ready = index.info(coll).ready
    changed = index.set_embedder(coll, embedder)
    files = f"its {ready} file{'s are' if ready != 1 else ' is'}"
    again = f"{files} embedded again at this index run" if embedder else "BM25 alone from now on"
    warn(f"collection '{shown(coll.name)}': embedding model changed, its vectors dropped; {again}")
    return changed


def _reindex(index: DocIndex, coll: Collection, args: argparse.Namespace) -> int:
    embedder = shared_embedder(coll.embedder) if coll.embedder else None
    printer = _ProgressLine(sys.stderr.isatty())
    started = time.monotonic()
    try:
        with _cancel_on_sigint() as cancelled:
            report = index_collection(index, coll, embedder=embedder, progress=printer.show, cancel=cancelled)
    finally:
        printer.clear()
    for _, reason in report.failed + report.skipped + report.notes:
        warn(reason)
    if report.repaired:
        warn(
            f"{report.repaired} file{'s' * (report.repaired != 1)} had duplicate passages (from two indexers at "
            "once) and were indexed again"
        )
    if args.json:
        _emit(json_text({"collection": coll.name, "seconds": round(time.monotonic() - started, 3), **report.to_json()}))
    else:
        sys.stdout.write(_summary(coll, report) + "\n")
    if report.cancelled:
        warn(f"indexing stopped; files already indexed are kept (`ember docs reindex {shown(coll.name)}` goes on)")
        return EXIT_INTERRUPTED
    return EXIT_OK


def _summary(coll: Collection, report: IndexReport) -> str:
    parts = [f"{len(report.indexed)} indexed", f"{report.unchanged} unchanged"]
    if report.removed:
        parts.append(f"{report.removed} removed")
    if report.failed:
        parts.append(f"{len(report.failed)} could not be read")
    if report.skipped:
        parts.append(f"{len(report.skipped)} skipped (not documents)")
    return f"{shown(coll.name)}: " + ", ".join(parts) + f" ({report.chunks:,} passages, {report.pages:,} pages)"


class _ProgressLine:
    """One rewritten stderr line on a terminal, at most 10 times a second; nothing otherwise."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self._last = 0.0
        self._shown = False

    def show(self, p: Progress) -> None:
        now = time.monotonic()
        if not self.tty or now - self._last < 0.1:
            return
        self._last = now
        name = shown(Path(p.current).name)[:40]
        pace = pace_words(p.passages_per_s, p.seconds_left)
        sys.stderr.write(
            f"\r\x1b[Kindexing {p.files_done}/{p.files_total} files · {p.pages:,} pages · "
            f"{p.chunks:,} passages{f' · {pace}' if pace else ''} · {name}"
        )
        sys.stderr.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


@contextmanager
def _cancel_on_sigint() -> Iterator[CancelToken]:
    """Ctrl+C asks the indexer to stop at its next batch (a second one stops at once)."""
    stop = CancelToken()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.cancelled:
            raise KeyboardInterrupt
        stop.cancel()

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, no cancel
        previous = None
    try:
        yield stop
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _info_json(info: CollectionInfo) -> dict[str, Any]:
    return {
        "name": info.collection.name,
        "embedder": info.collection.embedder or None,
        "roots": list(info.roots),
        "files": info.files,
        "ready": info.ready,
        "failed": info.failed,
        "indexing": info.indexing,
        "passages": info.chunks,
        "vectors": info.vectors,
    }


def _list(index: DocIndex, args: argparse.Namespace) -> int:
    if args.name:
        coll = index.collection(args.name)
        files = sorted(index.files(coll).values(), key=lambda f: f.path)
        rows = [
            {
                "path": f.path,
                "status": f.status,
                "error": f.error or None,
                "pages": f.pages,
                "passages": f.chunks,
                "size": f.size,
            }
            for f in files
        ]
        if args.json:
            _emit(json_text({**_info_json(index.info(coll)), "file_list": rows}))
            return EXIT_OK
        for r in rows:
            extra = f"  {shown(str(r['error']))}" if r["error"] else f"  {r['passages']} passages"
            sys.stdout.write(f"{r['status']:<9} {shown(str(r['path']))}{extra}\n")
        return EXIT_OK
    infos = [index.info(c) for c in index.collections()]
    if args.json:
        _emit(json_text([_info_json(i) for i in infos]))
        return EXIT_OK
    if not infos:
        sys.stdout.write("no collections yet (ember docs add NAME FILE_OR_FOLDER …)\n")
    for i in infos:
        vectors = " + vectors" if i.collection.embedder else ""
        failed = f", {i.failed} unreadable" if i.failed else ""
        pending = f", {i.indexing} not finished (reindex)" if i.indexing else ""
        sys.stdout.write(
            f"{shown(i.collection.name)}: {i.ready} file{'s' * (i.ready != 1)}, "
            f"{i.chunks:,} passage{'s' * (i.chunks != 1)} (BM25{vectors}){failed}{pending}\n"
        )
    return EXIT_OK


def _remove(index: DocIndex, args: argparse.Namespace) -> int:
    coll = index.collection(args.name)
    if not args.paths:
        index.remove_collection(coll)
        if args.json:
            _emit({"removed": coll.name})
        return EXIT_OK
    missing = [str(p) for p in args.paths if not index.remove_root(coll, p.expanduser().resolve())]
    for path in missing:
        warn(
            f"{shown(Path(path).name)}: not in collection '{shown(coll.name)}' (its roots: "
            f"`ember docs list {shown(coll.name)}`)"
        )
    removed = prune(index, coll)
    if args.json:
        _emit(json_text({"collection": coll.name, "removed_files": removed, "not_found": missing}))
    return EXIT_FAILED if missing else EXIT_OK


def _search(index: DocIndex, args: argparse.Namespace) -> int:
    coll = index.collection(args.name)
    embedder = shared_embedder(coll.embedder) if coll.embedder else None
    source = CollectionSource(index, coll, embedder)
    refs = numbered(source.search(args.query, args.k))
    if args.json:
        _emit(json_text([r.to_json() for r in refs]))
        return EXIT_OK
    if not refs:  # the same line `ember chat --docs` and the window show
        sys.stdout.write(no_match_line([source]) + "\n")
    for r in refs:
        preview = " ".join(r.text.split())[:200]
        sys.stdout.write(f"[{r.n}] {label(r)} (score {r.score:.4f})\n    {preview}\n")
    return EXIT_OK
