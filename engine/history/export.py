"""A conversation as Markdown (its active branch, for reading) or JSON (the whole tree, for import).

JSON shape (`format` "ember.conversation", `version` 1):

    {"format": "ember.conversation", "version": 1,
     "conversation": {"title", "model", "settings", "created_at", "updated_at", "active_leaf"},
     "messages": [{"id", "parent", "role", "content", "thinking", "status", "stats", "model",
                   "created_at", "updated_at", "images"?}, ...]}

A question's images travel inside the file, as `{"name", "url"}` with a `data:image/…;base64`
URL; import checks each (`engine.backends.image_input`) and stores it by content again, at most
MAX_MESSAGE_IMAGES per message and MAX_FILE_IMAGES per file (more is refused in one line). An
image whose file was missing or changed on disk at export is `{"name", "missing": note}`: the
export still goes, and import skips it (there is nothing to restore).

Message ids are local to the file (parents come before children); timestamps are ISO 8601
UTC. Import creates a new conversation with new ids, all versions and the active branch
kept, in one transaction: a bad file imports nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from engine.backends.image_input import MAX_MESSAGE_IMAGES, ImageData, data_url, from_data_url
from engine.errors import ConfigError
from engine.history.images import read_images, save_images
from engine.history.store import HistoryStore
from engine.history.times import as_datetime, in_range
from engine.history.types import Conversation, HistoryError, StoredMessage

FORMAT = "ember.conversation"
FORMAT_VERSION = 1
ROLES = ("system", "user", "assistant")
STATUSES = ("complete", "stopped", "interrupted", "error")
# The conversation settings a file may carry, and the type each must have: the conversation's own
# text and shape. Everything else stays behind, both ways: permissions (`tools_*`: always-allowed
# tools, folders, MCP servers), the files and collection it was answered from (`attachments`: the
# sender's absolute paths, read into every later prompt; `docs`: a collection name that would
# search the receiver's own), and keys this version does not know (it cannot judge them safe).
# Values are checked again where they are used (engine.session.settings reads them tolerantly).
IMPORTABLE_SETTINGS: Mapping[str, type] = {"system": str, "context_policy": str, "reply_format": dict}
MAX_FILE_IMAGES = 256  # pictures one imported file carries (MAX_MESSAGE_IMAGES per message)
_ROLE_HEADINGS = {"system": "System", "user": "You", "assistant": "Assistant"}


class ImportFormatError(HistoryError):
    """The file is not a conversation Ember can import; the message says what is wrong."""


def iso(ts: float | None) -> str | None:
    return None if ts is None else as_datetime(ts, UTC).isoformat(timespec="milliseconds")


def _from_iso(text: Any, where: str) -> float:
    if not isinstance(text, str):
        raise ImportFormatError(f"{where}: expected an ISO 8601 timestamp, got {_short(text)}")
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ImportFormatError(f"{where}: expected an ISO 8601 timestamp, got {_short(text)}") from None
    moment = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    if not in_range(moment):  # shown in local time, where years 1 and 9999 overflow
        raise ImportFormatError(f"{where}: {_short(text)} is outside the years 1970 to 9000")
    return moment


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


# -- export ---------------------------------------------------------------------------


def message_to_json(msg: StoredMessage) -> dict[str, Any]:
    return {
        "id": msg.id,
        "parent": msg.parent_id,
        "role": msg.role,
        "content": msg.content,
        "thinking": msg.thinking,
        "status": msg.status,
        "stats": dict(msg.stats),
        "model": msg.model,
        "created_at": iso(msg.created_at),
        "updated_at": iso(msg.updated_at),
    }


def conversation_to_json(conv: Conversation) -> dict[str, Any]:
    return {
        "id": conv.id,
        "title": conv.title,
        "model": conv.model,
        "settings": dict(conv.settings),
        "created_at": iso(conv.created_at),
        "updated_at": iso(conv.updated_at),
        "active_leaf": conv.active_leaf_id,
    }


def export_json(store: HistoryStore, conversation_id: int) -> dict[str, Any]:
    """The whole conversation, every version of every message."""
    conv = store.conversation(conversation_id)
    shared = conversation_to_json(conv) | {"settings": portable_settings(conv.settings)}  # no paths, no permissions
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "conversation": shared,
        "messages": _with_images(store, [message_to_json(m) for m in store.messages(conversation_id)]),
    }


def _with_images(store: HistoryStore, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question's images as data URLs; one missing or changed on disk as `{"name", "missing"}`
    (a note, so the export still goes and says what it lacks)."""
    images = read_images(store, [m["id"] for m in messages if m["role"] == "user"])
    for m in messages:
        found = [{"name": i.name, "url": data_url(i.data, i.name)} for i in images.found.get(m["id"], ())]
        lost = [{"name": d.name, "missing": d.note} for d in images.damaged.get(m["id"], ())]
        if found or lost:
            m["images"] = found + lost
    return messages


