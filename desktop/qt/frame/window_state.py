"""What the window remembers between runs: size and place, the sidebar, the last conversation.

Kept in `window.json` in the config folder (a bad or missing file means the defaults), with
the user's choice for the thinking pane (open while the model thinks, or not).
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import asdict, dataclass, field
from typing import Protocol

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow, QSplitter, QWidget

from desktop.qt.chat.thinking_pane import ThinkingPane
from engine.api.program import ember_paths, load_json_object, write_json_atomic

log = logging.getLogger(__name__)
FILE_NAME = "window.json"


class SidebarSwitch(Protocol):
    """The window's sidebar switch, as the state needs it (`MainWindow` is one)."""

    @property
    def sidebar_folded(self) -> bool:
        """Folded away by a narrow window, not by the user (so it is still the user's choice to show it)."""
        ...

    def set_sidebar_visible(self, visible: bool) -> None: ...


@dataclass(slots=True)
class WindowState:
    geometry: str = ""  # QWidget.saveGeometry(), base64
    splitter: list[int] = field(default_factory=list[int])
    sidebar: bool = True
    conversation: int | None = None  # the conversation open at close
    thinking_open: bool = True

    @classmethod
    def load(cls) -> WindowState:
        data = load_json_object(ember_paths().config_dir / FILE_NAME, {})
        state = cls()
        if isinstance(geometry := data.get("geometry"), str):
            state.geometry = geometry
        sizes = data.get("splitter")
        if isinstance(sizes, list) and all(isinstance(n, int) and n >= 0 for n in sizes):  # pyright: ignore[reportUnknownVariableType]
            state.splitter = [int(n) for n in sizes]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
        state.sidebar = data.get("sidebar") is not False
        conversation = data.get("conversation")
        state.conversation = conversation if isinstance(conversation, int) and conversation > 0 else None
        state.thinking_open = data.get("thinking_open") is not False
        ThinkingPane.open_while_thinking = state.thinking_open
        ThinkingPane.on_preference_changed = state.remember_thinking
        return state

    def remember_thinking(self, open_: bool) -> None:
        self.thinking_open = open_
        self.save()

    def save(self) -> None:
        try:
            write_json_atomic(ember_paths().config_dir / FILE_NAME, asdict(self))
        except OSError as exc:  # a read-only config folder must not break the window
            log.warning("could not save the window state: %s", exc)

    def restore(self, window: QMainWindow, sidebar: SidebarSwitch) -> None:
        """Size and place (kept on a screen by Qt), the sidebar and its width."""
        if self.geometry:
            try:
                window.restoreGeometry(QByteArray(base64.b64decode(self.geometry, validate=True)))
            except (binascii.Error, ValueError):
                log.warning("window state: unreadable geometry, using the default size")
        splitter = window.findChild(QSplitter)
        if isinstance(splitter, QSplitter) and len(self.splitter) == splitter.count() and self.splitter[0] > 0:
            splitter.setSizes(self.splitter)
        sidebar.set_sidebar_visible(self.sidebar)

    def save_from(self, window: QMainWindow, switch: SidebarSwitch, conversation: int | None) -> None:
        self.geometry = base64.b64encode(bytes(window.saveGeometry().data())).decode("ascii")
        splitter = window.findChild(QSplitter)
        sidebar: QWidget | None = splitter.widget(0) if isinstance(splitter, QSplitter) and splitter.count() else None
        self.sidebar = switch.sidebar_folded or (sidebar is not None and not sidebar.isHidden())
        if isinstance(splitter, QSplitter) and self.sidebar:
            self.splitter = list(splitter.sizes())
        self.conversation = conversation
        self.save()
