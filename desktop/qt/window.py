"""The main window: header (model), history sidebar, conversation, composer, status bar.

The window builds its parts and the controller they work with, then wires them in one
`_connect_signals`, as qutebrowser's main window does. It is the controller's `ChatView`;
user gestures become `@asyncSlot`s that await controller coroutines, so nothing blocks the
GUI thread and every widget is touched on it. The header's model button opens the model
picker (`desktop/qt/models/model_switch.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QActionGroup, QCloseEvent, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QHBoxLayout,
    QMainWindow,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.core.chat_views import ReplySink
from desktop.core.controller import ChatController
from desktop.core.conversation_docs import ConversationDocs
from desktop.core.failures import FailureAction, TurnFailure
from desktop.core.history_session import HistorySession
from desktop.core.model_choice import ModelInfo
from desktop.core.model_words import load_progress_words
from desktop.core.tool_turns import ToolTurns, default_tools
from desktop.qt.chat.attachment_chips import Attachments
from desktop.qt.chat.composer import ComposerBar
from desktop.qt.chat.context_meter import ContextMeter
from desktop.qt.chat.conversation_view import ConversationView
from desktop.qt.chat.documents_ui import DocumentsButton
from desktop.qt.chat.format_picker import ReplyFormatButton
from desktop.qt.chat.jump_latest import JumpToLatest
from desktop.qt.chat.message_view import AssistantMessage, prewarm
from desktop.qt.chat.tool_card import ToolCardArea
from desktop.qt.chat.tool_switches import ToolSwitches, load_mcp
from desktop.qt.frame.header import MODE_LABELS, HeaderBar
from desktop.qt.frame.keyboard import copy_last_reply, focus_search, regenerate_last, step
from desktop.qt.frame.network_indicator import NetworkIndicator
from desktop.qt.frame.notice_banner import NoticeBanner
from desktop.qt.frame.serve_toggle import ServeToggle
from desktop.qt.frame.shortcuts_sheet import show_shortcuts_sheet
from desktop.qt.frame.status_line import StatusLine
from desktop.qt.frame.window_state import WindowState
from desktop.qt.history.history_ui import HistoryParts, HistoryPresenter, dress_sidebar, place_reply_format
from desktop.qt.history.sidebar import DEFAULT_WIDTH as SIDEBAR_WIDTH
from desktop.qt.history.sidebar import HistorySidebar
from desktop.qt.history.sidebar_overlay import SidebarOverlay
from desktop.qt.look.appearance import ThemeManager
from desktop.qt.look.focus import TypingGoesToTheBox, tab_focus_only, typing_here
from desktop.qt.look.icons import recolour, set_icon_scale
from desktop.qt.look.style import CONTENT_MAX_WIDTH
from desktop.qt.look.theme import MODES, SPACE_MD, SPACE_SM
from desktop.qt.models.model_switch import ModelSwitcher
from engine.api import network as network_guard
from engine.api.errors import LoadFailure
from engine.api.network import Guard
from engine.api.session import ChatSession, Engine
from engine.api.tools import McpServers, ToolSet
from engine.api.values import ContextPolicy, TurnStats

DEFAULT_SIZE = (1040, 780)
NARROW_WIDTH = 880  # below this the sidebar folds away by itself
MIN_SIZE = (560, 420)


@dataclass(frozen=True, slots=True)
class WindowOptions:
    """What the window is built with besides its engine and session (the tests pass their own)."""

    history_notice: str = ""  # history could not be opened: said once, at the top of the window
    make_tools: Callable[[Sequence[str]], ToolSet] = default_tools
    mcp: Callable[[], McpServers | None] = load_mcp  # the configured MCP servers
    documents_index: Path | None = None  # None: the default index
    guard: Guard | None = field(default_factory=network_guard.active)  # the process's, for the indicator


def _centred(widget: QWidget, parent: QWidget) -> QWidget:
    """`widget` in the conversation's readable column width, centred in a row of the surface colour."""
    row = QWidget(parent)
    row.setObjectName("ComposerRow")
    layout = QHBoxLayout(row)
    layout.setContentsMargins(SPACE_MD, 0, SPACE_MD, SPACE_SM)
    layout.addWidget(widget)
    widget.setMaximumWidth(CONTENT_MAX_WIDTH)
    return row


