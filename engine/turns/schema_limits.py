"""Bounds on JSON Schemas before they become grammars or validators.

Two hazards come from ordinary-looking schemas:

- Depth. A schema nested thousands of levels deep, or one that refers to itself without
  consuming input (`{"$ref": "#"}`), ends in `RecursionError` inside jsonschema or the
  grammar converter. `schema_depth_problem` measures depth without recursing, so the
  schema is refused with one line before either runs.
- Repetition counts. llama-cpp-python's converter writes `maxLength: 20000` (or
  `maxItems`, or a `{1,30000}` quantifier in a `pattern`) as 20,000 nested optional groups,
  and llama.cpp's recursive grammar parser overflows the native stack on them (a
  segfault, not an exception). `bounded_for_grammar` returns a copy of the schema with
  every count above `REPEAT_LIMIT` loosened to an unbounded repetition: the grammar is then
  looser than the schema, and jsonschema still validates the reply against the original.
"""

from __future__ import annotations

import re
from typing import Any, cast

# Largest repetition count kept in a grammar. Each count n becomes n nested groups, which
# llama.cpp parses recursively; a few hundred is far inside what it handles.
REPEAT_LIMIT = 256
# Deepest schema accepted. Real schemas stay within a dozen levels.
MAX_SCHEMA_DEPTH = 64

_COUNT_KEYS = (("minLength", "maxLength"), ("minItems", "maxItems"), ("minProperties", "maxProperties"))


def schema_depth_problem(schema: Any, limit: int = MAX_SCHEMA_DEPTH) -> str | None:
    """Why `schema` is too deep to use (one line), or None. Iterative: never recurses."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return f"it is nested more than {limit} levels deep"
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in cast(dict[str, Any], node).values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in cast(list[Any], node))
    return None


def bounded_for_grammar(schema: Any) -> Any:
    """A copy of `schema` whose repetition counts all stay within `REPEAT_LIMIT`.

    Call it only on a schema that passed `schema_depth_problem` (it recurses).
    """
    if isinstance(schema, list):
        return [bounded_for_grammar(v) for v in cast(list[Any], schema)]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {k: bounded_for_grammar(v) for k, v in cast(dict[str, Any], schema).items()}
    for low, high in _COUNT_KEYS:
        if _too_big(out.get(high)):
            del out[high]
        if _too_big(out.get(low)):
            del out[low]
    pattern = out.get("pattern")
    if isinstance(pattern, str):
        out["pattern"] = bounded_pattern(pattern)
    return out


def _too_big(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not value <= REPEAT_LIMIT


_QUANTIFIER = re.compile(r"\{\s*(\d*)\s*(,\s*(\d*)\s*)?\}")


def bounded_pattern(pattern: str) -> str:
    """`pattern` with every `{m}`, `{m,}`, `{m,n}` above `REPEAT_LIMIT` made unbounded.

    `{m,n}` with only n too big keeps its minimum (`{m,}`); a too-big minimum becomes `+`.
    Escaped braces and braces inside character classes are left alone.
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "{" and (m := _QUANTIFIER.match(pattern, i)):
            out.append(_bounded_quantifier(m))
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _bounded_quantifier(m: re.Match[str]) -> str:
    low = int(m.group(1)) if m.group(1) else 0
    high = None if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
    if m.group(2) is None:
        high = low  # {m}: exactly m
    if low > REPEAT_LIMIT:
        return "+"
    if high is not None and high > REPEAT_LIMIT:
        return f"{{{low},}}"
    return m.group(0)
