"""The scaffolding guardrail: strip tool-call markup from a streamed answer.

`ScaffoldingFilter` is a pure streaming state machine over `DEFAULT_REGISTRY`. It sees
only the content channel (thinking is split off before it and never filtered) and
returns only text that is certain: it holds back the longest tail that could still
become a start marker, so its output never depends on where the stream was cut.

Matching works on the concatenated text of the stream. Special tokens are kept in the
buffer as atoms: a marker may begin or end at an atom's edge but never inside one, and
a CONTROL token that does not end up inside a stripped span is dropped, never rendered.
That lets a marker spelled by several tokens (Harmony's `<|start|>assistant<|channel|>…`,
where `<|start|>` and `<|channel|>` are control tokens) still match as a whole.

`MarkerSet` and `PieceBuffer` are shared with `engine.reply.reasoning`, which needs the same
hold-back rule for thinking markers.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.events import Piece
from models.formats import ModelFormat, ToolCallSpan, tool_call_spans

logger = logging.getLogger("engine.scaffolding")

LOG_SPAN_CHARS = 200


@dataclass(frozen=True, slots=True)
class ScaffoldPattern:
    """One registry entry.

    `end=None`: the span runs to the end of the reply. `end=""`: a standalone marker,
    only the marker itself is stripped. `fixture` is a sample reply holding exactly one
    span of this pattern, used by the registry's unit test. `family` is the human label
    (logs); `key` is the family's stable `models.formats` key, which a span sink receives.
    """

    family: str
    start: str
    end: str | None
    fixture: str
    key: str = ""


def _pattern(fmt: ModelFormat, span: ToolCallSpan) -> ScaffoldPattern:
    """A registry entry; its fixture wraps the span (or the standalone marker) in prose."""
    if span.end == "":
        return ScaffoldPattern(fmt.label, span.start, "", f"Checking now.{span.start} The weather is mild.", fmt.key)
    tail = "" if span.end is None else " Anything else?"
    fixture = f"Let me look that up.{span.start}{span.sample}{span.end or ''}{tail}"
    return ScaffoldPattern(fmt.label, span.start, span.end, fixture, fmt.key)


# Built from the one table of model formats (models/formats.py).
DEFAULT_REGISTRY: tuple[ScaffoldPattern, ...] = tuple(_pattern(fmt, span) for fmt, span in tool_call_spans())


# --- shared streaming machinery -------------------------------------------------------


def _proper_prefixes(markers: Iterable[str]) -> frozenset[str]:
    return frozenset(m[:i] for m in markers for i in range(1, len(m)))


def _inside_atom(pos: int, atoms: list[tuple[int, int]]) -> bool:
    """True when `pos` falls strictly inside a special token's text."""
    return any(a < pos < b for a, b in atoms)


class MarkerSet:
    """A fixed set of markers, searched leftmost-first with hold-back.

    No marker may be a proper prefix of another: then at most one marker can match at a
    position, and whether it does is decided by the final text alone, which is what
    makes the scan independent of chunking.
    """

    def __init__(self, markers: Iterable[str]) -> None:
        self.markers = frozenset(markers)
        if not self.markers or "" in self.markers:
            raise ValueError("a MarkerSet needs non-empty markers")
        self._check_prefix_free()
        self.first_chars = frozenset(m[0] for m in self.markers)
        self.prefixes = _proper_prefixes(self.markers)
        self.max_len = max(map(len, self.markers))
        self._first_re = re.compile("[" + "".join(re.escape(c) for c in sorted(self.first_chars)) + "]")
        by_length = sorted(self.markers, key=len, reverse=True)
        self._marker_re = re.compile("|".join(re.escape(m) for m in by_length))

    def _check_prefix_free(self) -> None:
        for a in self.markers:
            for b in self.markers:
                if a != b and b.startswith(a):
                    raise ValueError(f"marker {a!r} is a prefix of {b!r}")

    @property
    def find_first_char(self) -> Callable[[str], re.Match[str] | None]:
        """The raw first-character search, for hot loops that cannot afford a call layer."""
        return self._first_re.search

    def scan(self, text: str, atoms: list[tuple[int, int]]) -> tuple[int, str | None]:
        """The leftmost decision point in `text`.

        Returns `(p, marker)` when `marker` matches at `p`; `(p, None)` when `text[p:]`
        could still grow into a marker (hold it back); `(len(text), None)` when no marker
        can begin anywhere.
        """
        for candidate in self._first_re.finditer(text):
            p = candidate.start()
            if atoms and _inside_atom(p, atoms):
                continue
            found = self._marker_re.match(text, p)
            if found is not None:
                if atoms and _inside_atom(found.end(), atoms):
                    continue
                return p, found.group()
            if len(text) - p < self.max_len and text[p:] in self.prefixes:
                return p, None
        return len(text), None


