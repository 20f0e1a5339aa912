"""A stored branch as model messages: the one builder every turn's request starts from.

The system prompt leads (the conversation's own, else the model's). Thinking is never
sent back; an answer that is empty (a failed turn kept nothing) is left out. With tools
offered, each earlier reply that used tools becomes assistant (calls) → tool results →
assistant (answer) again, so the model sees what its tools said; old results are cut to
`REPLAY_RESULT_CHARS` to keep long chats in context. Consecutive messages of one role stay
apart: the context policy drops or joins them (engine/turns/context_policy.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from engine.backends.base import Message
from engine.backends.image_input import ImageData
from engine.history.types import TOOLS_STATS_KEY, StoredMessage
from engine.tools.permissions import DENIED_TEXT, cut_result

REPLAY_RESULT_CHARS = 2_000


def branch_messages(
    path: Sequence[StoredMessage],
    *,
    system: str = "",
    replay_tools: bool = False,
    images: Mapping[int, list[ImageData]] | None = None,
) -> list[Message]:
    """The model messages for a branch (`path`, root first), led by `system` when there is one;
    a question with `images` (by message id) carries them."""
    out: list[Message] = [{"role": "system", "content": system}] if system.strip() else []
    for msg in path:
        if msg.role == "assistant" and not msg.content.strip():
            continue
        records: Any = msg.stats.get(TOOLS_STATS_KEY)
        if replay_tools and msg.role == "assistant" and isinstance(records, list) and records:
            out.extend(_replayed(cast(list[Any], records)))
        message: Message = {"role": msg.role, "content": msg.content}
        if images and msg.id in images:
            message["images"] = images[msg.id]
        out.append(message)
    return out


def _replayed(records: list[Any]) -> list[Message]:
    calls = [cast(dict[str, Any], r) for r in records if isinstance(r, dict)]
    assistant: Message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": str(r.get("id")),
                "type": "function",
                "function": {"name": str(r.get("name")), "arguments": r.get("arguments") or {}},
            }
            for r in calls
        ],
    }
    results: list[Message] = []
    for r in calls:
        text = DENIED_TEXT if r.get("approval") == "denied" else str(r.get("result", ""))
        results.append(
            {
                "role": "tool",
                "tool_call_id": str(r.get("id")),
                "name": str(r.get("name")),
                "content": cut_result(text, REPLAY_RESULT_CHARS),
            }
        )
    return [assistant, *results]
