"""The main window: header (model), sidebar slot, conversation, composer, status bar.

The window is the controller's `ChatView`; user gestures become `@asyncSlot`s that await
controller coroutines, so nothing blocks the GUI thread and every widget is touched on it.
The header's model button opens the model picker (`desktop/model_switch.py` wires it);
`set_sidebar()` puts the history sidebar left of a splitter.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QSplitter,
    QStatusBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.composer import ComposerBar
from desktop.controller import ChatController, ReplySink, TurnFailure
from desktop.conversation_view import ConversationView
from desktop.message_view import AssistantMessage, prewarm
from desktop.model_choice import ModelInfo
from desktop.model_switch import ModelSwitcher
from desktop.qt.context_meter import ContextMeter
from desktop.qt_compat import guard_singleton_refcounts
from desktop.style import SPACING, window_stylesheet
from engine.events import TurnStats
from engine.turns.context_policy import ContextPolicy

DEFAULT_SIZE = (1040, 780)
MIN_SIZE = (560, 420)


class HeaderBar(QFrame):
    """Title, the model button (opens the picker), its settings, a loading indicator, New chat.

    While another model loads, the button keeps naming the current one (it still answers)
    and an indeterminate bar with "Loading <name>…" sits beside it.
    """

    MODEL_BUTTON_MAX_WIDTH = 360
    NO_MODEL = "No model"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HeaderBar")
        title = QLabel("<b>Ember</b>", self)
        self.model_button = self._tool_button("ModelButton", "Model", "Choose a model (Ctrl+M)")
        self.model_button.setMaximumWidth(self.MODEL_BUTTON_MAX_WIDTH)
        self.settings_button = self._tool_button("ModelSettingsButton", "Model settings",
                                                 "Settings for the current model")
        self.settings_button.setText("Settings…")
        self.loading_bar = QProgressBar(self)
        self.loading_bar.setObjectName("LoadingBar")
        self.loading_bar.setRange(0, 0)  # indeterminate: llama.cpp reports no load progress
        self.loading_bar.setTextVisible(False)
        self.loading_bar.setFixedSize(72, 6)
        self.loading_label = QLabel(self)
        self.loading_label.setObjectName("Muted")
        self.loading_label.setAccessibleName("Model loading")
        self.new_chat = self._tool_button("NewChatButton", "New conversation", "New conversation (Ctrl+N)")
        self.new_chat.setText("New chat")
        self._label = self.NO_MODEL
        self._lay_out(title)
        self.show_model(self.NO_MODEL)

    def _tool_button(self, name: str, accessible: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName(name)
        button.setAccessibleName(accessible)
        button.setToolTip(tip)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        return button

    def _lay_out(self, title: QLabel) -> None:
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACING, SPACING // 2, SPACING, SPACING // 2)
        layout.setSpacing(SPACING)
        layout.addWidget(title)
        layout.addWidget(self.model_button)
        layout.addWidget(self.settings_button)
        layout.addWidget(self.loading_bar)
        layout.addWidget(self.loading_label)
        layout.addStretch(1)
        layout.addWidget(self.new_chat)

    @property
    def model_label(self) -> str:
        return self._label

    def show_model(self, label: str) -> None:
        """Name the model answering now; ends any loading indication."""
        self._label = label
        metrics = self.model_button.fontMetrics()
        shown = metrics.elidedText(label, Qt.TextElideMode.ElideMiddle, self.MODEL_BUTTON_MAX_WIDTH - 40)
        self.model_button.setText(f"{shown}  ▾")
        self.model_button.setToolTip(f"{label}\nChoose a model (Ctrl+M)")
        self.hide_loading()

    def show_loading(self, label: str) -> None:
        self.loading_label.setText(f"Loading {label}…")
        self.loading_bar.show()
        self.loading_label.show()

    def hide_loading(self) -> None:
        self.loading_bar.hide()
        self.loading_label.hide()

    @property
    def loading(self) -> bool:
        return not self.loading_label.isHidden()


class NoticeBanner(QLabel):
    """A window-level notice (e.g. the model did not load); hidden when there is none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBanner")
        self.setAccessibleName("Notice")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setContentsMargins(12, 8, 12, 8)
        self.hide()

    def show_notice(self, text: str) -> None:
        self.setText(text)
        self.show()


