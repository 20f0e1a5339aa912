"""The sidebar over the chat in a narrow window, beside it in a wide one.

Under `OVERLAY_WIDTH` the chat keeps the whole width: a sidebar opened there (Ctrl+B, the
header's switch) floats over the chat's left edge instead of squeezing the message box,
and the switch or Esc folds it away again. From that width up it sits in the splitter.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QMainWindow, QSplitter, QWidget

OVERLAY_WIDTH = 880
OVERLAY_MAX_SHARE = 0.8  # of the window's width, however wide the sidebar was


class SidebarOverlay(QObject):
    """Moves `sidebar` between `splitter` (slot 0) and a floating place over the chat, below `header`.

    Signals:
        foldRequested(): Esc was pressed in the floating sidebar (the window folds it).
    """

    foldRequested = Signal()

    def __init__(self, window: QMainWindow, splitter: QSplitter, header: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self.splitter = splitter
        self.header = header
        self._placeholder: QWidget | None = None  # holds slot 0 while the sidebar floats
        self._width = 260

    @property
    def floating(self) -> bool:
        return self._placeholder is not None

    def place(self, sidebar: QWidget, visible: bool) -> None:
        """Show or hide `sidebar` where it belongs at the window's width."""
        overlay = visible and self.window.width() < OVERLAY_WIDTH
        if overlay and not self.floating:
            self._float(sidebar)
        elif not overlay and self.floating:
            self._dock(sidebar)
        sidebar.setVisible(visible)
        if self.floating:
            self._fit(sidebar)
            sidebar.raise_()

    def _float(self, sidebar: QWidget) -> None:
        if sidebar.width() > 0 and sidebar.isVisible():
            self._width = sidebar.width()
        self._placeholder = QWidget()
        self._placeholder.hide()
        self.splitter.replaceWidget(0, self._placeholder)
        sidebar.setParent(self.window)
        sidebar.setAutoFillBackground(True)
        sidebar.setProperty("overlay", True)
        sidebar.installEventFilter(self)

    def _dock(self, sidebar: QWidget) -> None:
        placeholder, self._placeholder = self._placeholder, None
        sidebar.removeEventFilter(self)
        sidebar.setProperty("overlay", False)
        self.splitter.replaceWidget(0, sidebar)
        if placeholder is not None:
            placeholder.deleteLater()

    def _fit(self, sidebar: QWidget) -> None:
        # Below the header, so its sidebar switch stays in reach to fold it again.
        area = self.splitter.geometry()
        top = self.header.mapTo(self.window, QPoint(0, self.header.height())).y()
        width = min(max(self._width, sidebar.minimumSizeHint().width()), int(area.width() * OVERLAY_MAX_SHARE))
        sidebar.setGeometry(area.x(), top, width, area.bottom() - top + 1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # Esc inside the floating sidebar folds it (as a drawer does) and gives the chat the keys back.
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape:
            self.foldRequested.emit()
            return True
        return False
