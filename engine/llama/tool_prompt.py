"""Tools for a chat template that ignores them: described in the system message instead.

Many small models' templates (SmolLM2's among them) never read `tools`, `tool_calls` or
the `tool` role's call ids: rendered as they are, the model never learns a tool exists and
its own earlier calls vanish from the prompt. For such a template the tools are described
in the system message in the Hermes convention (which Ember's guardrail parses), and an
assistant message's calls are written into its text as the `<tool_call>` markup it produced.
A template that mentions `tools` is left to render them its own way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from engine.backends.base import Message

TOOLS_INTRO = (
    "You can call these tools. To call one, reply with exactly\n"
    '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
    "and nothing else; the result comes back in a tool message. Available tools:"
)
_USES_TOOLS = re.compile(r"\btools\b")


def template_renders_tools(source: str) -> bool:
    return bool(_USES_TOOLS.search(source))


def call_markup(source: str) -> str:
    """The tool-call markup a model with this template writes, when it is known: "hermes" (Qwen,
    Hermes, and every template that ignores tools, whose models get `TOOLS_INTRO`), else ""."""
    return "hermes" if not template_renders_tools(source) or "<tool_call>" in source else ""


def fallback_for(
    source: str, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
) -> tuple[list[Message], Sequence[dict[str, Any]] | None]:
    """`(messages, tools)` as this template should get them."""
    if not tools or template_renders_tools(source):
        return list(messages), tools
    out = [_with_calls_as_text(m) for m in messages]
    description = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    block = f"{TOOLS_INTRO}\n{description}"
    if out and out[0].get("role") == "system":
        first = str(out[0].get("content") or "").rstrip()
        out[0] = out[0].copy()
        out[0]["content"] = f"{first}\n\n{block}" if first else block
    else:
        out.insert(0, {"role": "system", "content": block})
    return out, None


def _with_calls_as_text(message: Message) -> Message:
    calls: Any = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return message.copy()
    markup: list[str] = []
    for call in cast(list[Any], calls):
        function: Any = cast(dict[str, Any], call).get("function", {}) if isinstance(call, dict) else {}
        if isinstance(function, dict):
            fn = cast(dict[str, Any], function)
            body = json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments", {})}, ensure_ascii=False)
            markup.append(f"<tool_call>{body}</tool_call>")
    text = str(message.get("content") or "")
    out = message.copy()
    del out["tool_calls"]
    out["content"] = text + "".join(markup)
    return out
