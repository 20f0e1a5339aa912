"""The model picker: every model Ember knows (built-in, folders, opened files, servers), the
selected one's details, and the ways to add more.

Reading the library means reading every GGUF header, so it runs on a worker thread with a
busy indicator; a newer scan supersedes an older one. The picker never loads anything: it
emits `chosen` and the window's controller loads on the engine's worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStyle,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.core.async_tasks import spawn
from desktop.core.model_choice import ModelChoice, remote_choice, same_model
from desktop.core.model_rows import ModelRow, library_rows
from desktop.qt.look.last_folder import choose_gguf, last_folder, remember
from desktop.qt.look.style import SPACING, fit_to_window, muted_text, warning_border, warning_fill
from desktop.qt.models.model_details import ModelDetails
from desktop.qt.models.settings_dialog import ModelSettingsDialog, open_settings_dialog
from engine.api.errors import GGUFError
from engine.api.library import LibraryState, RemoteServer, load_library_state, save_library_state
from engine.api.models import BASE_MODEL_NOTE, ModelSettings, explain_load_failure, resolve_model_file

if TYPE_CHECKING:
    from desktop.qt.models.server_dialog import ServerDialog

log = logging.getLogger("desktop.picker")

COLUMNS = ("Model",)  # the file's name, and under it one line in words (`ModelRow.line`)
PICKER_SIZE = (1120, 600)
MIN_PICKER_SIZE = (640, 420)
NOTE_MS = 6_000  # how long "Added <folder>." stays
_ROW = Qt.ItemDataRole.UserRole


class FilePrompts:
    """The native file and folder dialogs (tests pass a fake)."""

    def open_file(self, parent: QWidget) -> Path | None:
        return choose_gguf(parent, "Open GGUF model")

    def folder(self, parent: QWidget) -> Path | None:
        name = QFileDialog.getExistingDirectory(parent, "Add a folder of models", last_folder("models"))
        if name:
            remember("models", Path(name).parent)
        return Path(name) if name else None


def _opened_not_used(state: LibraryState, path: Path) -> LibraryState:
    # A file becomes the last used model only once it has loaded (the controller notes it).
    return dataclasses.replace(
        state.with_opened(path), last_used=state.last_used, last_used_server=state.last_used_server
    )


class ModelPicker(QDialog):
    """Choose, inspect, add and configure models.

    Signals:
        chosen(object): load this `ModelChoice`.
        settingsSaved(object): a model's settings were saved (its `ModelChoice`, updated).
        scanned(): the list was (re)read.
        getModelsRequested(): "Get models…" was pressed (the window opens that page).
    """

    chosen = Signal(object)
    settingsSaved = Signal(object)
    scanned = Signal()
    getModelsRequested = Signal()

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        current: Callable[[], ModelChoice | None] = lambda: None,
        prompts: FilePrompts | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ModelPicker")
        self.setWindowTitle("Models")
        fit_to_window(self, PICKER_SIZE, MIN_PICKER_SIZE)
        self.prompts = prompts or FilePrompts()
        self._current = current
        self.rows: list[ModelRow] = []
        self._scan = 0  # the newest scan's number; older results are dropped
        self.settings_dialog: ModelSettingsDialog | None = None
        self.server_dialog: ServerDialog | None = None
        self._build()
        self._apply_style()

    def _say(self, text: str, *, for_ms: int = 0) -> None:
        """A line under the list; with `for_ms`, it goes away after that long (a note, not a problem)."""
        self.message.setText(text)
        self._message_timer.stop()
        if for_ms:
            self._message_timer.start(for_ms)

    # -- building --------------------------------------------------------------------------

    def _build(self) -> None:
        self.open_file = QPushButton("Open GGUF file…", self)
        self.add_folder = QPushButton("Add folder…", self)
        self.add_server = QPushButton("Add server…", self)
        self.get_models = QPushButton("Get models…", self)
        self.get_models.setToolTip("Download a catalogue model that fits this machine")
        self.scanning = QProgressBar(self)
        self.scanning.setRange(0, 0)
        self.scanning.setTextVisible(False)
        self.scanning.setFixedSize(72, 6)
        self.scanning_label = QLabel("Reading models…", self)
        self.scanning_label.setObjectName("Muted")
        self.table = self._build_table()
        self.details = ModelDetails(self)
        self.message = QLabel(self)
        self.message.setObjectName("PickerMessage")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self._message_timer = QTimer(self)
        self._message_timer.setSingleShot(True)
        self._message_timer.timeout.connect(self.message.clear)
        self.settings = QPushButton("Settings…", self)
        self.load = QPushButton("Load model", self)
        self.load.setDefault(True)
        self.close_button = QPushButton("Close", self)
        self._lay_out()
        self._connect()
        self._set_scanning(False)

    def _build_table(self) -> QTreeWidget:
        table = QTreeWidget(self)
        table.setObjectName("ModelTable")
        table.setAccessibleName("Models")
        table.setHeaderLabels(list(COLUMNS))
        table.setRootIsDecorated(False)
        table.setUniformRowHeights(False)  # two lines: the file's name, then what it is in words
        table.setAlternatingRowColors(True)
        # The whole width is the name's: cut in the middle only when even that is too narrow,
        # so the quantization and ".gguf" at its end stay readable.
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        table.setHeaderHidden(True)
        table.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        return table

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        for w in (self.get_models, self.open_file, self.add_folder, self.add_server):
            top.addWidget(w)
        top.addStretch(1)
        top.addWidget(self.scanning)
        top.addWidget(self.scanning_label)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.table)
        split.addWidget(self.details)
        split.setSizes([self.width() * 6 // 10, self.width() * 4 // 10])  # names need the room; the facts wrap
        split.setChildrenCollapsible(False)
        bottom = QHBoxLayout()
        bottom.addWidget(self.message, 1)
        for w in (self.settings, self.load, self.close_button):
            bottom.addWidget(w)
        layout = QVBoxLayout(self)
        layout.setSpacing(SPACING)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        layout.addLayout(bottom)

    def _connect(self) -> None:
        self.open_file.clicked.connect(self._on_open_file)
        self.add_folder.clicked.connect(self._on_add_folder)
        self.add_server.clicked.connect(self.open_server_dialog)
        self.get_models.clicked.connect(self.getModelsRequested.emit)
        self.table.currentItemChanged.connect(self._on_current_changed)
        self.table.itemDoubleClicked.connect(self._on_load)
        self.settings.clicked.connect(self._on_settings)
        self.load.clicked.connect(self._on_load)
        self.close_button.clicked.connect(self.reject)

    def _apply_style(self) -> None:
        p = self.palette()
        self.setStyleSheet(
            f"#MemoryWarning {{ background: {warning_fill(p).name()}; border: 1px solid "
            f"{warning_border(p).name()}; border-radius: 6px; }} #Muted {{ color: {muted_text(p).name()}; }}"
        )

    # -- reading the library ---------------------------------------------------------------

    def show_and_refresh(self) -> None:
        # The picker is kept between openings: sized for the window as it is now, not as it was
        # when the picker was made (opened at 1040 px, it came back 992 px wide over a window
        # narrowed to 800 px, review 3 N14).
        fit_to_window(self, PICKER_SIZE, MIN_PICKER_SIZE)
        self.show()
        self.raise_()
        self.activateWindow()
        spawn(self.refresh())

    async def refresh(self, select: ModelChoice | Path | None = None) -> None:
        """Re-read the library on a worker thread and show it; `select` that row afterwards."""
        self._scan += 1
        scan = self._scan
        self._set_scanning(True)
        rows: list[ModelRow] | OSError
        try:
            rows = await asyncio.to_thread(library_rows, load_library_state())
        except OSError as exc:  # e.g. an unreadable models folder; each bad file is a row instead
            log.warning("reading the model library failed: %s", exc)
            rows = exc
        if not shiboken6.isValid(self) or scan != self._scan:
            return  # closed with the window, or a newer scan is on its way
        self._set_scanning(False)
        if isinstance(rows, OSError):
            self.message.setText(f"Couldn't read the model library: {rows}")
            return
        self.show_rows(rows, select)
        self.scanned.emit()

    def _set_scanning(self, on: bool) -> None:
        self.scanning.setVisible(on)
        self.scanning_label.setVisible(on)

    @property
    def busy(self) -> bool:
        return not self.scanning.isHidden()

    def show_rows(self, rows: list[ModelRow], select: ModelChoice | Path | None = None) -> None:
        self.rows = rows
        self.table.clear()
        current = self._current()
        names = [row.name for row in rows]
        for index, row in enumerate(rows):
            item = self._item(index, row, same_model(row.choice, current), twin=names.count(row.name) > 1)
            self.table.addTopLevelItem(item)
        target = self._find(select) if select is not None else None
        target = target if target is not None else self._find(current)
        self.select_row(target if target is not None else 0)
        self._on_current_changed()

    def _item(self, index: int, row: ModelRow, loaded: bool, *, twin: bool = False) -> QTreeWidgetItem:
        line = f"{row.line} · loaded" if loaded else row.line
        if twin and row.path is not None:  # two files of one name: their folders tell them apart
            line = f"{line} · in {_folder(row.path)}" if line else f"in {_folder(row.path)}"
        item = QTreeWidgetItem([f"{row.name}\n{line}" if line else row.name])
        item.setData(0, _ROW, index)
        note = BASE_MODEL_NOTE if row.base_model else ""
        full = "\n".join(
            part for part in (row.name, row.title, str(row.path) if row.path else "", row.source, note) if part
        )
        item.setToolTip(0, f"{full}\n\n{row.problem}" if row.problem else full)  # however narrow the list
        if row.skipped:
            item.setForeground(0, self.palette().brush(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
        elif row.error:
            item.setIcon(0, self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning))
        if loaded:
            font = QFont(item.font(0))
            font.setBold(True)
            item.setFont(0, font)
        return item

    def _find(self, target: ModelChoice | Path | None) -> int | None:
        if target is None:
            return None
        for index, row in enumerate(self.rows):
            if isinstance(target, Path):
                if row.path is not None and _same_path(row.path, target):
                    return index
            elif same_model(row.choice, target):
                return index
        return None

    # -- selection -------------------------------------------------------------------------

    def selected(self) -> ModelRow | None:
        item = self.table.currentItem()
        if item is None:
            return None
        index = item.data(0, _ROW)
        return self.rows[index] if isinstance(index, int) and 0 <= index < len(self.rows) else None

    def _on_current_changed(self) -> None:
        row = self.selected()
        self.details.show_row(row)
        self.load.setEnabled(row is not None and row.loadable)
        self.load.setText("Reload model" if row and same_model(row.choice, self._current()) else "Load model")
        self.load.setToolTip(f"Can't load: {row.problem or row.error}" if row and row.error else "")
        local = row is not None and row.choice.settings is not None and row.metadata is not None
        self.settings.setEnabled(local)
        self.settings.setToolTip("" if local else "Settings are for local model files")

    def select_row(self, index: int) -> None:
        item = self.table.topLevelItem(index)
        if item is not None:
            self.table.setCurrentItem(item)

    # -- actions ---------------------------------------------------------------------------

    def _on_load(self) -> None:
        row = self.selected()
        if row is None or not row.loadable:
            return
        self.message.clear()
        self.chosen.emit(row.choice)
        self.accept()

    def _on_open_file(self) -> None:
        path = self.prompts.open_file(self)  # a nested event loop: not inside a task
        if path is not None:
            spawn(self.add_file(path))

    async def add_file(self, path: Path) -> None:
        """Note `path` as recently opened and show it selected (with its reason if bad)."""
        save_library_state(_opened_not_used(load_library_state(), path))
        await self.refresh(select=path)
        if shiboken6.isValid(self) and self._find(path) is None:
            reason = await asyncio.to_thread(explain_load_failure, path)
            self._say(f"{path.name} is not a chat model: {reason or 'unknown reason'}")

    def _on_add_folder(self) -> None:
        folder = self.prompts.folder(self)
        if folder is not None:
            spawn(self.add_folder_path(folder))

    async def add_folder_path(self, folder: Path) -> None:
        save_library_state(load_library_state().with_folder(folder))
        self._say(f"Added {folder}.", for_ms=NOTE_MS)
        await self.refresh()

    def open_server_dialog(self) -> ServerDialog:
        from desktop.qt.models.server_dialog import ServerDialog  # httpx (and rich) load when it opens, not at start

        dialog = ServerDialog(self)
        dialog.saved.connect(self._on_server_saved)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.server_dialog = dialog
        dialog.open()
        return dialog

    def _on_server_saved(self, server: RemoteServer) -> None:
        spawn(self.refresh(select=remote_choice(server)))

    @asyncSlot()
    async def _on_settings(self) -> None:
        row = self.selected()
        if row is not None:
            await self.open_settings(row)

    async def open_settings(self, row: ModelRow) -> ModelSettingsDialog | None:
        if row.metadata is None:
            return None  # an unreadable file: nothing to configure (the button is disabled too)
        dialog = await open_settings_dialog(self, row.choice, row.name, row.metadata)
        if dialog is not None:
            dialog.saved.connect(lambda s: self._on_settings_saved(row, s))
            self.settings_dialog = dialog
        return dialog

    def _on_settings_saved(self, row: ModelRow, settings: ModelSettings) -> None:
        updated = dataclasses.replace(row, choice=row.choice.with_settings(settings))
        if row in self.rows:
            self.rows[self.rows.index(row)] = updated
        if self.selected() is updated:
            self.details.show_row(updated)  # the memory estimate follows the new context
        self.settingsSaved.emit(updated.choice)


def _same_path(a: Path, b: Path) -> bool:
    try:
        return resolve_model_file(a) == resolve_model_file(b)
    except (OSError, GGUFError):  # a symlink loop, an unreachable share
        return a.absolute() == b.absolute()


def _folder(path: Path) -> str:
    """The file's folder as a person reads it: under the home folder as ~/…, else in full."""
    folder = path.parent
    try:
        return "~/" + str(folder.relative_to(Path.home()))
    except ValueError:
        return str(folder)
