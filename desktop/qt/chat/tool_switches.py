"""The tool switches in the composer's options menu: settings of the open conversation, not of the window.

"Let the model use tools", "Grant a folder to the file tools…", the tools always allowed, and
the configured MCP servers; each follows the conversation that is open.
"""

from __future__ import annotations

import logging

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from desktop.core.tool_turns import ToolTurns
from desktop.qt.chat.composer import ComposerBar
from desktop.qt.look.menu_heading import add_heading
from engine.api.errors import ConfigError
from engine.api.program import ember_paths
from engine.api.tools import McpServers


class ToolSwitches:
    """The "Tools" section of the composer's options menu, kept in step with the open conversation."""

    def __init__(self, turns: ToolTurns, composer: ComposerBar, parent: QWidget) -> None:
        self.turns = turns
        self.composer = composer
        self.parent = parent  # of the folder dialog
        menu = composer.options_menu
        add_heading(menu, "Tools")
        self.toggle = QAction("Let the model use tools", menu)
        self.toggle.setObjectName("ToolsToggle")
        self.toggle.setCheckable(True)
        self.toggle.setToolTip("Let the model use tools in this conversation; each call asks you first")
        menu.addAction(self.toggle)
        self.grant = QAction("Grant a folder to the file tools…", menu)
        self.grant.setObjectName("GrantFolder")
        menu.addAction(self.grant)
        self.allowed = _allowed_menu(menu, turns)
        menu.addMenu(self.allowed)
        self.mcp = _mcp_menu(menu, turns)
        if self.mcp is not None:
            menu.addMenu(self.mcp)
        self.grant.triggered.connect(self._choose_folder)
        self.toggle.toggled.connect(self._set_enabled)
        turns.on_conversation_changed = self.sync
        self.sync()

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.parent, "Grant a folder to the file tools")
        if folder:
            self.turns.grant_folder(folder)
            self.grant.setToolTip("Granted: " + ", ".join(self.turns.folders()))

    def sync(self) -> None:
        """Another conversation is open: the toggle shows its setting."""
        self.toggle.blockSignals(True)
        self.toggle.setChecked(self.turns.enabled)
        self.toggle.blockSignals(False)
        self.composer.set_option_active("tools", self.turns.enabled)

    def _set_enabled(self, on: bool) -> None:
        self.turns.set_enabled(on)
        self.composer.set_option_active("tools", on)


def _mcp_menu(parent: QWidget, turns: ToolTurns) -> QMenu | None:
    """A menu of the configured MCP servers, each switchable for this conversation."""
    if turns.mcp is None or not turns.mcp.names:
        return None
    menu = QMenu("MCP servers", parent)
    menu.setObjectName("McpServers")
    menu.setToolTip("MCP servers this conversation may use (each starts when first needed)")
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
    return menu


def _allowed_menu(parent: QWidget, turns: ToolTurns) -> QMenu:
    """The tools always allowed in this conversation; unticking one makes it ask again."""
    menu = QMenu("Always allowed", parent)
    menu.setObjectName("AllowedTools")
    menu.setToolTip("Tools that run without asking in this conversation (untick to be asked again)")

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
    return menu


def load_mcp() -> McpServers | None:
    try:
        return McpServers.from_config_dir(ember_paths().config_dir)
    except ConfigError as exc:
        logging.getLogger("desktop.tools").warning("MCP servers are off: %s", exc)
        return None
