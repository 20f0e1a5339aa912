"""A message's action buttons that appear on hover or keyboard focus, without moving anything.

The buttons stay laid out (and in the tab order) all the time; while the pointer is elsewhere
an opacity effect at zero skips painting them, so showing them shifts no text. Tabbing onto
one reveals the row, so keyboard users see what they are on.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QAbstractButton, QGraphicsOpacityEffect, QWidget


class HoverReveal(QObject):
    """Reveals `row` while the pointer is over `host` or a button in `row` has focus."""

    def __init__(self, host: QWidget, row: QWidget, buttons: list[QAbstractButton]) -> None:
        super().__init__(host)
        self._host = host
        self._row = row
        self._buttons = buttons
        self._effect = QGraphicsOpacityEffect(row)
        self._effect.setOpacity(0.0)
        row.setGraphicsEffect(self._effect)
        self._pinned = False
        host.installEventFilter(self)
        for button in buttons:
            button.installEventFilter(self)

    @property
    def revealed(self) -> bool:
        return not self._effect.isEnabled()

    def pin(self, pinned: bool) -> None:
        """Keep the row visible regardless of hover (e.g. the newest answer)."""
        self._pinned = pinned
        self._update()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.Enter, QEvent.Type.Leave, QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self._update(hovering=kind == QEvent.Type.Enter if watched is self._host else None)
        return False

    def _update(self, hovering: bool | None = None) -> None:
        over = self._host.underMouse() if hovering is None else hovering
        focused = any(b.hasFocus() for b in self._buttons)
        # Disabled effect = painted normally (and no offscreen pass at all).
        self._effect.setEnabled(not (over or focused or self._pinned))
