"""A JSON Schema's `pattern`s, checked in bounded time.

jsonschema checks `pattern` and `patternProperties` with Python's backtracking `re`: a pattern
like `(a|aa)+$` or `^(a+)+$` takes exponential time on an ordinary string that misses it, in
one native call that holds the GIL (no other thread runs, and signals wait). The pattern comes
with the request and the string from the model, so either side can hang a structured turn.

Here the validator's pattern keywords use the `regex` module instead, with a timeout and
`concurrent=True` (it releases the GIL while it matches, so the rest of the process goes on):

- `pattern_problem(schema)` runs when the schema is compiled, before any model call: every
  pattern must compile, and must answer a few short probe strings within `PROBE_SECONDS`
  (catastrophic backtracking shows at once on them); otherwise the schema is refused in one line.
- `checking(seconds)` gives all the pattern checks of one reply a shared budget; past it the
  check raises `PatternTooCostly` (one line) instead of running on.

Only `unevaluatedProperties` next to `patternProperties` is refused outright: jsonschema finds
the evaluated properties with `re` deep inside its own code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from engine.errors import ConfigError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

CHECK_SECONDS = 2.0  # all pattern checks of one reply (a real reply takes microseconds)
PROBE_SECONDS = 0.25  # all probes of one pattern, at compile time
MAX_PATTERN_CHARS = 4096
# Short strings on which catastrophic backtracking shows at once (a run, then a miss).
_PROBES = (
    "the quick brown fox jumps over the lazy dog",
    "a" * 40 + "!",
    "1" * 40 + "!",
    " " * 40 + "!",
    "x" * 40 + "\n",
)


class PatternTooCostly(ConfigError):
    """A pattern could not be checked within its time budget; the message says which (one line)."""


_budget = threading.local()


@contextmanager
def checking(seconds: float = CHECK_SECONDS) -> Generator[None]:
    """Every pattern check on this thread inside shares one deadline, `seconds` from now."""
    previous = getattr(_budget, "deadline", None)
    _budget.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _budget.deadline = previous


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema's semantics), within the budget."""
    deadline: float | None = getattr(_budget, "deadline", None)
    left = CHECK_SECONDS if deadline is None else deadline - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return _compiled(pattern).search(text, timeout=left, concurrent=True) is not None
    except TimeoutError:
        raise PatternTooCostly(
            f"the schema's pattern {_show(pattern)} could not be checked on a "
            f"{len(text):,}-character value within {CHECK_SECONDS:g} s"
        ) from None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    import regex  # imported on first use: the window starts without it

    return regex.compile(pattern)


def _show(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 60 else pattern[:57] + "...")


# -- at compile time ---------------------------------------------------------------------------


def pattern_problem(schema: Any) -> str | None:
    """Why the schema's patterns cannot be checked in bounded time (one line), or None."""
    patterns, unevaluated = _patterns(schema)
    if unevaluated and patterns:
        return "unevaluatedProperties next to patternProperties cannot be checked in bounded time"
    for pattern in sorted(patterns):
        problem = _one_pattern_problem(pattern)
        if problem:
            return problem
    return None


def _one_pattern_problem(pattern: str) -> str | None:
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"a pattern is {len(pattern):,} characters long (at most {MAX_PATTERN_CHARS:,})"
    import regex

    try:
        compiled = _compiled(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        return f"the pattern {_show(pattern)} does not compile ({exc})"
    deadline = time.monotonic() + PROBE_SECONDS
    try:
        for probe in _PROBES:
            compiled.search(probe, timeout=max(deadline - time.monotonic(), 0.001), concurrent=True)
    except TimeoutError:
        return f"the pattern {_show(pattern)} is too costly to check (it backtracks without end on a short string)"
    return None


def _patterns(schema: Any) -> tuple[set[str], bool]:
    """Every `pattern` and `patternProperties` key in `schema`, and whether it uses unevaluatedProperties.

    Iterative: the schema's depth is checked by the caller, but this never recurses anyway.
    """
    found: set[str] = set()
    unevaluated = False
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(cast(list[Any], node))
            continue
        if not isinstance(node, dict):
            continue
        obj = cast(dict[str, Any], node)
        if isinstance(obj.get("pattern"), str):
            found.add(obj["pattern"])
        props = obj.get("patternProperties")
        if isinstance(props, dict):
            found.update(str(k) for k in cast(dict[Any, Any], props))
        unevaluated = unevaluated or "unevaluatedProperties" in obj
        stack.extend(obj.values())
    return found, unevaluated


# -- the validator's keywords ---------------------------------------------------------------------


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, pattern_properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(original: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """jsonschema's own, except that keys are matched against patternProperties here."""
    from jsonschema.exceptions import ValidationError

    def check(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            yield from original(validator, additional, instance, schema)
            return
        known = schema.get("properties", {})
        extras = sorted((k for k in instance if k not in known and not any(search(p, k) for p in patterns)), key=str)
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:
            verb = "does" if len(extras) == 1 else "do"
            names = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{', '.join(repr(e) for e in extras)} {verb} not match any of the regexes: {names}")

    return check


@lru_cache(maxsize=16)
def bounded_validator_class(cls: type[Validator]) -> type[Validator]:
    """`cls` (a jsonschema validator class) with its pattern keywords bounded."""
    from jsonschema import validators

    extend = cast(Callable[[Any, dict[str, Any]], Any], validators.extend)  # pyright: ignore[reportUnknownMemberType]
    keywords = cast(dict[str, Any], cls.VALIDATORS)
    changed: dict[str, Any] = {"pattern": _pattern, "patternProperties": _pattern_properties}
    if "additionalProperties" in keywords:
        changed["additionalProperties"] = _additional_properties(keywords["additionalProperties"])
    return cast("type[Validator]", extend(cls, {k: v for k, v in changed.items() if k in keywords}))