class StatusLine(QStatusBar):
    """Model, device, the last reply's speed and the context used."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = self._add("Model", "No model")
        self.device = self._add("Device", "")
        self.speed = self._add("Reply speed", "")
        self.context = self._add("Context used", "")

    def _add(self, name: str, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setAccessibleName(name)
        label.setContentsMargins(SPACING // 2, 0, SPACING // 2, 0)
        self.addPermanentWidget(label)
        return label

    def show_model(self, info: ModelInfo | None) -> None:
        self.model.setText(info.label if info else "No model")
        self.device.setText(info.device if info else "")
        self.device.setToolTip(info.device_note if info else "")

    def show_stats(self, stats: TurnStats) -> None:
        self.speed.setText(f"{stats.tokens_per_s:.1f} tok/s" if stats.tokens_per_s else "")
        if stats.context_size:
            self.context.setText(f"Context {stats.context_used:,} / {stats.context_size:,}")
        elif stats.context_used:
            self.context.setText(f"Context {stats.context_used:,}")

    def clear_stats(self) -> None:
        self.speed.clear()
        self.context.clear()


class MainWindow(QMainWindow):
    """The chat window.

    Signals:
        closing(): the window was closed; the app shuts the engine down.
        replyStarted(AssistantMessage): a new assistant message began streaming.
    """

    closing = Signal()
    replyStarted = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        guard_singleton_refcounts()  # before the window's signals start draining counts
        super().__init__(parent)
        self.setWindowTitle("Ember")
        self.resize(*DEFAULT_SIZE)
        self.setMinimumSize(*MIN_SIZE)
        self._controller: ChatController | None = None
        self._model_label = "Assistant"
        self.header = HeaderBar(self)
        self.notice = NoticeBanner(self)
        self.conversation = ConversationView(self)
        self.composer = ComposerBar(self)
        self.sidebar = QWidget(self)  # the history sidebar's slot; empty and hidden for now
        self.sidebar.hide()
        self.splitter = self._build_body()
        self.status = StatusLine(self)
        self.setStatusBar(self.status)
        self._install_shortcuts()
        self._apply_theme()
        prewarm()
        self.composer.focus_edit()

    def _build_body(self) -> QSplitter:
        chat = QWidget(self)
        layout = QVBoxLayout(chat)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(self.notice)
        layout.addWidget(self.conversation, 1)
        layout.addWidget(self.composer)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(chat)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)
        return splitter

    def _install_shortcuts(self) -> None:
        QShortcut(QKeySequence.StandardKey.New, self, self._on_new_conversation)
        QShortcut(QKeySequence("Ctrl+L"), self, self.composer.focus_edit)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self._on_stop)

    def set_sidebar(self, widget: QWidget) -> None:
        """Put the history sidebar left of the conversation (replacing the empty slot)."""
        self.splitter.replaceWidget(0, widget)
        self.sidebar.deleteLater()
        self.sidebar = widget
        widget.show()

    # -- wiring ----------------------------------------------------------------------------

    def bind(self, controller: ChatController) -> None:
        self._controller = controller
        self.composer.submitted.connect(self._on_submitted)
        self.composer.stopRequested.connect(self._on_stop)
        self.header.new_chat.clicked.connect(self._on_new_conversation)
        self.conversation.failureAction.connect(self._on_failure_action)
        self.context_meter = ContextMeter(controller, self.composer)
        self.composer.add_tool(self.context_meter)
        self.composer.edit.textChanged.connect(lambda: self.context_meter.draft_changed(self.composer.text()))
        self.models = ModelSwitcher(self, controller)
        if controller.model is not None:
            self.model_ready(controller.model)

    @property
    def controller(self) -> ChatController:
        assert self._controller is not None, "bind() a controller first"
        return self._controller

    @asyncSlot(str)
    async def _on_submitted(self, text: str) -> None:
        sent = await self.controller.send(text)
        if not sent and self.controller.refusal and not self.composer.text().strip():
            self.composer.set_text(text)  # refused before it was stored: the draft comes back
        self.context_meter.recount()

    def _on_stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()

    @asyncSlot()
    async def _on_new_conversation(self) -> None:
        if self._controller is not None:
            await self._controller.new_conversation()
        self.composer.focus_edit()

    @asyncSlot(str)
    async def _on_failure_action(self, action: str) -> None:
        if action == "retry":
            await self.controller.retry()
        elif action == "new_conversation":
            await self.controller.new_conversation()
            self.composer.focus_edit()
        elif action == "drop_older":  # the stop policy's limit: keep chatting under truncate-middle
            self.controller.set_context_policy(ContextPolicy.TRUNCATE_MIDDLE)
            self.conversation.clear_failure(remove=True)
            if self.composer.text().strip():
                self.composer.submit()
            elif self.controller.can_retry:
                await self.controller.retry()

    # -- ChatView --------------------------------------------------------------------------

    def show_user_message(self, text: str) -> None:
        self.conversation.add_user(text)

    def start_reply(self) -> ReplySink:
        reply = self.conversation.start_reply(self._model_label)
        self.replyStarted.emit(reply)
        return reply

    def show_turn_failure(self, failure: TurnFailure) -> None:
        self.conversation.show_failure(failure)

    def clear_turn_failure(self, *, remove: bool) -> None:
        self.conversation.clear_failure(remove=remove)

    def set_busy(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        if not busy and self._controller is not None:
            self.context_meter.recount()

    def show_stats(self, stats: TurnStats) -> None:
        self.status.show_stats(stats)

    def show_context_cut(self, resume_turn: int | None) -> None:
        self.conversation.show_context_cut(resume_turn)
        self.context_meter.recount()

    def clear_conversation(self) -> None:
        self.conversation.clear()
        self.status.clear_stats()

    def model_loading(self, label: str) -> None:
        self.header.show_loading(label)  # the current model keeps its place until this one is ready
        self.status.showMessage(f"Loading {label}…")

    def model_ready(self, info: ModelInfo) -> None:
        self._model_label = info.label
        self.header.show_model(info.label)
        self.status.clearMessage()
        self.status.show_model(info)
        self.notice.hide()
        if self._controller is not None:
            self.context_meter.recount()  # a new model: a new tokenizer and context size

    def model_failed(self, label: str, message: str) -> None:
        self.status.clearMessage()
        self.header.hide_loading()
        self.status.show_model(self._controller.model if self._controller else None)  # the previous one
        self.notice.show_notice(f"Couldn't load the model {label}. {message}")

    # -- window events ---------------------------------------------------------------------

    def last_reply(self) -> AssistantMessage | None:
        replies = [m for m in self.conversation.messages() if isinstance(m, AssistantMessage)]
        return replies[-1] if replies else None

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_theme()  # light/dark follows the system palette
        super().changeEvent(event)

    def _apply_theme(self) -> None:
        sheet = window_stylesheet(self.palette())
        if sheet == self.styleSheet():
            return  # setting a style sheet raises palette events itself: do not loop
        self.setStyleSheet(sheet)
        for reply in self.conversation.findChildren(AssistantMessage):
            reply.answer.refresh_style()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._controller is not None:
            self._controller.stop()  # the reply ends within a token; the app awaits shutdown
        self.closing.emit()
        super().closeEvent(event)
