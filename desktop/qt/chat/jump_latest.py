"""A floating "↓ latest" button over the conversation while a reply streams below where you read.

Scrolling up during a reply keeps your place (the view stops following); the button then
floats at the bottom of the conversation and brings you back to the newest text, which
the view follows again from there.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QPushButton, QScrollArea

from desktop.qt.look.theme import SPACE_MD

LABEL = "↓ latest"


class JumpToLatest(QPushButton):
    """Shown while `busy()` and the view is scrolled up; a click goes to the newest text."""

    def __init__(self, view: QScrollArea, busy: object) -> None:
        super().__init__(LABEL, view)
        self.setObjectName("JumpToLatest")
        self.setAccessibleName("Jump to the latest text")
        self.setToolTip("Back to the newest text of the reply")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.view = view
        self._busy = busy
        self.hide()
        bar = view.verticalScrollBar()
        bar.valueChanged.connect(self.update_shown)
        bar.rangeChanged.connect(self.update_shown)
        view.installEventFilter(self)
        self.clicked.connect(self.jump)

    def jump(self) -> None:
        bar = self.view.verticalScrollBar()
        bar.setValue(bar.maximum())  # the view follows again from the bottom
        self.hide()

    def update_shown(self, *_: object) -> None:
        bar = self.view.verticalScrollBar()
        busy = bool(self._busy()) if callable(self._busy) else False
        show = busy and bar.value() < bar.maximum() - 2 * SPACE_MD * 4
        if show:
            self._place()
            self.raise_()
        self.setVisible(show)

    def _place(self) -> None:
        self.adjustSize()
        x = (self.view.width() - self.width()) // 2
        self.move(x, self.view.height() - self.height() - SPACE_MD)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False
