"""History in the window: the controller's `HistoryView`, the sidebar's dress, the reply-format chip.

The presenter shows stored branches in the conversation view, keeps the sidebar's list and
the header's title in step, and says when the history could not be read or written. The
window builds it with the sidebar (when there is a history) and connects the gestures
(Regenerate, Edit, ‹ n/m ›, open, New) to the controller itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLineEdit, QStatusBar, QToolButton, QWidget

from desktop.core.async_tasks import spawn
from desktop.core.citations import answer_from_stats, sources_from_stats
from desktop.core.history_session import HISTORY_ERRORS, Branch, BranchItem, HistorySession
from desktop.qt.chat.attachment_chips import add_question_chips
from desktop.qt.chat.composer import ComposerBar
from desktop.qt.chat.conversation_view import ConversationView, Entry
from desktop.qt.chat.format_picker import ReplyFormatButton
from desktop.qt.chat.message_view import AssistantMessage, UserMessage
from desktop.qt.chat.tool_card import stored_call_offset, stored_tool_cards
from desktop.qt.frame.header import HeaderBar
from desktop.qt.history.sidebar import HistorySidebar
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.icons import set_icon, themed_icon
from desktop.qt.look.menu_heading import add_heading
from engine.api.session import ReplyFormat
from engine.api.values import TOOLS_STATS_KEY

NOTICE_MS = 10_000


@dataclass(frozen=True, slots=True)
class HistoryParts:
    """The window's parts the presenter shows history in."""

    conversation: ConversationView
    header: HeaderBar
    status: QStatusBar
    sidebar: HistorySidebar | None
    format_button: ReplyFormatButton


class HistoryPresenter(QObject):
    """Shows stored conversations in the window's parts."""

    def __init__(
        self,
        parts: HistoryParts,
        history: HistorySession | None,
        model_label: Callable[[], str],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.conversation = parts.conversation
        self.header = parts.header
        self.status = parts.status
        self.sidebar = parts.sidebar
        self.format_button = parts.format_button
        self.history = history
        self._model_label = model_label

    # -- HistoryView -----------------------------------------------------------------------

    def show_branch(self, branch: Branch) -> None:
        """Build the conversation view from stored messages (the controller cleared it).

        Widgets are built lazily by the view (newest first), each from its stored message.
        """
        entries: list[Entry] = []
        for item in branch:
            msg = item.message
            if msg.role == "user":
                entries.append(("user", partial(self._stored_user, item)))
            elif msg.role == "assistant":
                entries.append(("assistant", partial(self._stored_reply, item)))
            # a system message is a setting, not part of the conversation on screen
        self.conversation.show_entries(entries)

    def _stored_user(self, item: BranchItem) -> QWidget:
        widget = self.conversation.user_widget(item.message.content)
        widget.set_history(item.message.id, item.versions)
        add_question_chips(widget, item.images, damaged=item.damaged)
        return widget

    def _stored_reply(self, item: BranchItem) -> QWidget:
        msg = item.message
        widget = self.conversation.stored_reply_widget(
            msg.model or self._model_label(), msg.content, msg.thinking, msg.status
        )
        records = msg.stats.get(TOOLS_STATS_KEY)
        at = stored_call_offset(records)
        for card in stored_tool_cards(records):  # "Used calculator → 42", folded, after the text before it
            widget.add_stored_tool_widget(card, at)
        widget.set_history(msg.id, item.versions)
        sources = sources_from_stats(msg.stats)
        widget.set_sources(sources, answer_from_stats(msg.stats, sources))
        receipt = msg.stats.get("receipt")
        widget.set_receipt(receipt if isinstance(receipt, dict) else None, msg.stats)
        return widget

    def tag_branch(self, branch: Branch) -> bool:
        """Give the messages on screen their stored ids, in order, after a turn.

        A widget with no stored counterpart (a reply stopped before any text) gets none.
        False when some stored message is not on screen (the caller then shows the branch).
        """
        on_screen = [item for item in branch if item.message.role != "system"]  # never on screen
        stored = iter(on_screen[self.conversation.backlog_count :])  # not built yet: nothing to tag
        pending = next(stored, None)
        question: int | None = None
        for widget in self.conversation.message_widgets():
            role = "user" if isinstance(widget, UserMessage) else "assistant"
            if pending is not None and pending.message.role == role:
                widget.set_history(pending.message.id, pending.versions)
                question = pending.message.id if role == "user" else question
                pending = next(stored, None)
            else:
                widget.set_history(None, None)
                if isinstance(widget, AssistantMessage):
                    widget.offer_retry(question)  # "Stopped before any answer": Regenerate asks again
        return pending is None

    async def conversations_changed(self) -> None:
        """Re-read the sidebar's list and the open conversation's title (on the history thread)."""
        if self.sidebar is not None:
            await self.sidebar.refresh()
        await self.show_title()

    def follow_rename(self, _conversation_id: int) -> None:
        """The header follows a rename in the sidebar at once."""
        spawn(self.show_title())

    async def show_title(self) -> None:
        history = self.history
        open_id = history.conversation_id if history is not None else None
        title = ""
        if history is not None and open_id is not None:
            try:
                title = await history.session.io(partial(history.title, open_id))
            except HISTORY_ERRORS:
                title = ""
        still_open = (history.conversation_id if history is not None else None) == open_id
        if still_open and shiboken6.isValid(self.header):  # not another conversation, nor a closed window
            self.header.show_title(title)

    def show_reply_format(self, fmt: ReplyFormat) -> None:
        self.format_button.show_format(fmt)

    def show_history_problem(self, text: str) -> None:
        if self.sidebar is not None:
            self.sidebar.show_message(text)
        else:
            self.status.showMessage(text, NOTICE_MS)

    def set_actions_enabled(self, enabled: bool) -> None:
        self.conversation.set_actions_enabled(enabled)


def place_reply_format(composer: ComposerBar, button: ReplyFormatButton) -> None:
    """The reply format: a submenu of the composer's options, and a chip by Send while it is not plain text."""
    menu = button.menu()
    assert menu is not None
    add_heading(composer.options_menu, "This conversation")
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
