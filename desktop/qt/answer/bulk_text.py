"""Showing a reply too big or too unbroken for rich text without freezing the window.

Qt lays a paragraph out in one go: a 1 MB reply with no spaces or newlines, rendered as
Markdown into a `QTextBrowser`, blocked the event loop for 47 s (Stop unreachable). Past
`needs_bulk_view`'s limits an answer is shown instead as plain text in `BulkTextView`:

- Display lines are cut at `DISPLAY_LINE_CHARS`, so no block is ever large to lay out
  (the answer's text itself is untouched: Copy and history use the original). Prose is
  cut after a sentence or a word (`_cut_at`), never mid-word; only an unbroken run is cut
  where it reaches the width.
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

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent, QTextCursor
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QSizePolicy, QWidget

BULK_TOTAL_CHARS = 200_000  # past this, Markdown rendering of every update costs too much
BULK_LINE_CHARS = 10_000  # one unbroken line this long is already slow to lay out
DISPLAY_LINE_CHARS = 500
SLICE_CHARS = 16_384
MAX_HEIGHT_LINES = 30


def needs_bulk_view(text: str) -> bool:
    """Whether `text` should be shown as bulk plain text rather than rendered Markdown."""
    if len(text) > BULK_TOTAL_CHARS:
        return True
    if len(text) <= BULK_LINE_CHARS:
        return False
    return any(len(line) > BULK_LINE_CHARS for line in text.split("\n"))


def _cut_at(line: str, take: int) -> int:
    """Where to cut `line` so its first part is at most `take` characters: after a sentence's
    end or a space in the last half of that room, else (an unbroken run) at `take` itself."""
    room = line[: take + 1]
    floor = take // 2
    for mark in (". ", "? ", "! ", " "):
        at = room.rfind(mark, floor)
        if at > 0:
            return at + len(mark) if at + len(mark) <= take else at
    return take


def display_lines(text: str, column: int, width: int = DISPLAY_LINE_CHARS) -> str:
    """`text` with a line break inserted wherever a line reaches `width` characters.

    `column` is how long the display's last line already is, so pieces appended one after
    another are cut exactly as the whole text would be.
    """
    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            out.append("\n")
            column = 0
        while column + len(line) > width:
            take = _cut_at(line, width - column) if width - column > 1 else width - column
            if take <= 0:
                take = width - column
            out.append(line[:take])
            out.append("\n")
            line = line[take:]
            column = 0
        out.append(line)
        column += len(line)
    return "".join(out)


def last_line_length(shown: str, column: int) -> int:
    """The display's last line length after appending `shown` to a last line of `column`."""
    last_break = shown.rfind("\n")
    return len(shown) - last_break - 1 if last_break >= 0 else column + len(shown)


LABEL_MAX_CHARS = 20_000


def bounded_label_text(text: str, max_chars: int = LABEL_MAX_CHARS) -> str:
    """`text` for a label in bounded layout time: lines cut at `DISPLAY_LINE_CHARS`, at most
    `max_chars` kept, with a note of how much was left out (the caller keeps the original)."""
    if len(text) <= BULK_LINE_CHARS and len(text) <= max_chars and "\n" not in text:
        return text if len(text) <= DISPLAY_LINE_CHARS else display_lines(text, 0)
    head = text[:max_chars]
    shown = display_lines(head, 0)
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
        self._column = 0  # length of the display's last line
        self._pump = QTimer(self)
        self._pump.setSingleShot(True)
        self._pump.setInterval(0)
        self._pump.timeout.connect(self._show_slice)

    def set_text(self, text: str) -> None:
        """The whole text so far; appends are shown progressively, anything else restarts."""
        if not text.startswith(self._source[: self._shown]):
            self.clear()
            self._shown = self._column = 0
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
        shown = display_lines(piece, self._column)
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(shown)
        self._column = last_line_length(shown, self._column)
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
