"""Tool calls inline in the reply: the approval card, its folded "Used calculator → 42" line, the switches.

A card sits in the reply that made the call. While the call waits it shows the tool's name
and its full arguments (indented JSON, selectable, scrolled rather than cut when long) and
Approve / Always allow / Deny. Keyboard: the card takes focus when it asks; Enter presses
the focused button (Approve by default), Y approves, N denies, A always allows; Alt+A /
Alt+W / Alt+D work too. Once the call has an outcome the card folds into one line that
opens again on a click; a reopened conversation redraws them from the stored activity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, cast

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.answer.bulk_text import SlicedPlainText, bounded_label_text, display_line_count, needs_bulk_view
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.focus import click_returns_focus
from desktop.qt.look.icons import set_icon
from desktop.qt.look.theme import SPACE_MD, SPACE_SM
from engine.api.tools import DEFAULT_MAX_ROUNDS, MAX_CALLS_PER_ROUND, Decision, arguments_text
from engine.api.values import ToolCall, ToolDenied, ToolLimit, ToolResult

ARGUMENTS_MAX_HEIGHT = 320
RESULT_PREVIEW_CHARS = 2_000
MAX_STORED_CARDS = MAX_CALLS_PER_ROUND * DEFAULT_MAX_ROUNDS
NAME_MAX_CHARS = 80
SUMMARY_RESULT_CHARS = 60  # "Used calculator → 42": the result's first line, this long at most


class ElidingToolButton(QToolButton):
    """A text-beside-icon button whose one-line text is elided at the right to the width it gets."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self.updateGeometry()
        self._elide()

    def full_text(self) -> str:
        return self._full

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(self._chrome() + self.fontMetrics().horizontalAdvance(self._full) + 2, hint.height())

    def _chrome(self) -> int:
        """What the icon, the padding and the frame take beside the text (the style's own measure)."""
        return super().sizeHint().width() - self.fontMetrics().horizontalAdvance(self.text())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(120, self.sizeHint().width()), self.sizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        room = max(20, self.width() - self._chrome())
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room))


def outcome_summary(name: str, approval: str, result: str, error: bool) -> str:
    """The one line a finished call folds into: "Used calculator → 42"."""
    if approval == "denied":
        return f"Denied {name}"
    first = next((line.strip() for line in result.splitlines() if line.strip()), "")
    if len(first) > SUMMARY_RESULT_CHARS:
        first = first[: SUMMARY_RESULT_CHARS - 1] + "…"
    if error:
        return f"{name} failed" + (f": {first}" if first else "")
    if approval == "always":  # not asked: say so, so it does not look like a call the user approved
        return f"Ran {name} automatically (always allowed)" + (f" → {first}" if first else "")
    return f"Used {name}" + (f" → {first}" if first else "")


