"""The scrolling column of messages.

It follows the newest text while the reader is at the bottom, and stays put once they
scroll up to read something earlier (until they scroll back down or send a message).

A stored conversation is shown lazily: only its newest `LAZY_BATCH` messages get widgets
when it opens; older ones wait as builders (the backlog) and are created a batch at a time
as the reader nears the top, keeping what they were reading where it was. So a 2,000-message
conversation opens as fast as a short one and nothing is built that is never looked at.

A quiet divider marks where the model's context begins when earlier messages fall outside it.
When truncate-middle keeps the first exchange, a second divider under it marks where the
left-out span starts, so the kept exchange reads as part of what the model sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from desktop.core.failures import TurnFailure
from desktop.qt.answer.markdown_view import discard
from desktop.qt.chat.empty_state import EmptyState
from desktop.qt.chat.found_mark import mark_found
from desktop.qt.chat.message_view import AssistantMessage, TurnBanner, UserMessage
from desktop.qt.look.focus import tab_focus_only
from desktop.qt.look.style import CONTENT_MAX_WIDTH, SPACING
from engine.api.values import DIVIDER_TEXT, Status

_W = TypeVar("_W", bound=QWidget)

FOLLOW_SLACK_PX = 24  # "at the bottom" includes being within this of it
LAZY_BATCH = 16  # message widgets built at a time (at open, and per step while scrolling up)
LOAD_OLDER_PX = 400  # within this of the top, the next older batch is built
# Between messages. A reply's action row (Copy, Regenerate) already sits under its text and
# separates it from the next question, so the gap itself stays small.
MESSAGE_GAP_PX = SPACING + 2
FILL_CHECK_MS = 300  # once the layout has settled: does the newest batch fill the view?

# A not-yet-built stored message: its role (for counting turns) and how to build it.
Entry = tuple[Literal["user", "assistant"], Callable[[], QWidget]]


# With the first exchange kept (truncate-middle), the left-out span has a line at each end.
HEAD_DIVIDER_TEXT = "The messages below are outside the model's context; the first exchange above is kept"
RESUME_DIVIDER_TEXT = "The model's context resumes here"


class ContextDivider(QLabel):
    """ "Earlier messages are outside the model's context", above the first message it still sees."""

    def __init__(self, parent: QWidget | None = None, text: str = DIVIDER_TEXT) -> None:
        super().__init__(text, parent)
        self.setObjectName("ContextDivider")
        self.setAccessibleName("Context divider")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)  # styled by desktop/qt/look/stylesheet.py


class ConversationView(QScrollArea):
    """Message widgets in a centred column of readable width.

    Signals:
        failureAction(str): a banner's button was pressed (its `FailureAction`).
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
        # A Tab stop (its ring shows the arrow keys scroll it), never focused by a click: Qt gives a
        # click on a button that takes no click focus to its nearest ancestor that does, and the
        # whole transcript would light up whenever Copy or ⓘ was clicked.
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self._follow = True
        self._messages: list[QWidget] = []
        self._pending: AssistantMessage | None = None
        self._banner: TurnBanner | None = None
        self._backlog: list[Entry] = []  # older stored messages without widgets yet, oldest first
        self._anchor: tuple[QWidget, int] | None = None  # kept in place while older ones are built
        self._cut_turn: int | None = None
        self._kept_head = 0  # turns kept at the start (truncate-middle's first exchange)
        self._column, self._layout = self._make_column()
        self.divider = ContextDivider(self._column)
        self.divider.hide()
        self.head_divider = ContextDivider(self._column, HEAD_DIVIDER_TEXT)
        self.head_divider.hide()
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
        layout.setSpacing(MESSAGE_GAP_PX)
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
        return self._append(self.user_widget(text))

    def user_widget(self, text: str) -> UserMessage:
        """A question's widget, wired but not placed (for `show_entries`)."""
        message = UserMessage(text)
        message.editSubmitted.connect(self.editRequested)
        message.versionRequested.connect(self.versionRequested)
        return message

    def stored_reply_widget(self, role_label: str, content: str, thinking: str, status: Status) -> AssistantMessage:
        """A stored reply's widget, wired but not placed (for `show_entries`)."""
        reply = self._reply_widget(role_label)
        reply.show_stored(content, thinking, status)
        return reply

    def show_entries(self, entries: Sequence[Entry]) -> None:
        """Show stored messages: the newest `LAZY_BATCH` now, older ones as the reader scrolls up."""
        self._pending = None
        split = max(0, len(entries) - LAZY_BATCH)
        self._backlog = list(entries[:split])
        for _role, build in entries[split:]:
            self._append(build())
        replies = [m for m in self._messages if isinstance(m, AssistantMessage)]
        if replies:
            replies[-1].reveal.pin(True)  # as after a send: the newest answer's actions show
        self._place_divider()
        # Short messages may not fill the view, and then there is nothing to scroll up with.
        if self._backlog:
            QTimer.singleShot(FILL_CHECK_MS, self._fill_view)

    def _fill_view(self) -> None:
        """Short messages may not fill the view (nothing to scroll up with): build older ones."""
        if not self._backlog:
            return
        last = self._messages[-1] if self._messages else None
        if last is not None and len(self._messages) > 1 and last.y() == 0:  # not laid out yet
            QTimer.singleShot(FILL_CHECK_MS, self._fill_view)
        elif self.verticalScrollBar().maximum() <= LOAD_OLDER_PX and self.load_older():
            QTimer.singleShot(FILL_CHECK_MS, self._fill_view)

    @property
    def backlog_count(self) -> int:
        """Stored messages above the first widget, not built yet."""
        return len(self._backlog)

    def load_older(self) -> int:
        """Build the next older batch above the first message, keeping the view still; how many."""
        if not self._backlog:
            return 0
        batch, self._backlog = self._backlog[-LAZY_BATCH:], self._backlog[:-LAZY_BATCH]
        first = self._messages[0] if self._messages else None
        if first is not None:
            self._anchor = (first, self._top_of(first) - self.verticalScrollBar().value())
        widgets = [build() for _role, build in batch]
        for widget in widgets:
            tab_focus_only(widget)
        at = self._layout.indexOf(first) if first is not None else self._layout.count() - 1
        for offset, widget in enumerate(widgets):
            self._layout.insertWidget(at + offset, widget)
        self._messages[0:0] = widgets
        self._place_divider()
        return len(widgets)

    def show_found(self, message_id: int, query: str) -> QWidget | None:
        """Scroll to stored message `message_id` (a search hit) and mark it; None: not in this branch."""
        found = None
        while found is None:  # older messages are built a batch at a time until it is there
            found = next((w for w in self.message_widgets() if w.message_id == message_id), None)
            if found is None and not self.load_older():
                return None
        mark_found(found, query)
        self._follow = False  # the reader is here now, not at the end
        self._anchor = None
        QTimer.singleShot(0, lambda: self._scroll_to(found))
        return found

    def _scroll_to(self, widget: QWidget) -> None:
        self._follow = False
        self.verticalScrollBar().setValue(max(0, self._top_of(widget) - SPACING * 2))

    def show_context_cut(self, resume_turn: int | None, kept_head: int = 0) -> None:
        """Put the divider above turn `resume_turn` (0 = the first question); None hides it.

        `kept_head` turns at the start are still seen (truncate-middle): the left-out span
        then gets a second divider above its first turn.
        """
        self._cut_turn = resume_turn
        self._kept_head = kept_head if resume_turn is not None else 0
        self._place_divider()

    def start_reply(self, role_label: str) -> AssistantMessage:
        self._pending = self._append(self._reply_widget(role_label))
        return self._pending

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
        self._backlog.clear()
        self._anchor = None
        self._cut_turn = None
        self._place_divider()
        self._pending = None
        self._banner = None
        self._empty.show()
        self._follow = True

    def _append(self, widget: _W) -> _W:
        tab_focus_only(widget)  # a click on a message's button leaves no focus ring behind
        self._empty.hide()
        self._layout.insertWidget(self._layout.count() - 1, widget)  # above the bottom stretch
        self._messages.append(widget)
        return widget

    # -- following the newest text ---------------------------------------------------------

    @property
    def following(self) -> bool:
        return self._follow

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._anchor is not None:  # older messages were built above: keep the reader's place
            widget, offset = self._anchor
            self._anchor = None
            self.verticalScrollBar().setValue(self._top_of(widget) - offset)
        elif self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_value_changed(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - FOLLOW_SLACK_PX
        if self._backlog and not self._follow and value <= LOAD_OLDER_PX and self._anchor is None:
            QTimer.singleShot(0, self.load_older)  # after this scroll event, not inside it

    def _top_of(self, widget: QWidget) -> int:
        outer = self.widget()
        return widget.mapTo(outer, QPoint(0, 0)).y() if outer is not None else 0

    # -- the context divider ---------------------------------------------------------------

    def _place_divider(self) -> None:
        target = self._turn_widget(self._cut_turn) if self._cut_turn is not None else None
        head = self._turn_widget(self._kept_head) if target is not None and self._kept_head > 0 else None
        self.divider.setText(RESUME_DIVIDER_TEXT if self._kept_head > 0 else DIVIDER_TEXT)
        self._put(self.divider, target)
        self._put(self.head_divider, head)

    def _put(self, divider: ContextDivider, above: QWidget | None) -> None:
        if above is None:
            divider.hide()
            return
        self._layout.removeWidget(divider)
        self._layout.insertWidget(self._layout.indexOf(above), divider)
        divider.show()

    def _turn_widget(self, turn: int) -> QWidget | None:
        """The question that starts turn `turn`, if it has a widget (turns count every question)."""
        seen = sum(1 for role, _build in self._backlog if role == "user")
        for widget in self._messages:
            if isinstance(widget, UserMessage):
                if seen == turn:
                    return widget
                seen += 1
        return None
