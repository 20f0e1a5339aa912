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

from engine.backends.image_input import wire_content
from engine.events import Piece
from models.library.json_input import bounded_loads

CHARS_PER_TOKEN_CAP = 32  # as the text budget counts: a piece costs at least 1 token, 1 per 32 characters


class ToolCallDeltas:
    """The structured tool calls of one streamed reply, assembled from their fragments.

    Fragments are kept in lists and joined once (growing one string per fragment is
    quadratic: 10 MB of 500-byte fragments took 50 s); `take_cost` tells the stream's token
    budget what arrived, so `--max-tokens` bounds tool calls as it bounds text.
    """

    def __init__(self) -> None:
        self.wanted = False  # only a request that offered tools turns calls into pieces
        self._calls: dict[int, tuple[list[str], list[str]]] = {}
        self._cost = 0
        self.room = 1 << 62  # characters still accepted (the stream sets it from max_tokens)

    def add(self, raw: object) -> None:
        if not isinstance(raw, list):
            return
        for item in cast(list[Any], raw):
            if not isinstance(item, dict):
                continue
            fragment = cast(dict[str, Any], item)
            index = fragment.get("index", len(self._calls))
            names, arguments = self._calls.setdefault(index if isinstance(index, int) else len(self._calls), ([], []))
            function: Any = fragment.get("function")
            if isinstance(function, dict):
                parts = cast(dict[str, Any], function)
                if isinstance(name := parts.get("name"), str):
                    names.append(self._kept(name))
                if isinstance(text := parts.get("arguments"), str):
                    arguments.append(self._kept(text))

    def _kept(self, fragment: str) -> str:
        kept = fragment[: max(0, self.room)]
        self.room -= len(kept)
        self._cost += _cost(fragment)
        return kept

    def take_cost(self) -> int:
        """Tokens (estimated like text: at least 1 a fragment) the fragments added since the last call."""
        cost, self._cost = self._cost, 0
        return cost

    def pieces(self) -> Iterator[Piece]:
        if not self.wanted:
            return
        for _, (names, parts) in sorted(self._calls.items()):
            text = "".join(parts)
            try:
                arguments: Any = bounded_loads(text or "{}")
            except (json.JSONDecodeError, RecursionError):
                arguments = text  # left as text: the parser rejects it, the guardrail strips it
            try:
                body = json.dumps({"name": "".join(names), "arguments": arguments}, ensure_ascii=False)
            except (RecursionError, ValueError):  # nested past what json can write back
                body = json.dumps({"name": "".join(names), "arguments": text}, ensure_ascii=False)
            yield Piece(f"<tool_call>{body}</tool_call>")


def _cost(fragment: str) -> int:
    return max(1, len(fragment) // CHARS_PER_TOKEN_CAP)


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """`message` as the chat-completions API takes it: call arguments as JSON strings, images
    as `image_url` parts holding data URLs."""
    out = dict(message)
    if "images" in out:
        out["content"] = wire_content(message)
        del out["images"]
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
