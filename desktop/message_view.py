"""One widget per message: the user's text, the assistant's reply, a failed turn's banner.

`AssistantMessage` is the controller's `ReplySink`. Deltas only append to buffers; a
single-shot timer flushes them at most about 60 times a second, and the Markdown render is
further spaced out by its own measured cost, so a fast stream never re-renders per token.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from desktop.controller import TurnFailure
from desktop.markdown_view import AnswerView, CopyButton, copy_to_clipboard
from desktop.thinking_pane import ThinkingPane
from engine.events import TurnStats

FLUSH_MS = 16  # about 60 updates a second at most
RENDER_COST_FACTOR = 4  # the Markdown render gets at most ~1/(1+4) of the GUI thread
USER_BUBBLE_MAX_FRACTION = 0.8
_prewarmed = False
ACTION_LABELS = {"retry": "Try again", "new_conversation": "New conversation"}


def _label(text: str, object_name: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(object_name)
    return label


class UserMessage(QFrame):
    """The user's message: plain text (never Markdown) in a bubble on the right."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("UserMessage")
        self._bubble = QLabel(text, self)
        self._bubble.setObjectName("UserBubble")
        self._bubble.setTextFormat(Qt.TextFormat.PlainText)
        self._bubble.setWordWrap(True)
        self._bubble.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._bubble.setContentsMargins(12, 8, 12, 8)
        self._bubble.setAccessibleName("Your message")
        self._bubble.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addStretch(1)
        layout.addWidget(self._bubble)

    def text(self) -> str:
        return self._bubble.text()

    def resizeEvent(self, event: QResizeEvent) -> None:
        # A bubble never spans the whole column, so who said what stays obvious; below that
        # it is as wide as its longest line (QLabel alone wraps short texts too eagerly).
        widest = int(self.width() * USER_BUBBLE_MAX_FRACTION)
        margins = self._bubble.contentsMargins()
        longest = max(self._bubble.fontMetrics().horizontalAdvance(line) for line in self.text().split("\n"))
        self._bubble.setMaximumWidth(widest)
        self._bubble.setMinimumWidth(min(widest, longest + margins.left() + margins.right() + 2))
        super().resizeEvent(event)


class TurnBanner(QFrame):
    """A failed turn, shown under the user's message, with an action when one helps.

    Signals:
        actionRequested(str): "retry" or "new_conversation".
    """

    actionRequested = Signal(str)

    def __init__(self, failure: TurnFailure, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TurnBanner")
        self.failure = failure
        self.setAccessibleName("Error")
        self.message = _label(failure.text, "BannerText", self)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        layout.addWidget(self.message, 1)
        self.button: QPushButton | None = None
        if failure.action:
            self.button = QPushButton(ACTION_LABELS[failure.action], self)
            self.button.setAccessibleName(ACTION_LABELS[failure.action])
            self.button.clicked.connect(lambda: self.actionRequested.emit(failure.action))
            layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignVCenter)

    def retire(self) -> None:
        """A newer turn exists: this banner's action no longer applies."""
        if self.button is not None:
            self.button.setEnabled(False)


class AssistantMessage(QFrame):
    """One assistant reply: thinking pane, rendered answer, status line and Copy.

    Signals:
        settled(): the reply ended and its final text is on screen.
    """

    settled = Signal()

    def __init__(self, role_label: str = "Assistant", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AssistantMessage")
        self._content: list[str] = []
        self._pending_thinking: list[str] = []
        self._content_dirty = False
        self._next_render = 0.0
        self._finished = False
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.role = _label(role_label, "RoleLabel", self)
        self.thinking = ThinkingPane(self)
        self.thinking.hide()
        self.answer = AnswerView(self)
        self.status = _label("", "Muted", self)
        self.status.setAccessibleName("Reply status")
        self.copy_button = CopyButton("Copy", "Copy answer", self)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.copy_button.hide()
        self._build_layout()

    def _build_layout(self) -> None:
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.addWidget(self.copy_button)
        footer.addWidget(self.status)
        footer.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.role)
        layout.addWidget(self.thinking)
        layout.addWidget(self.answer)
        layout.addLayout(footer)

    # -- what tests and Copy read ----------------------------------------------------------

    def answer_text(self) -> str:
        """The visible answer's Markdown source: content only, never thinking or scaffolding."""
        return "".join(self._content)

    @property
    def finished(self) -> bool:
        return self._finished

    # -- ReplySink -------------------------------------------------------------------------

    def add_thinking(self, text: str) -> None:
        self._pending_thinking.append(text)
        self._schedule()

    def add_content(self, text: str) -> None:
        self._content.append(text)
        self._content_dirty = True
        self._schedule()

    def restart(self, reason: str) -> None:
        """A recovery request began: what streamed so far is void."""
        self._flush_timer.stop()
        self._content.clear()
        self._pending_thinking.clear()
        self._content_dirty = False
        self.thinking.reset()
        self.thinking.hide()
        self.answer.reset()
        self.status.setText("Retrying…")

    def finish(self, stats: TurnStats) -> None:
        self._flush_timer.stop()
        self._flush(final=True)
        self.thinking.end()
        self._finished = True
        self.status.setText(self._status_for(stats))
        self.copy_button.setVisible(bool(self.answer_text().strip()))
        self.settled.emit()

    def _status_for(self, stats: TurnStats) -> str:
        if stats.finish_reason == "cancelled":
            return "Stopped" if self._content else "Stopped before any answer"
        if stats.finish_reason == "length":
            return "Stopped at the reply length limit"
        return ""

    # -- coalesced rendering ---------------------------------------------------------------

    def _schedule(self) -> None:
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def _flush(self, final: bool = False) -> None:
        if self._pending_thinking:
            self.thinking.show()
            self.thinking.append("".join(self._pending_thinking))
            self._pending_thinking.clear()
        if not (self._content_dirty or final):
            return
        if self._content:
            self.thinking.end()  # the answer began, so thinking is over
        now = time.perf_counter()
        if not final and now < self._next_render:
            self._flush_timer.start(max(1, int((self._next_render - now) * 1000)))
            return
        self._render_answer(final)

    def _render_answer(self, final: bool) -> None:
        started = time.perf_counter()
        self.answer.show_text("".join(self._content), final=final)
        self._content_dirty = False
        cost = time.perf_counter() - started
        # Space renders by what they cost, so a long answer never hogs the GUI thread.
        self._next_render = started + max(FLUSH_MS / 1000, RENDER_COST_FACTOR * cost)

    def _on_copy_clicked(self) -> None:
        copy_to_clipboard(self.answer_text())
        self.copy_button.flash_copied()


def prewarm() -> None:
    """Build and render each message widget once, off screen, and throw them away.

    PySide creates a class's Python enum types on first use; for the text widgets that is
    tens of milliseconds, which would otherwise land as a stall on the first streamed reply.
    Once per process is enough.
    """
    global _prewarmed
    if _prewarmed:
        return
    _prewarmed = True
    reply = AssistantMessage()
    reply.add_thinking("warm")
    reply.add_content("**warm** `up`\n\n- a\n\n```\ncode\n```\n\n| a |\n|---|\n| b |\n")
    reply.finish(TurnStats())
    widgets: list[QWidget] = [reply, UserMessage("warm"), TurnBanner(TurnFailure("warm", "warm", "retry"))]
    for widget in widgets:
        widget.deleteLater()
