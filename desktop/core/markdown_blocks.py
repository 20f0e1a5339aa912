r"""Safe Markdown for a growing answer, split into parts whose rendering is then frozen.

The answer is shown as a column of parts: runs of Markdown blocks (HTML for a rich-text
widget) and code blocks (raw text for a monospace widget with a Copy button). While a reply
streams, every complete block — one followed by another block — can no longer change, so
once enough of them pile up they are frozen: later updates parse and render only the text
after them. That keeps the cost of one update bounded however long the reply grows.

Like the chat apps people know, a single newline is a line break (markdown-it's `breaks`),
and a paragraph that reads as code (the model forgot its fence) is shown as a code block,
so its lines are neither merged nor reflowed. Math (`$…$`, `$$…$$`, `\(…\)`, `\[…\]`) becomes
an image reference `math:<key>` whose TeX `math_source(key)` returns; the window renders it.

Safety: raw HTML is disabled (the model's HTML shows as text), images are never loaded
(they become links), and markdown-it's link validation drops `javascript:` and friends.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

FREEZE_CHARS = 1500  # complete text that may pile up before it is frozen
MATH_SCHEME = "math"
MATH_SOURCES_MAX = 2_000  # TeX sources kept for the renderer (newest win)
_CODE_TOKENS = ("fence", "code_block")
_LIST_TOKENS = ("bullet_list_open", "ordered_list_open")
_math_sources: dict[str, tuple[str, bool]] = {}

# A line that reads as program text (keywords at the start, a trailing ; { or ):, an assignment, a call).
_CODE_LINE = re.compile(
    r"""^\s*(?:
    (?:def|class|import|from|return|elif|else:|try:|except|with|async|await|yield|lambda|print|
       function|const|let|var|public|private|static|fn|func|package|using|namespace|\#include)\b
    | (?:if|for|while)\b.*[:{]\s*$
    | [}\])]+[;,]?\s*$
    | .*[;{]\s*$
    | .*\)\s*:\s*$
    | [A-Za-z_][\w.\[\]]*\s*(?:=|\+=|-=|\*=)\s*\S.*
    | [A-Za-z_][\w.]*\(.*\)\s*;?\s*$
)""",
    re.VERBOSE,
)
_STRONG_CODE = re.compile(r"^\s*(?:def |class |import |return\b|print\(|#include)|[;{]\s*$|^\s*}|\)\s*:\s*$")
# \( … \) and \[ … \] as the $ forms (CommonMark would read "\[" as an escaped bracket).
_BRACKET_DISPLAY = re.compile(r"\\\[(.+?)\\\]", re.DOTALL)
_BRACKET_INLINE = re.compile(r"\\\((.+?)\\\)")
_CODE_SPAN_OR_FENCE = re.compile(r"(^(?:```|~~~).*?(?:^(?:```|~~~)[^\n]*$|\Z)|`[^`\n]*`)", re.MULTILINE | re.DOTALL)


def make_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True)
    md.add_render_rule("image", _render_image_as_link)
    md.add_render_rule("math_inline", _render_math)
    md.add_render_rule("math_inline_double", _render_math)
    md.add_render_rule("math_block", _render_math)
    md.add_render_rule("math_block_label", _render_math)
    return md


def math_source(key: str) -> tuple[str, bool] | None:
    """The TeX behind a `math:<key>` image and whether it is display math (None: unknown key)."""
    return _math_sources.get(key)


def _render_math(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    display = token.type.startswith("math_block") or token.type == "math_inline_double"
    tex = token.content.strip()
    key = hashlib.sha1(f"{display}:{tex}".encode()).hexdigest()[:16]
    if key not in _math_sources and len(_math_sources) >= MATH_SOURCES_MAX:
        _math_sources.pop(next(iter(_math_sources)))
    _math_sources[key] = (tex, display)
    alt = html.escape(tex, quote=True)
    # bottom: the window pads inline math below so that its baseline lands on the text's (math_render).
    img = f'<img src="{MATH_SCHEME}:{key}" alt="{alt}" title="{alt}" style="vertical-align: bottom">'
    return f'<p align="center">{img}</p>' if token.type.startswith("math_block") else img


def brackets_to_dollars(text: str) -> str:
    r"""`\[…\]` → `$$…$$` and `\(…\)` → `$…$`, outside code spans and fences."""
    if "\\[" not in text and "\\(" not in text:
        return text
    out: list[str] = []
    pos = 0
    for match in _CODE_SPAN_OR_FENCE.finditer(text):
        out.append(_swap_brackets(text[pos : match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_swap_brackets(text[pos:]))
    return "".join(out)


def _swap_brackets(text: str) -> str:
    text = _BRACKET_DISPLAY.sub(lambda m: f"$${m.group(1)}$$", text)
    return _BRACKET_INLINE.sub(lambda m: f"${m.group(1).strip()}$", text)


def looks_like_code(text: str) -> bool:
    """Whether a paragraph is program text written without a fence (its lines must then stay as they are)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    matching = sum(1 for line in lines if _CODE_LINE.match(line))
    return matching * 10 >= len(lines) * 7 and any(_STRONG_CODE.search(line) for line in lines)


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
        src = brackets_to_dollars(text)[self._offset :]
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

    def _parts(
        self, src: str, tokens: list[Token], blocks: list[_Block], lines: list[int], *, final: bool
    ) -> list[Part]:
        """Group blocks into parts: each code block alone, the blocks between as one text part."""
        parts: list[Part] = []
        run: list[_Block] = []
        for block in blocks:
            bare = _bare_code(src, tokens, block, lines) if block.code is None else None
            if block.code is None and bare is None:
                run.append(block)
                continue
            if run:
                parts.append(self._text_part(src, tokens, run, lines))
                run = []
            parts.append(_code_part(block.code, final=final) if block.code is not None else Part("code", bare or ""))
        if run:
            parts.append(self._text_part(src, tokens, run, lines))
        return parts

    def _text_part(self, src: str, tokens: list[Token], run: list[_Block], lines: list[int]) -> Part:
        start, end = run[0], run[-1]
        body = self._md.renderer.render(tokens[start.tok_start : end.tok_end], self._md.options, {})
        return Part("text", src[lines[start.line] : lines[end.end_line]], body)


def _bare_code(src: str, tokens: list[Token], block: _Block, lines: list[int]) -> str | None:
    """The source of a paragraph that is unfenced code, else None."""
    if tokens[block.tok_start].type != "paragraph_open":
        return None
    text = src[lines[block.line] : lines[block.end_line]].rstrip("\n")
    return text if looks_like_code(text) else None


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
