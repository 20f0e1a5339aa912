"""The collapsible pane that shows a reply's raw thinking.

While the model thinks the pane is open and its text streams (unless the user closed one
before: that choice is remembered, `ThinkingPane.open_while_thinking`); when the answer
begins it folds to its header. The header counts "Thinking… Ns" while thinking streams and
says "Thought for Ns" afterwards. The body is plain text exactly as the model wrote it, never
Markdown and never filtered: scaffolding inside thinking stays visible here on purpose.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QTextCursor
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QToolButton, QVBoxLayout, QWidget

from desktop.qt.answer.bulk_text import BULK_LINE_CHARS, LineCutter, display_lines
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.focus import click_returns_focus
from desktop.qt.look.icons import set_icon

TICK_MS = 250
STORED_LABEL = "Thoughts"  # a stored reply's header: how long it thought is not recorded
BODY_MAX_HEIGHT = 280


def thinking_label(seconds: float, *, running: bool) -> str:
    if running:
        return f"Thinking… {int(seconds)}s"
    return f"Thought for {max(1, round(seconds))}s"


class _HeaderButton(QToolButton):
    """Space toggles any button; Enter and Return toggle this one too."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.click()
            return
        super().keyPressEvent(event)


class ThinkingPane(QFrame):
    """Raw thinking of one reply.

    Signals:
        toggled(bool): the pane was expanded (True) or collapsed (False).
    """

    toggled = Signal(bool)
    # Whether thinking streams in the open; the user's last choice, saved with the window state.
    open_while_thinking = True
    on_preference_changed: Callable[[bool], None] = staticmethod(lambda _open: None)

    def __init__(self, parent: QWidget | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.setObjectName("ThinkingPane")
        self._clock = clock
        self._raw: list[str] = []
        self._cutter = LineCutter(run=BULK_LINE_CHARS)  # display lines, cut where layout would be slow
        self._started: float | None = None
        self._ended: float | None = None
        self._auto_open = False  # opened by streaming (not by the user): folds when thinking ends
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self.tick)
        self.header = self._make_header()
        self.body = self._make_body()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)

    def _make_header(self) -> QToolButton:
        header = _HeaderButton(self)
        header.setObjectName("ThinkingHeader")
        header.setCheckable(True)
        header.setAutoRaise(True)
        header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        set_icon(header, "chevron_right", current_palette().muted, 14)
        click_returns_focus(header)  # Tab reaches it; a click leaves the typing in the message box
        header.setCursor(Qt.CursorShape.PointingHandCursor)
        header.setAccessibleName("Thinking")
        header.setAccessibleDescription("Shows or hides the model's raw thinking")
        header.toggled.connect(self._on_header_toggled)
        header.clicked.connect(lambda: self.user_toggled(header.isChecked()))  # clicks only, never the stream
        header.setText(thinking_label(0, running=True))
        return header

    def _make_body(self) -> QPlainTextEdit:
        body = QPlainTextEdit(self)
        body.setObjectName("ThinkingBody")
        body.setReadOnly(True)
        body.setAccessibleName("Thinking text")
        body.setTabChangesFocus(True)
        body.setFrameShape(QFrame.Shape.NoFrame)
        body.hide()
        return body

    # -- state -----------------------------------------------------------------------------

    @property
    def expanded(self) -> bool:
        return self.header.isChecked()

    def set_expanded(self, expanded: bool) -> None:
        self.header.setChecked(expanded)

    def header_text(self) -> str:
        return self.header.text()

    def text(self) -> str:
        """The raw thinking, exactly as streamed."""
        return "".join(self._raw)

    @property
    def running(self) -> bool:
        return self._started is not None and self._ended is None

    # -- streaming -------------------------------------------------------------------------

    def append(self, text: str) -> None:
        if not text:
            return
        if self._started is None:
            self._started = self._clock()
            self._timer.start()
            if ThinkingPane.open_while_thinking and not self.expanded:
                self._auto_open = True
                self.set_expanded(True)
        self._raw.append(text)
        bar = self.body.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        # Display lines are cut (LineCutter): one unbroken megabyte would take a second to lay
        # out (text() still returns the raw thinking).
        shown = self._cutter.feed(text)
        cursor = QTextCursor(self.body.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(shown)
        if at_bottom:
            bar.setValue(bar.maximum())  # follow new thinking unless the reader scrolled up
        if self.expanded:
            self._fit_body()

    def end(self) -> None:
        """Thinking is over (the answer began, or the reply ended)."""
        if self._started is None or self._ended is not None:
            return
        self._ended = self._clock()
        self._timer.stop()
        self.tick()
        if self._auto_open:
            self._auto_open = False
            self.set_expanded(False)

    def show_stored(self, text: str) -> None:
        """Show a stored reply's thinking, finished, without timing it."""
        self.reset()
        self._raw.append(text)
        self.body.setPlainText(display_lines(text, run=BULK_LINE_CHARS))
        self.header.setText(STORED_LABEL)

    def reset(self) -> None:
        self._cutter = LineCutter(run=BULK_LINE_CHARS)
        self._raw.clear()
        self.body.clear()
        self._started = self._ended = None
        self._timer.stop()
        self.header.setText(thinking_label(0, running=True))

    # -- internals -------------------------------------------------------------------------

    def _elapsed(self) -> float:
        if self._started is None:
            return 0.0
        return (self._ended or self._clock()) - self._started

    def tick(self) -> None:
        """Refresh the header's seconds (the timer calls this while thinking streams)."""
        self.header.setText(thinking_label(self._elapsed(), running=self.running))

    def _on_header_toggled(self, expanded: bool) -> None:
        set_icon(self.header, "chevron_down" if expanded else "chevron_right", current_palette().muted, 14)
        self.body.setVisible(expanded)
        if expanded:
            self._fit_body()
        self.toggled.emit(expanded)

    def user_toggled(self, expanded: bool) -> None:
        """The user opened or closed the pane (not the stream): remembered while it thinks."""
        if self.running:
            self._remember(expanded)

    def _remember(self, expanded: bool) -> None:
        self._auto_open = False  # the user's choice now: the pane stays as they left it
        if ThinkingPane.open_while_thinking != expanded:
            ThinkingPane.open_while_thinking = expanded
            ThinkingPane.on_preference_changed(expanded)

    def refresh_style(self) -> None:
        """Theme or text size changed: recolour the chevron, refit the open body."""
        set_icon(self.header, "chevron_down" if self.expanded else "chevron_right", current_palette().muted, 14)
        if self.expanded:
            self._fit_body()

    def _fit_body(self) -> None:
        lines = max(2, self.body.document().lineCount())
        margin = 2 * int(self.body.document().documentMargin()) + 4
        wanted = lines * self.body.fontMetrics().lineSpacing() + margin
        self.body.setFixedHeight(min(BODY_MAX_HEIGHT, wanted))
