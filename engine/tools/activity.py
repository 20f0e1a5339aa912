"""Recording a turn's tool activity in the history: calls, approvals and results.

The activity goes into the reply's stored `stats` under `"tools"` (so the JSON export
carries it as is), and the conversation's always-allowed tools into its settings under
`"tools_always"`, so "always allow" holds for the conversation, not just one run.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any, cast

from engine.backends.base import Message
from engine.history.store import HistoryStore
from engine.history.types import HistoryError
from engine.turns.tool_events import AnyEvent, ToolCall, ToolDenied, ToolResult
from engine.turns.tool_loop import DENIED_TEXT, ToolPermissions, cut_result

log = logging.getLogger("engine.history")

STATS_KEY = "tools"
ALWAYS_KEY = "tools_always"
REPLAY_RESULT_CHARS = 2_000


class ToolActivity:
    """The tool events of one turn, as plain records in call order."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def on_event(self, event: AnyEvent) -> None:
        match event:
            case ToolCall(id=call_id, name=name, arguments=arguments):
                self.records.append({"id": call_id, "name": name, "arguments": arguments})
            case ToolDenied(id=call_id):
                self._update(call_id, approval="denied")
            case ToolResult(id=call_id, content=content, error=error, approval=approval):
                self._update(call_id, approval=approval, result=content, error=error)
            case _:
                pass

    def _update(self, call_id: str, **fields: Any) -> None:
        for record in reversed(self.records):
            if record["id"] == call_id:
                record.update(fields)
                return

    def save(self, store: HistoryStore, message_id: int | None) -> None:
        """Add the records to the stored reply's stats (no reply kept: nothing to attach to)."""
        if not self.records or message_id is None:
            return
        try:
            msg = store.message(message_id)
            stats = {**msg.stats, STATS_KEY: self.records}
            store.finish_message(message_id, content=msg.content, thinking=msg.thinking, status=msg.status,
                                 stats=stats)
        except (HistoryError, sqlite3.Error) as exc:
            log.error("history: could not record the tool calls of message %s: %s", message_id, exc)


def recorded_tools(events: Iterable[AnyEvent], activity: ToolActivity) -> Iterator[AnyEvent]:
    for event in events:
        activity.on_event(event)
        yield event


def load_permissions(store: HistoryStore, conversation_id: int) -> ToolPermissions:
    stored: Any = store.conversation(conversation_id).settings.get(ALWAYS_KEY)
    names = [str(n) for n in stored] if isinstance(stored, list) else []  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return ToolPermissions(set(names))


def save_permissions(store: HistoryStore, conversation_id: int, permissions: ToolPermissions) -> None:
    settings = dict(store.conversation(conversation_id).settings)
    settings[ALWAYS_KEY] = sorted(permissions.always)
    store.update_conversation(conversation_id, settings=settings)


def replay_tool_calls(store: HistoryStore, conversation_id: int, messages: list[Message], *,
                      upto: int | None = None) -> list[Message]:
    """`messages` with each earlier reply's tool calls and results put back before its answer.

    The prompt rebuilt from history holds only the answers; a reply that used tools becomes
    assistant (calls) → tool results → assistant (answer) again, so the model sees what its
    tools said. Old results are cut to `REPLAY_RESULT_CHARS` to keep long chats in context.
    """
    try:
        path = store.path(conversation_id, leaf_id=upto)
    except (HistoryError, sqlite3.Error) as exc:
        log.warning("history: tool calls not replayed: %s", exc)
        return messages
    pending: list[tuple[str, list[Any]]] = [
        (m.content, cast(list[Any], records)) for m in path
        if m.role == "assistant" and isinstance(records := m.stats.get(STATS_KEY), list) and records
    ]
    out: list[Message] = []
    for message in messages:
        if pending and message.get("role") == "assistant" and message.get("content") == pending[0][0]:
            content, records = pending.pop(0)
            out.extend(_replayed(records))
            out.append({"role": "assistant", "content": content})
        else:
            out.append(message)
    return out


def _replayed(records: list[Any]) -> list[Message]:
    calls = [cast(dict[str, Any], r) for r in records if isinstance(r, dict)]
    assistant: Message = {"role": "assistant", "content": "", "tool_calls": [
        {"id": str(r.get("id")), "type": "function",
         "function": {"name": str(r.get("name")), "arguments": r.get("arguments") or {}}} for r in calls]}
    results: list[Message] = []
    for r in calls:
        text = DENIED_TEXT if r.get("approval") == "denied" else str(r.get("result", ""))
        results.append({"role": "tool", "tool_call_id": str(r.get("id")), "name": str(r.get("name")),
                        "content": cut_result(text, REPLAY_RESULT_CHARS)})
    return [assistant, *results]
