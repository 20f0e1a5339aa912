"""The sidebar's list: conversations under date headers (Today, Yesterday, …, by month), or search hits.

A conversation row holds its title and when it was last active; a search hit adds a second
line, the snippet around the match. Headers are rows too (not enabled: the keyboard and
the mouse pass over them), so the list stays one cheap QListWidget at thousands of rows.
Search hits are not grouped: they are few, each carries its own time, and the snippet is
what matters there. Double-click or F2 edits a title in place.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem, QWidget

from desktop.qt.history.date_groups import YESTERDAY, with_headers
from desktop.qt.history.row_delegate import (
    ARCHIVED_ROLE,
    HEADER_ROLE,
    ID_ROLE,
    MESSAGE_ROLE,
    SNIPPET_ROLE,
    TIME_ROLE,
    UNTITLED,
    ConversationDelegate,
    relative_time,
)
from engine.api.values import Conversation, SearchHit, as_datetime

ARCHIVE_KEY = QKeySequence("Ctrl+E")
_Cursor = QAbstractItemView.CursorAction
_UPWARD = (_Cursor.MoveUp, _Cursor.MovePageUp, _Cursor.MovePrevious, _Cursor.MoveLeft, _Cursor.MoveEnd)


class Row(NamedTuple):
    """A conversation as shown (equal rows need no repaint)."""

    id: int
    title: str
    when: str  # relative time, or "Archived" on an archived search hit
    snippet: list[tuple[str, bool]] | None  # a search hit's snippet (None: not a hit)
    message_id: int | None  # the matching message (None: the title matched, or not a hit)
    archived: bool = False


Entry = Row | str  # a str is a date group's header
_Key = int | str


def _key(entry: Entry) -> _Key:
    return entry if isinstance(entry, str) else entry.id


def _moved_id(old: list[_Key], new: list[_Key]) -> _Key | None:
    """The one key whose move turns `old` into `new` (None: they differ otherwise, or not at all)."""
    if len(old) != len(new) or old == new:
        return None
    first = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    for candidate in (new[first], old[first]):
        if [x for x in old if x != candidate] == [x for x in new if x != candidate]:
            return candidate
    return None


def _grouped_when(ts: float, now: float) -> str:
    """The row's time, less what its header says: the hour under "Yesterday", no year under "October 2025"."""
    when = relative_time(ts, now)
    if when == YESTERDAY:
        return as_datetime(ts).strftime("%H:%M")
    day_month, _, year = when.rpartition(" ")
    return day_month if year.isdigit() and len(year) == 4 and day_month else when


def _row(conversation: Conversation, now: float) -> Row:
    when = _grouped_when(conversation.updated_at, now)
    return Row(conversation.id, conversation.title or UNTITLED, when, None, None, conversation.archived_at is not None)


def _hit_row(hit: SearchHit, now: float | None) -> Row:
    snippet = hit.snippet_parts() if hit.message_id else None
    when = "Archived" if hit.archived else relative_time(hit.updated_at, now)
    return Row(hit.conversation_id, hit.title or UNTITLED, when, snippet, hit.message_id, hit.archived)


def _grouped(conversations: list[Conversation], now: float | None, after: str | None = None) -> list[Entry]:
    moment = time.time() if now is None else now
    return [
        entry if isinstance(entry, str) else _row(entry, moment)
        for entry in with_headers(conversations, lambda c: c.updated_at, moment, after=after)
    ]


