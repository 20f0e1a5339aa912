"""The main window: header (model), sidebar slot, conversation, composer, status bar.

The window is the controller's `ChatView`; user gestures become `@asyncSlot`s that await
controller coroutines, so nothing blocks the GUI thread and every widget is touched on it.
The header's model button opens the model picker (`desktop/qt/model_switch.py` wires it);
`set_sidebar()` puts the history sidebar left of a splitter.
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QActionGroup, QCloseEvent, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStatusBar,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.core.controller import ChatController, ReplySink
from desktop.core.failures import FailureAction, TurnFailure
from desktop.core.load_errors import load_failure_text
from desktop.core.model_choice import ModelInfo
from desktop.qt.appearance import ThemeManager
from desktop.qt.composer import ComposerBar
from desktop.qt.context_meter import ContextMeter
from desktop.qt.conversation_view import ConversationView
from desktop.qt.focus import tab_focus_only
from desktop.qt.header import MODE_LABELS, HeaderBar, icon_button
from desktop.qt.icons import recolour, set_icon_scale, themed_icon
from desktop.qt.message_view import AssistantMessage, prewarm
from desktop.qt.model_switch import ModelSwitcher
from desktop.qt.shortcuts_sheet import show_shortcuts_sheet
from desktop.qt.style import CONTENT_MAX_WIDTH, SPACING
from desktop.qt.theme import ICON_PX, MODES, SPACE_MD, SPACE_SM
from desktop.qt.window_state import WindowState
from engine.events import TurnStats
from engine.turns.context_policy import ContextPolicy

DEFAULT_SIZE = (1040, 780)
NARROW_WIDTH = 880  # below this the sidebar folds away by itself
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
        self.details = QLabel(self)
        self.details.setObjectName("NoticeDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setAccessibleName("Notice details")
        self.details.hide()
        self.lasting = False
        self.details_button = QPushButton("Details", self)
        self.details_button.setCheckable(True)
        self.details_button.setAccessibleName("Show the details")
        self.details_button.toggled.connect(self.details.setVisible)
        self.choose_button = QPushButton("Choose model…", self)
        self.choose_button.setAccessibleName("Choose another model")
        self.choose_button.clicked.connect(self.chooseModelRequested)
        self.dismiss_button = icon_button(self, "IconButton", "close", "Dismiss notice", "Dismiss")
        self.dismiss_button.clicked.connect(self.hide)
        text = QVBoxLayout()
        text.setSpacing(SPACE_SM)
        text.addWidget(self.label)
        text.addWidget(self.details)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE_MD, SPACE_SM, SPACE_SM, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.choose_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def show_notice(self, text: str, details: str = "", *, offer_models: bool = False, lasting: bool = False) -> None:
        """One plain sentence; `details` (e.g. llama.cpp's own words) one click away.

        A `lasting` notice (history is not being saved) stays when a model loads; others are
        about the model and go once one is ready.
        """
        self.lasting = lasting
        self.label.setText(text)
        self.details.setText(details)
        self.details_button.setChecked(False)
        self.details_button.setVisible(bool(details))
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


DRAFT_TIP = ("Speculative decoding: tokens guessed ahead (from the conversation or a draft model) "
             "and how many the model confirmed; every shown token is still the model's own choice.")


def speed_text(stats: TurnStats) -> str:
    """`41.2 tok/s`, with the speculative drafts when there were any: `· 30/40 drafted accepted`."""
    if not stats.tokens_per_s:
        return ""
    text = f"{stats.tokens_per_s:.1f} tok/s"
    if stats.drafted:
        text += f" · {stats.accepted}/{stats.drafted} drafted accepted"
    return text


def _room_for(label: QLabel, text: str) -> int:
    margins = label.contentsMargins()
    return label.fontMetrics().horizontalAdvance(text) + margins.left() + margins.right() + SPACING // 2


class StatusLine(QStatusBar):
    """Model, device, the last reply's speed and the context used."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._device = ""
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
        self._device = info.device if info else ""
        self.device.setToolTip(info.device_note or self._device if info else "")
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """In a narrow window drop what is said elsewhere, so the rest is never cut off.

        First the model's name (the header's chip shows it), then the device's note (its
        tooltip keeps it: "CPU · this build has no GPU support" becomes "CPU"). Measured from
        the texts, not by trying: showing a label to measure it would re-lay the bar each time.
        """
        room = (self.parentWidget() or self).width()
        short = self._device.split(" · ")[0]
        rest = self._needed(skip=(self.model, self.device))
        with_model = rest + _room_for(self.model, self.model.text()) + _room_for(self.device, self._device)
        full_device = rest + _room_for(self.device, self._device) <= room
        if self.model.isHidden() != (with_model > room):
            self.model.setVisible(with_model <= room)
        text = self._device if full_device else short
        if self.device.text() != text:
            self.device.setText(text)

    def _needed(self, skip: tuple[QWidget, ...]) -> int:
        # Its widgets: these labels, the serve toggle and network indicator added later, the grip.
        parts = self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        shown = [w for w in parts if not w.isHidden() and w not in skip]
        return sum(w.sizeHint().width() + SPACING // 2 for w in shown) + SPACING * 2

    def show_stats(self, stats: TurnStats) -> None:
        """A reply ended: its speed (the context figure is the meter's, `show_context`)."""
        self.speed.setText(speed_text(stats))
        self.speed.setToolTip(DRAFT_TIP if stats.drafted else "")
        self._fit()

    def show_speed(self, tokens_per_s: float) -> None:
        """The live speed while a reply streams (none: cleared)."""
        self.speed.setText(f"{tokens_per_s:.1f} tok/s" if tokens_per_s > 0 else "")
        self.speed.setToolTip("")
        self._fit()

    def show_context(self, text: str, tip: str) -> None:
        """The same figure as the composer's meter: one count for the chat on screen."""
        self.context.setText(f"Context {text}" if text else "")
        self.context.setToolTip(tip)
        self._fit()

    def clear_stats(self) -> None:
        self.speed.clear()


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
        self._sidebar_folded = False  # folded by a narrow window, not by the user
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
        self.header.sidebar_button.toggled.connect(self.set_sidebar_visible)
        self.header.quit_action.triggered.connect(self.close)
        self.header.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.state = WindowState.load()
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
        QShortcut(QKeySequence("Ctrl+B"), self, self.header.sidebar_button.toggle)

    def _install_appearance_menu(self) -> None:
        menu = self.header.appearance_menu
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
        self.header.set_appearance_menu(group, actions)

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
        widget.setVisible(self.header.sidebar_button.isChecked())

    def set_sidebar_visible(self, visible: bool) -> None:
        """Show or hide the sidebar (the header's switch, Ctrl+B); the conversation takes the room."""
        self._sidebar_folded = False  # the user's choice from now on
        if self.header.sidebar_button.isChecked() != visible:
            self.header.sidebar_button.setChecked(visible)  # comes back here through `toggled`
            return
        self.sidebar.setVisible(visible)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # A narrow window gives the conversation the room: the sidebar folds away (and comes
        # back when the window widens again, unless the user chose otherwise meanwhile).
        narrow = self.width() < NARROW_WIDTH
        button = self.header.sidebar_button
        if narrow and button.isChecked() and not self._sidebar_folded:
            self.set_sidebar_visible(False)
            self._sidebar_folded = True
        elif not narrow and self._sidebar_folded:
            self.set_sidebar_visible(True)

    def show_shortcuts(self) -> None:
        show_shortcuts_sheet(self)

    # -- wiring ----------------------------------------------------------------------------

    def bind(self, controller: ChatController) -> None:
        """Build the parts that work on `controller` and connect everything, once."""
        self._controller = controller
        self.models = ModelSwitcher(self, self.header, self.notice.show_notice, controller)
        self.conversation.empty_state.getModelsRequested.connect(self.models.open_get_models)
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
        self.context_meter.shown.connect(self.status.show_context)
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
        if self._controller is None or not self.composer.busy:
            return
        self.composer.set_stopping()  # at once: the reply itself ends within a token
        reply = self.last_reply()
        if reply is not None:
            reply.stopping()
        self._controller.stop()
        self.focus_composer()

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
        reply.speedChanged.connect(self.status.show_speed)
        reply.start_waiting()
        self.status.show_speed(0.0)  # the previous reply's figure would be stale now
        self.replyStarted.emit(reply)
        return reply

    def show_turn_failure(self, failure: TurnFailure) -> None:
        self.conversation.show_failure(failure)

    def clear_turn_failure(self, *, remove: bool) -> None:
        self.conversation.clear_failure(remove=remove)

    def set_busy(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.focus_composer()  # after Send, Stop, Regenerate, Try again: typing goes on in the box
        if not busy and self._controller is not None:
            self.context_meter.recount()

    def focus_composer(self) -> None:
        """Give the message box the focus, unless the user is typing elsewhere or a tool card asks."""
        focused = QApplication.focusWidget()
        if focused is not None and focused.window() is not self:
            return  # a dialog is open
        if focused is not None and _keeps_focus(focused):
            return
        self.composer.focus_edit()

    def show_stats(self, stats: TurnStats) -> None:
        self.status.show_stats(stats)

    def show_context_cut(self, resume_turn: int | None, kept_head: int = 0) -> None:
        self.conversation.show_context_cut(resume_turn, kept_head)
        self.context_meter.set_cut(resume_turn is not None and resume_turn > 0)
        self.context_meter.recount()

    def clear_conversation(self) -> None:
        self.conversation.clear()
        self.status.clear_stats()
        if self._controller is not None:
            self.context_meter.set_cut(False)
            self.context_meter.recount()  # the new chat's count, not the previous one's

    def model_loading(self, label: str) -> None:
        self.header.show_loading(label)  # the current model keeps its place until this one is ready
        self.status.showMessage(f"Loading {label}…")

    def model_ready(self, info: ModelInfo) -> None:
        self._model_label = info.label
        self.header.show_model(info.label)
        self.conversation.empty_state.show_model(info, getattr(self._controller, "choice", None))
        self.status.clearMessage()
        self.status.show_model(info)
        if not self.notice.lasting:
            self.notice.hide()
        if self._controller is not None:
            self.context_meter.recount()  # a new model: a new tokenizer and context size

    def model_failed(self, label: str, message: str) -> None:
        self.status.clearMessage()
        self.header.hide_loading()
        previous = self._controller.model if self._controller else None
        self.status.show_model(previous)  # the previous one
        self.notice.show_notice(*load_failure_text(label, message, previous.label if previous else None),
                                offer_models=True)

    # -- window events ---------------------------------------------------------------------

    def last_reply(self) -> AssistantMessage | None:
        replies = [m for m in self.conversation.messages() if isinstance(m, AssistantMessage)]
        return replies[-1] if replies else None

    def _apply_theme(self) -> None:
        """The theme or text size changed: redraw what the style sheet does not reach."""
        palette = self.theme.palette
        sizes = self.splitter.sizes()
        if self.sidebar.isVisible() and sizes and sizes[0] > 0:
            # Larger text must not squeeze the sidebar: it keeps its width once the layout settles.
            QTimer.singleShot(0, lambda: self.splitter.setSizes(sizes))
        set_icon_scale(self.theme.appearance.text_scale)
        buttons = self.findChildren(QAbstractButton)
        recolour(buttons, palette.muted, palette.accent_text)
        tab_focus_only(self)
        self.notice.recolour(palette.error_text)
        for reply in self.conversation.findChildren(AssistantMessage):
            reply.refresh_style()
        self.conversation.empty_state.refresh_style()
        self.header.refit()
        self.composer.refit()
        align = getattr(self.sidebar, "align_top", None)
        if align is not None:
            align(self.header.sizeHint().height())

    # -- memory ----------------------------------------------------------------------------

    def restore_state(self) -> None:
        """Size, position, the sidebar and its width as they were when the window last closed."""
        self.state.restore(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        history = self._controller.history if self._controller is not None else None
        self.state.save_from(self, history.conversation_id if history is not None else None)
        if self._controller is not None:
            self._controller.stop()  # the reply ends within a token; the app awaits shutdown
        self.closing.emit()
        super().closeEvent(event)


def _keeps_focus(widget: QWidget) -> bool:
    """A text field being typed in, or a tool card waiting for an answer, keeps the focus."""
    if isinstance(widget, QLineEdit) or (isinstance(widget, QPlainTextEdit | QTextEdit) and not widget.isReadOnly()):
        return True
    parent: QWidget | None = widget
    while parent is not None:
        if parent.objectName() == "ToolCallCard" and parent.property("asking"):
            return True
        parent = parent.parentWidget()
    return False
