"""Menus open inside the window: the composer's upward from their button, the header's right-aligned.

A button's menu opens below it where the screen has room, which from the composer at the
window's bottom edge (or the header's ··· at its right edge) is outside the window. Once
the menu is about to show, it is moved to open above its button (or left of it), clamped
to the window's rectangle.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect
from PySide6.QtWidgets import QMenu, QWidget


class _Placer(QObject):
    def __init__(self, menu: QMenu, anchor: QWidget, upward: bool) -> None:
        super().__init__(menu)
        self.anchor = anchor
        self.upward = upward

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Show and isinstance(watched, QMenu):
            watched.move(place(watched.sizeHint().width(), watched.sizeHint().height(), self.anchor, self.upward))
        return False


def place(width: int, height: int, anchor: QWidget, upward: bool) -> QPoint:
    """Where a `width`×`height` menu of `anchor` goes so it stays inside `anchor`'s window."""
    window = anchor.window()
    area = QRect(window.mapToGlobal(QPoint(0, 0)), window.size())
    top_left = anchor.mapToGlobal(QPoint(0, 0))
    y = top_left.y() - height if upward else top_left.y() + anchor.height()
    x = top_left.x()
    x = max(area.left(), min(x, area.right() - width))
    y = max(area.top(), min(y, area.bottom() - height))
    return QPoint(x, y)


def keep_inside(menu: QMenu, anchor: QWidget, *, upward: bool) -> None:
    """Open `menu` inside `anchor`'s window (above `anchor` when `upward`)."""
    if menu.property("keptInside"):
        return
    menu.setProperty("keptInside", True)
    menu.installEventFilter(_Placer(menu, anchor, upward))