class PieceBuffer:
    """Pending stream text plus the special pieces (atoms) inside it."""

    __slots__ = ("atoms", "pieces", "text")

    def __init__(self) -> None:
        self.text = ""
        self.atoms: list[tuple[int, int]] = []
        self.pieces: list[Piece] = []  # the piece behind each atom, in order

    def __bool__(self) -> bool:
        return bool(self.text)

    def add_text(self, text: str) -> None:
        self.text += text

    def add_atom(self, piece: Piece) -> None:
        start = len(self.text)
        self.text += piece.text
        self.atoms.append((start, len(self.text)))
        self.pieces.append(piece)

    def boundary_at_or_after(self, pos: int) -> int:
        """`pos`, or the end of the atom that `pos` falls strictly inside."""
        for a, b in self.atoms:
            if a < pos < b:
                return b
        return pos

    def step(self, pos: int) -> int:
        """The next cut point after `pos`: past the atom starting there, else one char."""
        for a, b in self.atoms:
            if a == pos:
                return b
        return pos + 1

    def take(self, k: int) -> list[Piece]:
        """Remove and return the first `k` characters as pieces.

        `k` must not fall strictly inside an atom. Text runs come back as plain pieces,
        atoms as their original pieces.
        """
        if not self.atoms:
            head, self.text = self.text[:k], self.text[k:]
            return [Piece(head)] if head else []
        out: list[Piece] = []
        pos = 0
        while self.atoms and self.atoms[0][0] < k:
            (a, b), piece = self.atoms.pop(0), self.pieces.pop(0)
            assert b <= k, "a cut inside a special token"
            if a > pos:
                out.append(Piece(self.text[pos:a]))
            out.append(piece)
            pos = b
        if k > pos:
            out.append(Piece(self.text[pos:k]))
        self.text = self.text[k:]
        self.atoms = [(a - k, b - k) for a, b in self.atoms]
        return out


# --- the filter -----------------------------------------------------------------------


def _is_control(piece: Piece) -> bool:
    return piece.special and not piece.user_defined


# Receives each closed span when tools are offered: (the family's models.formats key, else
# its label; the span's full text; whether it was terminated). Returning True claims the
# span (a parsed tool call): it is then not counted as stripped scaffolding.
SpanSink = Callable[[str, str, bool], bool]


@functools.lru_cache(maxsize=8)
def _start_markers(starts: frozenset[str]) -> tuple[MarkerSet, frozenset[str]]:
    """The start markers' set and every prefix a start may grow from, built once per registry: a
    filter is made for every model request, right after its first token, and building these
    (hundreds of prefixes, two regexes) took 0.15-0.2 ms of the first token's way to the client.
    A MarkerSet is immutable, so the filters share it."""
    markers = MarkerSet(starts)
    return markers, markers.prefixes | markers.markers