class ToolCallCard(QFrame):
    """One tool call, inline in the reply that made it.

    While it asks: the tool's name, its full arguments and Approve / Always allow / Deny.
    Once it has an outcome it folds into one line ("Used calculator → 42") that opens to show
    the arguments and the whole result again.

    Signals:
        decided(object): the user chose a `Decision`.
    """

    decided = Signal(object)

    def __init__(self, call: ToolCall, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call = call
        self.setObjectName("ToolCallCard")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAccessibleName(f"Tool call {call.name}")
        self.setToolTip("Enter or Y approves, N denies, A always allows this tool here")
        self.summary = ElidingToolButton(self)
        self.summary.setObjectName("ToolSummary")
        self.summary.setCheckable(True)
        self.summary.setAutoRaise(True)
        self.summary.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.summary.setCursor(Qt.CursorShape.PointingHandCursor)
        self.summary.setAccessibleName(f"Tool {bounded_label_text(call.name, NAME_MAX_CHARS)}")
        self.summary.setAccessibleDescription("Shows or hides the tool's arguments and result")
        self.summary.toggled.connect(self._on_summary_toggled)
        click_returns_focus(self.summary)
        self.summary.hide()
        self._name = name = bounded_label_text(call.name, NAME_MAX_CHARS)
        self.title = _plain_label(f"Run the tool “{name}” with these arguments?", self)
        self.title.setObjectName("ToolTitle")
        # Shown a slice per event-loop turn, lines cut for display: a 1 MB argument used to freeze
        # the window for 20 s (bulk_text.py). The full text is still all there, scrolled.
        text = arguments_text(call.arguments)
        self.arguments = SlicedPlainText(self)
        bulk = needs_bulk_view(text)
        if bulk:
            self.arguments.set_text(text)
        else:
            self.arguments.setPlainText(text)  # ordinary arguments as they are (copied exactly)
        self.arguments.setObjectName("ToolArguments")
        self.arguments.setAccessibleName("Tool arguments")
        self.arguments.setTabChangesFocus(True)
        # As tall as the arguments (a few lines usually), scrolled rather than cut past the cap.
        lines = min(display_line_count(text) if bulk else text.count("\n") + 1, ARGUMENTS_MAX_HEIGHT) + 1
        height = lines * self.arguments.fontMetrics().lineSpacing() + 2 * self.arguments.frameWidth() + 8
        self.arguments.setFixedHeight(min(ARGUMENTS_MAX_HEIGHT, height))
        self.status = _plain_label("", self)
        self.status.setObjectName("ToolStatus")
        self.status.hide()
        # No Alt mnemonics: the card's keys are the shortcuts sheet's (Enter or Y, A, N), one set.
        self.approve = QPushButton("Approve", self)
        self.always = QPushButton("Always allow", self)
        self.always.setToolTip(f"Run {name} without asking for the rest of this conversation")
        self.deny = QPushButton("Deny", self)
        self.approve.setProperty("kind", "primary")
        self._buttons = (self.approve, self.always, self.deny)
        self._lay_out()
        self._outcome = False
        self.set_asking(False)

    def _lay_out(self) -> None:
        buttons = QHBoxLayout()
        buttons.setSpacing(SPACE_SM)
        for button, decision in (
            (self.approve, Decision.APPROVE),
            (self.always, Decision.ALWAYS),
            (self.deny, Decision.DENY),
        ):
            buttons.addWidget(button)
            button.clicked.connect(lambda _=False, d=decision: self.decide(d))
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE_MD, SPACE_SM, SPACE_MD, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.summary, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addLayout(buttons)
        layout.addWidget(self.status)

    def set_asking(self, asking: bool) -> None:
        for button in self._buttons:
            button.setVisible(asking)
            button.setEnabled(asking)
        self.setProperty("asking", asking)
        self.style().unpolish(self)
        self.style().polish(self)
        layout = self.layout()
        if layout is not None:  # a frame while it asks; a plain line in the reply once folded
            margins = (
                (SPACE_MD, SPACE_SM, SPACE_MD, SPACE_SM) if asking or not self.summary.isVisible() else (0, 0, 0, 0)
            )
            layout.setContentsMargins(*margins)
        if asking:
            self.summary.hide()
            self.title.setText(f"Run the tool “{self._name}” with these arguments?")
            for widget in (self.title, self.arguments):
                widget.show()
            self.status.hide()
            self.approve.setFocus(Qt.FocusReason.OtherFocusReason)

    def show_running(self) -> None:
        """Running without asking (the tool is always allowed here): one line until the result."""
        if not self._outcome:
            self._fold(f"Running {self._name}…")

    @property
    def asking(self) -> bool:
        return self.approve.isEnabled()

    @property
    def expanded(self) -> bool:
        return not self.arguments.isHidden()

    def decide(self, decision: Decision) -> None:
        if not self.asking:
            return
        self.set_asking(False)
        self.set_status(
            {
                Decision.APPROVE: "Approved — running…",
                Decision.DENY: "Denied",
                Decision.ALWAYS: f"Approved — {self._name} is always allowed here",
            }[decision]
        )
        if decision is not Decision.DENY:
            self._fold(f"Running {self._name}…")
        self.decided.emit(decision)

    def set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.show()

    def show_outcome(self, approval: str, result: str = "", error: bool = False) -> None:
        """The call ended: fold into its one-line summary (the details stay one click away)."""
        self.set_asking(False)
        self._outcome = True
        if approval == "denied":
            self.set_status("Denied")
        else:
            self.set_status(("Failed: " if error else "Result: ") + bounded_label_text(result, RESULT_PREVIEW_CHARS))
        self._fold(outcome_summary(self._name, approval, result[: SUMMARY_RESULT_CHARS * 4], error))

    def _fold(self, summary: str) -> None:
        self.summary.set_full_text(summary)
        self.summary.show()
        layout = self.layout()
        if layout is not None:
            layout.setContentsMargins(0, 0, 0, 0)
        self.title.setText(f"Arguments for {self._name}:")
        self.summary.setChecked(False)
        self._on_summary_toggled(False)

    def _on_summary_toggled(self, open_: bool) -> None:
        set_icon(self.summary, "chevron_down" if open_ else "chevron_right", current_palette().muted, 14)
        for widget in (self.title, self.arguments, self.status):
            widget.setVisible(open_ and (widget is not self.status or bool(self.status.text())))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if not self.asking:
            super().keyPressEvent(event)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            focused = self.focusWidget()
            (focused if focused in self._buttons else self.approve).click()  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue]
        elif key == Qt.Key.Key_Y:
            self.decide(Decision.APPROVE)
        elif key == Qt.Key.Key_N:
            self.decide(Decision.DENY)
        elif key == Qt.Key.Key_A:
            self.decide(Decision.ALWAYS)
        else:
            super().keyPressEvent(event)


