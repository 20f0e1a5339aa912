"""llama.cpp's built-in chat formats, for a GGUF without a chat template of its own.

Which format a file gets is decided from its header (`models.gguf.builtin_templates`);
`llama_chat_apply_template` renders it by name. As with a Jinja template, the messages
go in as sentinels, so the prompt splits into format text (tokenized with special
tokens) and message text (tokenized as plain text).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import llama_cpp.llama_cpp as ll

from engine.errors import ConfigError
from engine.llama.template import Segment, neutralise, sentinel, split_on_sentinels
from models.gguf.builtin_templates import BuiltinFormat


def apply_builtin(name: str, messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool = True) -> str:
    """`messages` as (role, content) rendered by llama.cpp's built-in format `name`."""
    encoded = [(role.encode(), content.encode()) for role, content in messages]
    chat = (ll.llama_chat_message * len(encoded))(*(ll.llama_chat_message(r, c) for r, c in encoded))
    size = 2 * sum(len(r) + len(c) for r, c in encoded) + 256  # llama.h's advice, plus the markers
    while True:
        buf = ctypes.create_string_buffer(size)
        # The binding annotates `buf` as bytes; C writes into it, so it must be a mutable buffer.
        n = ll.llama_chat_apply_template(name.encode(), chat, len(encoded), add_generation_prompt, buf, size)  # pyright: ignore[reportArgumentType]
        if n < 0:
            raise ConfigError(f"llama.cpp has no built-in chat format named {name!r}")
        if n <= size:
            return buf.raw[:n].decode("utf-8", "replace")
        size = n  # the buffer was short: n is what the prompt needs


class BuiltinTemplate:
    """A `PromptFormat` rendered by llama.cpp's built-in format `fmt`."""

    stop_texts: tuple[str, ...] = ()

    def __init__(self, fmt: BuiltinFormat, *, special_strings: Sequence[str] = ()) -> None:
        self.format = fmt
        self.source = f"llama.cpp built-in chat format: {fmt.name}"
        self.stop_markers = fmt.turn_openers  # a base model starting the next turn has finished this one
        self.special_strings = tuple(sorted(set(special_strings), key=len, reverse=True))

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return apply_builtin(self.format.name, [_pair(m) for m in messages])

    def segments(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> list[Segment]:
        """The prompt split into format text and message text (`tools` are described in the
        system message by then: built-in formats have no place for them)."""
        contents = [_pair(m)[1] for m in messages]
        rendered = self.render([{**m, "content": sentinel(i)} for i, m in enumerate(messages)])
        if all(sentinel(i) in rendered for i, c in enumerate(contents) if c):
            return split_on_sentinels(rendered, contents)
        # A message the format leaves out (gemma keeps a lone system message for the next turn).
        safe = [{**m, "content": neutralise(c, self.special_strings)} for m, c in zip(messages, contents, strict=True)]
        return [Segment(self.render(safe), trusted=True)]


def _pair(message: Mapping[str, Any]) -> tuple[str, str]:
    return str(message.get("role") or "user"), str(message.get("content") or "")
