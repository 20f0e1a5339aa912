"""Safe Markdown for a growing answer, split into parts whose rendering is then frozen.

The answer is shown as a column of parts: runs of Markdown blocks (HTML for a rich-text
widget) and code blocks (raw text for a monospace widget with a Copy button). While a reply
streams, every complete block — one followed by another block — can no longer change, so
once enough of them pile up they are frozen: later updates parse and render only the text
after them. That keeps the cost of one update bounded however long the reply grows.

Safety: raw HTML is disabled (the model's HTML shows as text), images are never loaded
(they become links), and markdown-it's link validation drops `javascript:` and friends.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

FREEZE_CHARS = 1500  # complete text that may pile up before it is frozen
_CODE_TOKENS = ("fence", "code_block")
_LIST_TOKENS = ("bullet_list_open", "ordered_list_open")


def make_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _render_image_as_link)
    return md


def _render_image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # An image would be a network fetch; show a link the user may click instead.
    token = tokens[idx]
    src = html.escape(str(token.attrGet("src") or ""), quote=True)
    alt = html.escape(token.content or "image")
    return f'<a href="{src}">[image: {alt}]</a>'


@dataclass(frozen=True, slots=True)
class Part:
    """One widget's worth of answer: Markdown rendered to HTML, or a code block."""

    kind: Literal["text", "code"]
    source: str  # the Markdown of a text part; the code itself for a code part
    html: str = ""
    lang: str = ""


@dataclass(frozen=True, slots=True)
class _Block:
    """A top-level Markdown block: its lines (up to the next block) and its token range."""

    line: int
    end_line: int
    tok_start: int
    tok_end: int
    code: Token | None
    is_list: bool = False


@dataclass(frozen=True, slots=True)
class Update:
    """Parts from index `base` on (earlier parts are frozen and unchanged)."""

    base: int
    parts: list[Part]


class MarkdownStream:
    """Turns successive versions of a growing answer into parts, freezing complete ones."""

    def __init__(self, md: MarkdownIt | None = None, freeze_chars: int = FREEZE_CHARS) -> None:
        self._md = md or make_markdown()
        self._freeze_chars = freeze_chars
        self._offset = 0  # characters of the answer covered by frozen parts
        self._frozen = 0  # number of frozen parts

    def update(self, text: str, *, final: bool = False) -> Update:
        base = self._frozen
        src = text[self._offset:]
        tokens = self._md.parse(src)
        lines = _line_offsets(src)
        blocks = _top_level_blocks(tokens, len(lines) - 1)
        cut = len(blocks) if final else self._cut_index(blocks, lines)
        frozen = self._parts(src, tokens, blocks[:cut], lines, final=True)
        open_ = self._parts(src, tokens, blocks[cut:], lines, final=final)
        if not final and cut:
            self._offset += lines[blocks[cut].line]
            self._frozen += len(frozen)
        return Update(base, frozen + open_)

    def _cut_index(self, blocks: list[_Block], lines: list[int]) -> int:
        """How many leading blocks to freeze now: all complete ones, once worth it.

        The last block may still grow. So may a list just before it: the last block's first
        characters ("2", "-") can still turn into the list's next item.
        """
        cut = len(blocks) - 1
        if cut > 0 and blocks[cut - 1].is_list:
            cut -= 1
        if cut <= 0:
            return 0
        has_code = any(b.code is not None for b in blocks[:cut])
        return cut if has_code or lines[blocks[cut].line] >= self._freeze_chars else 0

    def _parts(self, src: str, tokens: list[Token], blocks: list[_Block], lines: list[int],
               *, final: bool) -> list[Part]:
        """Group blocks into parts: each code block alone, the blocks between as one text part."""
        parts: list[Part] = []
        run: list[_Block] = []
        for block in blocks:
            if block.code is None:
                run.append(block)
                continue
            if run:
                parts.append(self._text_part(src, tokens, run, lines))
                run = []
            parts.append(_code_part(block.code, final=final))
        if run:
            parts.append(self._text_part(src, tokens, run, lines))
        return parts

    def _text_part(self, src: str, tokens: list[Token], run: list[_Block], lines: list[int]) -> Part:
        start, end = run[0], run[-1]
        body = self._md.renderer.render(tokens[start.tok_start:end.tok_end], self._md.options, {})
        return Part("text", src[lines[start.line]:lines[end.end_line]], body)


def _top_level_blocks(tokens: list[Token], n_lines: int) -> list[_Block]:
    starts = [(i, t.map[0]) for i, t in enumerate(tokens) if t.level == 0 and t.nesting >= 0 and t.map]
    blocks: list[_Block] = []
    for n, (i, line) in enumerate(starts):
        tok_end, end_line = starts[n + 1] if n + 1 < len(starts) else (len(tokens), n_lines)
        token = tokens[i]
        code = token if token.type in _CODE_TOKENS else None
        blocks.append(_Block(line, end_line, i, tok_end, code, token.type in _LIST_TOKENS))
    return blocks


def _line_offsets(src: str) -> list[int]:
    """Character offset of every line start, plus one past the end."""
    offsets = [0]
    pos = src.find("\n")
    while pos != -1:
        offsets.append(pos + 1)
        pos = src.find("\n", pos + 1)
    if offsets[-1] != len(src):
        offsets.append(len(src))
    return offsets


def _code_part(token: Token, *, final: bool) -> Part:
    code = token.content
    if code.endswith("\n"):
        code = code[:-1]
    if not final and token.type == "fence":
        code = _drop_partial_closer(code, token.markup)
    lang = token.info.split()[0] if token.info.strip() else ""
    return Part("code", code, lang=lang)


def _drop_partial_closer(code: str, markup: str) -> str:
    # While streaming, a closing fence arrives a character at a time; hide its beginning
    # instead of flashing backticks as code.
    head, _, last = code.rpartition("\n")
    fence_char = markup[:1] or "`"
    stripped = last.strip()
    if stripped and set(stripped) == {fence_char}:
        return head
    return code
