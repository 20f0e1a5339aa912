"""The sidebar's export and import: the file dialogs, and the reads and writes on the history thread."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtWidgets import QFileDialog

from desktop.core.async_tasks import spawn
from desktop.core.history_session import HISTORY_ERRORS
from desktop.qt.look.last_folder import last_folder, remember

if TYPE_CHECKING:
    from desktop.qt.history.sidebar import HistorySidebar

EXPORT_FILTERS = {"md": "Markdown (*.md)", "json": "Ember conversation (*.json)"}


def export_file_name(title: str, fmt: str) -> str:
    """A file name from a title: letters, digits and dashes only."""
    stem = re.sub(r"[^\w]+", "-", title.lower()).strip("-")[:60] or "conversation"
    return f"{stem}.{fmt}"


class SidebarFiles:
    """Export a conversation as Markdown or JSON, import an Ember JSON export (and open it)."""

    def __init__(self, sidebar: HistorySidebar) -> None:
        self._sidebar = sidebar

    async def export_conversation(self, conversation_id: int, path: Path, fmt: str) -> bool:
        """Write the conversation to `path` as Markdown ("md") or JSON ("json"), on the history thread."""
        try:
            await self._sidebar.session.io(partial(self._sidebar.session.export_file, conversation_id, path, fmt))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self._sidebar):
                self._sidebar.show_message(f"Couldn't export to {path.name}: {exc}")
            return False
        if shiboken6.isValid(self._sidebar):
            self._sidebar.show_message(f"Exported to {path.name}.")
        return True

    async def import_conversation(self, path: Path) -> int | None:
        """Import an Ember JSON export (read and stored on the history thread) and open it; its id, or None."""
        try:
            conversation = await self._sidebar.session.io(partial(self._sidebar.session.import_file, path))
        except HISTORY_ERRORS as exc:
            if shiboken6.isValid(self._sidebar):
                self._sidebar.show_message(f"Couldn't import {path.name}: {exc}")
            return None
        if shiboken6.isValid(self._sidebar):
            self._sidebar.refresh()
            self._sidebar.openRequested.emit(conversation.id, None)
        return conversation.id

    def export_open(self, fmt: str) -> None:
        if self._sidebar.session.conversation_id is None:
            self._sidebar.show_message("Open a conversation to export it.")
            return
        self.export_dialog(self._sidebar.session.conversation_id, fmt)

    def export_dialog(self, conversation_id: int, fmt: str) -> None:
        name = export_file_name(self._sidebar.title_of(conversation_id), fmt)
        path, _ = QFileDialog.getSaveFileName(
            self._sidebar, "Export conversation", str(Path(last_folder("exports")) / name), EXPORT_FILTERS[fmt]
        )
        if path:
            remember("exports", path)
            spawn(self.export_conversation(conversation_id, Path(path), fmt))

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self._sidebar, "Import conversation", last_folder("exports"), EXPORT_FILTERS["json"]
        )
        if path:
            remember("exports", path)
            spawn(self.import_conversation(Path(path)))
