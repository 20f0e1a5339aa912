"""The composer: an options menu, a text box that grows with its text, and a Send button that becomes Stop.

The options button ("+" at the left) holds the open conversation's settings that used to
crowd the header: the reply format and the tools (filled in by `history_ui` and `tool_card`).
While a stop is on its way the button says "Stopping…" and waits.

Text too big or too unbroken to lay out quickly (`needs_bulk_view`: a pasted 1 MB line froze
the window for 30 s) is held aside and shown as one short placeholder line,
"[pasted text 1: 1,000,000 characters]"; `message()` gives the text with every intact
placeholder replaced by what it holds, so nothing pasted is lost or changed.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QEvent, QMimeData, Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.answer.bulk_text import BULK_LINE_CHARS, BULK_TOTAL_CHARS, needs_bulk_view
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.icons import set_icon
from desktop.qt.look.menu_place import keep_inside
from desktop.qt.look.style import SPACING

MIN_LINES = 1
MAX_LINES = 8
MIN_EDIT_SHARE = 0.6  # the message box keeps this much of the row; the rest moves below when short
PLACEHOLDER = "Message Ember… (Enter sends, Shift+Enter adds a line)"
SHORT_PLACEHOLDER = "Message Ember…"
HOLD_MARK = "\u2060"  # an invisible word joiner: nobody types it, so a placeholder cannot be forged
_HELD = re.compile(HOLD_MARK + r"\[pasted text (\d+): [\d,]+ characters\]" + HOLD_MARK)


class ComposerEdit(QPlainTextEdit):
    """Enter sends; Shift+Enter inserts a newline; the height follows the text up to a cap.

    Signals:
        submitRequested(): Enter was pressed.
        filesDropped(list): local files were dropped or pasted (their paths; attached, not typed).
        imagePasted(QMimeData): a picture without a file (a screenshot) was pasted or dropped.
    """

    submitRequested = Signal()
    filesDropped = Signal(list)
    imagePasted = Signal(QMimeData)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerEdit")
        self.setAccessibleName("Message")
        self.setPlaceholderText(PLACEHOLDER)
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self._fit_height)
        self._held: dict[int, str] = {}  # placeholder number -> the text it stands for
        self._fit_height()

    # -- text too long to lay out, held aside ---------------------------------------------

    def message(self) -> str:
        """The text as written: placeholders replaced by the text they hold."""
        text = self.toPlainText()
        if not self._held:
            return text
        return _HELD.sub(lambda m: self._held.get(int(m.group(1)), m.group(0)), text)

    def set_message(self, text: str) -> None:
        """Put `text` in the box, holding aside whatever is too long to lay out."""
        self._held.clear()
        self.setPlainText(self._holding(text))

    def clear(self) -> None:
        self._held.clear()
        super().clear()

    # Drop and paste both come here: local files become attachments, anything else is text.
    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(_local_files(source)) or source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = _local_files(source)
        if files:
            self.filesDropped.emit(files)
            return
        if source.hasImage():
            self.imagePasted.emit(source)
            return
        if source.hasText() and needs_bulk_view(text := source.text()):
            self.insertPlainText(self._holding(text))
            return
        super().insertFromMimeData(source)

    def _holding(self, text: str) -> str:
        if not needs_bulk_view(text):
            return text
        if len(text) <= BULK_TOTAL_CHARS:  # only some lines are too long: hold just those
            return "\n".join(self._hold(line) if len(line) > BULK_LINE_CHARS else line for line in text.split("\n"))
        return self._hold(text)

    def _hold(self, text: str) -> str:
        number = max(self._held, default=0) + 1
        self._held[number] = text
        return f"{HOLD_MARK}[pasted text {number}: {len(text):,} characters]{HOLD_MARK}"

    def keyPressEvent(self, event: QKeyEvent) -> None:
        is_enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if is_enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitRequested.emit()
            return
        if is_enter:
            self.insertPlainText("\n")  # Shift+Enter: a plain newline, not a paragraph break
            return
        super().keyPressEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # The hint about Enter only while it fits on the one line (a wrapped placeholder looks broken).
        room = self.viewport().width() - 2 * int(self.document().documentMargin())
        fits = self.fontMetrics().horizontalAdvance(PLACEHOLDER) <= room
        self.setPlaceholderText(PLACEHOLDER if fits else SHORT_PLACEHOLDER)
        self._fit_height()  # wrapping changes with the width

    def refit(self) -> None:
        self._fit_height()

    def _fit_height(self) -> None:
        lines = min(MAX_LINES, max(MIN_LINES, self._visual_lines()))
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        doc_margin = 2 * int(self.document().documentMargin())
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + doc_margin + margins + 8)

    def _visual_lines(self) -> int:
        doc = self.document()
        lines = 0
        block = doc.begin()
        while block.isValid():
            layout = block.layout()
            lines += max(1, layout.lineCount() if layout is not None else 1)
            block = block.next()
        return lines


def _local_files(source: QMimeData) -> list[str]:
    return [u.toLocalFile() for u in source.urls() if u.isLocalFile()] if source.hasUrls() else []


class ComposerBar(QFrame):
    """The composer row.

    Signals:
        submitted(str): the user sent this text (the box is cleared).
        stopRequested(): the user pressed Stop.
    """

    submitted = Signal(str)
    stopRequested = Signal()
    menuClosed = Signal()  # one of its buttons' menus closed: the window gives the box the focus back

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerBar")
        self._busy = False
        self._stopping = False
        self._active: set[str] = set()
        self.options = self._make_options()
        self.options_menu = QMenu(self.options)
        self.options_menu.setObjectName("ComposerOptionsMenu")
        self.options.setMenu(self.options_menu)
        self.options_menu.aboutToHide.connect(self.menuClosed)
        keep_inside(self.options_menu, self.options, upward=True)
        self.edit = ComposerEdit(self)
        self.edit.submitRequested.connect(self._on_submit)
        self.edit.textChanged.connect(self._update_button)
        self.button = QPushButton("Send", self)
        self.button.setObjectName("SendButton")
        self.button.setAccessibleName("Send")
        self.button.clicked.connect(self._on_button_clicked)
        self._tools: list[QWidget] = []  # beside Send: the meter, the paperclip, the format chip
        self._stacked = False  # the controls sit below the box (a short row), else beside it
        self._row = QHBoxLayout()
        self._row.setSpacing(SPACING)
        self._below = QHBoxLayout()
        self._below.setSpacing(SPACING)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACING, SPACING, SPACING, SPACING)
        layout.setSpacing(SPACING // 2)
        layout.addLayout(self._row)
        layout.addLayout(self._below)
        self._arrange(force=True)
        self._update_button()

    def _make_options(self) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName("ComposerOptions")
        button.setAccessibleName("Options")
        button.setToolTip("Options for this conversation: reply format, tools")
        button.setText("Options")
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        set_icon(button, "options", current_palette().muted)
        return button

    def set_option_active(self, name: str, active: bool) -> None:
        """Mark a non-default option (tools on, a JSON reply format) on the options button."""
        (self._active.add if active else self._active.discard)(name)
        on = bool(self._active)
        if self.options.property("active") != on:
            self.options.setProperty("active", on)
            self.options.style().unpolish(self.options)
            self.options.style().polish(self.options)
        described = {"tools": "tools on", "format": "a structured reply format"}
        extra = ", ".join(described.get(n, n) for n in sorted(self._active))
        self.options.setToolTip("Options for this conversation: reply format, tools" + (f" ({extra})" if extra else ""))

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def stopping(self) -> bool:
        return self._stopping

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._stopping = False
        self._update_button()

    def set_stopping(self) -> None:
        """A stop was asked for: say so at once, and wait for the reply to end."""
        if self._busy:
            self._stopping = True
            self._update_button()

    def refit(self) -> None:
        """The text size changed: the box's height and the button's width follow."""
        self.edit.refit()
        self._update_button()
        self._arrange()

    def text(self) -> str:
        return self.edit.message()

    def set_text(self, text: str) -> None:
        self.edit.set_message(text)

    def add_tool(self, widget: QWidget) -> None:
        """Put a small control (e.g. the reply format) beside the Send button."""
        self._tools.append(widget)
        widget.setParent(self)
        menu = widget.menu() if isinstance(widget, QToolButton) else None
        if menu is not None:
            menu.aboutToHide.connect(self.menuClosed)
            keep_inside(menu, widget, upward=True)
        self._arrange(force=True)

    @property
    def stacked(self) -> bool:
        """The options, tools and Send sit on a line below the box (the row was too short for them beside it)."""
        return self._stacked

    def _controls_width(self) -> int:
        shown = [w for w in (self.options, *self._tools, self.button) if not w.isHidden()]
        return sum(max(w.sizeHint().width(), w.minimumWidth()) for w in shown) + SPACING * len(shown)

    def _arrange(self, *, force: bool = False) -> None:
        """Beside the box while it keeps `MIN_EDIT_SHARE` of the row; else on a line of their own below it."""
        margins = self.contentsMargins()
        row = self.width() - margins.left() - margins.right() - 2 * SPACING
        stacked = row > 0 and row - self._controls_width() < MIN_EDIT_SHARE * row
        if stacked == self._stacked and not force:
            return
        self._stacked = stacked
        for layout in (self._row, self._below):
            while layout.count():
                layout.takeAt(0)
        bottom = Qt.AlignmentFlag.AlignBottom
        if stacked:
            self._row.addWidget(self.edit, 1)
            self._below.addWidget(self.options, 0, bottom)
            self._below.addStretch(1)
            for tool in self._tools:
                self._below.addWidget(tool, 0, bottom)
            self._below.addWidget(self.button, 0, bottom)
            return
        self._row.addWidget(self.options, 0, bottom)
        self._row.addWidget(self.edit, 1)
        for tool in self._tools:
            self._row.addWidget(tool, 0, bottom)
        self._row.addWidget(self.button, 0, bottom)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange()

    def event(self, event: QEvent) -> bool:
        # A control grew or shrank ("1 file", a format chip, the count's "· earlier left out"): the
        # same rule as for a resize, so the layout never depends on the order things happened in.
        if event.type() == QEvent.Type.LayoutRequest:
            self._arrange()
        return super().event(event)

    def focus_edit(self) -> None:
        self.edit.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _on_button_clicked(self) -> None:
        if self._busy and not self._stopping:
            self.stopRequested.emit()
        else:
            self._on_submit()

    def submit(self) -> None:
        """Send the draft, as Enter does."""
        self._on_submit()

    def _on_submit(self) -> None:
        text = self.text().strip()
        if self._busy or not text:
            return  # while a reply streams, Enter keeps the draft instead of sending it
        self.edit.clear()
        self.submitted.emit(text)

    def _update_button(self) -> None:
        label = ("Stopping…" if self._stopping else "Stop") if self._busy else "Send"
        self.button.setText(label)
        # As wide as the widest label it takes, so it never jumps or clips between them.
        metrics = self.button.fontMetrics()
        widest = max(metrics.horizontalAdvance(t) for t in ("Send", "Stop", "Stopping…"))
        self.button.setMinimumWidth(widest + self.button.iconSize().width() + 44)
        if self.button.property("busy") != self._busy:
            self.button.setProperty("busy", self._busy)  # the style sheet: accent Send, quiet Stop
            self.button.setProperty("iconOnAccent", not self._busy)
            palette = current_palette()
            set_icon(
                self.button,
                "stop" if self._busy else "send",
                palette.text if self._busy else palette.accent_text,
                16,
                disabled=palette.muted,
            )
            self.button.style().unpolish(self.button)
            self.button.style().polish(self.button)
        self.button.setAccessibleName("Stop the reply" if self._busy else "Send message")
        self.button.setToolTip("Stop the reply (Esc)" if self._busy else "Send (Enter)")
        self.button.setEnabled((self._busy and not self._stopping) or (not self._busy and bool(self.text().strip())))
