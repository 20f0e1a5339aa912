"""JSON nested past what a reader allows is refused before it is parsed (`bounded_loads`).

`json.loads` of a 100,000-deep value runs to Python's recursion limit before it fails, and the
garbage collector runs there too: any finalizer it calls (a file's, a socket's) has no room
left and fails as an "unraisable" exception. Under load, with garbage from other tests, that
failed `test_arguments_nested_100000_deep_are_a_malformed_call_not_a_traceback`.
"""

from __future__ import annotations

import gc
import json
import random
from typing import Any

import pytest

from models.library.json_input import NestedTooDeep, bounded_loads, json_depth

DEEP = "[" * 100_000 + "]" * 100_000


def _finalizers_after(parse: Any, threshold: int) -> list[str]:
    """What the finalizers of some garbage did when the collector ran during `parse(DEEP)`."""
    ran: list[str] = []

    class Finalized:
        def __del__(self) -> None:
            def down(n: int) -> int:
                return 0 if n == 0 else 1 + down(n - 1)

            try:
                down(60)  # what closing a file through a few layers costs
                ran.append("ok")
            except RecursionError:
                ran.append("no room")

    before = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            garbage = Finalized()
            garbage.me = garbage  # type: ignore[attr-defined]  # a cycle: only the collector frees it
            del garbage
        gc.set_threshold(threshold)  # the next collection comes about `threshold` lists deep
        gc.enable()
        with pytest.raises((RecursionError, ValueError)):
            parse(DEEP)
    finally:
        gc.set_threshold(*before)
        gc.enable()
    gc.collect()
    return ran


@pytest.mark.slow  # about 4 CPU s: a full collection and a deep parse per threshold
def test_a_finalizer_that_runs_during_a_deep_parse_has_room() -> None:
    thresholds = range(400, 1001, 50)  # where the limit falls depends on how deep this test runs
    assert any("no room" in _finalizers_after(json.loads, t) for t in thresholds)  # json.loads alone
    assert all(set(_finalizers_after(bounded_loads, t)) == {"ok"} for t in thresholds)


def test_too_deep_is_refused_as_invalid_json_in_bounded_time() -> None:
    for text in (DEEP, "[" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        with pytest.raises(NestedTooDeep, match="nested more than 256 levels deep"):
            bounded_loads(text)
    assert issubclass(NestedTooDeep, json.JSONDecodeError)  # callers that catch invalid JSON catch it
    with pytest.raises(NestedTooDeep) as refused:
        bounded_loads("[" * 300)
    assert str(refused.value) == "nested more than 256 levels deep"  # one line, no made-up position
    assert bounded_loads('"' + "[" * 1000 + '"') == "[" * 1000  # brackets in a string are text


def _value(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, "a[b{", '\\"[[[', None, '"]}', "\\\\", "é[", '\\\\"{', 2.5])
    if rng.random() < 0.5:
        return [_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k[{i}\\": _value(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_the_depth_is_read_exactly_whatever_the_strings_hold() -> None:
    rng = random.Random(7)
    for _ in range(400):
        value = _value(rng, rng.randint(0, 14))
        depth = json_depth(value)
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), json.dumps(value, indent=1)):
            for limit in (0, 1, depth - 1, depth, 9, 12):
                if limit < 0:
                    continue
                if depth > limit:
                    with pytest.raises(NestedTooDeep):
                        bounded_loads(text, max_depth=limit)
                else:
                    assert bounded_loads(text, max_depth=limit) == value
