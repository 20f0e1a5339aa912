"""One reply's token pipeline: pieces → thinking splitter → scaffolding filter → deltas.

Thinking goes out raw (special pieces included, as their text); content goes through the
scaffolding filter. Adjacent output of one channel is coalesced into one delta.
"""

from __future__ import annotations

from engine.events import ContentDelta, Piece, ThinkingDelta
from engine.reply.reasoning import Channel, ThinkingSplitter
from engine.reply.scaffolding import ScaffoldingFilter, SpanSink

Delta = ThinkingDelta | ContentDelta
MAX_PIECE_CHARS = 8192


class ReplyPipeline:
    """Turns one reply's pieces into thinking and content deltas."""

    def __init__(self, *, prefilled: str = "", span_sink: SpanSink | None = None) -> None:
        self._splitter = ThinkingSplitter(prefilled)
        self._filter = ScaffoldingFilter(sink=span_sink)
        self._content: list[str] = []
        self._thinking: list[str] = []

    def feed(self, piece: Piece) -> list[Delta]:
        if piece.special or len(piece.text) <= MAX_PIECE_CHARS:
            return self._feed_one(piece)
        # A huge piece (a server or script sending a megabyte at once) goes through in
        # slices: each regex scan then holds the GIL briefly, so the GUI thread keeps running.
        runs: list[tuple[type[Delta], list[str]]] = []
        for start in range(0, len(piece.text), MAX_PIECE_CHARS):
            part = Piece(piece.text[start : start + MAX_PIECE_CHARS], piece.token_id, False, piece.user_defined)
            for delta in self._feed_one(part):
                if runs and runs[-1][0] is type(delta):
                    runs[-1][1].append(delta.text)
                else:
                    runs.append((type(delta), [delta.text]))
        return [kind("".join(texts)) for kind, texts in runs]

    def _feed_one(self, piece: Piece) -> list[Delta]:
        pairs = self._splitter.feed_piece(piece)
        if len(pairs) == 1:  # the common case, kept cheap: one piece in one channel
            channel, out = pairs[0]
            text = out.text if channel == "thinking" else self._filter.feed_piece(out)
            return [self._record(channel, text)] if text else []
        return self._route(pairs, final=False)

    def flush(self) -> list[Delta]:
        return self._route(self._splitter.flush(), final=True)

    @property
    def stripped_chars(self) -> int:
        return self._filter.stripped_chars

    @property
    def content(self) -> str:
        return "".join(self._content)

    @property
    def thinking(self) -> str:
        return "".join(self._thinking)

    def _route(self, pairs: list[tuple[Channel, Piece]], *, final: bool) -> list[Delta]:
        runs: list[tuple[Channel, str]] = []
        for channel, piece in pairs:
            text = piece.text if channel == "thinking" else self._filter.feed_piece(piece)
            _append_run(runs, channel, text)
        if final:
            _append_run(runs, "content", self._filter.flush())
        return [self._record(channel, text) for channel, text in runs]

    def _record(self, channel: Channel, text: str) -> Delta:
        if channel == "thinking":
            self._thinking.append(text)
            return ThinkingDelta(text)
        self._content.append(text)
        return ContentDelta(text)


def _append_run(runs: list[tuple[Channel, str]], channel: Channel, text: str) -> None:
    """Add text to the run list, extending the last run when the channel matches."""
    if not text:
        return
    if runs and runs[-1][0] == channel:
        runs[-1] = (channel, runs[-1][1] + text)
    else:
        runs.append((channel, text))