def stored_tool_cards(records: object, parent: QWidget | None = None) -> list[ToolCallCard]:
    """The folded cards of a stored reply's tool activity (its `stats["tools"]` records)."""
    cards: list[ToolCallCard] = []
    # At most what one turn can make now (an import or an older reply may hold thousands: one card each stalled)
    for record in records[:MAX_STORED_CARDS] if isinstance(records, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(record, dict):
            continue
        rec = cast(dict[str, Any], record)
        arguments = rec.get("arguments")
        call = ToolCall(
            str(rec.get("id", "")),
            str(rec.get("name", "tool")),
            cast(dict[str, Any], arguments) if isinstance(arguments, dict) else {},
        )
        card = ToolCallCard(call, parent)
        card.show_outcome(str(rec.get("approval", "")), str(rec.get("result", "")), bool(rec.get("error")))
        cards.append(card)
    return cards


def stored_call_offset(records: object) -> int | None:
    """How much of a stored answer came before its first tool call (None: an older reply, not recorded)."""
    first: object = records[0] if isinstance(records, list) and records else None  # pyright: ignore[reportUnknownVariableType]
    at = cast(dict[str, Any], first).get("at") if isinstance(first, dict) else None
    return at if isinstance(at, int) and at >= 0 else None


def _plain_label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)  # names and results come from the model or a tool
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class ToolHost(Protocol):
    """Where a turn's cards go: the reply being written (`AssistantMessage.add_tool_widget`)."""

    def add_tool_widget(self, widget: QWidget) -> None: ...


class ToolCardArea(QWidget):
    """The `ToolPrompter` the tool turns ask through: each card goes inline into the reply.

    `host()` names the reply being written; the area itself is a fallback strip above the
    composer, shown only if a call ever arrives with no reply to hold it.
    """

    def __init__(
        self,
        host: Callable[[], ToolHost | None] = lambda: None,
        parent: QWidget | None = None,
        reveal: Callable[[QWidget], None] = lambda _w: None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ToolCardArea")
        self._host = host
        self._reveal = reveal
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(8, 4, 8, 4)
        self.cards: dict[str, ToolCallCard] = {}
        self.notices: list[QLabel] = []
        self._waiting: dict[str, asyncio.Future[Decision]] = {}
        self.hide()

    def show_call(self, call: ToolCall) -> None:
        self._card(call)

    def ask(self, call: ToolCall) -> asyncio.Future[Decision]:
        card = self._card(call)
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[call.id] = answer
        card.set_asking(True)
        self._reveal(card)
        return answer

    def show_outcome(self, event: ToolResult | ToolDenied | ToolLimit) -> None:
        match event:
            case ToolResult(id=call_id, content=content, error=error, approval=approval):
                card = self.cards.get(call_id)
                if card is not None:
                    card.show_outcome(approval, content, error)
            case ToolDenied(id=call_id):
                card = self.cards.get(call_id)
                if card is not None:
                    card.show_outcome("denied")
            case ToolLimit(rounds=rounds):
                self.show_notice(f"Stopped after {rounds} rounds of tool calls.")

    def show_notice(self, text: str) -> None:
        """One line about the tools themselves (a server that could not start, the round limit)."""
        label = _plain_label(bounded_label_text(text, RESULT_PREVIEW_CHARS), self)
        label.setObjectName("ToolNotice")
        self.notices.append(label)
        self._place(label)

    def clear(self) -> None:
        """A new turn: open questions are denials; earlier cards stay in their replies."""
        for answer in self._waiting.values():
            answer.cancel()  # the turn went away: an open question is a denial
        self._waiting.clear()
        for card in self.cards.values():
            if card.asking:
                card.show_outcome("denied")
        self.cards.clear()
        self.notices.clear()
        while (item := self._layout.takeAt(0)) is not None:
            widget = item.widget()
            if widget is not None:
                widget.deleteLater()
        self.hide()

    def _card(self, call: ToolCall) -> ToolCallCard:
        card = self.cards.get(call.id)
        if card is None:
            card = self.cards[call.id] = ToolCallCard(call)
            card.decided.connect(lambda decision, call_id=call.id: self._on_decided(call_id, decision))
            card.show_running()
            self._place(card)
        return card

    def _place(self, widget: QWidget) -> None:
        host = self._host()
        if host is not None:
            host.add_tool_widget(widget)
        else:
            self._layout.addWidget(widget)
            self.show()

    def _on_decided(self, call_id: str, decision: Decision) -> None:
        answer = self._waiting.pop(call_id, None)
        if answer is not None and not answer.done():
            answer.set_result(decision)
