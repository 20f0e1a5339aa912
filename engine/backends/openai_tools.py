"""Tool calls over an OpenAI-compatible server, in Ember's terms.

Such a server (llama.cpp's with `--jinja`, vLLM, LM Studio) parses calls itself and streams
them as structured `tool_calls` deltas. `ToolCallDeltas` gathers those fragments and, when
tools were offered, turns each finished call into Hermes markup
(`<tool_call>{"name": …, "arguments": …}</tool_call>`) at the end of the reply, so the
same guardrail and the same parser handle local and remote calls alike. Going out,
`wire_message` writes an assistant message's call arguments as the JSON string the API
expects (chat templates take them as an object).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

from engine.events import Piece


class ToolCallDeltas:
    """The structured tool calls of one streamed reply, assembled from their fragments."""

    def __init__(self) -> None:
        self.wanted = False  # only a request that offered tools turns calls into pieces
        self._calls: dict[int, dict[str, str]] = {}

    def add(self, raw: object) -> None:
        if not isinstance(raw, list):
            return
        for item in cast(list[Any], raw):
            if not isinstance(item, dict):
                continue
            fragment = cast(dict[str, Any], item)
            index = fragment.get("index", len(self._calls))
            call = self._calls.setdefault(index if isinstance(index, int) else len(self._calls),
                                          {"name": "", "arguments": ""})
            function: Any = fragment.get("function")
            if isinstance(function, dict):
                parts = cast(dict[str, Any], function)
                if isinstance(name := parts.get("name"), str):
                    call["name"] += name
                if isinstance(arguments := parts.get("arguments"), str):
                    call["arguments"] += arguments

    def pieces(self) -> Iterator[Piece]:
        if not self.wanted:
            return
        for _, call in sorted(self._calls.items()):
            try:
                arguments: Any = json.loads(call["arguments"] or "{}")
            except json.JSONDecodeError:
                arguments = call["arguments"]  # left as text: the parser rejects it, the guardrail strips it
            body = json.dumps({"name": call["name"], "arguments": arguments}, ensure_ascii=False)
            yield Piece(f"<tool_call>{body}</tool_call>")


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """`message` as the chat-completions API takes it: call arguments as JSON strings."""
    out = dict(message)
    calls: Any = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [_wire_call(c) for c in cast(list[Any], calls)]
    return out


def _wire_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = dict(cast(dict[str, Any], call))
    function: Any = out.get("function")
    if isinstance(function, dict):
        fn = dict(cast(dict[str, Any], function))
        if not isinstance(fn.get("arguments"), str):
            fn["arguments"] = json.dumps(fn.get("arguments") or {}, ensure_ascii=False)
        out["function"] = fn
    return out
