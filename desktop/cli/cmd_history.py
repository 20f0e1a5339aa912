"""`ember history`: list, show, search, export, import, archive, delete and restore conversations.

Also the history side of `ember chat` (`--no-history`, `-c/--continue`, `--conversation`):
`add_chat_options` and `chat_session`, so `cmd_chat` only calls into them. No Qt here.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import Any

from desktop.cli import history_reproduce
from desktop.cli.arg_checks import id_arg, text_arg, title_arg
from desktop.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, positive_int
from engine.api.conversations import (
    DEFAULT_WAIT_S,
    IMPORT_MAX_BYTES,
    HistoryStore,
    JsonInputError,
    conversation_to_json,
    export_json,
    export_markdown,
    import_json,
    iso,
    message_to_json,
    parse_json_input,
    read_json_input,
)
from engine.api.errors import ConfigError
from engine.api.program import ember_paths, write_text_atomic
from engine.api.session import ChatSession
from engine.api.text import cell, strict_dumps
from engine.api.values import HIGHLIGHT_END, HIGHLIGHT_START, Conversation, HistoryError, NotFoundError, as_datetime


def open_store(*, reading: bool = False) -> HistoryStore:
    """The history; for a command that only reads, a database Ember cannot write is opened read-only."""
    try:
        return HistoryStore(ember_paths().ensure().history_db)
    except (HistoryError, OSError):
        path = ember_paths().history_db
        if not reading or not path.is_file():
            raise
        return HistoryStore(path, read_only=True)


# -- `ember history` ------------------------------------------------------------------


def register(sub: Any) -> None:
    p = sub.add_parser("history", help="list, search, export and import recorded conversations")
    p.set_defaults(func=run, history_action=_list, json=False, limit=None, trash=False, archived=False)
    actions = p.add_subparsers(dest="history_command", metavar="ACTION")

    a = actions.add_parser("list", help="conversations, most recent first")
    _json_flag(a)
    a.add_argument("--limit", type=positive_int, default=None, help="show at most N")
    shown = a.add_mutually_exclusive_group()
    shown.add_argument("--trash", action="store_true", help="list deleted conversations instead")
    shown.add_argument("--archived", action="store_true", help="list archived conversations instead")
    a.set_defaults(history_action=_list)

    a = actions.add_parser("show", help="a conversation's active branch")
    a.add_argument("id", type=id_arg, metavar="ID")
    _json_flag(a)
    a.add_argument("--all", action="store_true", help="every version of every message, not only the active branch")
    history_reproduce.add_options(a)
    a.set_defaults(history_action=_show)

    a = actions.add_parser("search", help="conversations whose title or messages contain every word")
    a.add_argument("text", nargs="+", metavar="TEXT", type=text_arg)
    _json_flag(a)
    a.add_argument("--limit", type=positive_int, default=50, help="show at most N")
    a.set_defaults(history_action=_search)

    a = actions.add_parser("export", help="a conversation as Markdown or JSON")
    a.add_argument("id", type=id_arg, metavar="ID")
    a.add_argument("--format", choices=("md", "json"), default="md", help="md (default) or json")
    a.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    a.set_defaults(history_action=_export)

    a = actions.add_parser("import", help="a conversation exported as JSON (FILE or - for stdin)")
    a.add_argument("file", metavar="FILE")
    a.set_defaults(history_action=_import)

    for name, action, text in (
        ("archive", _archive, "set a conversation aside: out of the list, nothing lost"),
        ("unarchive", _unarchive, "bring an archived conversation back to the list"),
        ("delete", _delete, "move a conversation to the trash (restore undoes it)"),
        ("restore", _restore, "bring a deleted conversation back"),
        ("rename", _rename, "give a conversation a title"),
    ):
        a = actions.add_parser(name, help=text)
        a.add_argument("id", type=id_arg, metavar="ID")
        a.set_defaults(history_action=action)
    actions.choices["delete"].add_argument("--purge", action="store_true", help="delete for good, now")
    actions.choices["rename"].add_argument("title", metavar="TITLE", type=title_arg)


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    try:
        with open_store(reading=args.history_action in _READING) as store:
            return int(args.history_action(store, args))
    except NotFoundError as exc:
        return fail(str(exc), EXIT_USAGE)
    except HistoryError as exc:
        return fail(str(exc), EXIT_FAILED)


def _print_json(value: Any) -> None:
    sys.stdout.write(strict_dumps(value, ensure_ascii=False, indent=2) + "\n")


def _local(ts: float) -> str:
    return as_datetime(ts).strftime("%Y-%m-%d %H:%M")


def _list(store: HistoryStore, args: argparse.Namespace) -> int:
    conversations = store.conversations(limit=args.limit, deleted=args.trash, archived=args.archived)
    if args.json:
        _print_json([_conversation_json(c) for c in conversations])
        return EXIT_OK
    for conv in conversations:
        print(f"{conv.id:>6}  {_local(conv.updated_at)}  {cell(conv.title) or '(untitled)'}")
    if not conversations:
        sys.stderr.write(f"ember: {_nothing_listed(args)}\n")
    elif not (args.trash or args.archived) and (count := store.archived_count()):
        sys.stderr.write(f"ember: {count} archived not shown (ember history list --archived)\n")
    return EXIT_OK


def _nothing_listed(args: argparse.Namespace) -> str:
    if args.trash:
        return "the trash is empty"
    return "nothing is archived" if args.archived else "no conversations yet"


def _conversation_json(conv: Conversation) -> dict[str, Any]:
    return conversation_to_json(conv) | {"deleted_at": iso(conv.deleted_at), "archived_at": iso(conv.archived_at)}


def _show(store: HistoryStore, args: argparse.Namespace) -> int:
    conv = store.conversation(args.id)
    if args.reproduce:
        return history_reproduce.run_reproduce(store, conv.id, args)
    if args.all and not args.json:
        return fail("--all shows every version as JSON: add --json", EXIT_USAGE)
    if not args.json:
        sys.stdout.write(export_markdown(store, conv.id))
        return EXIT_OK
    messages = store.messages(conv.id) if args.all else store.path(conv.id)
    out: list[dict[str, Any]] = []
    for msg in messages:
        versions = store.versions(msg.id)
        out.append(message_to_json(msg) | {"version": versions.index + 1, "versions": versions.count})
    _print_json(_conversation_json(conv) | {"messages": out})
    return EXIT_OK


def _search(store: HistoryStore, args: argparse.Namespace) -> int:
    hits = store.search(" ".join(args.text), limit=args.limit)
    if args.json:
        _print_json(
            [
                {
                    "conversation_id": h.conversation_id,
                    "title": h.title,
                    "message_id": h.message_id,
                    "snippet": h.plain_snippet,
                    "updated_at": iso(h.updated_at),
                    "archived": h.archived,
                }
                for h in hits
            ]
        )
        return EXIT_OK
    bold, plain = ("\x1b[1m", "\x1b[0m") if sys.stdout.isatty() else ("", "")
    for h in hits:
        snippet = _highlighted(h.snippet, bold, plain)
        where = ("title" if h.message_id is None else f"message {h.message_id}") + (", archived" if h.archived else "")
        print(f"{h.conversation_id:>6}  {cell(h.title) or '(untitled)'}  [{where}]\n        {snippet}")
    if not hits:
        sys.stderr.write("ember: nothing found\n")
    return EXIT_OK


def _highlighted(snippet: str, bold: str, plain: str) -> str:
    """The snippet made safe for the terminal, its highlight markers (control characters) then styled."""
    marked = snippet.replace(HIGHLIGHT_START, "\ue010").replace(HIGHLIGHT_END, "\ue011")
    return cell(marked).replace("\ue010", bold).replace("\ue011", plain)


def _export(store: HistoryStore, args: argparse.Namespace) -> int:
    if args.format == "json":
        text = strict_dumps(export_json(store, args.id), ensure_ascii=False, indent=2) + "\n"
    else:
        text = export_markdown(store, args.id)
    if args.output:
        try:
            write_text_atomic(Path(args.output), text)
        except OSError as exc:
            return fail(f"cannot write {args.output}: {exc.strerror or exc}", EXIT_FAILED)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _import(store: HistoryStore, args: argparse.Namespace) -> int:
    name = "stdin" if args.file == "-" else args.file
    try:
        if args.file == "-":
            data = parse_json_input(sys.stdin.buffer.read(IMPORT_MAX_BYTES + 1)[:IMPORT_MAX_BYTES])
        else:
            data = read_json_input(Path(args.file), max_bytes=IMPORT_MAX_BYTES)
    except JsonInputError as exc:
        return fail(f"cannot import {name}: {exc}", EXIT_USAGE)
    except OSError as exc:
        return fail(f"cannot read {name}: {exc.strerror or exc}", EXIT_USAGE)
    try:
        conv = import_json(store, data)
    except HistoryError as exc:  # the file's fault (2), or a write that failed, e.g. on a full disk (1)
        return fail(
            f"cannot import {name}: {exc}", EXIT_FAILED if isinstance(exc.__cause__, sqlite3.Error) else EXIT_USAGE
        )
    except RecursionError:
        return fail(f"cannot import {name}: it is nested too deeply to be a conversation", EXIT_USAGE)
    except UnicodeEncodeError:  # a JSON "\ud800" escape: not storable text
        return fail(f"cannot import {name}: it holds text that is not valid Unicode", EXIT_USAGE)
    print(f"imported conversation {conv.id}: {cell(conv.title) or '(untitled)'}")
    return EXIT_OK


def _delete(store: HistoryStore, args: argparse.Namespace) -> int:
    conv = store.conversation(args.id)
    if args.purge:
        store.purge(conv.id)
        print(f"deleted conversation {conv.id} for good")
    else:
        store.delete(conv.id)
        print(f"moved conversation {conv.id} to the trash (undo: ember history restore {conv.id})")
    return EXIT_OK


def _archive(store: HistoryStore, args: argparse.Namespace) -> int:
    store.archive(args.id)
    print(f"archived conversation {args.id} (undo: ember history unarchive {args.id})")
    return EXIT_OK


def _unarchive(store: HistoryStore, args: argparse.Namespace) -> int:
    conv = store.conversation(args.id)
    store.unarchive(conv.id)
    if conv.deleted_at is not None:  # unarchived, but the trash still hides it: say so, and how
        print(
            f"conversation {conv.id} is no longer archived, but it is in the trash "
            f"(ember history restore {conv.id} brings it back to the list)"
        )
    else:
        print(f"conversation {conv.id} is back in the list")
    return EXIT_OK


def _restore(store: HistoryStore, args: argparse.Namespace) -> int:
    conv = store.conversation(args.id)
    store.restore(conv.id)
    if conv.archived_at is not None:  # back from the trash into the archive, not the list
        print(f"restored conversation {conv.id}; it is archived (ember history unarchive {conv.id} lists it)")
    else:
        print(f"restored conversation {conv.id}")
    return EXIT_OK


def _rename(store: HistoryStore, args: argparse.Namespace) -> int:
    conv = store.conversation(args.id)
    if conv.deleted_at is not None:
        return fail(f"conversation {conv.id} is in the trash (ember history restore {conv.id} first)", EXIT_USAGE)
    store.rename(conv.id, args.title)
    title = store.conversation(conv.id).title
    print(f"renamed conversation {conv.id}: {cell(title) or '(untitled)'}")
    return EXIT_OK


_READING = (_list, _show, _search, _export)  # these work on a history Ember cannot write


# -- the history side of `ember chat` -------------------------------------------------


def add_chat_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("history")
    g.add_argument("--no-history", action="store_true", help="do not record this turn")
    which = g.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the most recent conversation (its active branch is the context)",
    )
    which.add_argument("--conversation", type=id_arg, metavar="ID", help="continue conversation ID")


def chat_session(args: argparse.Namespace) -> ChatSession:
    """The session `ember chat` records in; ConfigError for a bad combination or an unknown id.

    Without history (`--no-history`, or a database that cannot be opened for a new
    conversation) the turn still runs the same way, in an unsaved session.
    """
    wants_existing = bool(args.continue_latest) or args.conversation is not None
    if args.no_history:
        if wants_existing:
            raise ConfigError("--no-history cannot be combined with --continue or --conversation")
        return ChatSession.unsaved(on_wait=_waiting)
    try:
        store = open_store()
    except HistoryError as exc:
        if wants_existing:
            raise ConfigError(str(exc)) from exc
        # Chatting matters more than recording: say so and go on without history.
        sys.stderr.write(f"ember: not recording this turn: {exc}\n")
        return ChatSession.unsaved(on_wait=_waiting)
    try:
        # Another `chat -c` on the conversation first finishes its turn (its answer is then in the context).
        return ChatSession(store, _target_conversation(store, args), lock_wait_s=DEFAULT_WAIT_S, on_wait=_waiting)
    except BaseException:
        store.close()
        raise


def _waiting() -> None:
    sys.stderr.write("ember: waiting for another reply in this conversation to finish…\n")
    sys.stderr.flush()


def _target_conversation(store: HistoryStore, args: argparse.Namespace) -> int | None:
    if args.conversation is not None:
        try:
            conv = store.conversation(args.conversation)
        except NotFoundError as exc:
            raise ConfigError(f"{exc} (see: ember history list)") from exc
        if conv.deleted_at is not None:
            raise ConfigError(f"conversation {conv.id} is in the trash (ember history restore {conv.id})")
        return conv.id
    if args.continue_latest:
        latest = store.latest_conversation()
        return None if latest is None else latest.id  # nothing to continue yet: start one
    return None
