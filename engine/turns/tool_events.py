"""Events of a turn with tools: a call (shown before it runs), its result, or its denial.

They extend the plain event vocabulary of `engine.events`; `tool_event_to_json` is the
`--events` shape of every event of a tool turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.events import Event, event_to_json


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asked to run `name` with `arguments`; it runs only once approved."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    id: str
    content: str
    error: bool = False  # the tool failed; `content` says why (the model sees it too)
    # "approved" (asked), "approved_always" (asked; the user chose always allow) or
    # "always" (not asked: the tool is always allowed in this conversation)
    approval: str = "approved"


@dataclass(frozen=True, slots=True)
class ToolDenied:
    id: str


@dataclass(frozen=True, slots=True)
class ToolLimit:
    """The turn stopped because the model kept calling tools past the round limit."""

    rounds: int


ToolEvent = ToolCall | ToolResult | ToolDenied | ToolLimit
AnyEvent = Event | ToolEvent


def tool_event_to_json(event: AnyEvent) -> dict[str, Any]:
    match event:
        case ToolCall(id=call_id, name=name, arguments=arguments):
            return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
        case ToolResult(id=call_id, content=content, error=error):
            out: dict[str, Any] = {"type": "tool_result", "id": call_id, "content": content}
            if error:
                out["error"] = True
            return out
        case ToolDenied(id=call_id):
            return {"type": "tool_denied", "id": call_id}
        case ToolLimit(rounds=rounds):
            return {"type": "tool_limit", "rounds": rounds}
        case _:
            return event_to_json(event)
