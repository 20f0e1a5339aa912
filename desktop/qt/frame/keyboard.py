"""The window's keyboard: Tab in reading order, focus back in the message box, and the reply shortcuts.

Tab goes header → chat list → transcript → composer (Shift+Tab back), each part top to
bottom and left to right as it is drawn, whatever order its widgets were made in (replies
are added as the chat goes on). The token meter is no stop: the status bar says the same.
After a composer menu closes the message box has the focus again, so the next keys typed
are not lost. Ctrl+Shift+C copies the last reply, Ctrl+R answers again, Ctrl+K searches.
"""

from __future__ import annotations

from functools import cmp_to_key
from typing import Protocol

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication, QLineEdit, QScrollArea, QWidget

from desktop.qt.chat.composer import ComposerBar
from desktop.qt.chat.message_view import AssistantMessage


class KeyboardWindow(Protocol):
    """What the keys need of the main window (`MainWindow` is one): its parts, in the order drawn."""

    @property
    def header(self) -> QWidget: ...
    @property
    def sidebar(self) -> QWidget: ...
    @property
    def notice(self) -> QWidget: ...
    @property
    def conversation(self) -> QWidget: ...
    @property
    def composer(self) -> ComposerBar: ...

    def window(self) -> QWidget:
        """The top-level widget (QWidget.window(): the main window itself)."""
        ...

    def last_reply(self) -> AssistantMessage | None: ...

    def set_sidebar_visible(self, visible: bool) -> None: ...


def regions(window: KeyboardWindow) -> list[QWidget]:
    """The window's parts in reading order (the sidebar only while it shows)."""
    parts: list[QWidget] = [window.header]
    if window.sidebar.isVisible():
        parts.append(window.sidebar)
    return [*parts, window.notice, window.conversation, window.composer]


def _stops(region: QWidget, window: QWidget) -> list[QWidget]:
    found = [region, *region.findChildren(QWidget)]
    stops = [w for w in found if _is_stop(w, window)]

    boxes = {w: QRect(w.mapTo(window, QPoint(0, 0)), w.size()) for w in stops}

    def reading(a: QWidget, b: QWidget) -> int:
        # Side by side (their heights overlap): left first; else the upper one first.
        ra, rb = boxes[a], boxes[b]
        if ra.bottom() < rb.top() or rb.bottom() < ra.top():
            return -1 if ra.top() < rb.top() else 1
        return (ra.left() > rb.left()) - (ra.left() < rb.left())

    return sorted(stops, key=cmp_to_key(reading))


def _is_stop(widget: QWidget, window: QWidget) -> bool:
    return (
        bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)
        and widget.isEnabled()
        and widget.isVisibleTo(window)
        and widget.focusProxy() is None
        and widget.window() is window
    )


def tab_chain(window: KeyboardWindow) -> list[QWidget]:
    """Every Tab stop of the window, in reading order."""
    top = window.window()
    return [w for region in regions(window) for w in _stops(region, top)]


def step(window: KeyboardWindow, forward: bool) -> bool:
    """Move the focus to the next (previous) stop in reading order; False when it is not ours to move."""
    focused = QApplication.focusWidget()
    chain = tab_chain(window)
    if not chain:
        return False
    if focused in chain:
        index = (chain.index(focused) + (1 if forward else -1)) % len(chain)
    elif focused is None or focused.window() is window.window():
        index = 0 if forward else len(chain) - 1
    else:
        return False
    target = chain[index]
    scroller = _scroll_area_of(target)
    if scroller is not None:
        scroller.ensureWidgetVisible(target)
    target.setFocus(Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason)
    return True


def _scroll_area_of(widget: QWidget) -> QScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


def copy_last_reply(window: KeyboardWindow) -> bool:
    reply = window.last_reply()
    text = reply.answer_text() if reply is not None else ""
    if not text.strip():
        return False
    QApplication.clipboard().setText(text)
    return True


def regenerate_last(window: KeyboardWindow) -> bool:
    reply = window.last_reply()
    if reply is None or window.composer.busy or reply.message_id is None:
        return False
    reply.regenerateRequested.emit(reply.message_id)
    return True


def focus_search(window: KeyboardWindow) -> bool:
    """Show the sidebar if it is folded, and put the caret in its search field."""
    search = window.sidebar.findChild(QLineEdit, "HistorySearch")
    if search is None:
        return False
    if not window.sidebar.isVisible():
        window.set_sidebar_visible(True)
    search.setFocus(Qt.FocusReason.ShortcutFocusReason)
    search.selectAll()
    return True
