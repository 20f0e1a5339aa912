"""The tool approval card, the cards' area above the composer, and the per-conversation toggle.

A card shows the tool's name and its full arguments (indented JSON, selectable, scrolled
rather than cut when long) and, while the call waits, Approve / Deny / Always allow.
Keyboard: the card takes focus when it asks; Enter presses the focused button (Approve
by default), Y approves, N denies, A always allows; Alt+A / Alt+D / Alt+W work too.

    install_tools(window, controller, make_tools)   # after window.bind(controller)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.controller import ChatController
from desktop.core.tool_turns import ToolTurns, default_tools
from engine.errors import ConfigError
from engine.events import ToolCall, ToolDenied, ToolLimit, ToolResult
from engine.tools.mcp_tools import McpServers
from engine.tools.permissions import Decision, arguments_text
from engine.tools.registry import ToolSet
from models.library.paths import ember_paths

ARGUMENTS_MAX_HEIGHT = 320
RESULT_PREVIEW_CHARS = 2_000


class ToolCallCard(QFrame):
    """One tool call.

    Signals:
        decided(object): the user chose a `Decision`.
    """

    decided = Signal(object)

    def __init__(self, call: ToolCall, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call = call
        self.setObjectName("ToolCallCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAccessibleName(f"Tool call {call.name}")
        self.setToolTip("Enter or Y approves, N denies, A always allows this tool here")
        layout = QVBoxLayout(self)
        self.title = _plain_label(f"The model wants to run the tool “{call.name}” with these arguments:", self)
        self.arguments = QPlainTextEdit(arguments_text(call.arguments), self)
        self.arguments.setReadOnly(True)
        self.arguments.setAccessibleName("Tool arguments")
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        # As tall as the arguments (a few lines usually), scrolled rather than cut past the cap.
        lines = self.arguments.document().blockCount() + 1
        height = lines * self.arguments.fontMetrics().lineSpacing() + 2 * self.arguments.frameWidth() + 8
        self.arguments.setFixedHeight(min(ARGUMENTS_MAX_HEIGHT, height))
        self.status = _plain_label("", self)
        self.status.hide()
        self.approve = QPushButton("&Approve", self)
        self.deny = QPushButton("&Deny", self)
        self.always = QPushButton(f"Al&ways allow {call.name} here", self)
        self.always.setToolTip("Run this tool without asking for the rest of this conversation")
        buttons = QHBoxLayout()
        for button, decision in ((self.approve, Decision.APPROVE), (self.deny, Decision.DENY),
                                 (self.always, Decision.ALWAYS)):
            buttons.addWidget(button)
            button.clicked.connect(lambda _=False, d=decision: self.decide(d))
        buttons.addStretch(1)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        self._buttons = (self.approve, self.deny, self.always)
        self.set_asking(False)

    def set_asking(self, asking: bool) -> None:
        for button in self._buttons:
            button.setVisible(asking)
            button.setEnabled(asking)
        if asking:
            self.approve.setFocus(Qt.FocusReason.OtherFocusReason)

    @property
    def asking(self) -> bool:
        return self.approve.isEnabled()

    def decide(self, decision: Decision) -> None:
        if not self.asking:
            return
        self.set_asking(False)
        self.set_status({Decision.APPROVE: "Approved — running…", Decision.DENY: "Denied",
                         Decision.ALWAYS: f"Approved — {self.call.name} is always allowed here"}[decision])
        self.decided.emit(decision)

    def set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.show()

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


def _plain_label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)  # names and results come from the model or a tool
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class ToolCardArea(QWidget):
    """The cards of the turn in progress; the `ToolPrompter` the tool turns ask through."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ToolCardArea")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(8, 4, 8, 4)
        self.cards: dict[str, ToolCallCard] = {}
        self._waiting: dict[str, asyncio.Future[Decision]] = {}
        self.hide()

    def show_call(self, call: ToolCall) -> None:
        self._card(call)

    def ask(self, call: ToolCall) -> asyncio.Future[Decision]:
        card = self._card(call)
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[call.id] = answer
        card.set_asking(True)
        return answer

    def show_outcome(self, event: ToolResult | ToolDenied | ToolLimit) -> None:
        match event:
            case ToolResult(id=call_id, content=content, error=error):
                card = self.cards.get(call_id)
                if card is not None:
                    shown = content if len(content) <= RESULT_PREVIEW_CHARS else content[:RESULT_PREVIEW_CHARS] + "…"
                    card.set_status(("Failed: " if error else "Result: ") + shown)
            case ToolDenied(id=call_id):
                card = self.cards.get(call_id)
                if card is not None:
                    card.set_status("Denied")
            case ToolLimit(rounds=rounds):
                self.show_notice(f"Stopped after {rounds} rounds of tool calls.")

    def show_notice(self, text: str) -> None:
        """One line about the tools themselves (a server that could not start, the round limit)."""
        label = _plain_label(text, self)
        label.setObjectName("ToolNotice")
        self._layout.addWidget(label)
        self.show()

    def clear(self) -> None:
        for answer in self._waiting.values():
            answer.cancel()  # the turn went away: an open question is a denial
        self._waiting.clear()
        self.cards.clear()
        while (item := self._layout.takeAt(0)) is not None:
            widget = item.widget()
            if widget is not None:
                widget.deleteLater()
        self.hide()

    def _card(self, call: ToolCall) -> ToolCallCard:
        card = self.cards.get(call.id)
        if card is None:
            card = self.cards[call.id] = ToolCallCard(call, self)
            card.decided.connect(lambda decision, call_id=call.id: self._on_decided(call_id, decision))
            self._layout.addWidget(card)
            self.show()
        return card

    def _on_decided(self, call_id: str, decision: Decision) -> None:
        answer = self._waiting.pop(call_id, None)
        if answer is not None and not answer.done():
            answer.set_result(decision)


