"""A question plus documents → the user message a turn sends, with its numbered passages.

    ctx = build_context(question, [attachments, collection], fits=fits, max_chars=budget_chars)
    messages[-1] = {"role": "user", "content": ctx.content}
    yield Sources(ctx.passages)  # before the answer; the recorder keeps them with the reply

This is the one seam between documents and a turn: the caller (the session, `ember chat`)
says what fits — `fits(content)` measures the candidate user message exactly, through the
model's template, against what the context leaves for it — and gets back the message and
its sources. Documents go in whole when every source offers its whole text and it fits;
otherwise the best passages by hybrid retrieval, as many as fit (found by bisection, so a
few exact counts at most). Passages are numbered in the prompt so the reply can cite `[n]`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from engine.docs.index import RRF_K
from engine.docs.names import shown
from engine.docs.sources import DocSource
from engine.events import SourceRef

MAX_PASSAGES = 12  # retrieved passages offered at most (more rarely helps a small model)
CHARS_PER_TOKEN_BOUND = 8  # text longer than budget × this never fits: skip counting it
INSTRUCTION = "Answer using these passages from my documents, and cite the ones you use by number, like [1]."
NO_MATCH = (
    "No passage in {scope} matches this question. Say that my documents do not answer it; "
    "do not make up a source or cite one."
)


@dataclass(frozen=True, slots=True)
class DocContext:
    content: str  # the user message to send: instruction, numbered passages, question
    passages: tuple[SourceRef, ...]
    whole: bool  # the documents went in whole (not retrieved)
    no_match: str = ""  # "No passage in … matches this question" when nothing relevant was found


def scope_of(sources: Sequence[DocSource]) -> str:
    """What was searched, for the no-match line: "'Tax 2026'", "the attached files"."""
    names = [getattr(s, "scope", "your documents") for s in sources]
    return " or ".join(names) if names else "your documents"


def no_match_line(sources: Sequence[DocSource]) -> str:
    """The one line a front end shows when no passage is relevant: "No passage in 'Tax 2026' matches this question"."""
    return NO_MATCH.format(scope=scope_of(sources)).split(". ")[0]


def label(ref: SourceRef) -> str:
    """ "report.pdf, page 2": the file's name escaped (a newline or RLO in it cannot forge a line)."""
    name = shown(Path(ref.path).name)
    return f"{name}, page {ref.page}" if ref.page is not None else name


def render(question: str, passages: Sequence[SourceRef]) -> str:
    if not passages:
        return question
    blocks = "\n\n".join(f"[{p.n}] {label(p)}\n{p.text.strip()}" for p in passages)
    return f"{INSTRUCTION}\n\n{blocks}\n\nQuestion: {question}"


def numbered(refs: Sequence[SourceRef]) -> tuple[SourceRef, ...]:
    return tuple(replace(r, n=i) for i, r in enumerate(refs, start=1))


def build_context(
    question: str, sources: Sequence[DocSource], fits: Callable[[str], bool], *, max_chars: int, k: int = MAX_PASSAGES
) -> DocContext:
    """The user message for `question` with the documents' passages that fit (`fits` decides)."""
    whole = _whole(sources, max_chars)
    if whole is not None:
        content = render(question, whole)
        if len(content) <= max_chars and fits(content):
            return DocContext(content, whole, True)
    ranked = numbered(search_all(sources, question, k))
    if not ranked:  # the relevance cut-off left nothing: the model is told so, and so is the user
        note = NO_MATCH.format(scope=scope_of(sources))
        return DocContext(f"{note}\n\nQuestion: {question}", (), False, no_match_line(sources))
    n = _most_that_fit(question, ranked, fits, max_chars)
    chosen = ranked[:n]
    return DocContext(render(question, chosen), chosen, False)


def _whole(sources: Sequence[DocSource], max_chars: int) -> tuple[SourceRef, ...] | None:
    refs: list[SourceRef] = []
    for source in sources:
        part = source.whole(max_chars - sum(len(r.text) for r in refs))
        if part is None:
            return None
        refs.extend(part)
    return numbered(refs) if refs else None


def search_all(sources: Sequence[DocSource], question: str, k: int) -> list[SourceRef]:
    """The best `k` passages over every source, their rankings merged by reciprocal-rank fusion."""
    if len(sources) == 1:
        return sources[0].search(question, k)
    scored: list[tuple[float, int, SourceRef]] = []
    for source in sources:
        for rank, ref in enumerate(source.search(question, k), start=1):
            scored.append((1.0 / (RRF_K + rank), len(scored), ref))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [ref for _, _, ref in scored[:k]]


def _most_that_fit(question: str, ranked: Sequence[SourceRef], fits: Callable[[str], bool], max_chars: int) -> int:
    """The largest n such that the first n passages fit (bisection over exact counts)."""
    lo, hi = 0, len(ranked)
    while hi > 0 and len(render(question, ranked[:hi])) > max_chars:
        hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(render(question, ranked[:mid])):
            lo = mid
        else:
            hi = mid - 1
    return lo
