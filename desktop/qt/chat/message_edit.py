"""Editing a sent message in place: Save & send stores a new version, the old one stays."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from desktop.qt.chat.composer import ComposerEdit


class _EditorBox(ComposerEdit):
    """The composer's box (Enter saves, Shift+Enter adds a line), where Esc cancels the edit.

    Signals:
        cancelRequested(): Esc was pressed.
    """

    cancelRequested = Signal()

    def event(self, event: QEvent) -> bool:
        # The window's Esc shortcut (stop the reply) would take the key first: claim it here.
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
        ):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.cancelRequested.emit()
            return
        super().keyPressEvent(event)


class InlineEditor(QFrame):
    """A sent message's text in an editable box with Cancel and Save & send.

    Signals:
        saved(str): the edited text (stripped, never empty).
        cancelled(): the edit was abandoned.
    """

    saved = Signal(str)
    cancelled = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("InlineEditor")
        self.edit = _EditorBox(self)
        self.edit.setPlaceholderText("")
        self.edit.setAccessibleName("Edit message")
        self.edit.set_message(text)
        self.edit.submitRequested.connect(self._on_save)
        self.edit.cancelRequested.connect(self.cancelled)
        self.edit.textChanged.connect(self._update)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancelled)
        self.save_button = QPushButton("Save && send", self)
        self.save_button.setAccessibleName("Save and send")
        self.save_button.setToolTip("Send the edited message as a new version (Enter)")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self._on_save)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        layout.addLayout(buttons)
        self._update()

    def text(self) -> str:
        return self.edit.message()

    def focus(self) -> None:
        self.edit.setFocus(Qt.FocusReason.OtherFocusReason)
        self.edit.selectAll()

    def _update(self) -> None:
        self.save_button.setEnabled(bool(self.text().strip()))

    def _on_save(self) -> None:
        text = self.text().strip()
        if text:
            self.saved.emit(text)