class ConversationList(QListWidget):
    """Conversations newest first under date headers (or search hits), the open one selected.

    Signals:
        openRequested(int, object): open this conversation (showing message id, or None).
        renameRequested(int, str): the title was edited in place.
        deleteRequested(int): Delete was pressed on this conversation.
        archiveRequested(int, bool): Ctrl+E on this conversation; True: it is archived now.
    """

    openRequested = Signal(int, object)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    archiveRequested = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationList")
        self.setAccessibleName("Conversations")
        self.setItemDelegate(ConversationDelegate(self))
        self.setUniformItemSizes(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self._shown: list[Entry] = []
        self.itemClicked.connect(self.open_item)
        self.itemChanged.connect(self._on_item_changed)

    # -- contents --------------------------------------------------------------------------

    def show_conversations(
        self, conversations: list[Conversation], current: int | None, now: float | None = None
    ) -> None:
        self._fill(_grouped(conversations, now), current)

    def show_hits(
        self, hits: list[SearchHit], current: int | None, now: float | None = None, *, top: bool = False
    ) -> None:
        """Show search results; `top`: a new search, shown from its first result (not the old scroll offset)."""
        self._fill([_hit_row(h, now) for h in hits], current)
        if top:
            self.scrollToTop()

    def first_row(self) -> QListWidgetItem | None:
        """The first conversation row (headers are skipped), if any."""
        return next((self.item(i) for i in range(self.count()) if self.item(i).data(ID_ROLE) is not None), None)

    def append_conversations(self, conversations: list[Conversation], now: float | None = None) -> None:
        """Add older conversations below the list (the next page), leaving the rest alone.

        A page that continues the last group shown gets no second header for it.
        """
        known = {_key(e) for e in self._shown}
        last = next((e for e in reversed(self._shown) if isinstance(e, str)), None)
        entries = _grouped([c for c in conversations if c.id not in known], now, after=last)
        self.blockSignals(True)
        try:
            for entry in entries:
                self.addItem(self._item(entry))
            self._shown = [*self._shown, *entries]
        finally:
            self.blockSignals(False)

    def headers(self) -> list[str]:
        """The date groups' labels, top to bottom."""
        return [e for e in self._shown if isinstance(e, str)]

    def title_of(self, conversation_id: int) -> str | None:
        """The title shown for a listed conversation (None when it is not listed)."""
        return next((e.title for e in self._shown if isinstance(e, Row) and e.id == conversation_id), None)

    def is_archived(self, conversation_id: int) -> bool:
        return any(isinstance(e, Row) and e.id == conversation_id and e.archived for e in self._shown)

    def remove_conversation(self, conversation_id: int) -> None:
        """Take one conversation's row out now (deleted, archived), and its header if it was alone under it."""
        keys = [_key(e) for e in self._shown]
        if conversation_id not in keys:
            return
        index = keys.index(conversation_id)
        alone = (
            index > 0
            and isinstance(self._shown[index - 1], str)
            and (index + 1 == len(keys) or isinstance(self._shown[index + 1], str))
        )
        first = index - 1 if alone else index
        self.blockSignals(True)
        try:
            for row in range(index, first - 1, -1):
                self.takeItem(row)
            self._shown = self._shown[:first] + self._shown[index + 1 :]
        finally:
            self.blockSignals(False)

    def _fill(self, shown: list[Entry], current: int | None) -> None:
        scrolled = self.verticalScrollBar().value()  # a refresh must not jump the list to the top
        self.blockSignals(True)  # filling is not the user renaming or opening anything
        try:
            self._update(shown)
            self.select_conversation(current)
            self.verticalScrollBar().setValue(scrolled)
        finally:
            self.blockSignals(False)

    def _update(self, shown: list[Entry]) -> None:
        """Show `shown`, touching only what changed: with thousands of conversations a refresh
        (after every turn, every minute) must not rebuild and re-measure every row."""
        old, self._shown = self._shown, shown
        if shown == old:
            return
        old_keys, new_keys = [_key(e) for e in old], [_key(e) for e in shown]
        if len(shown) > len(old) and shown[: len(old)] == old:
            for entry in shown[len(old) :]:  # the next page
                self.addItem(self._item(entry))
            return
        moved = _moved_id(old_keys, new_keys)
        if old_keys != new_keys and moved is None:
            self._rebuild(shown)
            return
        if moved is not None:  # one conversation moved (the one just used): move its row only
            self.insertItem(new_keys.index(moved), self.takeItem(old_keys.index(moved)))
        before = dict(zip(old_keys, old, strict=True))
        for i, entry in enumerate(shown):
            if before[_key(entry)] != entry:
                self._set(self.item(i), entry)

    def _rebuild(self, shown: list[Entry]) -> None:
        self.clear()
        # One height for every row (headers included): no per-row measuring.
        self.setUniformItemSizes(all(isinstance(e, str) or e.snippet is None for e in shown))
        for entry in shown:
            self.addItem(self._item(entry))

    def _item(self, entry: Entry) -> QListWidgetItem:
        item = QListWidgetItem()
        self._set(item, entry)
        return item

    @staticmethod
    def _set(item: QListWidgetItem, entry: Entry) -> None:
        if isinstance(entry, str):
            item.setFlags(Qt.ItemFlag.NoItemFlags)  # not selectable, not focusable, not editable
            item.setText(entry)
            item.setData(HEADER_ROLE, True)
            return
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        item.setText(entry.title)
        item.setData(ID_ROLE, entry.id)
        item.setData(TIME_ROLE, entry.when)
        item.setData(SNIPPET_ROLE, entry.snippet)
        item.setData(MESSAGE_ROLE, entry.message_id)
        item.setData(ARCHIVED_ROLE, entry.archived)
        item.setToolTip(entry.title)

    def select_conversation(self, conversation_id: int | None) -> None:
        """Mark the open conversation (no signal: this follows the view, it does not drive it)."""
        blocked = self.blockSignals(True)
        self.clearSelection()
        self.setCurrentRow(-1)
        item = self.item_of(conversation_id)
        if item is not None:
            self.setCurrentItem(item)
        self.blockSignals(blocked)

    def item_of(self, conversation_id: int | None) -> QListWidgetItem | None:
        """The row of a listed conversation (None: not listed)."""
        keys = [_key(e) for e in self._shown]
        return self.item(keys.index(conversation_id)) if conversation_id in keys else None

    def conversation_ids(self) -> list[int]:
        return [e.id for e in self._shown if isinstance(e, Row)]

    @property
    def editing(self) -> bool:
        return self.state() == QAbstractItemView.State.EditingState

    def current_id(self) -> int | None:
        item = self.currentItem()
        value = None if item is None else item.data(ID_ROLE)
        return None if value is None else int(value)

    # -- gestures --------------------------------------------------------------------------

    def moveCursor(self, cursorAction: _Cursor, modifiers: Qt.KeyboardModifier) -> QModelIndex:
        # Up/Down already pass over disabled rows; Home and the page keys can land on a header.
        index = super().moveCursor(cursorAction, modifiers)
        if not index.isValid() or not index.data(HEADER_ROLE):
            return index
        return self._nearest_row(index.row(), -1 if cursorAction in _UPWARD else 1)

    def _nearest_row(self, row: int, step: int) -> QModelIndex:
        """The first conversation from `row` going `step`, else the other way."""
        for direction in (step, -step):
            r = row + direction
            while 0 <= r < self.count():
                if not self.item(r).data(HEADER_ROLE):
                    return self.indexFromItem(self.item(r))
                r += direction
        return QModelIndex()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        current = self.current_id()
        if current is not None and not self.editing:
            if event.key() == Qt.Key.Key_Delete:
                self.deleteRequested.emit(current)
                return
            if QKeySequence(event.keyCombination()) == ARCHIVE_KEY:
                self.archiveRequested.emit(current, self.is_archived(current))
                return
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.open_item(self.currentItem())
                return
        super().keyPressEvent(event)

    def open_item(self, item: QListWidgetItem) -> None:
        if item.data(ID_ROLE) is not None:
            self.openRequested.emit(int(item.data(ID_ROLE)), item.data(MESSAGE_ROLE))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        title = item.text().strip()
        if title and item.data(ID_ROLE) is not None:
            self.renameRequested.emit(int(item.data(ID_ROLE)), title)
