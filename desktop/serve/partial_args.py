"""The arguments of a tool call cut by `max_tokens`, as an object: the fields the model finished.

OpenAI's API returns a cut call's arguments as the text written so far (`{"city": "Paris", "coun`);
Ollama's takes arguments only as an object, and its clients (the `ollama` package) refuse a
string. So the Ollama side answers with every field whose value was written in full, nested
objects and arrays closed where the cut left them, and `done_reason: "length"` saying it is cut.
A value cut mid-way is left out rather than guessed.
"""

from __future__ import annotations

from typing import Any, cast

from engine.api.text import bounded_loads

_CLOSERS = {"{": "}", "[": "]"}


def finished_fields(text: str) -> dict[str, Any]:
    """The longest prefix of `text` that ends after a whole value, closed and parsed; {} when none."""
    try:
        whole = bounded_loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return cast(dict[str, Any], whole)
    for end, closers in reversed(_cut_points(text)):
        try:
            value = bounded_loads(text[:end] + closers)
        except ValueError:
            continue
        if isinstance(value, dict):
            return cast(dict[str, Any], value)
    return {}


def _cut_points(text: str) -> list[tuple[int, str]]:
    """Each place a value inside the top object has just ended (before a `,`, or after a
    bracket closes), with the brackets still open there, closed."""
    points: list[tuple[int, str]] = []
    stack: list[str] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
            points.append((i + 1, "".join(reversed(stack))))  # an empty object or array so far
        elif char in "}]" and stack:
            stack.pop()
            if stack:
                points.append((i + 1, "".join(reversed(stack))))
        elif char == "," and stack:
            points.append((i, "".join(reversed(stack))))
    return points
