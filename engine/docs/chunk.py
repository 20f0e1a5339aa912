"""Cutting extracted text into passages that follow its structure, with overlap and offsets.

A passage is a contiguous span of its block's text, so `text == page_text[start:end]` always
holds and a citation's offsets point at exactly what the model read. Passages break at
headings (a Markdown heading always starts a new passage), then between paragraphs; a fenced
code block is kept whole when it fits; a paragraph longer than a passage is cut at line ends,
then sentence ends, then spaces. Each passage after the first in a section starts up to
`overlap` characters before the previous one ended (at a word boundary), so a fact that
straddles a break is still found whole in one of them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from engine.docs.extract import Block

TARGET_CHARS = 1200  # about 300 tokens: small enough to cite, large enough to carry a fact with its context
OVERLAP_CHARS = 200

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_HEADING = re.compile(r"^#{1,6} \S", re.MULTILINE)
_SPLITTERS = ("\n", ". ", "? ", "! ", "; ", ", ", " ")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    page: int | None
    start: int  # offsets in the page's (PDF) or the document's text
    end: int


def chunk_blocks(blocks: Iterable[Block], target: int = TARGET_CHARS, overlap: int = OVERLAP_CHARS) -> Iterator[Chunk]:
    for block in blocks:
        for s, e in chunk_spans(block.text, target, overlap):
            yield Chunk(block.text[s:e], block.page, block.start + s, block.start + e)


def chunk_spans(text: str, target: int = TARGET_CHARS, overlap: int = OVERLAP_CHARS) -> Iterator[tuple[int, int]]:
    """(start, end) spans of `text`'s passages, in order."""
    cur_s: int | None = None
    cur_e = 0
    # Units leave room for the overlap, so a passage is never longer than `target`.
    for s, e, heading in _units(text, max(target // 2, target - overlap)):
        # A heading starts a passage; a passage that is only a heading so far takes the next unit.
        if cur_s is not None and (heading or (e - cur_s > target and not _only_heading(text, cur_s, cur_e))):
            yield cur_s, cur_e
            cur_s = s if heading else _overlap_start(text, cur_s, cur_e, s, overlap)
        if cur_s is None:
            cur_s = s
        cur_e = e
    if cur_s is not None and text[cur_s:cur_e].strip():
        yield cur_s, cur_e


def _only_heading(text: str, s: int, e: int) -> bool:
    return _HEADING.match(text, s) is not None and "\n" not in text[s:e]


def _overlap_start(text: str, prev_s: int, prev_e: int, next_s: int, overlap: int) -> int:
    """Where the next passage starts: about `overlap` characters back, on a word boundary."""
    if overlap <= 0:
        return next_s
    at = max(prev_s + 1, prev_e - overlap)
    space = min((i for i in (text.find(" ", at, next_s), text.find("\n", at, next_s)) if i >= 0), default=-1)
    if space < 0:
        return next_s
    start = space + 1
    while start < next_s and text[start].isspace():
        start += 1
    return start


def _units(text: str, target: int) -> Iterator[tuple[int, int, bool]]:
    """Paragraph spans (start, end, starts_with_heading), none longer than `target`."""
    for s, e in _paragraphs(text):
        heading = _HEADING.match(text, s) is not None
        for i, (ps, pe) in enumerate(_fit(text, s, e, target)):
            yield ps, pe, heading and i == 0


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Paragraph spans: split at blank lines and before headings; a ``` fence is kept in one piece."""
    bounds = sorted({0, len(text), *(m.end() for m in _PARAGRAPH_BREAK.finditer(text)), *_heading_starts(text)})
    start, fences = None, 0
    for s, e in itertools.pairwise(bounds):
        if start is None:
            start = s
        fences += text.count("```", s, e)
        if fences % 2 == 0:  # not inside an open code fence
            if text[start:e].strip():
                yield start, _rstrip_end(text, start, e)
            start = None
    if start is not None and text[start:].strip():
        yield start, _rstrip_end(text, start, len(text))


def _heading_starts(text: str) -> Iterator[int]:
    """Where the Markdown headings start. Found from each "#": `_HEADING.finditer` tried its
    MULTILINE `^` at every character, half of all the chunking time on text without headings."""
    at = text.find("#")
    while at >= 0:
        if _HEADING.match(text, at):
            yield at
        at = text.find("#", at + 1)


def _rstrip_end(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1].isspace():
        e -= 1
    return e


def _fit(text: str, s: int, e: int, target: int) -> Iterator[tuple[int, int]]:
    """Cut the span [s, e) into pieces of at most `target` characters at the best separator."""
    while e - s > target:
        cut = _cut_point(text, s, s + target)
        yield s, cut
        s = cut
        while s < e and text[s] in " \n":
            s += 1
    if e > s:
        yield s, e


def _cut_point(text: str, s: int, limit: int) -> int:
    floor = s + (limit - s) // 2
    for sep in _SPLITTERS:
        at = text.rfind(sep, floor, limit)
        if at >= 0:
            return at + len(sep.rstrip()) if sep != "\n" else at + 1
    return limit
