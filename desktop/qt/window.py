"""The main window: header (model), sidebar slot, conversation, composer, status bar.

The window is the controller's `ChatView`; user gestures become `@asyncSlot`s that await
controller coroutines, so nothing blocks the GUI thread and every widget is touched on it.
The header's model button opens the model picker (`desktop/qt/model_switch.py` wires it);
`set_sidebar()` puts the history sidebar left of a splitter.
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QActionGroup, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractButton,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QSplitter,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.core.controller import ChatController, ReplySink
from desktop.core.failures import FailureAction, TurnFailure
from desktop.core.model_choice import ModelInfo
from desktop.qt.appearance import ThemeManager
from desktop.qt.composer import ComposerBar
from desktop.qt.context_meter import ContextMeter
from desktop.qt.conversation_view import ConversationView
from desktop.qt.header import MODE_LABELS, HeaderBar, icon_button
from desktop.qt.icons import recolour, themed_icon
from desktop.qt.message_view import AssistantMessage, prewarm
from desktop.qt.model_switch import ModelSwitcher
from desktop.qt.style import CONTENT_MAX_WIDTH, SPACING
from desktop.qt.theme import ICON_PX, MODES, SPACE_MD, SPACE_SM
from engine.events import TurnStats
from engine.turns.context_policy import ContextPolicy

DEFAULT_SIZE = (1040, 780)
MIN_SIZE = (560, 420)


class NoticeBanner(QFrame):
    """A window-level notice (e.g. the model did not load), with Choose model and Dismiss; hidden when none.

    Signals:
        chooseModelRequested(): the notice's "Choose model" button was pressed.
    """

    chooseModelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBanner")
        self.setAccessibleName("Notice")
        self.icon = QLabel(self)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAccessibleName("Notice text")
        self.choose_button = QPushButton("Choose model…", self)
        self.choose_button.setAccessibleName("Choose another model")
        self.choose_button.clicked.connect(self.chooseModelRequested)
        self.dismiss_button = icon_button(self, "IconButton", "close", "Dismiss notice", "Dismiss")
        self.dismiss_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE_MD, SPACE_SM, SPACE_SM, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.choose_button, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def show_notice(self, text: str, *, offer_models: bool = False) -> None:
        self.label.setText(text)
        self.choose_button.setVisible(offer_models)
        self.show()

    def recolour(self, colour: str) -> None:
        self.icon.setPixmap(themed_icon("error", colour).pixmap(ICON_PX, ICON_PX))


def _centred(widget: QWidget, parent: QWidget) -> QWidget:
    """`widget` in the conversation's readable column width, centred in a row of the surface colour."""
    row = QWidget(parent)
    row.setObjectName("ComposerRow")
    layout = QHBoxLayout(row)
    layout.setContentsMargins(SPACE_MD, 0, SPACE_MD, SPACE_SM)
    layout.addWidget(widget)
    widget.setMaximumWidth(CONTENT_MAX_WIDTH)
    return row


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
        self.theme = ThemeManager.for_app()
        self.theme.changed.connect(self._apply_theme)
        self._install_appearance_menu()
        self._install_shortcuts()
        self.conversation.promptChosen.connect(self._on_prompt_chosen)
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
        layout.addWidget(_centred(self.composer, chat))
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(chat)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        splitter.setHandleWidth(1)
        self.setCentralWidget(splitter)
        return splitter

    def _install_shortcuts(self) -> None:
        QShortcut(QKeySequence.StandardKey.New, self, self._on_new_conversation)
        QShortcut(QKeySequence("Ctrl+L"), self, self.composer.focus_edit)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self._on_stop)
        # Ctrl+= and Ctrl++ both zoom in: "+" needs Shift on most layouts.
        for keys in ("Ctrl+=", "Ctrl++"):
            QShortcut(QKeySequence(keys), self, lambda: self.theme.zoom(+1))
        QShortcut(QKeySequence("Ctrl+-"), self, lambda: self.theme.zoom(-1))
        QShortcut(QKeySequence("Ctrl+0"), self, self.theme.reset_zoom)
        QShortcut(QKeySequence("Ctrl+Shift+D"), self, self.theme.toggle_dark)

    def _install_appearance_menu(self) -> None:
        menu = QMenu(self.header.appearance_button)
        group = QActionGroup(menu)
        actions = {}
        for mode in MODES:
            action = menu.addAction(MODE_LABELS[mode])
            action.setCheckable(True)
            action.setChecked(mode == self.theme.appearance.mode)
            group.addAction(action)
            action.triggered.connect(partial(self._on_mode_chosen, mode))
            actions[mode] = action
        menu.addSeparator()
        menu.addAction("Larger text\tCtrl+=", lambda: self.theme.zoom(+1))
        menu.addAction("Smaller text\tCtrl+-", lambda: self.theme.zoom(-1))
        menu.addAction("Default text size\tCtrl+0", self.theme.reset_zoom)
        self.header.set_appearance_menu(menu, group, actions)

    def _on_mode_chosen(self, mode: str, _checked: bool = False) -> None:
        if mode in MODES:
            self.theme.set_mode(mode)  # type: ignore[arg-type]

    def _on_prompt_chosen(self, text: str) -> None:
        self.composer.set_text(text)
        self.composer.focus_edit()
        cursor = self.composer.edit.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.composer.edit.setTextCursor(cursor)

    def set_sidebar(self, widget: QWidget) -> None:
        """Put the history sidebar left of the conversation (replacing the empty slot)."""
        self.splitter.replaceWidget(0, widget)
        self.sidebar.deleteLater()
        self.sidebar = widget
        widget.show()

    # -- wiring ----------------------------------------------------------------------------

    def bind(self, controller: ChatController) -> None:
        """Build the parts that work on `controller` and connect everything, once."""
        self._controller = controller
        self.models = ModelSwitcher(self, self.header, self.notice.show_notice, controller)
        self.context_meter = ContextMeter(controller, self.composer)
        self.composer.add_tool(self.context_meter)
        self._connect_signals()
        if controller.model is not None:
            self.model_ready(controller.model)

    def _connect_signals(self) -> None:
        """Every connection between the window's parts, in one place."""
        self.composer.submitted.connect(self._on_submitted)
        self.composer.stopRequested.connect(self._on_stop)
        self.composer.edit.textChanged.connect(lambda: self.context_meter.draft_changed(self.composer.text()))
        self.header.new_chat.clicked.connect(self._on_new_conversation)
        self.conversation.failureAction.connect(self._on_failure_action)
        self.notice.chooseModelRequested.connect(self.models.open_picker)

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
        if action == FailureAction.RETRY:
            await self.controller.retry()
        elif action == FailureAction.NEW_CONVERSATION:
            await self.controller.new_conversation()
            self.composer.focus_edit()
        elif action == FailureAction.DROP_OLDER:  # the stop policy's limit: keep chatting under truncate-middle
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
        previous = self.last_reply()
        if previous is not None:
            previous.reveal.pin(False)
        reply = self.conversation.start_reply(self._model_label)
        reply.reveal.pin(True)  # the newest answer's Copy and Regenerate show without hovering
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
        self.conversation.empty_state.show_model(info, getattr(self._controller, "choice", None))
        self.status.clearMessage()
        self.status.show_model(info)
        self.notice.hide()
        if self._controller is not None:
            self.context_meter.recount()  # a new model: a new tokenizer and context size

    def model_failed(self, label: str, message: str) -> None:
        self.status.clearMessage()
        self.header.hide_loading()
        self.status.show_model(self._controller.model if self._controller else None)  # the previous one
        self.notice.show_notice(f"Couldn't load the model {label}. {message}", offer_models=True)

    # -- window events ---------------------------------------------------------------------

    def last_reply(self) -> AssistantMessage | None:
        replies = [m for m in self.conversation.messages() if isinstance(m, AssistantMessage)]
        return replies[-1] if replies else None

    def _apply_theme(self) -> None:
        """The theme or text size changed: redraw what the style sheet does not reach."""
        palette = self.theme.palette
        buttons = self.findChildren(QAbstractButton)
        recolour(buttons, palette.muted, palette.accent_text)
        self.notice.recolour(palette.error_text)
        for reply in self.conversation.findChildren(AssistantMessage):
            reply.refresh_style()
        self.conversation.empty_state.refresh_style()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._controller is not None:
            self._controller.stop()  # the reply ends within a token; the app awaits shutdown
        self.closing.emit()
        super().closeEvent(event)