def export_markdown(store: HistoryStore, conversation_id: int) -> str:
    """The active branch as a readable document; thinking goes in collapsed <details> blocks."""
    conv = store.conversation(conversation_id)
    created = as_datetime(conv.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"*{conv.model} · {created}*" if conv.model else f"*{created}*"
    parts = [f"# {conv.title or 'Conversation'}", meta]
    for msg in store.path(conversation_id):
        parts.append(f"## {_ROLE_HEADINGS.get(msg.role, msg.role)}")
        if msg.thinking.strip():
            parts.append(f"<details>\n<summary>Thinking</summary>\n\n{msg.thinking.strip()}\n\n</details>")
        parts.extend(tool_call_lines(msg.stats.get("tools")))
        parts.append(msg.content.strip() or "*(no text)*")
        parts.extend(source_lines(msg.stats.get("sources")))
        if msg.status not in ("complete", "streaming"):
            parts.append(f"*({msg.status})*")
    return "\n\n".join(parts) + "\n"


def tool_call_lines(records: Any) -> list[str]:
    """The tool calls recorded with a reply (their stats' "tools"), as Markdown blocks."""
    lines: list[str] = []
    for record in cast(list[Any], records) if isinstance(records, list) else []:
        if not isinstance(record, dict):
            continue
        r = cast(dict[str, Any], record)
        arguments = json.dumps(r.get("arguments", {}), ensure_ascii=False, indent=2)
        outcome = "denied" if r.get("approval") == "denied" else f"{r.get('approval', 'approved')}, result:"
        block = f"**Tool call** {code_span(str(r.get('name', '?')))} ({outcome})\n\n{fenced(arguments, 'json')}"
        if "result" in r:
            block += f"\n\n{fenced(str(r['result']))}"
        lines.append(block)
    return lines


def fenced(text: str, info: str = "") -> str:
    """`text` in a code fence longer than any backtick run in it, so it can never close the fence."""
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def code_span(text: str) -> str:
    """`text` as inline code on one line, delimited by more backticks than it holds in a row."""
    flat = " ".join(text.split())
    ticks = "`" * (_longest_backtick_run(flat) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def source_lines(records: Any) -> list[str]:
    """The passages a reply was given (its stats' "sources"), as one Markdown list."""
    items: list[str] = []
    for record in cast(list[Any], records) if isinstance(records, list) else []:
        if not isinstance(record, dict):
            continue
        r = cast(dict[str, Any], record)
        page = f", page {r['page']}" if r.get("page") is not None else ""
        path = code_span(str(r.get("path", "?")))
        items.append(f"- [{r.get('n', '?')}] {path}{page}, characters {r.get('start', 0)}–{r.get('end', 0)}")
    return ["**Sources**\n\n" + "\n".join(items)] if items else []


# -- import ---------------------------------------------------------------------------


def import_json(store: HistoryStore, data: Any) -> Conversation:
    """Create a new conversation from `export_json` output; raises ImportFormatError on a bad file."""
    conv_data, messages = _check_document(data)
    with store.transaction():
        conv = store.create_conversation(
            title=_text(conv_data, "title", "conversation"),
            model=_text(conv_data, "model", "conversation"),
            settings=portable_settings(_mapping(conv_data.get("settings"), "conversation.settings")),
        )
        ids: dict[Any, int] = {}
        _count_images(messages)
        for i, raw in enumerate(messages):
            key = _message_key(raw, i, ids, f"messages[{i}]")
            ids[key] = _import_message(store, conv.id, raw, ids, f"messages[{i}]")
        leaf = ids.get(conv_data.get("active_leaf"), max(ids.values(), default=None))
        store.set_active_leaf(conv.id, leaf)
        _restore_times(store, conv.id, conv_data)
    return store.conversation(conv.id)


def portable_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Only the settings a conversation file may carry (IMPORTABLE_SETTINGS), each of its type."""
    return {key: settings[key] for key, kind in IMPORTABLE_SETTINGS.items() if isinstance(settings.get(key), kind)}


def _check_document(data: Any) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    if not isinstance(data, dict) or cast(dict[str, Any], data).get("format") != FORMAT:
        raise ImportFormatError(f'not an Ember conversation export (expected "format": "{FORMAT}")')
    doc = cast(dict[str, Any], data)
    if doc.get("version") != FORMAT_VERSION:
        raise ImportFormatError(
            f"unsupported export version {doc.get('version')!r} (this Ember reads {FORMAT_VERSION})"
        )
    conv = _mapping(doc.get("conversation"), "conversation")
    raw_messages: Any = doc.get("messages")
    if not isinstance(raw_messages, list):
        raise ImportFormatError("'messages' must be a list")
    messages = [_mapping(m, f"messages[{i}]") for i, m in enumerate(cast(list[Any], raw_messages))]
    return conv, messages


def _import_message(
    store: HistoryStore, conversation_id: int, raw: Mapping[str, Any], ids: Mapping[Any, int], where: str
) -> int:
    role, status = raw.get("role"), raw.get("status", "complete")
    if role not in ROLES:
        raise ImportFormatError(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}")
    if status == "streaming":  # exported while another process was writing it
        status = "interrupted"
    if status not in STATUSES:
        raise ImportFormatError(f"{where}.status must be one of {', '.join(STATUSES)}, got {status!r}")
    parent = raw.get("parent")
    if parent is not None and parent not in ids:
        raise ImportFormatError(f"{where}.parent {parent!r} is not an earlier message")
    created = _from_iso(raw["created_at"], f"{where}.created_at") if "created_at" in raw else None
    updated = _from_iso(raw["updated_at"], f"{where}.updated_at") if "updated_at" in raw else None
    images = _images(raw.get("images"), where)
    message_id = store.add_message(
        conversation_id,
        role,
        _text(raw, "content", where),
        parent_id=None if parent is None else ids[parent],
        thinking=_text(raw, "thinking", where),
        status=status,
        stats=_mapping(raw.get("stats"), f"{where}.stats"),
        model=_text(raw, "model", where),
        make_active=False,
        created_at=created,
        updated_at=updated,
    )
    if images:
        save_images(store, message_id, images)
    return message_id


def _images(value: Any, where: str) -> list[ImageData]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}.images must be a list")
    items = cast(list[Any], value)  # counted against the bounds before (_count_images)
    out: list[ImageData] = []
    for i, item in enumerate(items):
        image = _mapping(item, f"{where}.images[{i}]")
        name = _text(image, "name", f"{where}.images[{i}]") or "image"
        if "url" not in image and isinstance(image.get("missing"), str):
            continue  # lost before the export: its note is all there is
        try:
            out.append(ImageData(from_data_url(_text(image, "url", f"{where}.images[{i}]"), name), name))
        except ConfigError as exc:
            raise ImportFormatError(f"{where}.images[{i}]: {exc}") from None
    return out


def _count_images(messages: list[Mapping[str, Any]]) -> None:
    """Refuse a message carrying more than MAX_MESSAGE_IMAGES pictures, or a file more than
    MAX_FILE_IMAGES, before any is decoded: each becomes a thumbnail when the conversation opens."""
    counts = [len(cast(list[Any], m["images"])) if isinstance(m.get("images"), list) else 0 for m in messages]
    for i, count in enumerate(counts):
        if count > MAX_MESSAGE_IMAGES:  # as many as one message can carry when it is sent
            raise ImportFormatError(
                f"messages[{i}].images holds {count:,} pictures; at most {MAX_MESSAGE_IMAGES} go with one message"
            )
    total = sum(counts)
    if total > MAX_FILE_IMAGES:
        raise ImportFormatError(f"the file carries {total:,} pictures; at most {MAX_FILE_IMAGES:,} are imported")


def _message_key(raw: Mapping[str, Any], index: int, seen: Mapping[Any, int], where: str) -> Any:
    key = raw.get("id", index)
    if not isinstance(key, int | str) or isinstance(key, bool):
        raise ImportFormatError(f"{where}.id must be a number or text, got {key!r}")
    if key in seen:
        raise ImportFormatError(f"{where}.id {key!r} is used twice")
    return key


def _restore_times(store: HistoryStore, conversation_id: int, conv: Mapping[str, Any]) -> None:
    if "created_at" not in conv:
        return
    created = _from_iso(conv["created_at"], "conversation.created_at")
    updated = _from_iso(conv.get("updated_at", conv["created_at"]), "conversation.updated_at")
    store.set_timestamps(conversation_id, created_at=created, updated_at=updated)


def _text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}.{key} must be text, got {type(value).__name__}")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ImportFormatError(f"{where} must be an object")
    return cast(dict[str, Any], value)
