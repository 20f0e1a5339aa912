"""One widget per message: the user's text, the assistant's reply, a failed turn's banner.

`AssistantMessage` is the controller's `ReplySink`. Deltas only append to buffers; a
single-shot timer flushes them at most about 60 times a second, and the Markdown render is
further spaced out by its own measured cost, so a fast stream never re-renders per token.

A message that is stored in the history gets its id (`set_history`), and with it its
actions: Edit on a question, Regenerate on an answer, and a ‹ n/m › navigator when it has
other versions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.failures import FailureAction, TurnFailure
from desktop.core.model_words import load_progress_words
from desktop.core.receipt_text import receipt_lines, timing_lines
from desktop.qt.answer.bulk_text import BulkTextView, bounded_label_text, needs_bulk_view
from desktop.qt.answer.citations import CitationActions, SourcesRow
from desktop.qt.answer.code_highlight import load_lexer
from desktop.qt.answer.markdown_view import AnswerView, CopyButton, copy_to_clipboard, discard
from desktop.qt.chat.hover_actions import HoverReveal
from desktop.qt.chat.message_edit import InlineEditor
from desktop.qt.chat.thinking_pane import ThinkingPane
from desktop.qt.chat.version_nav import VersionNav
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.focus import focus_the_box
from desktop.qt.look.icons import set_icon, themed_icon
from desktop.qt.look.theme import ICON_PX
from engine.api.values import AnswerFrom, FinishReason, SourceRef, Status, TurnStats, Versions

FLUSH_MS = 16  # about 60 updates a second at most
WAIT_TICK_MS = 400  # the waiting dots' pace
SPEED_MIN_S = 0.5  # live tok/s shows once this much of the reply streamed
SPEED_EVERY_S = 0.5  # and is refreshed this often
RENDER_COST_FACTOR = 4  # the Markdown render gets at most ~1/(1+4) of the GUI thread
USER_BUBBLE_MAX_FRACTION = 0.8
BUBBLE_MAX_CHARS = 1_500  # of a huge message, what its bubble shows (a wrapped label lays out slowly)
BUBBLE_SLACK_PX = 8  # the style sheet's 2 px focus border on each side, and rounding
_prewarmed = False
ACTION_LABELS = {
    FailureAction.RETRY: "Try again",
    FailureAction.NEW_CONVERSATION: "New conversation",
    FailureAction.DROP_OLDER: "Leave older messages out",
}
# How a stored reply that did not complete says so, quietly, in its status line.
STORED_STATUS: dict[str, str] = {
    "stopped": "Stopped",
    "interrupted": "Interrupted",
    "error": "Ended with an error",
    "streaming": "Still being written",
}


def _label(text: str, object_name: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(object_name)
    return label


def _action(text: str, accessible_name: str, tip: str, parent: QWidget, icon: str) -> QToolButton:
    """A quiet icon button under a message (shown once the message is stored)."""
    button = QToolButton(parent)
    button.setObjectName("MessageAction")
    button.setText(text)
    button.setAccessibleName(accessible_name)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
    button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    set_icon(button, icon, current_palette().muted, 16)
    button.hide()
    return button


def _action_row(parent: QWidget, buttons: list[QWidget], *, right: bool = False) -> QWidget:
    """The row that holds a message's hover actions (revealed by `HoverReveal`)."""
    row = QWidget(parent)
    row.setObjectName("MessageActions")
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(2)
    if right:
        layout.addStretch(1)
    for button in buttons:
        layout.addWidget(button)
    return row


