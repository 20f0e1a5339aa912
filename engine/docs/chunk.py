"""Cutting extracted text into passages that follow its structure, with overlap and offsets.

A passage is a contiguous span of its block's text, so `text == page_text[start:end]` always
holds and a citation's offsets point at exactly what the model read. Passages break at
headings (a Markdown heading always starts a new passage), then between paragraphs; a fenced
code block is kept whole when it fits; a paragraph longer than a passage is cut at line ends,
then sentence ends, then spaces. Each passage after the first in a section starts up to
`overlap` characters before the previous one ended (at a word boundary), so a fact that
straddles a break is still found whole in one of them.

Each passage also carries a `head`: the file's title and the headings it sits under
(`"zstd README — Benchmarks › Dictionary compression\n"`). The head is not part of the passage (its
offsets and what the model is shown stay the span of the text), but it is what BM25 and the
embedder read before the passage: a paragraph under "## Building on Windows" of zstd's README is
found by a question about zstd on Windows even when it names neither.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.docs.extract import Block

# About 200 word pieces with the head: within the default embedder's window (all-MiniLM-L6-v2
# reads 256, was trained on 128), so a passage is embedded whole; 1,200 characters (~300) were cut.
TARGET_CHARS = 900
OVERLAP_CHARS = 150
MAX_HEAD_CHARS = 200  # a title and its headings, cut: a passage's own words must outweigh them

_SETEXT = re.compile(r"[^\n]*\S[^\n]*\n(?:={3,}|-{3,})[ \t]*(?:\n|$)")
_GENERIC_NAMES = frozenset(
    "readme index news faq changelog notes todo install usage manual guide copying copyright license "
    "licence authors contributing history".split()
)
_DOC_SUFFIXES = frozenset(".gz .bz2 .xz .md .markdown .txt .text .rst .html .htm .pdf .docx .epub".split())

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_HEADING = re.compile(r"^#{1,6} \S", re.MULTILINE)
_SPLITTERS = ("\n", ". ", "? ", "! ", "; ", ", ", " ")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    page: int | None
    start: int  # offsets in the page's (PDF) or the document's text
    end: int
    head: str = ""  # the title and headings above it, ending in a newline (or ""): indexed, not shown

    @property
    def indexed(self) -> str:
        """What BM25 and the embedder read: the head, then the passage."""
        return self.head + self.text


def chunk_blocks(
    blocks: Iterable[Block], target: int = TARGET_CHARS, overlap: int = OVERLAP_CHARS, *, title: str = ""
) -> Iterator[Chunk]:
    headings = _Headings(title)
    for block in blocks:
        marks = _heading_marks(block.text)
        for s, e in chunk_spans(block.text, target, overlap):
            own = False  # a passage that starts with a heading: its head is that heading's parents
            while marks and marks[0][0] <= s:
                own = marks[0][0] == s
                headings.enter(*marks.pop(0)[1:])
            yield Chunk(block.text[s:e], block.page, block.start + s, block.start + e, headings.head(own))
        for _, level, name in marks:
            headings.enter(level, name)


def title_of(path: Path) -> str:
    """A file's title for its passages' heads: `zstd/README.md.gz` -> "zstd README", `tax-2026_receipts.pdf` ->
    "tax 2026 receipts". A generic name (README, NEWS, FAQ…) takes its folder's name before it."""
    name = path.name
    while (suffix := Path(name).suffix.lower()) in _DOC_SUFFIXES and suffix != name.lower():
        name = name[: -len(suffix)]
    words = " ".join(re.split(r"[-_.\s]+", name)).strip()
    if name.lower() in _GENERIC_NAMES and path.parent.name:
        words = f"{path.parent.name} {words}"
    # A name that is not UTF-8 holds surrogate escapes (engine.docs.names): neither SQLite nor the
    # embedder's tokenizer can encode them, so they become U+FFFD in the title.
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in words)


class _Headings:
    """The headings open at a point of a document, by level."""

    def __init__(self, title: str) -> None:
        self.title = " ".join(title.split())
        self.open: list[tuple[int, str]] = []

    def enter(self, level: int, name: str) -> None:
        while self.open and self.open[-1][0] >= level:
            self.open.pop()
        self.open.append((level, name))

    def head(self, but_last: bool = False) -> str:
        path = " › ".join(name for _, name in self.open[: -1 if but_last else None])
        head = " — ".join(part for part in (self.title, path) if part)[:MAX_HEAD_CHARS]
        return head + "\n" if head else ""


def _heading_marks(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, name) of each Markdown heading (`## Name`, or a line underlined with === or ---)."""
    marks: list[tuple[int, int, str]] = []
    for at in _heading_starts(text):
        space = text.index(" ", at)
        marks.append((at, space - at, text[space : _line_end(text, at)]))
    for rule, level in (("\n===", 1), ("\n---", 2)):  # found by str.find: a regex's `^` is tried everywhere
        at = text.find(rule)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            if _SETEXT.match(text, start):
                marks.append((start, level, text[start:at]))
            at = text.find(rule, at + 1)
    marks.sort()
    names = ((at, level, " ".join(name.split()).strip("# ")[:MAX_HEAD_CHARS]) for at, level, name in marks)
    return [(at, level, name) for at, level, name in names if name]


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


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
