"""Plugging history and reply formats into the window: the controller's `HistoryView`.

`attach_history(window, controller)` adds the sidebar (when there is a history), the
reply format (a conversation setting, in the composer's options menu), and a presenter that shows stored branches in the
conversation view and turns message gestures (Regenerate, Edit, ‹ n/m ›) and sidebar
gestures (open, New) into controller calls.
"""

from __future__ import annotations

from functools import partial

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLineEdit, QToolButton, QWidget
from qasync import asyncSlot

from desktop.core.citations import sources_from_stats
from desktop.core.controller import ChatController
from desktop.core.history_session import HISTORY_ERRORS, Branch, BranchItem
from desktop.qt.appearance import current_palette
from desktop.qt.conversation_view import Entry
from desktop.qt.format_picker import ReplyFormatButton
from desktop.qt.icons import set_icon, themed_icon
from desktop.qt.message_view import UserMessage
from desktop.qt.sidebar import DEFAULT_WIDTH, HistorySidebar
from desktop.qt.tool_card import stored_call_offset, stored_tool_cards
from desktop.qt.window import MainWindow
from engine.history.types import TOOLS_STATS_KEY
from engine.session.reply_format import ReplyFormat

NOTICE_MS = 10_000


class HistoryPresenter(QObject):
    """Shows stored conversations in the window and routes history gestures to the controller."""

    def __init__(self, window: MainWindow, controller: ChatController, sidebar: HistorySidebar | None,
                 format_button: ReplyFormatButton) -> None:
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.sidebar = sidebar
        self.format_button = format_button
        view = window.conversation
        view.regenerateRequested.connect(self._on_regenerate)
        view.editRequested.connect(self._on_edit)
        view.versionRequested.connect(self._on_version)
        format_button.formatChosen.connect(self._on_format_chosen)
        if sidebar is not None:
            sidebar.openRequested.connect(self._on_open)
            sidebar.newRequested.connect(self._on_new)

    # -- HistoryView -----------------------------------------------------------------------

    def show_branch(self, branch: Branch) -> None:
        """Build the conversation view from stored messages (the controller cleared it).

        Widgets are built lazily by the view (newest first), each from its stored message.
        """
        view = self.window.conversation
        entries: list[Entry] = []
        for item in branch:
            msg = item.message
            if msg.role == "user":
                entries.append(("user", partial(self._stored_user, item)))
            elif msg.role == "assistant":
                entries.append(("assistant", partial(self._stored_reply, item)))
            # a system message is a setting, not part of the conversation on screen
        view.show_entries(entries)

    def _stored_user(self, item: BranchItem) -> QWidget:
        widget = self.window.conversation.user_widget(item.message.content)
        widget.set_history(item.message.id, item.versions)
        return widget

    def _stored_reply(self, item: BranchItem) -> QWidget:
        msg = item.message
        widget = self.window.conversation.stored_reply_widget(msg.model or self._model_label(), msg.content,
                                                              msg.thinking, msg.status)
        records = msg.stats.get(TOOLS_STATS_KEY)
        at = stored_call_offset(records)
        for card in stored_tool_cards(records):  # "Used calculator → 42", folded, after the text before it
            widget.add_stored_tool_widget(card, at)
        widget.set_history(msg.id, item.versions)
        widget.set_sources(sources_from_stats(msg.stats))
        receipt = msg.stats.get("receipt")
        widget.set_receipt(receipt if isinstance(receipt, dict) else None)
        return widget

    def tag_branch(self, branch: Branch) -> bool:
        """Give the messages on screen their stored ids, in order, after a turn.

        A widget with no stored counterpart (a reply stopped before any text) gets none.
        False when some stored message is not on screen (the caller then shows the branch).
        """
        on_screen = [item for item in branch if item.message.role != "system"]  # never on screen
        stored = iter(on_screen[self.window.conversation.backlog_count:])  # not built yet: nothing to tag
        pending = next(stored, None)
        for widget in self.window.conversation.message_widgets():
            role = "user" if isinstance(widget, UserMessage) else "assistant"
            if pending is not None and pending.message.role == role:
                widget.set_history(pending.message.id, pending.versions)
                pending = next(stored, None)
            else:
                widget.set_history(None, None)
        return pending is None

    async def conversations_changed(self) -> None:
        """Re-read the sidebar's list and the open conversation's title (on the history thread)."""
        if self.sidebar is not None:
            await self.sidebar.refresh()
        await self._show_title()

    async def _show_title(self) -> None:
        history = self.controller.history
        open_id = history.conversation_id if history is not None else None
        title = ""
        if history is not None and open_id is not None:
            try:
                title = await history.session.io(partial(history.title, open_id))
            except HISTORY_ERRORS:
                title = ""
        still_open = (history.conversation_id if history is not None else None) == open_id
        if still_open and shiboken6.isValid(self.window):  # not another conversation, nor a closed window
            self.window.header.show_title(title)

    def show_reply_format(self, fmt: ReplyFormat) -> None:
        self.format_button.show_format(fmt)

    def show_history_problem(self, text: str) -> None:
        if self.sidebar is not None:
            self.sidebar.show_message(text)
        else:
            self.window.statusBar().showMessage(text, NOTICE_MS)

    def set_actions_enabled(self, enabled: bool) -> None:
        self.window.conversation.set_actions_enabled(enabled)

    def _model_label(self) -> str:
        model = self.controller.model
        return model.label if model is not None else "Assistant"

    # -- gestures --------------------------------------------------------------------------

    @asyncSlot(int)
    async def _on_regenerate(self, message_id: int) -> None:
        await self.controller.regenerate(message_id)

    @asyncSlot(int, str)
    async def _on_edit(self, message_id: int, text: str) -> None:
        await self.controller.edit(message_id, text)

    @asyncSlot(int)
    async def _on_version(self, message_id: int) -> None:
        await self.controller.switch_version(message_id)

    @asyncSlot(int, object)
    async def _on_open(self, conversation_id: int, reveal: int | None) -> None:
        await self.controller.open_conversation(conversation_id, reveal=reveal)

    @asyncSlot()
    async def _on_new(self) -> None:
        await self.controller.new_conversation()
        self.window.composer.focus_edit()

    def _on_format_chosen(self, fmt: ReplyFormat) -> None:
        self.controller.set_reply_format(fmt)