class ScaffoldingFilter:
    """Streams visible answer text with every registered scaffolding span removed."""

    def __init__(self, registry: Iterable[ScaffoldPattern] = DEFAULT_REGISTRY, *, sink: SpanSink | None = None) -> None:
        self._sink = sink
        self._span_full: list[str] = []  # the whole span, kept only for a sink
        self._patterns = {p.start: p for p in registry}
        self._starts, self._may_start = _start_markers(frozenset(self._patterns))
        self._find_first_char = self._starts.find_first_char
        self._buf = PieceBuffer()
        self._open: ScaffoldPattern | None = None  # the span being stripped, if any
        self._span_head = ""  # the span's first LOG_SPAN_CHARS characters, for the log
        self._span_len = 0
        self.stripped_chars = 0

    # -- entry points

    def feed(self, text: str) -> str:
        """Feed plain text; return the visible text that is certain now."""
        if not self._buf.text:
            # Fast paths: nothing is held and the text cannot change state.
            if self._open is None:
                if self._find_first_char(text) is None:
                    return text
            elif self._open.end is None or self._open.end[0] not in text:
                self._add_to_span(text)
                return ""
        self._buf.add_text(text)
        return self._drain(final=False)

    def feed_piece(self, piece: Piece) -> str:
        """Feed one token.

        USER_DEFINED tokens are text. A CONTROL token is an atom in the buffer: a marker
        spelled by it matches at once, and one that ends up outside every span is dropped.
        """
        if not piece.special or piece.user_defined:
            return self.feed(piece.text)
        if self._open is None and not self._buf.text and piece.text not in self._may_start:
            self._drop_control(piece.text)
            return ""
        self._buf.add_atom(piece)
        return self._drain(final=False)

    def flush(self) -> str:
        """End the stream: emit a held partial marker as text, drop an unclosed span."""
        out = self._drain(final=True)
        if self._open is not None:
            self._add_to_span(self._buf.text)
            self._buf = PieceBuffer()
            # A to-the-end pattern (end=None) is complete by definition here.
            self._close_span(terminated=self._open.end is None)
        return out

    # -- the state machine

    def _drain(self, *, final: bool) -> str:
        out: list[str] = []
        while self._buf:
            if self._open is not None:
                if not self._advance_span():
                    break
                continue
            p, marker = self._starts.scan(self._buf.text, self._buf.atoms)
            if marker is not None:
                out.append(self._release(p))
                self._buf.take(len(marker))
                self._open_span(self._patterns[marker], marker)
            elif not final:
                out.append(self._release(p))
                break
            else:
                # The stream ended inside a possible marker at p: it is not one, so p
                # is ordinary text and scanning resumes right after it.
                out.append(self._release(self._buf.step(p) if p < len(self._buf.text) else p))
        return "".join(out)

    def _release(self, k: int) -> str:
        """Emit the first `k` buffered characters, dropping any control token in them."""
        buf = self._buf
        if not buf.atoms:  # the common case: plain text
            head, buf.text = buf.text[:k], buf.text[k:]
            return head
        visible: list[str] = []
        for piece in self._buf.take(k):
            if _is_control(piece):
                self._drop_control(piece.text)
            else:
                visible.append(piece.text)
        return "".join(visible)

    def _open_span(self, pattern: ScaffoldPattern, marker: str) -> None:
        self._open = pattern
        self._span_head, self._span_len = "", 0
        self._span_full = []
        self._add_to_span(marker)
        if pattern.end == "":
            self._close_span(terminated=True)

    def _advance_span(self) -> bool:
        """Consume buffered span text; True when the span closed."""
        assert self._open is not None
        end = self._open.end
        text = self._buf.text
        if end is None:
            self._add_to_span(text)
            self._buf = PieceBuffer()
            return False
        at = self._find_end(text, end)
        if at < 0:
            # Keep a tail that could be the beginning of the end marker.
            cut = self._buf.boundary_at_or_after(max(0, len(text) - len(end) + 1))
            self._add_to_span(text[:cut])
            self._buf.take(cut)
            return False
        self._add_to_span(text[: at + len(end)])
        self._buf.take(at + len(end))
        self._close_span(terminated=True)
        return True

    def _find_end(self, text: str, end: str) -> int:
        at = text.find(end)
        atoms = self._buf.atoms
        while at >= 0 and atoms and (_inside_atom(at, atoms) or _inside_atom(at + len(end), atoms)):
            at = text.find(end, at + 1)
        return at

    def _add_to_span(self, text: str) -> None:
        if self._sink is not None:
            self._span_full.append(text)
        if len(self._span_head) < LOG_SPAN_CHARS:
            self._span_head += text[: LOG_SPAN_CHARS - len(self._span_head)]
        self._span_len += len(text)

    def _close_span(self, *, terminated: bool) -> None:
        assert self._open is not None
        full, self._span_full = "".join(self._span_full), []
        if self._sink is not None and self._sink(self._open.key or self._open.family, full, terminated):
            self._open = None
            self._span_head, self._span_len = "", 0
            return
        self.stripped_chars += self._span_len
        logger.warning(
            "stripped %d chars of %s tool-call scaffolding%s: %r",
            self._span_len,
            self._open.family,
            "" if terminated else " (unterminated at end of reply)",
            self._span_head,
        )
        self._open = None
        self._span_head, self._span_len = "", 0

    def _drop_control(self, text: str) -> None:
        self.stripped_chars += len(text)
        logger.warning("dropped control token %r from the answer", text[:LOG_SPAN_CHARS])
