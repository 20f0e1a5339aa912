"""The sidebar over the chat in a narrow window, beside it in a wide one.

Under `OVERLAY_WIDTH` the chat keeps the whole width: a sidebar opened there (Ctrl+B, the
header's switch) floats over the conversation like a drawer, over a dimming scrim, and stops
above the message box, so the box and what is typed into it are never covered. Esc, a click
outside it (on the scrim, the box, the header) or the switch folds it away again. From that
width up it sits in the splitter.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QApplication, QMainWindow, QSplitter, QWidget

from desktop.qt.look.appearance import current_palette

OVERLAY_WIDTH = 880
OVERLAY_MAX_SHARE = 0.8  # of the window's width, however wide the sidebar was
SCRIM_ALPHA = 96  # of 255: the chat stays readable under it, but reads as "behind"


class Scrim(QWidget):
    """A translucent shade over the chat while the drawer is open; a click on it folds the drawer."""

    clicked = Signal()

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("SidebarScrim")
        self.setAccessibleName("Close the sidebar")
        self.hide()

    def paintEvent(self, event: QPaintEvent) -> None:
        shade = QColor(current_palette().text)
        shade.setAlpha(SCRIM_ALPHA)
        QPainter(self).fillRect(self.rect(), shade)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.clicked.emit()
        event.accept()


class SidebarOverlay(QObject):
    """Moves `sidebar` between `splitter` (slot 0) and a floating place over the chat, below `header`
    and above `composer_row`.

    Signals:
        foldRequested(): Esc, or a click outside the floating sidebar (the window folds it).
    """

    foldRequested = Signal()

    def __init__(self, window: QMainWindow, splitter: QSplitter, header: QWidget, composer_row: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self.splitter = splitter
        self.header = header
        self.composer_row = composer_row
        self._placeholder: QWidget | None = None  # holds slot 0 while the sidebar floats
        self._sidebar: QWidget | None = None
        self._width = 260
        self.scrim = Scrim(window)
        self.scrim.clicked.connect(self.foldRequested)

    @property
    def floating(self) -> bool:
        return self._placeholder is not None

    @property
    def open(self) -> bool:
        """The drawer is showing over the chat."""
        return self.floating and self._sidebar is not None and self._sidebar.isVisible()

    def place(self, sidebar: QWidget, visible: bool) -> None:
        """Show or hide `sidebar` where it belongs at the window's width."""
        overlay = visible and self.window.width() < OVERLAY_WIDTH
        if overlay and not self.floating:
            self._float(sidebar)
        elif not overlay and self.floating:
            self._dock(sidebar)
        sidebar.setVisible(visible)
        self.scrim.setVisible(self.floating and visible)
        if self.floating:
            self._fit(sidebar)
            self.scrim.raise_()
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
        self._sidebar = sidebar
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)  # Esc and clicks anywhere in the window

    def _dock(self, sidebar: QWidget) -> None:
        placeholder, self._placeholder = self._placeholder, None
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self._sidebar = None
        sidebar.setProperty("overlay", False)
        self.splitter.replaceWidget(0, sidebar)
        if placeholder is not None:
            placeholder.deleteLater()

    def _fit(self, sidebar: QWidget) -> None:
        # Below the header, so its sidebar switch stays in reach to fold it again; above the
        # message box, so what is typed there stays in sight.
        area = self.splitter.geometry()
        top = self.header.mapTo(self.window, QPoint(0, self.header.height())).y()
        bottom = self.composer_row.mapTo(self.window, QPoint(0, 0)).y() - 1
        width = min(max(self._width, sidebar.minimumSizeHint().width()), int(area.width() * OVERLAY_MAX_SHARE))
        sidebar.setGeometry(area.x(), top, width, max(1, bottom - top + 1))
        self.scrim.setGeometry(area.x(), top, area.width(), max(1, bottom - top + 1))

    def refit(self) -> None:
        """The window's layout moved (a resize, a taller message box): the drawer follows."""
        if self.open and self._sidebar is not None:
            self._fit(self._sidebar)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if not self.open or not isinstance(watched, QWidget) or watched.window() is not self.window:
            return False
        sidebar = self._sidebar
        assert sidebar is not None
        kind = event.type()
        if watched is self.composer_row and kind in (QEvent.Type.Move, QEvent.Type.Resize):
            self._fit(sidebar)  # the box grew with its text: the drawer stays above it
        elif kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape:
            if watched is QApplication.focusWidget() or watched is self.window:
                self.foldRequested.emit()  # as a drawer does; the chat gets the keys back
                return True
        elif kind == QEvent.Type.MouseButtonPress and watched is not self.scrim:
            inside = watched is sidebar or sidebar.isAncestorOf(watched)
            switch = getattr(self.header, "sidebar_button", None)
            if not inside and watched is not switch:
                self.foldRequested.emit()  # a click outside: the click itself still lands (in the box, say)
        return False
