"""The history sidebar: search, the conversation list, a menu (New, Export, Import), the archive and Undo.

The list, its pages and searches are read, and rename, delete, restore, export and import
written, on the session's history thread (`HistorySession.io`): the window never waits on the
disk, and the list changes when a read is in (`refresh` returns its task). Opening a
conversation or starting a new one goes through the controller (a reply may be streaming),
so those are signals. Deleting asks first, then offers Undo for a while: a deleted
conversation sits in the trash, and `restore` brings it back. Archiving needs no question
(nothing is lost): the conversation leaves the list for the archive, reached by the
"Archived (N)" button at the bottom, and Undo or Unarchive brings it back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import shiboken6
from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.async_tasks import spawn
from desktop.core.history_session import HISTORY_ERRORS, HistorySession
from desktop.qt.chat.undo_bar import UndoBar
from desktop.qt.history.archive_toggle import ArchiveToggle
from desktop.qt.history.conversation_list import ARCHIVE_KEY, ConversationList
from desktop.qt.history.row_delegate import ID_ROLE, UNTITLED
from desktop.qt.history.sidebar_files import SidebarFiles
from desktop.qt.look.plain_question import answered, ask
from desktop.qt.look.style import SPACING

SEARCH_DELAY_MS = 150  # typing pauses this long before the list is filtered
PAGE = 300  # conversations listed per page
TICK_MS = 60_000  # "5 min" ago must not stay "now": re-read the list every minute
DEFAULT_WIDTH = 260
MIN_WIDTH = 180


class HistorySidebar(QFrame):
    """Conversations by last activity, searchable, with New, rename, delete, export and import.

    Signals:
        openRequested(int, object): open this conversation (showing this message id, or None).
        newRequested(): start a fresh conversation (also sent when the open one is deleted).
    """

    openRequested = Signal(int, object)
    newRequested = Signal()
    renamed = Signal(int)  # a conversation's title changed (the header follows at once)

    def __init__(self, session: HistorySession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HistorySidebar")
        self.setMinimumWidth(MIN_WIDTH)
        self.session = session
        self.files = SidebarFiles(self, parent=self)  # export and import
        self.confirm_delete: Callable[[str], bool] = self._ask_delete  # tests answer for the user
        self.search = self._make_search()
        self.menu_button = self._make_menu_button()
        self.list = ConversationList(self)
        self.list.openRequested.connect(self.openRequested)
        self.list.renameRequested.connect(self.rename)
        self.list.deleteRequested.connect(self.delete)
        self.list.archiveRequested.connect(self._toggle_archived)
        self.archive_toggle = ArchiveToggle(self)
        self.archive_toggle.toggled.connect(self._show_archive)
        self.list.customContextMenuRequested.connect(self._show_context_menu)
        # With thousands of conversations only a page is read and listed; scrolling near the
        # end reads the next, so a refresh (after every turn) stays cheap.
        self._page_limit = PAGE
        self._more = False
        self.list.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.list.itemDelegate().closeEditor.connect(self._on_editor_closed)
        self._stale = False
        self._shown_query = ""  # the search the list shows the results of ("": the conversations)
        self._reads = 0  # the newest list read: an older one's rows arriving late are dropped
        self.page_read: asyncio.Future[None] | None = None  # the next page being read, if one is
        self.deleting: asyncio.Future[None] | None = None  # the last delete being written
        self.undo_bar = UndoBar(self)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self._refresh_if_shown)
        self.search.textChanged.connect(lambda _text: self._search_timer.start())
        self._tick = QTimer(self)
        self._tick.setInterval(TICK_MS)
        self._tick.timeout.connect(self._refresh_if_shown)
        self._tick.start()
        self._lay_out()
        self.refresh()

    def _make_search(self) -> QLineEdit:
        search = QLineEdit(self)
        search.setObjectName("HistorySearch")
        search.setPlaceholderText("Search conversations")
        search.setAccessibleName("Search conversations")
        search.setClearButtonEnabled(True)
        search.installEventFilter(self)  # Down and Enter reach the results
        return search

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.search and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            if event.key() == Qt.Key.Key_Down:
                return self._into_results()
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                return self._open_first_result()
        return super().eventFilter(watched, event)

    def _into_results(self) -> bool:
        """Down in the search field: the first result (or the open conversation's row) takes the focus."""
        if self._search_timer.isActive():
            self.refresh()  # typed just now: the rows are read first (the list is then current)
        first = self.list.first_row()
        if first is None:
            return False
        if self.list.current_id() is None or self.search.text().strip():
            self.list.setCurrentItem(first)
        self.list.setFocus(Qt.FocusReason.TabFocusReason)
        return True

    def _open_first_result(self) -> bool:
        """Enter in the search field opens the first result (a search with no results does nothing)."""
        if not self.search.text().strip():
            return False
        spawn(self._open_first_when_read())
        return True

    async def _open_first_when_read(self) -> None:
        if self._search_timer.isActive():
            await self.refresh()  # the results for what was just typed, not the previous ones
        first = self.list.first_row()
        if first is not None and shiboken6.isValid(self):
            self.list.setCurrentItem(first)
            self.list.open_item(first)

    def _make_menu_button(self) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName("HistoryMenuButton")
        button.setText("⋯")
        button.setAccessibleName("History menu")
        button.setToolTip("New conversation, export, import")
        button.setAutoRaise(True)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(button)
        # The window owns Ctrl+N; the text after the tab only shows it (no second, ambiguous shortcut).
        menu.addAction(
            f"New conversation\t{QKeySequence(QKeySequence.StandardKey.New).toString()}", self.newRequested.emit
        )
        menu.addSeparator()
        menu.addAction("Export as Markdown…", lambda: self.files.export_open("md"))
        menu.addAction("Export as JSON…", lambda: self.files.export_open("json"))
        menu.addAction("Import JSON…", self.files.import_dialog)
        button.setMenu(menu)
        return button

    def _lay_out(self) -> None:
        self.top = QFrame(self)
        self.top.setObjectName("SidebarTop")
        top = QHBoxLayout(self.top)
        top.setContentsMargins(SPACING // 2, SPACING // 2, SPACING // 4, SPACING // 2)
        top.setSpacing(SPACING // 4)
        top.addWidget(self.search, 1)
        top.addWidget(self.menu_button)
        body = QVBoxLayout()
        body.setContentsMargins(SPACING // 2, SPACING // 2, SPACING // 2, SPACING // 2)
        body.setSpacing(SPACING // 2)
        self.empty_label = QLabel(self)
        self.empty_label.setObjectName("EmptySidebar")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.empty_label.setWordWrap(True)
        self.empty_label.hide()
        self.archive_heading = QLabel("Archived conversations", self)
        self.archive_heading.setObjectName("ArchiveHeading")
        self.archive_heading.hide()
        body.addWidget(self.archive_heading)
        body.addWidget(self.empty_label)
        body.addWidget(self.list, 1)
        body.addWidget(self.archive_toggle)
        body.addWidget(self.undo_bar)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.top)
        layout.addLayout(body, 1)
        self.resize(DEFAULT_WIDTH, self.height())

    def align_top(self, height: int) -> None:
        """Make the search row as tall as the window's header, so their bottom lines meet."""
        self.top.setFixedHeight(max(height, self.top.sizeHint().height()))

    # -- the list --------------------------------------------------------------------------

    def refresh(self) -> asyncio.Future[None]:
        """Re-read the list (filtered by the search box), keeping the open conversation marked.

        The rows are read on the history thread; the list changes when they are in (await the
        returned task to know when).
        """
        return spawn(self._refresh())

    async def _refresh(self) -> None:
        self._search_timer.stop()
        if self.list.editing:
            self._stale = True  # rebuilding now would throw away the title being typed
            return
        self._stale = False
        self._reads += 1
        ticket, query, limit = self._reads, self.search.text().strip(), self._page_limit
        try:
            rows, archived = await self.session.io(partial(self._read_list, query, limit, self.showing_archive))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self) and ticket == self._reads:
                self.show_message(f"Couldn't read the history: {exc}")
            return
        if not shiboken6.isValid(self) or ticket != self._reads:
            return  # the window closed meanwhile, or a newer read is on its way
        if self.list.editing:
            self._stale = True  # the user began renaming while the rows were read
            return
        current = self.session.conversation_id
        self.archive_toggle.set_count(archived)
        shown_before, self._shown_query = self._shown_query, query
        if query:
            self.list.show_hits(rows, current, top=query != shown_before)  # new results open at the top
        else:
            self._page_limit = limit
            self._more = len(rows) > limit  # more below: read when scrolled near
            self.list.show_conversations(rows[:limit], current)
            if shown_before:
                self.list.scrollToTop()  # back from a search: the list from its top
        self.empty_label.setText(self._empty_text(query))
        self.empty_label.setVisible(self.list.count() == 0)

    def _read_list(self, query: str, limit: int, archived: bool) -> tuple[list[Any], int]:
        """On the history thread: the hits, or a page and one more (is there more?); and the archive's size."""
        if query:
            rows: list[Any] = self.session.search(query)
        else:
            rows = self.session.conversations(limit=limit + 1, archived=archived)
        return rows, self.session.archived_count()

    def _empty_text(self, query: str) -> str:
        if query:
            return "No matches"
        if self.showing_archive:
            return "Nothing archived.\nArchive a conversation (Ctrl+E) to set it aside here."
        return "No conversations yet.\nThey appear here as you chat."

    @property
    def showing_archive(self) -> bool:
        return self.archive_toggle.isChecked()

    def _show_archive(self, on: bool) -> None:
        """Swap the list for the archive (or back): read from its first page."""
        self.archive_heading.setVisible(on)
        self._page_limit = PAGE
        self.list.verticalScrollBar().setValue(0)
        self.refresh()

    def _on_scrolled(self, value: int) -> None:
        bar = self.list.verticalScrollBar()
        if self._more and value >= bar.maximum() - bar.pageStep() and not self.search.text().strip():
            self._more = False  # until this page is read
            self.page_read = spawn(self._read_next_page())  # read on the history thread; appended when in

    async def _read_next_page(self) -> None:
        """Append the next page of older conversations (only that page is read)."""
        if self.list.editing or self.search.text().strip():
            return
        ticket, offset = self._reads, self._page_limit
        try:
            found = await self.session.io(
                partial(self.session.conversations, limit=PAGE + 1, offset=offset, archived=self.showing_archive)
            )
        except HISTORY_ERRORS as exc:
            self.show_message(f"Couldn't read the history: {exc}")
            return
        if not shiboken6.isValid(self) or ticket != self._reads or self.list.editing or self.search.text().strip():
            return  # the list was re-read (or is being edited or filtered) meanwhile: this page is stale
        self._page_limit += PAGE
        self._more = len(found) > PAGE
        self.list.append_conversations(found[:PAGE])

    def _on_editor_closed(self) -> None:
        if self._stale:
            QTimer.singleShot(0, self._refresh_if_shown)  # once the view has left its editing state

    def _refresh_if_shown(self) -> None:
        # A timer's refresh, not once the window is closing (its editors close then too).
        if shiboken6.isValid(self) and self.window().isVisible():
            self.refresh()

    def show_message(self, text: str) -> None:
        self.undo_bar.show_message(text)

    def open_conversation(self, conversation_id: int) -> None:
        """Ask the window to open this conversation at its end."""
        self.openRequested.emit(conversation_id, None)

    def title_of(self, conversation_id: int) -> str:
        listed = self.list.title_of(conversation_id)  # on screen already: no read
        if listed is not None:
            return listed
        try:
            return self.session.title(conversation_id) or UNTITLED
        except HISTORY_ERRORS:
            return UNTITLED

    # -- rename, delete, undo (written on the history thread) ------------------------------

    def rename(self, conversation_id: int, title: str) -> asyncio.Future[None]:
        self._stale = True  # the in-place editor is still closing: refresh right after it
        return spawn(self._rename(conversation_id, title))

    async def _rename(self, conversation_id: int, title: str) -> None:
        try:
            await self.session.io(partial(self.session.rename, conversation_id, title))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self):
                self.show_message(f"Couldn't rename it: {exc}")
        else:
            if shiboken6.isValid(self):
                self.renamed.emit(conversation_id)
        if shiboken6.isValid(self):
            self._stale = True
            self._on_editor_closed()

    def delete(self, conversation_id: int) -> bool:
        """Ask, move the conversation to the trash (on the history thread) and offer Undo; False when not asked to."""
        title = self.title_of(conversation_id)
        if not self.confirm_delete(title):
            return False
        self.list.remove_conversation(conversation_id)  # gone at once; the re-read follows the write
        self.deleting = spawn(self._delete(conversation_id, title))
        return True

    async def _delete(self, conversation_id: int, title: str) -> None:
        if not await self._written(partial(self.session.delete, conversation_id), "delete"):
            return
        if conversation_id == self.session.conversation_id:
            self.newRequested.emit()
        self.refresh()
        self.undo_bar.show_message(f"Deleted “{title}”.", "Undo", partial(self._undo_delete, conversation_id))

    async def _written(self, write: Callable[[], object], doing: str) -> bool:
        """Run a history write whose row already left the list; on failure say so and bring the
        row back. False also when the sidebar was closed meanwhile."""
        try:
            await self.session.io(write)
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self):
                self.show_message(f"Couldn't {doing} it: {exc}")
                self.refresh()  # its row comes back
            return False
        return shiboken6.isValid(self)

    def archive(self, conversation_id: int, *, archived: bool = True) -> asyncio.Future[None]:
        """Archive a conversation (or take it out of the archive): its row goes at once, Undo follows."""
        title = self.title_of(conversation_id)  # before its row goes
        self.list.remove_conversation(conversation_id)
        return spawn(self._archive(conversation_id, title, archived))

    def _toggle_archived(self, conversation_id: int, archived: bool) -> None:
        self.archive(conversation_id, archived=not archived)

    async def _archive(self, conversation_id: int, title: str, archived: bool) -> None:
        write = self.session.archive if archived else self.session.unarchive
        if not await self._written(partial(write, conversation_id), "archive" if archived else "unarchive"):
            return
        self.refresh()
        said = f"Archived “{title}”." if archived else f"“{title}” is back in the list."
        self.undo_bar.show_message(said, "Undo", partial(self._undo_archive, conversation_id, archived))

    def _undo_archive(self, conversation_id: int, archived: bool) -> None:
        self.archive(conversation_id, archived=not archived)

    def _undo_delete(self, conversation_id: int) -> None:
        self.restore(conversation_id)

    def restore(self, conversation_id: int) -> asyncio.Future[None]:
        return spawn(self._restore(conversation_id))

    async def _restore(self, conversation_id: int) -> None:
        try:
            await self.session.io(partial(self.session.restore, conversation_id))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self):
                self.show_message(f"Couldn't restore it: {exc}")
        if shiboken6.isValid(self):
            self.refresh()

    def _ask_delete(self, title: str) -> bool:
        return answered(
            ask(
                self,
                "Delete conversation",
                f"Delete “{title}”?\n\nYou can undo this for a few seconds.",
                "Delete",
                "Cancel",
                destructive=True,
            )
        )

    def _show_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(ID_ROLE) is None:
            return  # a date header
        conversation_id = int(item.data(ID_ROLE))
        archived = self.list.is_archived(conversation_id) or self.showing_archive
        menu = QMenu(self)
        menu.addAction("Rename\tF2", lambda: self.list.editItem(item))
        menu.addAction("Export as Markdown…", lambda: self.files.export_dialog(conversation_id, "md"))
        menu.addAction("Export as JSON…", lambda: self.files.export_dialog(conversation_id, "json"))
        menu.addSeparator()
        shortcut = ARCHIVE_KEY.toString(QKeySequence.SequenceFormat.NativeText)
        menu.addAction(
            f"{'Unarchive' if archived else 'Archive'}\t{shortcut}",
            lambda: self.archive(conversation_id, archived=not archived),
        )
        menu.addAction("Delete…\tDel", lambda: self.delete(conversation_id))
        menu.popup(self.list.viewport().mapToGlobal(pos))
