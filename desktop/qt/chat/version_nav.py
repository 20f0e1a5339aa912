"""The "‹ 1/2 ›" navigator under a message that has other versions (regenerated or edited)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from desktop.qt.look.appearance import current_palette
from desktop.qt.look.icons import set_icon
from engine.api.values import Versions

ARROW_PX = 16


class VersionNav(QWidget):
    """Steps between the versions of one message; hidden while there is only one.

    Signals:
        switchRequested(int): show the version with this message id.
    """

    switchRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("VersionNav")
        self._ids: tuple[int, ...] = ()
        self._index = 0
        self.previous = self._button("‹", "Previous version", -1, "chevron_left")
        self.label = QLabel(self)
        self.label.setObjectName("Muted")
        self.label.setAccessibleName("Version")
        self.next = self._button("›", "Next version", +1, "chevron_right")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.previous)
        layout.addWidget(self.label)
        layout.addWidget(self.next)
        self.hide()

    def _button(self, text: str, name: str, step: int, icon: str) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName("MessageAction")
        button.setText(text)
        # A 16 px arrow in a 24 px target: the ‹ › glyphs were about 8 px, hard to hit.
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        set_icon(button, icon, current_palette().muted, ARROW_PX)
        button.setMinimumSize(ARROW_PX + 8, ARROW_PX + 8)
        button.setAccessibleName(name)
        button.setToolTip(name)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda: self._step(step))
        return button

    @property
    def position(self) -> tuple[int, int]:
        """(1-based version shown, number of versions)."""
        return self._index + 1, len(self._ids)

    @property
    def has_versions(self) -> bool:
        return len(self._ids) > 1

    def set_versions(self, versions: Versions | None) -> None:
        if versions is None or versions.count < 2:
            self._ids = ()
            self.hide()
            return
        self._ids, self._index = versions.ids, versions.index
        self.label.setText(f"{versions.index + 1}/{versions.count}")
        self.label.setToolTip(f"Version {versions.index + 1} of {versions.count}")
        self.previous.setEnabled(versions.index > 0)
        self.next.setEnabled(versions.index < versions.count - 1)
        self.show()

    def _step(self, step: int) -> None:
        index = self._index + step
        if 0 <= index < len(self._ids):
            self.switchRequested.emit(self._ids[index])
