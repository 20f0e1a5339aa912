"""The scrolling column of messages.

It follows the newest text while the reader is at the bottom, and stays put once they
scroll up to read something earlier (until they scroll back down or send a message).
"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QScrollArea, QVBoxLayout, QWidget

from desktop.controller import TurnFailure
from desktop.markdown_view import discard
from desktop.message_view import AssistantMessage, TurnBanner, UserMessage
from desktop.qt.empty_state import EmptyState
from desktop.style import CONTENT_MAX_WIDTH, SPACING
from engine.history_types import Status

_W = TypeVar("_W", bound=QWidget)

FOLLOW_SLACK_PX = 24  # "at the bottom" includes being within this of it


class ConversationView(QScrollArea):
    """Message widgets in a centred column of readable width.

    Signals:
        failureAction(str): a banner's button was pressed ("retry" or "new_conversation").
        regenerateRequested(int): Regenerate on the stored answer with this id.
        editRequested(int, str): Save & send on an edit of the stored question with this id.
        versionRequested(int): a navigator asked for this version (message id).
        promptChosen(str): an example prompt of the empty state was clicked.
    """

    failureAction = Signal(str)
    regenerateRequested = Signal(int)
    editRequested = Signal(int, str)
    versionRequested = Signal(int)
    promptChosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationScroll")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._follow = True
        self._messages: list[QWidget] = []
        self._pending: AssistantMessage | None = None
        self._banner: TurnBanner | None = None
        self._column, self._layout = self._make_column()
        self._empty = self.empty_state = EmptyState(self._column)
        self._empty.promptChosen.connect(self.promptChosen)
        self._layout.insertWidget(0, self._empty)
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_value_changed)

    def _make_column(self) -> tuple[QWidget, QVBoxLayout]:
        outer = QWidget()
        outer.setObjectName("ConversationColumn")
        column = QWidget(outer)
        column.setMaximumWidth(CONTENT_MAX_WIDTH)
        layout = QVBoxLayout(column)
        layout.setContentsMargins(SPACING * 2, SPACING * 2, SPACING * 2, SPACING * 2)
        layout.setSpacing(SPACING * 3 // 2)
        layout.addStretch(1)
        row = QHBoxLayout(outer)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(column)
        self.setWidget(outer)
        return column, layout

    # -- content ---------------------------------------------------------------------------

    def messages(self) -> list[QWidget]:
        return list(self._messages)

    @property
    def banner(self) -> TurnBanner | None:
        return self._banner

    def message_widgets(self) -> list[UserMessage | AssistantMessage]:
        """The questions and answers on screen, in order (banners left out)."""
        return [w for w in self._messages if isinstance(w, UserMessage | AssistantMessage)]

    def add_user(self, text: str) -> UserMessage:
        self._follow = True  # sending a message always brings the view to the bottom
        self._pending = None
        message = self._append(UserMessage(text))
        message.editSubmitted.connect(self.editRequested)
        message.versionRequested.connect(self.versionRequested)
        return message

    def start_reply(self, role_label: str) -> AssistantMessage:
        self._pending = self._append(self._reply_widget(role_label))
        return self._pending

    def add_stored_reply(self, role_label: str, content: str, thinking: str, status: Status) -> AssistantMessage:
        """A finished reply read back from history."""
        self._pending = None
        reply = self._append(self._reply_widget(role_label))
        reply.show_stored(content, thinking, status)
        return reply

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit, Regenerate and the navigators wait while a reply streams."""
        for widget in self.message_widgets():
            widget.set_actions_enabled(enabled)

    def _reply_widget(self, role_label: str) -> AssistantMessage:
        reply = AssistantMessage(role_label)
        reply.regenerateRequested.connect(self.regenerateRequested)
        reply.versionRequested.connect(self.versionRequested)
        return reply

    def show_failure(self, failure: TurnFailure) -> TurnBanner:
        """Replace the unanswered reply with a banner right under the user's message."""
        self.clear_failure()
        pending, self._pending = self._pending, None
        if pending is not None and not pending.finished and pending in self._messages:
            self._messages.remove(pending)
            discard(pending)
        self._banner = self._append(TurnBanner(failure))
        self._banner.actionRequested.connect(self.failureAction)
        return self._banner

    def clear_failure(self, *, remove: bool = False) -> None:
        """Done with the last banner: removed on Try again, kept but inert after a new message."""
        banner, self._banner = self._banner, None
        if banner is None:
            return
        if not remove:
            banner.retire()
            return
        if banner in self._messages:
            self._messages.remove(banner)
        discard(banner)

    def clear(self) -> None:
        for widget in self._messages:
            discard(widget)
        self._messages.clear()
        self._pending = None
        self._banner = None
        self._empty.show()
        self._follow = True

    def _append(self, widget: _W) -> _W:
        self._empty.hide()
        self._layout.insertWidget(self._layout.count() - 1, widget)  # above the bottom stretch
        self._messages.append(widget)
        return widget

    # -- following the newest text ---------------------------------------------------------

    @property
    def following(self) -> bool:
        return self._follow

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_value_changed(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - FOLLOW_SLACK_PX
