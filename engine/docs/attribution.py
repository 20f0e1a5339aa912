"""Which passages support each paragraph of an answer, when the model cites none: deterministic, no model.

The built-in model writes no `[n]` (0 of 5 answers from documents did), so an answer showed no
source at all. After the answer, each paragraph is compared with the passages the prompt
carried, word by word:

- a paragraph that cites `[n]` of a passage it was given keeps those (the model's own citations,
  checked as before: a number naming no passage is not a source);
- otherwise its words (lower-cased, crudely stemmed, stopwords left out) are weighed by how rare
  they are among the passages (a word every passage has says nothing about which one supports
  it), and a passage supports the paragraph when it holds at least `THRESHOLD` of the
  paragraph's weight, and at least `NEAR_BEST` of the best passage's share; at most `MAX_SOURCES`.

A paragraph too short to judge (under `MIN_WORDS` content words: "Sure!") gets none. The same
answer and passages always give the same sources: the window, `ember chat` and `ember serve`
show the same thing, and a test can say what it must be.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.events import ContentDelta, Event, ParagraphSources, Recovery, SourceRef, Sources, TurnDone

THRESHOLD = 0.15
NEAR_BEST = 0.75
MAX_SOURCES = 3
MIN_WORDS = 4
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CITE = re.compile(r"\[(\d{1,4})\]")
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SUFFIXES = ("ing", "edly", "ed", "es", "s", "ly")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i in is it its of on or that the this to was were what "
    "when where which who why will with you your does do did can could should would about into than then there "
    "these those they them he she we our us my me not no yes so if also any all may must such other more only "
    "use used using one two some each been being here just like very".split()
)


@dataclass(frozen=True, slots=True)
class _Weights:
    idf: dict[str, float]
    passages: list[frozenset[str]]


def words(text: str) -> list[str]:
    """Content words, crudely stemmed ("installing", "installed", "installs" -> "install")."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS or len(word) < 2:
            continue
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 4:
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


def paragraphs(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each paragraph of `answer` (split at blank lines), without surrounding space."""
    spans: list[tuple[int, int]] = []
    start = 0
    for brk in [*_PARAGRAPH.finditer(answer), None]:
        end = brk.start() if brk else len(answer)
        s, e = start, end
        while s < e and answer[s].isspace():
            s += 1
        while e > s and answer[e - 1].isspace():
            e -= 1
        if e > s:
            spans.append((s, e))
        start = brk.end() if brk else len(answer)
    return spans


def attribute(answer: str, sources: Sequence[SourceRef]) -> tuple[ParagraphSources, ...]:
    """Each paragraph of `answer` with the numbers of the passages that support it (possibly none)."""
    if not sources:
        return ()
    given = {ref.n for ref in sources}
    weights = _weigh(sources)
    out: list[ParagraphSources] = []
    for start, end in paragraphs(answer):
        text = answer[start:end]
        cited = tuple(dict.fromkeys(n for n in (int(m) for m in _CITE.findall(text)) if n in given))
        if cited:
            out.append(ParagraphSources(start, end, cited, cited=True))
        else:
            out.append(ParagraphSources(start, end, _supporting(text, sources, weights), cited=False))
    return tuple(out)


def _weigh(sources: Sequence[SourceRef]) -> _Weights:
    passages = [frozenset(words(ref.text)) for ref in sources]
    df: dict[str, int] = {}
    for passage in passages:
        for word in passage:
            df[word] = df.get(word, 0) + 1
    n = len(passages)
    # A word in every passage weighs little, never nothing: a one-passage answer still has support.
    return _Weights({w: math.log(1 + (n + 1) / c) for w, c in df.items()}, passages)


def _supporting(text: str, sources: Sequence[SourceRef], weights: _Weights) -> tuple[int, ...]:
    said = set(words(text))
    if len(said) < MIN_WORDS:
        return ()
    unseen = math.log(1 + (len(sources) + 1) / 0.5)  # a word in no passage weighs most: it is unsupported
    total = sum(weights.idf.get(w, unseen) for w in said)
    shares = [
        (sum(weights.idf[w] for w in said & passage) / total, ref.n)
        for ref, passage in zip(sources, weights.passages, strict=True)
    ]
    best = max((share for share, _ in shares), default=0.0)
    if best < THRESHOLD:
        return ()
    kept = sorted(((s, n) for s, n in shares if s >= THRESHOLD and s >= NEAR_BEST * best), key=lambda x: (-x[0], x[1]))
    return tuple(n for _, n in kept[:MAX_SOURCES])


class AnswerSources:
    """Follows a turn's events and, just before its `TurnDone`, gives the `Sources` again with each
    paragraph's supporting passages (the front ends show them; the history keeps them)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self._text: list[str] = []

    def before(self, event: Event) -> Sources | None:
        """The event to send before `event`, if any."""
        match event:
            case ContentDelta(text=text):
                self._text.append(text)
            case Recovery():
                self._text.clear()  # a new attempt replaces the answer
            case TurnDone() if self.sources.sources:
                answer = "".join(self._text)
                return Sources(self.sources.sources, attribute(answer, self.sources.sources))
            case _:
                pass
        return None
