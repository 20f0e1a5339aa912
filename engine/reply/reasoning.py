"""Split a streamed reply into thinking and content, before the scaffolding filter.

Thinking goes to the thinking pane raw and is never filtered, so scaffolding written
inside thinking stays there. The splitter consumes only thinking markers and the
Harmony answer headers; every other piece passes through, special pieces unchanged, so
the scaffolding filter can still match a control token atomically. In particular a
Harmony tool-call message (`<|start|>assistant<|channel|>commentary to=…`) is held back
only while it could still be an analysis or final header, then released intact.
"""

from __future__ import annotations

from typing import Literal

from engine.events import Piece
from engine.reply.scaffolding import MarkerSet, PieceBuffer
from models.formats import ThinkingFormat, answer_headers, closer_for, thinking_formats

Channel = Literal["thinking", "content"]


# Built from the one table of model formats (models/formats.py).
THINKING_FORMATS: tuple[ThinkingFormat, ...] = thinking_formats()
# Headers of answer messages (Harmony): consumed, the message body is content.
ANSWER_HEADERS: frozenset[str] = answer_headers()

_OPENERS = {f.opener: f.closer for f in THINKING_FORMATS}
_CONTENT_MARKERS = MarkerSet(set(_OPENERS) | ANSWER_HEADERS)
_CLOSER_MARKERS = {closer: MarkerSet([closer]) for closer in set(_OPENERS.values())}


class ThinkingSplitter:
    """Streams one reply as (channel, piece) pairs; text runs come back as plain pieces.

    Output never depends on how the text was chunked: a tail that could still become a
    marker is held back, and whitespace at the start of the answer after a closer or an
    answer header is dropped wherever the chunks fall.
    """

    def __init__(self, prefilled: str = "") -> None:
        self._closer: str | None = None  # ends the thinking block now open, if any
        self._markers: MarkerSet = _CONTENT_MARKERS  # what can switch the state now
        self._find_first_char = _CONTENT_MARKERS.find_first_char
        self._channel: Channel = "content"
        if prefilled:  # the prompt ended with this opener: the reply starts inside it
            self._set_closer(closer_for(prefilled))
        self._buf = PieceBuffer()
        self._lstrip = False  # drop whitespace at the start of the answer after a switch
        self._out: list[tuple[Channel, Piece]] = []

    def feed_piece(self, piece: Piece) -> list[tuple[Channel, Piece]]:
        if not self._buf.text and self._find_first_char(piece.text) is None:
            # Fast path: nothing held and no marker can begin here.
            if piece.text and not self._lstrip:
                return [(self._channel, piece)]
            self._emit(piece)
        else:
            if piece.special:
                self._buf.add_atom(piece)
            else:
                self._buf.add_text(piece.text)
            self._drain(final=False)
        return self._take_output()

    def feed(self, text: str) -> list[tuple[Channel, str]]:
        """Convenience for plain text: (channel, text) pairs."""
        return [(ch, p.text) for ch, p in self.feed_piece(Piece(text))]

    def flush(self) -> list[tuple[Channel, Piece]]:
        """End the stream: held text that never became a marker is emitted as it is."""
        self._drain(final=True)
        return self._take_output()

    # -- the state machine

    def _set_closer(self, closer: str | None) -> None:
        self._closer = closer
        self._markers = _CONTENT_MARKERS if closer is None else _CLOSER_MARKERS[closer]
        self._find_first_char = self._markers.find_first_char
        self._channel = "content" if closer is None else "thinking"

    def _drain(self, *, final: bool) -> None:
        while self._buf:
            p, marker = self._markers.scan(self._buf.text, self._buf.atoms)
            if marker is not None:
                self._release(p)
                self._buf.take(len(marker))
                self._switch(marker)
            elif not final:
                self._release(p)
                return
            else:
                # The stream ended inside a possible marker at p: it is not one.
                self._release(self._buf.step(p) if p < len(self._buf.text) else p)

    def _switch(self, marker: str) -> None:
        if self._closer is not None:  # the closer: back to the answer
            self._set_closer(None)
            self._lstrip = True
        elif marker in ANSWER_HEADERS:
            self._lstrip = True
        else:
            self._set_closer(_OPENERS[marker])

    def _release(self, k: int) -> None:
        for piece in self._buf.take(k):
            self._emit(piece)

    def _emit(self, piece: Piece) -> None:
        channel = self._channel
        if channel == "content" and self._lstrip:
            if piece.special:
                self._lstrip = False
            else:
                stripped = piece.text.lstrip()
                if not stripped:
                    return
                self._lstrip = False
                piece = Piece(stripped) if stripped != piece.text else piece
        if not piece.text:
            return
        self._append(channel, piece)

    def _append(self, channel: Channel, piece: Piece) -> None:
        """Append, merging adjacent plain text of the same channel into one piece."""
        if self._out and not piece.special:
            last_channel, last = self._out[-1]
            if last_channel == channel and not last.special:
                self._out[-1] = (channel, Piece(last.text + piece.text))
                return
        self._out.append((channel, piece))

    def _take_output(self) -> list[tuple[Channel, Piece]]:
        out, self._out = self._out, []
        return out
