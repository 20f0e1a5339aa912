"""A transient one-line bar with an optional action: "Conversation deleted. Undo"."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

HIDE_AFTER_MS = 10_000  # long enough to notice and reach for Undo


class UndoBar(QFrame):
    """Shows one message at a time; hides itself after a while, or when closed or acted on."""

    def __init__(self, parent: QWidget | None = None, *, hide_after_ms: int = HIDE_AFTER_MS) -> None:
        super().__init__(parent)
        self.setObjectName("UndoBar")
        self._action: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(hide_after_ms)
        self._timer.timeout.connect(self.dismiss)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setAccessibleName("Notice")
        self.action_button = QPushButton(self)
        self.action_button.clicked.connect(self.trigger)
        self.close_button = QToolButton(self)
        self.close_button.setText("×")
        self.close_button.setAccessibleName("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action_button)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(
        self, text: str, action_label: str | None = None, action: Callable[[], None] | None = None
    ) -> None:
        self.label.setText(text)
        self._action = action
        self.action_button.setText(action_label or "")
        self.action_button.setAccessibleName(action_label or "")
        self.action_button.setVisible(action is not None)
        self.show()
        self._timer.start()

    def trigger(self) -> None:
        """Run the action (once) and close the bar."""
        action, self._action = self._action, None
        self.dismiss()
        if action is not None:
            action()

    def dismiss(self) -> None:
        self._timer.stop()
        self._action = None
        self.hide()