def attach_history(window: MainWindow, controller: ChatController, *, notice: str = "") -> HistoryPresenter:
    """Add the sidebar, the reply-format button and the presenter to a bound window.

    `notice` (history could not be opened) is shown as one line in the status bar.
    """
    sidebar = HistorySidebar(controller.history) if controller.history is not None else None
    if sidebar is not None:
        dress_sidebar(sidebar)
        window.set_sidebar(sidebar)
        sidebar.align_top(window.header.sizeHint().height())
        window.splitter.setSizes([DEFAULT_WIDTH, max(1, window.width() - DEFAULT_WIDTH)])
    button = ReplyFormatButton(window.composer)
    place_reply_format(window, button)
    presenter = HistoryPresenter(window, controller, sidebar, button)
    controller.history_view = presenter
    if notice:  # once, in one line, at the top of the window: what is wrong, where, and what happens now
        first, _, rest = notice.partition("\n")
        window.notice.show_notice(first, rest.strip(), lasting=True)
    return presenter


def place_reply_format(window: MainWindow, button: ReplyFormatButton) -> None:
    """The reply format: a submenu of the composer's options, and a chip by Send while it is not plain text."""
    menu = button.menu()
    assert menu is not None
    composer = window.composer
    composer.options_menu.addSection("This conversation")
    composer.options_menu.addMenu(menu)
    composer.add_tool(button)

    def show(fmt: ReplyFormat) -> None:
        menu.setTitle(f"Reply format: {fmt.label}")
        button.setVisible(fmt.kind != "text")
        composer.set_option_active("format", fmt.kind != "text")

    button.formatShown.connect(show)
    show(button.current)


def dress_sidebar(sidebar: HistorySidebar) -> None:
    """Icons for the sidebar's search field and menu button (the sidebar itself stays icon-agnostic)."""
    muted = current_palette().muted
    search = sidebar.search.addAction(themed_icon("search", muted), QLineEdit.ActionPosition.LeadingPosition)
    search.setToolTip("Search conversations (titles and messages)")
    _name_action_buttons(sidebar.search, {search: "Search", None: "Clear search"})
    set_icon(sidebar.menu_button, "menu", muted)
    sidebar.menu_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)


def _name_action_buttons(edit: QLineEdit, names: dict[QAction | None, str]) -> None:
    """Accessible names for a line edit's icon buttons (its own clear button is the `None` entry)."""
    for action in edit.findChildren(QAction):  # the clear button's action is a child, not in actions()
        name = names.get(action) or (names.get(None, "") if "clear" in action.objectName() else "")
        for widget in action.associatedObjects():
            if isinstance(widget, QToolButton) and name:
                widget.setAccessibleName(name)
                widget.setToolTip(widget.toolTip() or name)
