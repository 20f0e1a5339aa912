"""Showing a reply too big or too unbroken for rich text without freezing the window.

Qt lays a paragraph out in one go: a 1 MB reply with no spaces or newlines, rendered as
Markdown into a `QTextBrowser`, blocked the event loop for 47 s (Stop unreachable). Past
`needs_bulk_view`'s limits an answer is shown instead as plain text in `BulkTextView`:

- Display lines are cut by `LineCutter`, so no block is ever slow to lay out (the answer's
  text itself is untouched: Copy and history use the original): a run without spaces every
  `DISPLAY_LINE_CHARS`, a paragraph of words only past `PARAGRAPH_CHARS`, after a sentence.
- New text is appended `SLICE_CHARS` at a time, one slice per event-loop turn, so a
  megabyte arriving as one piece costs many short steps instead of one long one.
- The view is as tall as its text (no scroll box inside the scrolling conversation): each
  slice's new blocks are measured once as they arrive (`BulkTextView._fit`), so the cost
  stays a slice at a time; a new width measures them again.

The same bounds serve every other surface that can receive a long line (issue #28):
`SlicedPlainText` is the progressive plain-text box (the approval card's arguments),
`bounded_label_text` the text for a label (a tool result, a sent message's bubble): lines
cut for display and the whole capped with a note of what was left out.
"""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent, QTextCursor
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QSizePolicy, QWidget

BULK_TOTAL_CHARS = 200_000  # past this, Markdown rendering of every update costs too much
BULK_LINE_CHARS = 10_000  # one unbroken line this long is already slow to lay out
DISPLAY_LINE_CHARS = 500  # an unbroken run is cut this often (LineCutter)
PARAGRAPH_CHARS = 50_000  # a paragraph of words stays one block up to this (LineCutter)
SLICE_CHARS = 16_384


def needs_bulk_view(text: str) -> bool:
    """Whether `text` should be shown as bulk plain text rather than rendered Markdown."""
    if len(text) > BULK_TOTAL_CHARS:
        return True
    if len(text) <= BULK_LINE_CHARS:
        return False
    return any(len(line) > BULK_LINE_CHARS for line in text.split("\n"))


_PIECES = re.compile(r"\n|[^\S\n]+|\S+")  # a line end, a run of blanks, a run of anything else


class LineCutter:
    """Display lines for text that arrives in pieces: cut so that no block is slow to lay out,
    and only where a reader sees no break that the text does not have.

    Qt lays out a run without spaces in time that grows with its square (1 MB: over a minute),
    so such a run is cut every `run` characters; it wraps anywhere at the width anyway. Words
    cost little (a 50,000-character paragraph lays out in about 25 ms), so a paragraph stays one
    block, wrapped by the view at its width, up to `paragraph` characters; past that it is cut
    after a sentence's end (at the latest one blank later). An earlier version cut every line at
    500 characters, which showed as a short line every few lines (review 3, D3).

    `feed` takes the text piece by piece and cuts it exactly as it would cut the whole.
    """

    def __init__(self, *, run: int = DISPLAY_LINE_CHARS, paragraph: int = PARAGRAPH_CHARS) -> None:
        self.run_max, self.paragraph = run, paragraph
        self.column = 0  # length of the display's last line
        self.run = 0  # length of the unbroken run that ends it
        self.sentence_end = False  # its last character ends a sentence

    def feed(self, text: str) -> str:
        out: list[str] = []
        for match in _PIECES.finditer(text):
            piece = match.group()
            if piece == "\n":
                out.append(piece)
                self.column = self.run = 0
                self.sentence_end = False
            elif piece[0].isspace():
                self._blanks(piece, out)
            else:
                self._word(piece, out)
        return "".join(out)

    def _blanks(self, piece: str, out: list[str]) -> None:
        most = self.paragraph + self.run_max  # blanks alone never make a slow block either
        while self.column + len(piece) > most:
            take = max(most - self.column, 0)
            out.append(piece[:take])
            out.append("\n")
            piece = piece[take:]
            self.column = 0
        out.append(piece)
        self.column += len(piece)
        self.run = 0

    def _word(self, piece: str, out: list[str]) -> None:
        # A long paragraph ends its block before the word after a sentence's end (or after any
        # word, once a sentence's end is overdue), so the break falls where a reader pauses.
        late = self.column >= self.paragraph + self.run_max
        if self.run == 0 and self.column >= self.paragraph and (self.sentence_end or late):
            out.append("\n")
            self.column = 0
        while self.run + len(piece) > self.run_max:
            take = self.run_max - self.run
            out.append(piece[:take])
            out.append("\n")
            piece = piece[take:]
            self.column = self.run = 0
        out.append(piece)
        self.column += len(piece)
        self.run += len(piece)
        self.sentence_end = piece[-1] in ".?!:;" if piece else self.sentence_end