class UserMessage(QFrame):
    """The user's message: plain text (never Markdown) in a bubble on the right.

    Signals:
        editSubmitted(int, str): Save & send on an edit of stored message id.
        versionRequested(int): show this version (a sibling message id).
    """

    editSubmitted = Signal(int, str)
    versionRequested = Signal(int)

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("UserMessage")
        self.message_id: int | None = None
        self.editor: InlineEditor | None = None
        self._text = text  # the message itself; the bubble shows it cut for display if it is huge
        shown = bounded_label_text(text, BUBBLE_MAX_CHARS) if needs_bulk_view(text) else text
        self._bubble = QLabel(shown, self)
        self._bubble.setObjectName("UserBubble")
        self._bubble.setTextFormat(Qt.TextFormat.PlainText)
        self._bubble.setWordWrap(True)
        self._bubble.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self._bubble.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # messages are reachable with Tab
        self._bubble.setContentsMargins(14, 9, 14, 9)
        self._bubble.setAccessibleName("Your message")
        self._bubble.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self.nav = VersionNav(self)
        self.nav.switchRequested.connect(self.versionRequested)
        self.edit_button = _action("Edit", "Edit message", "Edit and send again as a new version", self, "edit")
        self.edit_button.clicked.connect(self.start_edit)
        self._build_layout()

    def _build_layout(self) -> None:
        # Edit sits beside the bubble, not under it: a row under every question would add a
        # line of blank space between each question and its answer.
        self._row = QWidget(self)
        row = QHBoxLayout(self._row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        row.addStretch(1)
        actions = _action_row(self, [self.edit_button], right=True)
        row.addWidget(actions, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self._bubble)
        self.reveal = HoverReveal(self, actions, [self.edit_button])
        footer = QHBoxLayout()  # only the ‹ n/m › navigator, so it takes no room without versions
        footer.setContentsMargins(0, 0, 0, 0)
        footer.addStretch(1)
        footer.addWidget(self.nav)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self._row)
        layout.addLayout(footer)

    def text(self) -> str:
        return self._text

    @property
    def bubble(self) -> QLabel:
        """The bubble that shows the text (where the question visibly starts and ends)."""
        return self._bubble

    def set_history(self, message_id: int | None, versions: Versions | None) -> None:
        """The stored message this bubble shows (None: not stored), and its versions."""
        self.message_id = message_id
        self.nav.set_versions(versions)
        editing = self.editor is not None
        self.nav.setVisible(self.nav.has_versions and not editing)
        self.edit_button.setVisible(message_id is not None and not editing)

    def set_actions_enabled(self, enabled: bool) -> None:
        self.edit_button.setEnabled(enabled)
        self.nav.setEnabled(enabled)

    def start_edit(self) -> InlineEditor:
        """Swap the bubble for an editor holding its text."""
        if self.editor is None:
            self.editor = InlineEditor(self.text(), self)
            self.editor.saved.connect(self._on_edit_saved)
            self.editor.cancelled.connect(self.end_edit)
            layout = self.layout()
            assert isinstance(layout, QVBoxLayout)
            layout.insertWidget(1, self.editor)
            self._row.hide()
            self.edit_button.hide()
            self.nav.hide()
        self.editor.focus()
        return self.editor

    def end_edit(self) -> None:
        editor, self.editor = self.editor, None
        if editor is not None:
            discard(editor)
        self._row.show()
        self.nav.setVisible(self.nav.has_versions)
        self.edit_button.setVisible(self.message_id is not None)

    def _on_edit_saved(self, text: str) -> None:
        message_id = self.message_id
        self.end_edit()
        if message_id is not None:
            self.editSubmitted.emit(message_id, text)

    def resizeEvent(self, event: QResizeEvent) -> None:
        # A bubble never spans the whole column, so who said what stays obvious; below that
        # it is as wide as its longest line (QLabel alone wraps short texts too eagerly).
        widest = int(self.width() * USER_BUBBLE_MAX_FRACTION)
        margins = self._bubble.contentsMargins()
        longest = max(self._bubble.fontMetrics().horizontalAdvance(line) for line in self._bubble.text().split("\n"))
        self._bubble.setMaximumWidth(widest)
        self._bubble.setMinimumWidth(min(widest, longest + margins.left() + margins.right() + BUBBLE_SLACK_PX))
        super().resizeEvent(event)