class ToolsToggle(QCheckBox):
    """Offer tools in this conversation (stored with it)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Tools", parent)
        self.setObjectName("ToolsToggle")
        self.setToolTip("Let the model use tools in this conversation; each call asks you first")


def _mcp_menu(parent: QWidget, turns: ToolTurns) -> QToolButton | None:
    """A menu of the configured MCP servers, each switchable for this conversation."""
    if turns.mcp is None or not turns.mcp.names:
        return None
    button = QToolButton(parent)
    button.setObjectName("McpServers")
    button.setText("MCP")
    button.setToolTip("MCP servers this conversation may use (each starts when first needed)")
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QMenu(button)
    for name in turns.mcp.names:
        action = menu.addAction(name)
        action.setCheckable(True)
        action.toggled.connect(lambda on, n=name: turns.set_mcp_server(n, on))

    def sync() -> None:
        enabled = set(turns.mcp_servers())
        for action in menu.actions():
            action.blockSignals(True)
            action.setChecked(action.text() in enabled)
            action.blockSignals(False)

    menu.aboutToShow.connect(sync)
    button.setMenu(menu)
    return button


def _allowed_menu(parent: QWidget, turns: ToolTurns) -> QToolButton:
    """The tools always allowed in this conversation; unticking one makes it ask again."""
    button = QToolButton(parent)
    button.setObjectName("AllowedTools")
    button.setText("Allowed")
    button.setToolTip("Tools that run without asking in this conversation (untick to be asked again)")
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QMenu(button)

    def revoke(name: str) -> None:
        permissions = turns.permissions()
        permissions.revoke(name)
        turns.set_permissions(permissions)

    def rebuild() -> None:
        menu.clear()
        names = sorted(turns.permissions().always)
        for name in names:
            action = menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(True)
            action.toggled.connect(lambda on, n=name: None if on else revoke(n))
        if not names:
            menu.addAction("No tool is always allowed here").setEnabled(False)

    menu.aboutToShow.connect(rebuild)
    button.setMenu(menu)
    return button


def _load_mcp() -> McpServers | None:
    try:
        return McpServers.from_config_dir(ember_paths().config_dir)
    except ConfigError as exc:
        logging.getLogger("desktop.tools").warning("MCP servers are off: %s", exc)
        return None


def install_tools(window: QWidget, controller: ChatController,
                  make_tools: Callable[[Sequence[str]], ToolSet] = default_tools,
                  mcp: McpServers | None = None) -> ToolTurns:
    """Add the toggle and the card area to a bound window and route tool turns through them.

    `window` is the main window: its `composer` and `header` are where the area and toggle go.
    """
    composer: QWidget = getattr(window, "composer")  # noqa: B009 - MainWindow's public parts
    header: QWidget = getattr(window, "header")  # noqa: B009
    area = ToolCardArea(window)
    holder = composer.parentWidget()
    column = holder.layout() if holder is not None else None
    if isinstance(column, QVBoxLayout):
        column.insertWidget(column.indexOf(composer), area)
    toggle = ToolsToggle(header)
    grant = QPushButton("Folders…", header)
    grant.setObjectName("GrantFolder")
    grant.setToolTip("Let the file tools read a folder in this conversation")
    row = header.layout()
    if isinstance(row, QHBoxLayout):
        row.insertWidget(max(0, row.count() - 1), toggle)
        row.insertWidget(max(0, row.count() - 1), grant)
    turns = ToolTurns(area, make_tools, session=controller.session, mcp=mcp if mcp is not None else _load_mcp())
    servers = _mcp_menu(header, turns)
    allowed = _allowed_menu(header, turns)
    if isinstance(row, QHBoxLayout):
        for extra in (servers, allowed):
            if extra is not None:
                row.insertWidget(max(0, row.count() - 1), extra)
    closing = getattr(window, "closing", None)
    if closing is not None:
        closing.connect(turns.close)  # the MCP servers stop with the window

    def choose_folder() -> None:
        folder = QFileDialog.getExistingDirectory(window, "Grant a folder to the file tools")
        if folder:
            turns.grant_folder(folder)
            grant.setToolTip("Granted: " + ", ".join(turns.folders()))

    grant.clicked.connect(choose_folder)

    def sync_toggle() -> None:
        toggle.blockSignals(True)
        toggle.setChecked(turns.enabled)
        toggle.blockSignals(False)

    toggle.toggled.connect(turns.set_enabled)
    turns.on_conversation_changed = sync_toggle
    sync_toggle()
    controller.tool_turns = turns
    window.tool_toggle = toggle  # type: ignore[attr-defined]
    window.tool_grant = grant  # type: ignore[attr-defined]
    window.tool_mcp = servers  # type: ignore[attr-defined]
    window.tool_allowed = allowed  # type: ignore[attr-defined]
    window.tool_cards = area  # type: ignore[attr-defined]
    return turns
