"""Rendering a model's own chat template, safely, and keeping user text out of control tokens.

The template runs in Jinja's immutable sandbox (templates ship inside downloaded files).
Message contents are swapped for sentinels before rendering, so the rendered prompt can be
split into template text (tokenized with special tokens enabled) and user text (tokenized
as plain text): a user typing `<|im_end|>` gets ordinary text tokens, never the control
token. Where a template rewrites content so the sentinels vanish, every special-token
string inside the content is broken with a zero-width space instead.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from jinja2 import TemplateError

from engine.errors import ConfigError
from engine.llama.template_limits import (
    BASE_OUTPUT_CHARS,
    BoundedEnvironment,
    TemplateLimitError,
    bounded,
    bounded_filter,
    render_bounded,
)

_ZWSP = "\u200b"
_SENTINEL = "\ue000EMBER{}\ue001"  # private-use code points: never in real text or templates


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    trusted: bool  # True: template text, tokenized with special tokens enabled


class PromptFormat(Protocol):
    """What turns a conversation into a prompt: the file's own template, or one for a file without
    (`engine.llama.builtin_template`, `engine.llama.plain_transcript`)."""

    @property
    def source(self) -> str:
        """The template text, or a name for a format that has none (hashed into receipts)."""
        ...

    @property
    def stop_markers(self) -> tuple[str, ...]:
        """Special tokens that end a reply besides the vocabulary's end-of-generation set."""
        ...

    @property
    def stop_texts(self) -> tuple[str, ...]:
        """Ordinary text that ends a reply (not returned)."""
        ...

    def segments(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> list[Segment]: ...

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The whole prompt as text (for llama-cpp-python's chat handler in the bench's raw side)."""
        ...


def _raise(message: str) -> None:
    raise ValueError(message)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


def _environment() -> BoundedEnvironment:
    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env_globals = cast(dict[str, Any], env.globals)  # pyright: ignore[reportUnknownMemberType]
    env_globals["raise_exception"] = _raise
    env_globals["strftime_now"] = _strftime_now
    env.filters["tojson"] = bounded_filter(  # pyright: ignore[reportUnknownMemberType]
        lambda v, indent=None, **_: json.dumps(v, ensure_ascii=False, indent=indent)  # type: ignore[misc]
    )
    return env


_ENV = _environment()


def neutralise(text: str, special_strings: Iterable[str]) -> str:
    """Break every special-token string in `text` with a zero-width space after its first char."""
    for s in special_strings:
        if len(s) > 1 and s in text:
            text = text.replace(s, s[0] + _ZWSP + s[1:])
    return text


class ChatTemplate:
    """A compiled chat template plus the model's special-token strings."""

    stop_markers: tuple[str, ...] = ()  # the end-of-generation tokens suffice
    stop_texts: tuple[str, ...] = ()

    def __init__(
        self, source: str, *, bos_token: str = "", eos_token: str = "", special_strings: Sequence[str] = ()
    ) -> None:
        self.source = source
        self.set_tokens(bos_token=bos_token, eos_token=eos_token, special_strings=special_strings)
        if len(self.source) > MAX_TEMPLATE_CHARS:  # compiling is linear but slow (3.6 MB: a minute), untraced
            raise ConfigError(
                f"the model's chat template cannot be used: it is {len(self.source):,} characters "
                f"long (chat templates are a few KB; at most {MAX_TEMPLATE_CHARS:,} are compiled)"
            )
        try:
            with bounded(_COMPILE_SECONDS):  # compiling may evaluate constant expressions
                self._template = _ENV.from_string(self.source)
        except TemplateError as exc:
            raise ConfigError(f"the model's chat template does not parse: {_one_line(exc)}") from exc
        except (TemplateLimitError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"the model's chat template cannot be used: {_why(exc)}") from exc

    def set_tokens(self, *, bos_token: str, eos_token: str, special_strings: Sequence[str]) -> None:
        """The model's token strings, known once its vocabulary is loaded (after the template was checked)."""
        self.bos_token = bos_token
        self.eos_token = eos_token
        # Longest first, so a longer token is broken before a shorter one inside it.
        self.special_strings = tuple(sorted(set(special_strings), key=len, reverse=True))

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        # Output may not outgrow what went in by much: a template adds only markers.
        size = sum(len(str(m.get("content") or "")) for m in messages) + len(json.dumps(tools or [], default=str))
        try:
            return render_bounded(
                self._template,
                BASE_OUTPUT_CHARS + 2 * size,
                messages=list(messages),
                tools=list(tools) if tools else None,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except (TemplateError, ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
            raise ConfigError(f"this model's chat template failed to render: {_one_line(exc)}") from exc
        except (TemplateLimitError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"this model's chat template was stopped: {_why(exc)}") from exc

    def segments(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> list[Segment]:
        """The prompt split into trusted template text and untrusted message text."""
        contents = [str(m.get("content") or "") for m in messages]
        marked = [{**m, "content": _SENTINEL.format(i)} for i, m in enumerate(messages)]
        rendered = self.render(marked, tools=tools)
        if all(_SENTINEL.format(i) in rendered for i, c in enumerate(contents) if c):
            return split_on_sentinels(rendered, contents)
        safe = [{**m, "content": neutralise(c, self.special_strings)} for m, c in zip(messages, contents, strict=True)]
        return [Segment(self.render(safe, tools=tools), trusted=True)]


_COMPILE_SECONDS = 5.0  # bounds what Jinja evaluates while compiling (constant folding)
MAX_TEMPLATE_CHARS = 64 * 1024  # real templates are under 30 KB; 64 KB compile in 1-3 s on a busy 2-core machine


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it calls itself without end"
    if isinstance(exc, MemoryError):
        return "it ran out of memory"
    return str(exc)


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (raise_exception text comes from the model file)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def sentinel(index: int) -> str:
    """The stand-in for message `index`'s content while a template renders."""
    return _SENTINEL.format(index)


def split_on_sentinels(rendered: str, contents: Sequence[str]) -> list[Segment]:
    """`rendered` (with `sentinel(i)` for each content) as template text and message text."""
    out: list[Segment] = []
    rest = rendered
    while rest:
        start = rest.find("\ue000EMBER")
        if start < 0:
            out.append(Segment(rest, True))
            break
        end = rest.index("\ue001", start)
        if start:
            out.append(Segment(rest[:start], True))
        index = int(rest[start + len("\ue000EMBER") : end])
        if contents[index]:
            out.append(Segment(contents[index], False))
        rest = rest[end + 1 :]
    return out
