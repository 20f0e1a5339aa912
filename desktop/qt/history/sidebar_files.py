"""The sidebar's export and import: the file dialogs, and the reads and writes on the history thread."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Protocol

import shiboken6
from PySide6.QtWidgets import QFileDialog, QWidget

from desktop.core.async_tasks import spawn
from desktop.core.history_session import HISTORY_ERRORS, HistorySession
from desktop.qt.look.last_folder import last_folder, remember


class FilesHost(Protocol):
    """What export and import need of the sidebar (`HistorySidebar` is one)."""

    @property
    def session(self) -> HistorySession: ...

    def open_conversation(self, conversation_id: int) -> None: ...

    def show_message(self, text: str) -> None: ...

    def refresh(self) -> object: ...

    def title_of(self, conversation_id: int) -> str: ...


EXPORT_FILTERS = {"md": "Markdown (*.md)", "json": "Ember conversation (*.json)"}


def export_file_name(title: str, fmt: str) -> str:
    """A file name from a title: letters, digits and dashes only."""
    stem = re.sub(r"[^\w]+", "-", title.lower()).strip("-")[:60] or "conversation"
    return f"{stem}.{fmt}"


class SidebarFiles:
    """Export a conversation as Markdown or JSON, import an Ember JSON export (and open it)."""

    def __init__(self, sidebar: FilesHost, parent: QWidget) -> None:
        self._sidebar = sidebar
        self._parent = parent  # the file dialogs' parent, and what must still exist when a read ends

    async def export_conversation(self, conversation_id: int, path: Path, fmt: str) -> bool:
        """Write the conversation to `path` as Markdown ("md") or JSON ("json"), on the history thread."""
        try:
            await self._sidebar.session.io(partial(self._sidebar.session.export_file, conversation_id, path, fmt))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self._parent):
                self._sidebar.show_message(f"Couldn't export to {path.name}: {exc}")
            return False
        if shiboken6.isValid(self._parent):
            self._sidebar.show_message(f"Exported to {path.name}.")
        return True

    async def import_conversation(self, path: Path) -> int | None:
        """Import an Ember JSON export (read and stored on the history thread) and open it; its id, or None."""
        try:
            conversation = await self._sidebar.session.io(partial(self._sidebar.session.import_file, path))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self._parent):
                self._sidebar.show_message(f"Couldn't import {path.name}: {exc}")
            return None
        if shiboken6.isValid(self._parent):
            self._sidebar.refresh()
            self._sidebar.open_conversation(conversation.id)
        return conversation.id

    def export_open(self, fmt: str) -> None:
        if self._sidebar.session.conversation_id is None:
            self._sidebar.show_message("Open a conversation to export it.")
            return
        self.export_dialog(self._sidebar.session.conversation_id, fmt)

    def export_dialog(self, conversation_id: int, fmt: str) -> None:
        name = export_file_name(self._sidebar.title_of(conversation_id), fmt)
        path, _ = QFileDialog.getSaveFileName(
            self._parent, "Export conversation", str(Path(last_folder("exports")) / name), EXPORT_FILTERS[fmt]
        )
        if path:
            remember("exports", path)
            spawn(self.export_conversation(conversation_id, Path(path), fmt))

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self._parent, "Import conversation", last_folder("exports"), EXPORT_FILTERS["json"]
        )
        if path:
            remember("exports", path)
            spawn(self.import_conversation(Path(path)))
