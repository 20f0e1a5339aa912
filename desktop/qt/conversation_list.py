"""The sidebar's list: one row per conversation (title and when it was last active), or per search hit.

A search hit adds a second line, the snippet around the match with the matched words in
bold. The delegate paints both; double-click or F2 edits the title in place.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QPainter,
    QPalette,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from desktop.qt.style import accent_fill, muted_text, subtle_fill
from engine.history.times import as_datetime
from engine.history.types import Conversation, SearchHit

ID_ROLE = Qt.ItemDataRole.UserRole
TIME_ROLE = Qt.ItemDataRole.UserRole + 1
SNIPPET_ROLE = Qt.ItemDataRole.UserRole + 2  # a search hit's snippet, as (text, is_match) runs
MESSAGE_ROLE = Qt.ItemDataRole.UserRole + 3  # the matching message's id (None: the title matched)
PAD_X, PAD_Y, LINE_GAP = 10, 7, 2
UNTITLED = "New conversation"
_Index = QModelIndex | QPersistentModelIndex
# A row as shown: id, title, relative time, search snippet (None: not a hit), matching message id.
_Row = tuple[int, str, str, list[tuple[str, bool]] | None, int | None]


def _moved_id(old: list[int], new: list[int]) -> int | None:
    """The one id whose move turns `old` into `new` (None: they differ otherwise, or not at all)."""
    if len(old) != len(new) or old == new:
        return None
    first = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    for candidate in (new[first], old[first]):
        if [x for x in old if x != candidate] == [x for x in new if x != candidate]:
            return candidate
    return None


def relative_time(ts: float, now: float | None = None) -> str:
    """When, as a sidebar says it: "now", "5 min", "3 h", "Yesterday", "Mon", "12 Mar", "12 Mar 2023"."""
    now = time.time() if now is None else now
    seconds = max(0.0, now - ts)
    if seconds < 60:
        return "now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    then, today = as_datetime(ts), as_datetime(now)
    days = (today.date() - then.date()).days
    if days == 0:
        return f"{int(seconds // 3600)} h"
    if days == 1:
        return "Yesterday"
    if days < 7:
        return then.strftime("%a")
    if then.year == today.year:
        return f"{then.day} {then.strftime('%b')}"
    return f"{then.day} {then.strftime('%b')} {then.year}"


def snippet_runs(parts: list[tuple[str, bool]], plain: QFontMetrics, bold: QFontMetrics,
                 room: int) -> list[tuple[str, bool]]:
    """The runs of a snippet that fit in `room` pixels, with its first matched word whole.

    In a narrow sidebar the words before the match can fill the line, so the match itself
    would be cut; the leading words give way to "…" first, then the end is elided.
    """
    def width(runs: list[tuple[str, bool]]) -> int:
        return sum((bold if match else plain).horizontalAdvance(text) for text, match in runs)

    first = next((i for i, (_text, match) in enumerate(parts) if match), None)
    runs = list(parts)
    if first and width(runs[:first + 1]) > room:
        before = "".join(text for text, _match in runs[:first]).removeprefix("…")
        while before and width([("…" + before, False), runs[first]]) > room:
            before = before.lstrip().partition(" ")[2]  # drop the first word
        runs = [("…" + before, False), *runs[first:]]
    shown: list[tuple[str, bool]] = []
    left = room
    for text, match in runs:
        metrics = bold if match else plain
        if metrics.horizontalAdvance(text) > left:
            shown.append((metrics.elidedText(text, Qt.TextElideMode.ElideRight, left), match))
            break
        shown.append((text, match))
        left -= metrics.horizontalAdvance(text)
    return shown


class ConversationDelegate(QStyledItemDelegate):
    """Paints a row: title (elided) with the time on the right; a snippet line under a search hit."""

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        line = option.fontMetrics.lineSpacing()
        lines = 2 if index.data(SNIPPET_ROLE) else 1
        return QSize(200, 2 * PAD_Y + lines * line + (lines - 1) * LINE_GAP)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        # Painted by hand rather than by the style: a soft tint for the open conversation
        # reads better in a sidebar than the style's strong selection colour.
        state = option.state
        # The application's palette: the list's own has a transparent Base (see the style sheet).
        palette = QGuiApplication.palette()
        metrics = option.fontMetrics
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self._paint_background(painter, QRectF(option.rect).adjusted(2, 1, -2, -1), palette,
                               selected=bool(state & QStyle.StateFlag.State_Selected),
                               hovered=bool(state & QStyle.StateFlag.State_MouseOver))
        rect = option.rect.adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        line = metrics.lineSpacing()
        title_rect = QRect(rect.left(), rect.top(), rect.width(), line)
        when = str(index.data(TIME_ROLE) or "")
        painter.setPen(muted_text(palette))
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, when)
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or UNTITLED)
        room = title_rect.width() - metrics.horizontalAdvance(when) - PAD_X
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         metrics.elidedText(title, Qt.TextElideMode.ElideRight, room))
        parts = index.data(SNIPPET_ROLE)
        if parts:
            snippet_rect = QRect(rect.left(), rect.top() + line + LINE_GAP, rect.width(), line)
            self._paint_snippet(painter, snippet_rect, parts, muted_text(palette), option.font)
        painter.restore()

    def _paint_background(self, painter: QPainter, rect: QRectF, palette: QPalette, *, selected: bool,
                          hovered: bool) -> None:
        if not (selected or hovered):
            return
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(accent_fill(palette) if selected else subtle_fill(palette, 0.05))
        painter.drawRoundedRect(rect, 6, 6)

    def _paint_snippet(self, painter: QPainter, rect: QRect, parts: list[tuple[str, bool]], color: QColor,
                       font: QFont) -> None:
        """The snippet on one line, matched words bold, elided where it runs out of room."""
        bold = QFont(font)
        bold.setBold(True)
        painter.setPen(color)
        x = rect.left()
        for text, match in snippet_runs(parts, QFontMetrics(font), QFontMetrics(bold), rect.width()):
            painter.setFont(bold if match else font)
            painter.drawText(QRect(x, rect.top(), rect.right() - x, rect.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
            x += QFontMetrics(painter.font()).horizontalAdvance(text)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: _Index) -> None:
        # The title editor sits where the title is drawn, not over the whole row.
        editor.setGeometry(option.rect.adjusted(PAD_X - 4, 3, -(PAD_X - 4), -3))


class ConversationList(QListWidget):
    """Conversations newest first (or search hits), the open one selected.

    Signals:
        openRequested(int, object): open this conversation (showing message id, or None).
        renameRequested(int, str): the title was edited in place.
        deleteRequested(int): Delete was pressed on this conversation.
    """

    openRequested = Signal(int, object)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationList")
        self.setAccessibleName("Conversations")
        self.setItemDelegate(ConversationDelegate(self))
        self.setUniformItemSizes(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self._shown: list[_Row] = []
        self.itemClicked.connect(self._open_item)
        self.itemChanged.connect(self._on_item_changed)

    # -- contents --------------------------------------------------------------------------

    def show_conversations(self, conversations: list[Conversation], current: int | None,
                           now: float | None = None) -> None:
        self._fill([(c.id, c.title, c.updated_at, None, None) for c in conversations], current, now)

    def show_hits(self, hits: list[SearchHit], current: int | None, now: float | None = None) -> None:
        self._fill([(h.conversation_id, h.title, h.updated_at, h.snippet_parts() if h.message_id else None,
                     h.message_id) for h in hits], current, now)

    def append_conversations(self, conversations: list[Conversation], now: float | None = None) -> None:
        """Add older conversations below the list (the next page), leaving the rest alone."""
        known = {r[0] for r in self._shown}
        rows = [(c.id, c.title or UNTITLED, relative_time(c.updated_at, now), None, None)
                for c in conversations if c.id not in known]
        self.blockSignals(True)
        try:
            for row in rows:
                self.addItem(self._item(row))
            self._shown = [*self._shown, *rows]
        finally:
            self.blockSignals(False)

    def title_of(self, conversation_id: int) -> str | None:
        """The title shown for a listed conversation (None when it is not listed)."""
        return next((row[1] for row in self._shown if row[0] == conversation_id), None)

    def remove_conversation(self, conversation_id: int) -> None:
        """Take one conversation's row out now (deleted), ahead of the list's next read."""
        ids = [r[0] for r in self._shown]
        if conversation_id in ids:
            index = ids.index(conversation_id)
            self.blockSignals(True)
            try:
                self.takeItem(index)
                self._shown = self._shown[:index] + self._shown[index + 1:]
            finally:
                self.blockSignals(False)

    def _fill(self, rows: list[tuple[int, str, float, list[tuple[str, bool]] | None, int | None]],
              current: int | None, now: float | None) -> None:
        shown = [(cid, title or UNTITLED, relative_time(updated, now), snippet, message_id)
                 for cid, title, updated, snippet, message_id in rows]
        scrolled = self.verticalScrollBar().value()  # a refresh must not jump the list to the top
        self.blockSignals(True)  # filling is not the user renaming or opening anything
        try:
            self._update(shown)
            self.select_conversation(current)
            self.verticalScrollBar().setValue(scrolled)
        finally:
            self.blockSignals(False)

    def _update(self, shown: list[_Row]) -> None:
        """Show `shown`, touching only what changed: with thousands of conversations a refresh
        (after every turn, every minute) must not rebuild and re-measure every row."""
        old, self._shown = self._shown, shown
        if shown == old:
            return
        old_ids, new_ids = [r[0] for r in old], [r[0] for r in shown]
        if len(new_ids) > len(old_ids) and new_ids[: len(old_ids)] == old_ids and shown[: len(old)] == old:
            for row in shown[len(old):]:  # the next page
                self.addItem(self._item(row))
            return
        moved = _moved_id(old_ids, new_ids)
        if old_ids != new_ids and moved is None:
            self.clear()
            self.setUniformItemSizes(all(r[3] is None for r in shown))  # one height: no per-row measuring
            for row in shown:
                self.addItem(self._item(row))
            return
        if moved is not None:  # one conversation moved (the one just used): move its row only
            self.insertItem(new_ids.index(moved), self.takeItem(old_ids.index(moved)))
        before = dict(zip(old_ids, old, strict=True))
        for i, row in enumerate(shown):
            if before[row[0]] != row:
                self._set(self.item(i), row)

    def _item(self, row: _Row) -> QListWidgetItem:
        item = QListWidgetItem()
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        self._set(item, row)
        return item

    @staticmethod
    def _set(item: QListWidgetItem, row: _Row) -> None:
        conversation_id, title, when, snippet, message_id = row
        item.setText(title)
        item.setData(ID_ROLE, conversation_id)
        item.setData(TIME_ROLE, when)
        item.setData(SNIPPET_ROLE, snippet)
        item.setData(MESSAGE_ROLE, message_id)
        item.setToolTip(title)

    def select_conversation(self, conversation_id: int | None) -> None:
        """Mark the open conversation (no signal: this follows the view, it does not drive it)."""
        blocked = self.blockSignals(True)
        self.clearSelection()
        self.setCurrentRow(-1)
        for row in range(self.count()):
            item = self.item(row)
            if item.data(ID_ROLE) == conversation_id:
                self.setCurrentItem(item)
                break
        self.blockSignals(blocked)

    def conversation_ids(self) -> list[int]:
        return [int(self.item(row).data(ID_ROLE)) for row in range(self.count())]

    @property
    def editing(self) -> bool:
        return self.state() == QAbstractItemView.State.EditingState

    def current_id(self) -> int | None:
        item = self.currentItem()
        return None if item is None else int(item.data(ID_ROLE))

    # -- gestures --------------------------------------------------------------------------

    def keyPressEvent(self, event: QKeyEvent) -> None:
        current = self.current_id()
        if current is not None and not self.editing:
            if event.key() == Qt.Key.Key_Delete:
                self.deleteRequested.emit(current)
                return
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self._open_item(self.currentItem())
                return
        super().keyPressEvent(event)

    def _open_item(self, item: QListWidgetItem) -> None:
        self.openRequested.emit(int(item.data(ID_ROLE)), item.data(MESSAGE_ROLE))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        title = item.text().strip()
        if title:
            self.renameRequested.emit(int(item.data(ID_ROLE)), title)
