"""Citations in an answer: `[n]` references made into links to the passages the prompt carried (no Qt).

The window renders an answer's Markdown to HTML, then `link_citations` turns each `[n]` whose
`n` is one of the reply's sources into a `cite:n` link (never inside code), so hovering shows
the passage and clicking opens its file. Stored replies keep their sources in their stats
(`stats["sources"]`, written by the history recorder); `sources_from_stats` reads them back.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

from engine.api.values import AnswerFrom, ParagraphSources, SourceRef, answer_from

CITE_SCHEME = "cite"
MAX_STORED_SOURCES = 64  # sources read back per stored reply (a reply is given at most 12)
MAX_SOURCE_CHARS = 20_000  # of each one's passage text (a passage is about 1,500 characters)
MAX_PATH_CHARS = 4_096  # of its path (PATH_MAX on Linux)
_REFERENCE = re.compile(r"\[(\d{1,4})\]")
_CODE = re.compile(r"(<code\b.*?</code>|<pre\b.*?</pre>|<a\b.*?</a>|<[^>]*>)", re.DOTALL | re.IGNORECASE)


def link_citations(html: str, numbers: Collection[int]) -> str:
    """`html` with each `[n]` (n in `numbers`) in the text (not in code, links or tags) made a `cite:n` link."""
    if not numbers or "[" not in html:
        return html
    parts = _CODE.split(html)
    for i in range(0, len(parts), 2):  # the even parts are text outside code, links and tags
        parts[i] = _REFERENCE.sub(lambda m: _link(m, numbers), parts[i])
    return "".join(parts)


def _link(match: re.Match[str], numbers: Collection[int]) -> str:
    n = int(match.group(1))
    if n in numbers:
        return f'<a href="{CITE_SCHEME}:{n}">[{n}]</a>'
    # A number the answer was not given: shown as unsupported, never as a link to some other passage.
    return f'<span style="color:#b03a2e">[{n}: no such source]</span>'


def unsupported_citations(text: str, numbers: Collection[int]) -> list[int]:
    """The `[n]` in a plain-text answer that name no source it was given, in order, once each."""
    cited = dict.fromkeys(int(m.group(1)) for m in _REFERENCE.finditer(text))
    return [n for n in cited if n not in numbers]


def answer_from_stats(stats: Mapping[str, Any], sources: Sequence[SourceRef]) -> AnswerFrom | None:
    """Where a stored reply's answer came from (`engine.events.answer_from`), from its stats'
    "source_paragraphs"; None for a reply stored before its answer was attributed. Malformed
    entries and numbers naming no stored source are skipped."""
    raw = stats.get("source_paragraphs")
    if not isinstance(raw, list) or not sources:
        return None
    given = {ref.n for ref in sources}
    paragraphs: list[ParagraphSources] = []
    for item in cast(list[Any], raw)[:MAX_STORED_SOURCES]:
        numbers = cast(dict[str, Any], item).get("sources") if isinstance(item, dict) else None
        kept = [
            n
            for n in (cast(list[Any], numbers)[:MAX_STORED_SOURCES] if isinstance(numbers, list) else [])
            if isinstance(n, int) and not isinstance(n, bool) and n in given
        ]
        paragraphs.append(ParagraphSources(0, 0, tuple(kept)))
    return answer_from(sources, paragraphs)


def sources_from_stats(stats: Mapping[str, Any]) -> tuple[SourceRef, ...]:
    """The sources a stored reply kept (malformed entries are skipped), at most MAX_STORED_SOURCES.

    A reply carries at most MAX_PASSAGES; an imported one can hold any number (20,000 stalled the
    window 3.9 s when the conversation was opened), so only the first ones are read.
    """
    raw = stats.get("sources")
    out: list[SourceRef] = []
    for item in cast(list[Any], raw)[:MAX_STORED_SOURCES] if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        d = cast(dict[str, Any], item)
        try:
            page = d.get("page")
            out.append(
                SourceRef(
                    int(d["n"]),
                    str(d["path"])[:MAX_PATH_CHARS],
                    None if page is None else int(page),
                    int(d.get("start", 0)),
                    int(d.get("end", 0)),
                    float(d.get("score", 0.0)),
                    str(d.get("text", ""))[:MAX_SOURCE_CHARS],
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(out)