class MainWindow(QMainWindow):
    """The chat window.

    Signals:
        closing(): the window was closed; the app shuts the engine down.
        replyStarted(AssistantMessage): a new assistant message began streaming.
    """

    closing = Signal()
    replyStarted = Signal(object)

    def __init__(
        self, engine: Engine, session: ChatSession, options: WindowOptions | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        options = options or WindowOptions()
        self._sidebar_folded = False  # folded by a narrow window, not by the user
        self.setWindowTitle("Ember")
        self.resize(*DEFAULT_SIZE)
        self.setMinimumSize(*MIN_SIZE)
        self._model_label = "Assistant"
        self._model_sees = True  # until a model says otherwise: no warning on a guess
        self._build_parts(session, options)
        self.controller = ChatController(
            engine,
            self,
            session=session,
            history_view=self.history_view,
            tool_turns=self.tools,
            documents=self.documents,
        )
        self._build_controls(options)
        self.theme = ThemeManager.for_app()
        self._install_appearance_menu()
        self._install_shortcuts()
        self._connect_signals()
        self.state = WindowState.load()
        self._apply_theme()
        prewarm()
        if self.controller.models.model is not None:
            self.model_ready(self.controller.models.model)
        if options.history_notice:  # once, in one line, at the top: what is wrong, where, and what happens now
            first, _, rest = options.history_notice.partition("\n")
            self.notice.show_notice(first, rest.strip(), lasting=True)
        self.typing = TypingGoesToTheBox(self)  # keys typed where nothing is typed land in the box
        self.composer.focus_edit()

    def _build_parts(self, session: ChatSession, options: WindowOptions) -> None:
        """The widgets, and the parts the controller is built with (history view, tools, documents)."""
        self.header = HeaderBar(self)
        self.notice = NoticeBanner(self)
        self.conversation = ConversationView(self)
        self.composer = ComposerBar(self)
        history = HistorySession(session) if session.saved else None
        self.sidebar = self._build_sidebar(history)
        self.tool_cards = ToolCardArea(self.last_reply, self, self._reveal)  # the fallback strip, above the composer
        self.splitter = self._build_body()
        composer_row = self.composer.parentWidget()
        assert composer_row is not None
        self.sidebar_overlay = SidebarOverlay(self, self.splitter, self.header, composer_row)  # a drawer when narrow
        self.status = StatusLine(self)
        self.setStatusBar(self.status)
        self.format_button = ReplyFormatButton(self.composer)
        sidebar = self.sidebar if isinstance(self.sidebar, HistorySidebar) else None
        parts = HistoryParts(self.conversation, self.header, self.status, sidebar, self.format_button)
        self.history_view = HistoryPresenter(parts, history, lambda: self._model_label, self)
        self.documents = ConversationDocs(options.documents_index)
        self.tools = ToolTurns(self.tool_cards, options.make_tools, session=session, mcp=options.mcp())

    def _build_controls(self, options: WindowOptions) -> None:
        """The parts that work on the controller: model switching, the meter, the composer's and status bar's tools."""
        self.models = ModelSwitcher(self, self.header, self.notice.show_notice, self.controller)
        self.context_meter = ContextMeter(self.controller, self.composer)
        self.context_meter.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a figure, no Tab stop (its menu is in Settings)
        self.composer.add_tool(self.context_meter)
        self.jump_latest = JumpToLatest(self.conversation, lambda: self.composer.busy)
        # The button goes away once clicked: the keys go on in the box, not nowhere.
        self.jump_latest.clicked.connect(lambda: QTimer.singleShot(0, self.focus_composer))
        place_reply_format(self.composer, self.format_button)  # a conversation setting, in the options menu
        switches = ToolSwitches(self.tools, self.composer, self)
        self.tool_toggle, self.tool_grant, self.tool_allowed, self.tool_mcp = (
            switches.toggle,
            switches.grant,
            switches.allowed,
            switches.mcp,
        )
        self.serve = ServeToggle(self.controller, self.status)
        self.status.addPermanentWidget(self.serve)
        self.documents_button = DocumentsButton(self.documents, self.composer, options.documents_index)
        self.composer.add_tool(self.documents_button)
        self.attachments = Attachments(self, self.composer, self.controller.images, self.documents_button)
        self.attachments.show_tools(self.tool_toggle)
        self.attachments.model_sees = lambda: self._model_sees
        self.documents.on_change = self._documents_changed
        self.network = NetworkIndicator(options.guard, self.status) if options.guard is not None else None
        if self.network is not None:
            self.status.addPermanentWidget(self.network)

    def _documents_changed(self) -> None:
        """Files were sent, a conversation with its own documents opened: the paperclip and chips follow."""
        self.documents_button.refresh()
        self.attachments.refresh()

    def _build_sidebar(self, history: HistorySession | None) -> QWidget:
        if history is None:
            empty = QWidget(self)  # no history this session: an empty slot, hidden
            empty.hide()
            return empty
        sidebar = HistorySidebar(history)
        dress_sidebar(sidebar)
        return sidebar

    def _build_body(self) -> QSplitter:
        chat = QWidget(self)
        layout = QVBoxLayout(chat)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(self.notice)
        layout.addWidget(self.conversation, 1)
        layout.addWidget(self.tool_cards)
        layout.addWidget(_centred(self.composer, chat))
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(chat)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        splitter.setHandleWidth(1)
        self.setCentralWidget(splitter)
        if isinstance(self.sidebar, HistorySidebar):
            self.sidebar.setVisible(self.header.sidebar_button.isChecked())
            self.sidebar.align_top(self.header.sizeHint().height())
            splitter.setSizes([SIDEBAR_WIDTH, max(1, self.width() - SIDEBAR_WIDTH)])
        return splitter

    def _reveal(self, card: QWidget) -> None:
        self.conversation.ensureWidgetVisible(card, 0, 48)

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
        QShortcut(QKeySequence("Ctrl+Shift+C"), self, lambda: copy_last_reply(self))
        QShortcut(QKeySequence("Ctrl+R"), self, lambda: regenerate_last(self))
        QShortcut(QKeySequence("Ctrl+K"), self, lambda: focus_search(self))

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

    @property
    def sidebar_folded(self) -> bool:
        """The sidebar was folded by a narrow window, not by the user."""
        return self._sidebar_folded

    def set_sidebar_visible(self, visible: bool) -> None:
        """Show or hide the sidebar (the header's switch, Ctrl+B); the conversation takes the room."""
        self._sidebar_folded = False  # the user's choice from now on
        if self.header.sidebar_button.isChecked() != visible:
            self.header.sidebar_button.setChecked(visible)  # comes back here through `toggled`
            return
        self.sidebar_overlay.place(self.sidebar, visible)

    def _fold_drawer(self) -> None:
        self.set_sidebar_visible(False)
        self.focus_composer()  # the keys go to the chat again

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
        elif button.isChecked():
            self.sidebar_overlay.place(self.sidebar, True)  # over the chat when narrow, beside it when wide

    def show_shortcuts(self) -> None:
        show_shortcuts_sheet(self)

    def focusNextPrevChild(self, next: bool) -> bool:
        """Tab and Shift+Tab in reading order: header, chat list, transcript, composer (`keyboard.step`)."""
        return step(self, next) or super().focusNextPrevChild(next)

    # -- wiring ----------------------------------------------------------------------------

    def _connect_signals(self) -> None:
        """Every connection between the window's parts, in one place."""
        self.theme.changed.connect(self._apply_theme)
        self.header.sidebar_button.toggled.connect(self.set_sidebar_visible)
        self.sidebar_overlay.foldRequested.connect(self._fold_drawer)  # Esc, or a click outside it
        self.header.quit_action.triggered.connect(self.close)
        self.header.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.header.new_chat.clicked.connect(self._on_new_conversation)
        self.composer.submitted.connect(self._on_submitted)
        self.composer.stopRequested.connect(self._on_stop)
        self.composer.menuClosed.connect(lambda: QTimer.singleShot(0, self.focus_composer))  # typing goes on
        self.composer.edit.textChanged.connect(lambda: self.context_meter.draft_changed(self.composer.text()))
        self.documents_button.changed.connect(self.context_meter.recount)  # attached documents count too
        self.conversation.promptChosen.connect(self._on_prompt_chosen)
        self.conversation.failureAction.connect(self._on_failure_action)
        self.conversation.empty_state.getModelsRequested.connect(self.models.open_get_models)
        self.conversation.regenerateRequested.connect(self._on_regenerate)
        self.conversation.editRequested.connect(self._on_edit)
        self.conversation.versionRequested.connect(self._on_version)
        self.format_button.formatChosen.connect(self.controller.screen.set_format)
        self.notice.chooseModelRequested.connect(self.models.open_picker)
        self.attachments.chooseModelRequested.connect(self.models.open_picker)
        if isinstance(self.sidebar, HistorySidebar):
            self.sidebar.openRequested.connect(self._on_open)
            self.sidebar.newRequested.connect(self._on_new_conversation)
            self.sidebar.renamed.connect(self.history_view.follow_rename)  # the header follows a rename
        self.closing.connect(self.tools.close)  # the MCP servers stop with the window
        self.closing.connect(self.serve.stop)

    @asyncSlot(str)
    async def _on_submitted(self, text: str) -> None:
        sent = await self.controller.send(text)
        if not sent and self.controller.refusal and not self.composer.text().strip():
            self.composer.set_text(text)  # refused before it was stored: the draft comes back
        self.context_meter.recount()

    def _on_stop(self) -> None:
        if self.sidebar_overlay.open:
            self._fold_drawer()  # Esc closes the top layer first: the drawer, then the reply
            return
        if not self.composer.busy:
            return
        self.composer.set_stopping()  # at once: the reply itself ends within a token
        reply = self.last_reply()
        if reply is not None:
            reply.stopping()
        self.controller.stop()
        self.focus_composer()

    @asyncSlot()
    async def _on_new_conversation(self) -> None:
        await self.controller.new_conversation()
        self.composer.focus_edit()

    @asyncSlot(str)
    async def _on_failure_action(self, action: str) -> None:
        if action == FailureAction.RETRY:
            await self.controller.retry()
        elif action == FailureAction.NEW_CONVERSATION:
            await self.controller.new_conversation()
            self.composer.focus_edit()
        elif action == FailureAction.DROP_OLDER:  # the stop policy's limit: keep chatting under truncate-middle
            self.controller.screen.set_policy(ContextPolicy.TRUNCATE_MIDDLE)
            self.conversation.clear_failure(remove=True)
            if self.composer.text().strip():
                self.composer.submit()
            elif self.controller.can_retry:
                await self.controller.retry()

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
        opened = await self.controller.open_conversation(conversation_id, reveal=reveal)
        if opened and reveal is not None:
            self.conversation.show_found(reveal, self.sidebar_query())
        self.composer.focus_edit()  # opened from the list or a search: the next keys are the next message
        if self.sidebar_overlay.open:
            self.set_sidebar_visible(False)  # the narrow window's drawer closes on a choice, as a drawer does

    def sidebar_query(self) -> str:
        search = getattr(self.sidebar, "search", None)
        return search.text().strip() if search is not None else ""

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
        reply.tokensChanged.connect(self.context_meter.streaming)  # one live count while it streams
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
        if not busy:
            self.context_meter.recount()

    def focus_composer(self) -> None:
        """Give the message box the focus, unless the user is typing elsewhere or a tool card asks."""
        focused = QApplication.focusWidget()
        if focused is not None and focused.window() is not self:
            return  # a dialog is open
        if focused is not None and typing_here(focused):
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
        self.context_meter.set_cut(False)
        self.context_meter.recount()  # the new chat's count, not the previous one's

    def model_loading(self, label: str) -> None:
        self.header.show_loading(label)  # the current model keeps its place until this one is ready
        self.status.showMessage(f"Loading {label}…")

    def model_load_progress(self, label: str, percent: int) -> None:
        self.status.showMessage(f"Loading {label}…{load_progress_words(percent)}")

    def model_ready(self, info: ModelInfo) -> None:
        self._model_label = info.label
        self._model_sees = info.sees
        self.header.show_model(info.label)
        self.conversation.empty_state.show_model(info, self.controller.models.choice)
        self.status.clearMessage()
        self.status.show_model(info)
        if not self.notice.lasting:
            self.notice.hide()
        self.context_meter.recount()  # a new model: a new tokenizer and context size
        self.attachments.refresh()  # pictures attached: does this one see them?

    def model_failed(self, label: str, message: str, cause: LoadFailure) -> None:
        """The engine's reason stays behind "Details"; the banner says what happened and which model answers."""
        self.status.clearMessage()
        self.header.hide_loading()
        previous = self.controller.models.model
        self.status.show_model(previous)  # the previous one
        now = f"Still using {previous.label}." if previous else "No model is loaded yet — choose another one."
        self.notice.show_notice(f"Couldn't load {label}. {cause} {now}", message, offer_models=True)

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
        self.state.restore(self, sidebar=self)

    def closeEvent(self, event: QCloseEvent) -> None:
        history = self.controller.history
        conversation = history.conversation_id if history is not None else None
        self.state.save_from(self, switch=self, conversation=conversation)
        self.controller.stop()  # the reply ends within a token; the app awaits shutdown
        self.closing.emit()
        super().closeEvent(event)
