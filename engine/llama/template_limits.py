"""Limits on what a model's chat template may cost: time, output size, and huge values.

Chat templates ship inside downloaded GGUF files and run on every turn. The Jinja sandbox
already stops escapes; these limits stop the rest:

- Huge values. `'x' * 3000000000`, `'x'|center(10**9)`, `'%999999999d' % 1` or `2 ** 10**9`
  would each allocate gigabytes (or compute for minutes) in ONE native step, which no timer
  can interrupt. `BoundedEnvironment` intercepts the operators (which also stops Jinja
  folding them at compile time) and refuses any call or filter given a number above
  `MAX_VALUE`.
- Time. Nested loops (`range(100000)` inside `range(100000)`) run pure Python that never
  calls out. `bounded(deadline)` installs a line tracer on the template's own frames only
  (filename `<template>`), which raises `TemplateLimitError` once the deadline passes.
- Output size. `render_bounded` consumes the template's output stream and stops at
  `max_chars`.
- Recursion (a macro calling itself) ends in `RecursionError`, which the caller reports.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from types import FrameType
from typing import Any, cast

from jinja2 import Template
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.errors import EngineError

MAX_VALUE = 1_000_000  # the largest count, width or length a template may ask for
RENDER_SECONDS = 5.0  # a real template renders a long conversation in milliseconds
BASE_OUTPUT_CHARS = 1 << 20  # plus twice what the messages hold

_WIDE = re.compile(r"\d{7,}")  # a width or precision of 1,000,000 or more in a format string


class TemplateLimitError(EngineError):
    """A template went past one of the limits; the message says which (one line)."""


def _check_value(value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_VALUE:
        raise TemplateLimitError(f"it asked for a value too large to use ({_short(value)})")


def _short(value: int) -> str:
    return f"{value:.3g}" if abs(value) < 10**300 else "a number with over 300 digits"


def _check_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        _check_value(value)


def bounded_filter(func: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _check_args(args[1:], kwargs)  # args[0] is the value filtered (or the context)
        return func(*args, **kwargs)

    # Keeps Jinja's pass_context / pass_eval_context markers working.
    for marker in ("jinja_pass_arg",):
        if hasattr(func, marker):
            setattr(wrapper, marker, getattr(func, marker))
    return wrapper


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, refusing values big enough to exhaust memory in one step."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        filters = cast(dict[str, Callable[..., Any]], self.filters)  # pyright: ignore[reportUnknownMemberType]
        for name, func in list(filters.items()):
            filters[name] = bounded_filter(func)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            _check_repeat(left, right)
        elif operator == "**":
            _check_power(left, right)
        elif operator == "%" and isinstance(left, str) and _WIDE.search(left):
            raise TemplateLimitError("it asked for a formatted value too wide to use")
        result: Any = super().call_binop(context, operator, left, right)
        if _too_long(result):
            raise TemplateLimitError("it built a value too large to use")
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _check_args(args, kwargs)
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        receiver = getattr(method, "__self__", None)
        if (
            isinstance(receiver, str)
            and getattr(method, "__name__", "") in ("format", "format_map")
            and _WIDE.search(receiver)
        ):
            raise TemplateLimitError("it asked for a formatted value too wide to use")
        return super().call(__context, __obj, *args, **kwargs)


def _too_long(value: Any) -> bool:
    return isinstance(value, (str, list, tuple)) and len(cast(Any, value)) > MAX_VALUE * 8


def _check_repeat(left: Any, right: Any) -> None:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
            if len(cast(Any, seq)) * max(count, 0) > MAX_VALUE * 8:
                raise TemplateLimitError("it asked for a repeated value too large to use")


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1:
        if exponent * abs(base).bit_length() > 4096:
            raise TemplateLimitError("it asked for a number too large to use")


# -- time ---------------------------------------------------------------------------------


@contextmanager
def bounded(seconds: float) -> Generator[None]:
    """Raise TemplateLimitError inside template code running past `seconds` (this thread)."""
    deadline = time.monotonic() + seconds

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise TemplateLimitError(f"it took longer than {seconds:g} s to render")
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        # Only the template's own frames are traced; everything else runs at full speed.
        return on_line if frame.f_code.co_filename == "<template>" else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)


def render_bounded(template: Template, max_chars: int, seconds: float | None = None, **context: Any) -> str:
    """Render within `seconds` (default `RENDER_SECONDS`) and `max_chars`, else TemplateLimitError."""
    out: list[str] = []
    size = 0
    with bounded(RENDER_SECONDS if seconds is None else seconds):
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > max_chars:
                raise TemplateLimitError(f"its output grew past {max_chars:,} characters")
            out.append(chunk)
    return "".join(out)
