"""What each of Ember's JSON files may hold, and strict JSON out.

A schema is a mapping of field name to check. `conform` keeps the fields whose value passes
and sets the others aside with a warning naming the file and the field, so one hand-edited
value falls back to its default instead of raising somewhere downstream (`"kv_cache":
["q8_0"]`, `"base_url": "http://[fe80::1"`). A check that raises (an unhashable value
tested with `in`) counts as a failed check: no check can crash a reader.

`strict_dumps` is the one way Ember writes JSON that others read (exports, `--json`,
ledgers, receipts): never `NaN`/`Infinity` (strict parsers reject them), never a value
nested past `MAX_DEPTH` (the parser on the other side would refuse it).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, cast

from models.library.json_input import MAX_DEPTH

log = logging.getLogger(__name__)

Check = Callable[[object], bool]
Schema = Mapping[str, Check]
TRUNCATED = "(nested too deeply)"


def holds(check: Check, value: object) -> bool:
    """Whether `value` passes `check`; a check that raises is a failed check."""
    try:
        return bool(check(value))
    except Exception:  # e.g. TypeError: unhashable type: 'list' from `value in {...}`
        return False


def conform(data: Mapping[str, object], schema: Schema, where: str) -> dict[str, object]:
    """`data` without the fields `schema` rejects (each logged once, naming `where`); others kept."""
    kept: dict[str, object] = {}
    for name, value in data.items():
        check = schema.get(name)
        if check is None or holds(check, value):
            kept[name] = value
        else:
            log.warning("%s: ignoring %r (%s); using the default", where, name, describe(value))
    return kept


def describe(value: object) -> str:
    """A short, one-line account of a rejected value (its type and a clipped repr)."""
    text = repr(value) if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


# --- checks used by more than one file ---------------------------------------------------------


def is_text(v: object) -> TypeGuard[str]:
    return isinstance(v, str)


def is_bool(v: object) -> TypeGuard[bool]:
    return isinstance(v, bool)


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def is_object(v: object) -> bool:
    return isinstance(v, dict)


def is_list(v: object) -> bool:
    return isinstance(v, list)


def int_in(lo: int, hi: int | None = None) -> Check:
    return lambda v: is_int(v) and lo <= v and (hi is None or v <= hi)


def optional(check: Check) -> Check:
    return lambda v: v is None or holds(check, v)


def is_url(v: object) -> bool:
    """A string `urllib` can split into scheme, host and port (`http://[fe80::1` cannot)."""
    from urllib.parse import urlsplit  # here: `ember --version` imports this module

    if not isinstance(v, str) or not v.strip():
        return False
    try:
        parts = urlsplit(v.strip())
        _ = parts.port  # raises on a bad port or an unclosed IPv6 bracket
    except ValueError:
        return False
    return bool(parts.scheme and parts.hostname)


# --- strict JSON out ---------------------------------------------------------------------------


def strict_dumps(value: object, **kwargs: Any) -> str:
    """`json.dumps` that always gives strict JSON: non-finite numbers become null and anything
    nested past MAX_DEPTH is replaced by a marker (only values that need it pay for the copy)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except (ValueError, RecursionError):
        return json.dumps(strict_value(value), allow_nan=False, **kwargs)


def strict_value(value: object, max_depth: int = MAX_DEPTH) -> Any:
    """A copy of `value` that strict JSON can hold (see `strict_dumps`); iterative, any depth."""
    root: list[Any] = [None]
    stack: list[tuple[object, list[Any] | dict[str, Any], int | str, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, slot, depth = stack.pop()
        out: Any
        if isinstance(item, float) and not math.isfinite(item):
            out = None
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                out = TRUNCATED
            elif isinstance(item, dict):
                pairs = [(str(k), v) for k, v in cast(dict[object, object], item).items()]
                out = dict.fromkeys(k for k, _ in pairs)  # keys in order; values filled below
                stack.extend((v, out, k, depth + 1) for k, v in pairs)
            else:
                items = list(cast(list[object] | tuple[object, ...], item))
                out = [None] * len(items)
                stack.extend((v, out, i, depth + 1) for i, v in enumerate(items))
        else:
            out = item
        if isinstance(parent, dict):
            parent[cast(str, slot)] = out
        else:
            parent[cast(int, slot)] = out
    return root[0]