def display_lines(text: str, **bounds: int) -> str:
    """`text` cut into display lines by a new `LineCutter` (the whole text at once)."""
    return LineCutter(**bounds).feed(text)


LABEL_MAX_CHARS = 20_000


def bounded_label_text(text: str, max_chars: int = LABEL_MAX_CHARS) -> str:
    """`text` for a label in bounded layout time: lines cut by `LineCutter`, at most
    `max_chars` kept, with a note of how much was left out (the caller keeps the original)."""
    head = text[:max_chars]
    shown = display_lines(head)
    if len(text) > max_chars:
        shown += f"\n… [{len(text) - max_chars:,} more characters not shown]"
    return shown


def display_line_count(text: str, width: int = DISPLAY_LINE_CHARS) -> int:
    """How many lines `display_lines(text, 0)` has, without building it."""
    return sum(max(1, -(-len(line) // width)) for line in text.split("\n"))


class SlicedPlainText(QPlainTextEdit):
    """Read-only plain text shown a slice per event-loop turn, its lines cut for display.

    `set_text` takes the whole text so far: an extension of what is shown is appended, any
    other text restarts the display. Costs stay bounded whatever the line lengths.
    """

    def __init__(self, parent: QWidget | None = None, *, slice_chars: int = SLICE_CHARS) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self._slice = slice_chars
        self._source = ""  # the answer text received so far
        self._shown = 0  # how much of it is on screen
        self._cutter = LineCutter()
        self._pump = QTimer(self)
        self._pump.setSingleShot(True)
        self._pump.setInterval(0)
        self._pump.timeout.connect(self._show_slice)

    def set_text(self, text: str) -> None:
        """The whole text so far; appends are shown progressively, anything else restarts."""
        if not text.startswith(self._source[: self._shown]):
            self.clear()
            self._shown = 0
            self._cutter = LineCutter()
        self._source = text
        if self._shown < len(text) and not self._pump.isActive():
            if len(text) - self._shown <= self._slice:
                self._show_slice()  # a short text (most tool arguments) is there at once
            else:
                self._pump.start()

    @property
    def caught_up(self) -> bool:
        return self._shown >= len(self._source)

    def _show_slice(self) -> None:
        piece = self._source[self._shown : self._shown + self._slice]
        shown = self._cutter.feed(piece)
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(shown)
        self._shown += len(piece)
        if self._shown < len(self._source):
            self._pump.start()


class BulkTextView(SlicedPlainText):
    """A huge or unbroken answer: read-only plain text, fed the whole answer so far, as tall as its text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("BulkAnswer")
        self.setAccessibleName("Answer (shown as plain text: it is very long)")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setCursorWidth(0)  # read-only: no caret
        self._measured = 0  # blocks measured so far
        self._height = 0.0  # their height, in pixels
        self._width = -1  # the viewport width they were measured at
        self.setFixedHeight(self.fontMetrics().lineSpacing())

    def _show_slice(self) -> None:
        super()._show_slice()
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.viewport().width() != self._width:
            QTimer.singleShot(0, self._fit)  # after the new width's layout

    def _fit(self) -> None:
        """As tall as the text: the blocks not measured yet (all of them after a new width)."""
        if self.viewport().width() != self._width:
            self._width, self._measured, self._height = self.viewport().width(), 0, 0.0
        block = self.document().findBlockByNumber(self._measured)
        while block.isValid():
            if block.next().isValid() or self.caught_up:  # the last block may still grow
                self._height += self.blockBoundingRect(block).height()
                self._measured += 1
            else:
                break
            block = block.next()
        tail = self.blockBoundingRect(block).height() if block.isValid() else 0.0
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        height = int(self._height + tail + 2 * self.document().documentMargin()) + margins + 2
        if height != self.height():
            self.setFixedHeight(height)
            self.verticalScrollBar().setValue(0)