class TurnBanner(QFrame):
    """A failed turn, shown under the user's message, with an action when one helps.

    Signals:
        actionRequested(str): the banner's `FailureAction`.
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
        self.icon = QLabel(self)
        self.icon.setPixmap(themed_icon("warning", current_palette().warning_text).pixmap(ICON_PX, ICON_PX))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 10, 10, 10)
        layout.setSpacing(10)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.message, 1)
        self.button: QPushButton | None = None
        if failure.action:
            self.button = QPushButton(ACTION_LABELS[failure.action], self)
            self.button.setProperty("kind", "primary")
            set_icon(
                self.button,
                "regenerate" if failure.action is FailureAction.RETRY else "new_chat",
                current_palette().accent_text,
                16,
            )
            self.button.setProperty("iconOnAccent", True)
            self.button.setAccessibleName(ACTION_LABELS[failure.action])
            self.button.clicked.connect(lambda: self.actionRequested.emit(failure.action))
            layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignVCenter)

    def retire(self) -> None:
        """A newer turn exists: this banner's action no longer applies."""
        if self.button is not None:
            self.button.setEnabled(False)


class WaitingIndicator(QLabel):
    """From send to the first word: animated dots, then "Reading 1,600 tokens… 45 %" for a long prompt."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("WaitingIndicator")
        self.setAccessibleName("Waiting for the reply")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._step = 0
        self._progress = ""
        self._with_dots = False  # the text and the dots (waiting for the model), else the text alone
        self._timer = QTimer(self)
        self._timer.setInterval(WAIT_TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._tick()

    def start(self) -> None:
        self.show()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self.hide()

    def set_text_now(self, text: str, *, with_dots: bool = False) -> None:
        self._progress = text
        self._with_dots = with_dots
        self._tick()

    def show_progress(self, done: int, total: int) -> None:
        percent = 100 * done // total if total > 0 else 0
        self.set_text_now(f"Reading {total:,} tokens… {percent} %")

    def _tick(self) -> None:
        self._step = (self._step + 1) % 4
        dots = "●" * max(1, self._step) + "○" * (3 - max(1, self._step))
        if self._with_dots:
            self.setText(f"{self._progress}  {dots}")
            self.setToolTip("The message is sent as soon as the model is ready; Stop cancels it")
            return
        self.setText(self._progress or dots)
        self.setToolTip("The model is reading the conversation" if self._progress else "Waiting for the first words")


class AssistantMessage(QFrame):
    """One assistant reply: thinking pane, rendered answer, status line, Copy and Regenerate.

    Signals:
        settled(): the reply ended and its final text is on screen.
        regenerateRequested(int): answer again (stored message id of this answer).
        versionRequested(int): show this version (a sibling message id).
    """

    settled = Signal()
    regenerateRequested = Signal(int)
    versionRequested = Signal(int)
    speedChanged = Signal(float)  # live tokens a second while the reply streams
    tokensChanged = Signal(int)  # pieces streamed so far (about one token each), as often as the speed

    def __init__(self, role_label: str = "Assistant", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AssistantMessage")
        self._content: list[str] = []
        self._pending_thinking: list[str] = []
        self._content_dirty = False
        self._next_render = 0.0
        self._finished = False
        self._note = ""
        self._bulk: BulkTextView | None = None  # replaces `answer` for a huge or unbroken reply
        self.message_id: int | None = None
        self._question_id: int | None = None  # a reply stopped before any answer: its question
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.role = _label(role_label, "RoleLabel", self)
        self.role.setAccessibleName("Model")
        self.thinking = ThinkingPane(self)
        self.thinking.hide()
        self.waiting = WaitingIndicator(self)
        self.waiting.hide()
        self.tools = QWidget(self)  # the turn's tool calls, inline (`add_tool_widget`)
        self.tools.setObjectName("ReplyTools")
        tools_layout = QVBoxLayout(self.tools)
        tools_layout.setContentsMargins(0, 0, 0, 0)
        tools_layout.setSpacing(6)
        self.tools.hide()
        self._deltas = 0
        self._stop_asked = False
        self._first_delta = 0.0
        self._speed_shown = 0.0
        # The text written before the turn's first tool call, shown above its card (`add_tool_widget`).
        self.lead = AnswerView(self)
        self.lead.setObjectName("ReplyLead")
        self.lead.hide()
        self._lead_chars = 0  # how much of the content `lead` shows; `answer` shows the rest
        self.answer = AnswerView(self)
        self.sources_row = SourcesRow(self.answer.citations, self)
        self.status = _label("", "Muted", self)
        self.status.setAccessibleName("Reply status")
        self.copy_button = CopyButton("Copy", "Copy answer", self, icon_only=True)
        self.copy_button.setObjectName("MessageAction")  # styled like Regenerate beside it
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.copy_button.hide()
        self.regenerate_button = _action(
            "Regenerate", "Regenerate answer", "Answer again; this answer stays as another version", self, "regenerate"
        )
        self.regenerate_button.clicked.connect(self._on_regenerate_clicked)
        self.details_button = _action(
            "Details",
            "Reply details",
            "How this reply was made: the model file and its SHA-256, sampling, seed",
            self,
            "details",
        )
        self.details_button.clicked.connect(self.show_details)
        self._receipt: Mapping[str, Any] | None = None
        self._timing: list[str] = []  # "First token after 420 ms", "Speed: 18.3 tokens/s"
        self.nav = VersionNav(self)
        self.nav.switchRequested.connect(self.versionRequested)
        self._build_layout()

    def _build_layout(self) -> None:
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(6)
        buttons = [self.copy_button, self.regenerate_button, self.details_button]
        actions = _action_row(self, buttons)
        self.reveal = HoverReveal(self, actions, buttons)
        footer.addWidget(actions)
        footer.addWidget(self.nav)
        footer.addWidget(self.status)
        footer.addStretch(1)
        self._body = QVBoxLayout()
        self._body.setSpacing(6)
        for part in (self.role, self.waiting, self.thinking, self.lead, self.tools, self.answer, self.sources_row):
            self._body.addWidget(part)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)  # the actions' own padding already sets them off from the text
        layout.addLayout(self._body)
        layout.addLayout(footer)

    # -- what tests and Copy read ----------------------------------------------------------

    def answer_text(self) -> str:
        """The visible answer's Markdown source: content only, never thinking or scaffolding."""
        return "".join(self._content)

    @property
    def finished(self) -> bool:
        return self._finished

    # -- history ---------------------------------------------------------------------------

    def set_history(self, message_id: int | None, versions: Versions | None) -> None:
        """The stored message this reply shows (None: not stored), and its versions."""
        self.message_id = message_id
        self._question_id = None
        self.nav.set_versions(versions)
        self.regenerate_button.setVisible(message_id is not None)

    def set_receipt(self, receipt: Mapping[str, Any] | None, stats: Mapping[str, Any] | None = None) -> None:
        """What reproduces this reply (its stats' receipt) and how fast it came; Details shows them."""
        self._receipt = receipt
        self._timing = timing_lines(stats)
        self.details_button.setVisible(bool(receipt))

    def show_details(self) -> QMessageBox:
        box = QMessageBox(
            QMessageBox.Icon.NoIcon,
            "Reply details",
            "\n".join(self._timing + receipt_lines(self._receipt)),
            QMessageBox.StandardButton.Close,
            self.window(),
        )
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        window = self.window()
        # Closed (Esc, Close): the keys go on in the message box, not on the ⓘ that opened it.
        box.finished.connect(lambda _result: QTimer.singleShot(0, lambda: focus_the_box(window)))
        box.open()
        return box

    def set_actions_enabled(self, enabled: bool) -> None:
        self.regenerate_button.setEnabled(enabled)
        self.nav.setEnabled(enabled)

    def show_stored(self, content: str, thinking: str, status: Status) -> None:
        """Show a reply read back from history: final text, thinking collapsed, status said quietly."""
        if thinking:
            self.thinking.show()
            self.thinking.show_stored(thinking)
        self._content = [content]
        if not self._show_bulk(content):
            self.answer.show_text(content, final=True)
        self._finished = True
        self.status.setText(STORED_STATUS.get(status, ""))
        self.copy_button.setVisible(bool(content.strip()))

    def set_sources(self, sources: tuple[SourceRef, ...], origin: AnswerFrom | None = None) -> None:
        """The passages this reply was given: `[n]` in the answer links to them; a row lists them,
        saying what the answer came from once it is whole (`origin`)."""
        actions = CitationActions(sources)
        self.lead.set_sources(actions)
        self.answer.set_sources(actions)
        self.sources_row.citations = actions
        self.sources_row.show_sources(sources, origin)

    def start_waiting(self) -> None:
        """Sent: show the waiting dots until the first word (or thought, or tool call) arrives."""
        if not self._finished:
            self.waiting.start()

    def waiting_for_model(self, label: str, percent: int | None = None) -> None:
        """Sent while the model loads: the reply waits for it (the controller's `LoadWaitSink`)."""
        if self._finished:
            return
        self.waiting.start()
        self.waiting.set_text_now(f"Waiting for the model to load…{load_progress_words(percent)}", with_dots=True)
        self.waiting.setAccessibleDescription(f"{label} is loading")

    def model_arrived(self) -> None:
        """The model loaded: back to the plain dots until the first word."""
        if not self._finished:
            self.waiting.set_text_now("")

    def progress(self, done: int, total: int) -> None:
        """The prompt is being read (`PromptProgress`)."""
        if not self._content and not self._finished:
            self.waiting.start()
            self.waiting.show_progress(done, total)

    def stopping(self) -> None:
        """A stop was asked for; the reply ends within a token."""
        if not self._finished:
            self._stop_asked = True
            self.status.setText("Stopping…")

    def add_tool_widget(self, widget: QWidget) -> None:
        """A tool call's card (or a note about the tools), in the order they came, below the text before it."""
        self.add_stored_tool_widget(widget, sum(map(len, self._content)))

    def add_stored_tool_widget(self, widget: QWidget, at: int | None) -> None:
        """A card whose call came after `at` characters of the answer (None: not known, an older reply)."""
        self.waiting.stop()
        layout = self.tools.layout()
        assert layout is not None
        if layout.count() == 0 and at:
            self._split_lead(at)
        layout.addWidget(widget)
        self.tools.show()

    def _split_lead(self, at: int) -> None:
        """Show the first `at` characters above the tool cards and the rest below them."""
        text = "".join(self._content)
        if self._bulk is not None or not text[:at].strip():
            return
        self._lead_chars = at
        self.lead.show_text(text[:at], final=True)
        self.lead.show()
        self._render_answer(final=self._finished)

    def tool_cards(self) -> list[QWidget]:
        layout = self.tools.layout()
        assert layout is not None
        items = (layout.itemAt(i) for i in range(layout.count()))
        return [w for item in items if item is not None and (w := item.widget()) is not None]

    def retrying(self, attempt: int, error: str) -> None:
        """A structured reply was refused and the model is asked again: say so, quietly."""
        self.status.setText(f"Retrying (attempt {attempt})…")
        self.status.setToolTip(f"The previous reply was not valid: {error}")

    def note(self, text: str) -> None:
        """Something worth knowing about this reply (e.g. its schema is not enforced while decoding)."""
        self._note = text
        self.status.setText(text)
        self.status.setToolTip(text)

    def _on_regenerate_clicked(self) -> None:
        target = self.message_id if self.message_id is not None else self._question_id
        if target is not None:
            self.regenerateRequested.emit(target)

    def offer_retry(self, question_id: int | None) -> None:
        """Stopped before any answer (nothing stored): Regenerate answers question `question_id` again."""
        self._question_id = question_id
        if self.message_id is None:
            self.regenerate_button.setVisible(question_id is not None)

    # -- ReplySink -------------------------------------------------------------------------

    def add_thinking(self, text: str) -> None:
        self._pending_thinking.append(text)
        self._count_delta()
        self._schedule()

    def add_content(self, text: str) -> None:
        self._content.append(text)
        self._content_dirty = True
        self._count_delta()
        self._schedule()

    def _count_delta(self) -> None:
        # The engine streams token by token, so deltas a second is the live tok/s (near enough).
        now = time.perf_counter()
        if self._deltas == 0:
            self._first_delta = now
            self.waiting.stop()
        self._deltas += 1
        elapsed = now - self._first_delta
        if elapsed >= SPEED_MIN_S and now - self._speed_shown >= SPEED_EVERY_S:
            self._speed_shown = now
            self.speedChanged.emit((self._deltas - 1) / elapsed)
            self.tokensChanged.emit(self._deltas)

    def restart(self, reason: str) -> None:
        """A recovery request began: what streamed so far is void."""
        self._flush_timer.stop()
        self._content.clear()
        self._pending_thinking.clear()
        self._content_dirty = False
        self.thinking.reset()
        self.thinking.hide()
        self._lead_chars = 0
        self.lead.reset()
        self.lead.hide()
        self.answer.reset()
        self._drop_bulk()
        self.status.setText("Retrying…")

    def finish(self, stats: TurnStats) -> None:
        self.waiting.stop()
        self._flush_timer.stop()
        self._flush(final=True)
        self.thinking.end()
        self._finished = True
        self.status.setText(self._status_for(stats) or self._note)
        self.status.setToolTip(self._note)
        self.set_receipt(stats.receipt, stats.to_dict())
        self.copy_button.setVisible(bool(self.answer_text().strip()))
        self.settled.emit()

    def _status_for(self, stats: TurnStats) -> str:
        # A stop can end a turn in other ways too (a tool call it denied): the user asked, so say it.
        if stats.finish_reason == FinishReason.CANCELLED or self._stop_asked:
            return "Stopped" if self._content else "Stopped before any answer"
        if stats.finish_reason == FinishReason.LENGTH:
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
        text = "".join(self._content)[self._lead_chars :]
        if not self._show_bulk(text):
            self.answer.show_text(text, final=final)
        self._content_dirty = False
        cost = time.perf_counter() - started
        # Space renders by what they cost, so a long answer never hogs the GUI thread.
        self._next_render = started + max(FLUSH_MS / 1000, RENDER_COST_FACTOR * cost)

    def on_screen(self) -> bool:
        """Whether all the answer received so far is on screen (a bulk answer shows in slices)."""
        return self._bulk is None or self._bulk.caught_up

    def _show_bulk(self, text: str) -> bool:
        """Show `text` as bulk plain text if it is too big for Markdown; whether it was."""
        if self._bulk is None:
            if not needs_bulk_view(text):
                return False
            self._bulk = BulkTextView(self)
            self.answer.reset()
            self.answer.hide()
            self._body.insertWidget(self._body.indexOf(self.answer) + 1, self._bulk)
        self._bulk.set_text(text)
        return True

    def _drop_bulk(self) -> None:
        if self._bulk is not None:
            discard(self._bulk)
            self._bulk = None
            self.answer.show()

    def _on_copy_clicked(self) -> None:
        copy_to_clipboard(self.answer_text())
        self.copy_button.flash_copied()

    def refresh_style(self) -> None:
        """The theme or text size changed: re-render what draws its own colours."""
        self.lead.refresh_style()
        self.answer.refresh_style()
        self.thinking.refresh_style()


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
    load_lexer("python")  # the most common fence language: its lexer loads off the GUI thread
    reply = AssistantMessage()
    reply.add_thinking("warm")
    reply.add_content("**warm** `up`\n\n- a\n\n```\ncode\n```\n\n| a |\n|---|\n| b |\n")
    reply.finish(TurnStats())
    widgets: list[QWidget] = [reply, UserMessage("warm"), TurnBanner(TurnFailure("warm", "warm", FailureAction.RETRY))]
    for widget in widgets:
        widget.deleteLater()
