"""Documents in the window: the composer's paperclip, drag-and-drop and paste of files, collections.

The paperclip's menu attaches files, lists the ones attached (click one to take it out), picks
the collection this conversation searches, and opens the collections dialog. Files dropped on
or pasted into the composer are attached the same way. The dialog (`CollectionsDialog`) creates
collections, adds files and folders, re-indexes and removes, indexing on a worker thread with a
progress bar and Cancel; a file that cannot be read is listed with its one-line reason. Its
"Embedding model" control (`embedder_choice`) changes the selected collection's model, as
`ember docs add NAME --embedder` does: asked first when vectors would be dropped, then indexed.
File and collection names are shown escaped (`engine.docs.names.shown`): a newline, a bidi
override or a byte that is not UTF-8 in a name shows as an escape, never as layout.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.conversation_docs import ConversationDocs
from desktop.qt.chat.embedder_choice import EmbedderChoice, describe
from desktop.qt.chat.index_progress import ByteCount, IndexProgress, report_lines
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.icons import set_icon
from desktop.qt.look.last_folder import last_folder, remember
from desktop.qt.look.menu_heading import add_heading
from engine.api.documents import (
    DEFAULT_EMBEDDER,
    CollectionInfo,
    DocIndex,
    IndexReport,
    Progress,
    default_path,
    find_files,
    index_collection,
    shared_embedder,
)
from engine.api.errors import EngineError
from engine.api.text import escaped as shown
from engine.api.values import CancelToken

log = logging.getLogger("desktop.documents")

FILE_FILTER = (
    "Documents (*.pdf *.docx *.epub *.md *.markdown *.txt *.html *.htm *.rst *.csv *.json *.py *.js *.ts "
    "*.c *.cpp *.h *.java *.go *.rs *.rb);;Pictures (*.png *.jpg *.jpeg *.gif *.bmp);;All files (*)"
)


class DocumentsButton(QToolButton):
    """The paperclip: attach files, see and remove them, choose the conversation's collection.

    Signals:
        changed(): the documents of the next message changed (attached, removed, collection).
    """

    changed = Signal()

    def __init__(self, docs: ConversationDocs, parent: QWidget | None = None, index_path: Path | None = None) -> None:
        super().__init__(parent)
        self.docs = docs
        self.index_path = index_path
        self.route: Callable[[Sequence[str]], None] | None = None  # where chosen files go, when not all to docs
        self.setObjectName("DocumentsButton")
        self.setAccessibleName("Attach documents")
        self.setAutoRaise(True)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        set_icon(self, "attach", current_palette().muted, 16)
        self._menu = QMenu(self)
        self._menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(self._menu)
        self.refresh()

    def attach(self, paths: Sequence[str | Path]) -> None:
        self.docs.attach(paths)
        self.refresh()
        self.changed.emit()

    def refresh(self) -> None:
        files = self.docs.pending + self.docs.attached
        parts = [f"{len(files)} file{'s' * (len(files) != 1)}"] if files else []
        if self.docs.collection:
            parts.append(shown(self.docs.collection))
        self.setText(" · ".join(parts))
        tip = ["Attach files (or drop them on the message box)"]
        tip += [f"Attached: {shown(p.name)}" for p in files]
        if self.docs.collection:
            tip.append(f"Searching collection: {shown(self.docs.collection)}")
        self.setToolTip("\n".join(tip))

    def _fill_menu(self) -> None:
        menu = self._menu
        menu.clear()
        menu.addAction("Attach files…", self._choose_files)
        files = self.docs.pending + self.docs.attached
        if files:
            add_heading(menu, "Attached (click to remove)")
            for path in files:
                menu.addAction(f"✕  {shown(path.name)}", lambda p=path: self._detach(p))
        sub = menu.addMenu("Search a collection")
        none = sub.addAction("None", lambda: self._choose(None))
        none.setCheckable(True)
        none.setChecked(self.docs.collection is None)
        for name in self._collection_names():
            action = sub.addAction(shown(name), lambda n=name: self._choose(n))
            action.setCheckable(True)
            action.setChecked(name == self.docs.collection)
        menu.addAction("Manage collections…", self.open_collections)

    def _collection_names(self) -> list[str]:
        try:
            with DocIndex.open(self.index_path or default_path()) as index:
                return [c.name for c in index.collections()]
        except EngineError:
            return []

    def _choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Attach files", last_folder("documents"), FILE_FILTER)
        if files:
            remember("documents", files[0])
            (self.route or self.attach)(files)  # pictures go with the message (attachment_chips)

    def _detach(self, path: Path) -> None:
        self.docs.detach(path)
        self.refresh()
        self.changed.emit()

    def _choose(self, name: str | None) -> None:
        self.docs.choose_collection(name)
        self.refresh()
        self.changed.emit()

    def open_collections(self) -> CollectionsDialog:
        dialog = CollectionsDialog(self.index_path or default_path(), self.window())
        dialog.chosen.connect(self._choose)
        dialog.show()
        return dialog


class _Worker(QObject):
    """Runs one indexing job on a thread; its signals arrive on the window's thread."""

    progressed = Signal(object, int, int)  # a copy of the Progress, the bytes read, the bytes in all
    finished = Signal(object)  # IndexReport, or an EngineError

    def __init__(self, job: Callable[[Callable[[Progress], None], CancelToken], IndexReport]) -> None:
        super().__init__()
        self._job = job
        self.bytes: ByteCount | None = None  # the job sets it once it knows the files
        self.cancelled = CancelToken()
        self.runner = threading.Thread(target=self._run, name="ember-docs-index", daemon=True)

    def _run(self) -> None:
        try:
            report: object = self._job(self._progress, self.cancelled)
        except EngineError as exc:
            report = exc
        except Exception as exc:  # never a silent dead worker: the dialog would spin for ever
            log.exception("indexing failed")
            report = EngineError(f"indexing stopped: {shown(str(exc)) or type(exc).__name__}")
        self.finished.emit(report)

    def _progress(self, p: Progress) -> None:
        count = self.bytes
        done, total = (count.done(p), count.total) if count is not None else (0, 0)
        self.progressed.emit(dataclasses.replace(p), done, total)


class CollectionPrompts:
    """The dialog's one question (tests pass canned answers)."""

    def confirm(self, parent: QWidget, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            parent,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes


def _change_question(info: CollectionInfo, spec: str) -> str:
    name, ready = shown(info.collection.name), info.ready
    files = f"its {ready} file{'s' * (ready != 1)}"
    if not spec:
        return f"“{name}” will be searched by its words only, and the embeddings of {files} are removed."
    return (
        f"“{name}” will use {describe(spec)}: {files} {'are' if ready != 1 else 'is'} embedded again at the "
        "next index, which starts now and can take a while."
    )


def _detail_lines(roots: Sequence[Path], errors: Sequence[str]) -> list[str]:
    lines = ["Folders and files: " + (", ".join(shown(str(r)) for r in roots) or "none")]  # the model: above
    lines += [shown(e) for e in errors[:5]]  # rows an older Ember wrote may hold raw names
    if len(errors) > 5:
        lines.append(f"… and {len(errors) - 5} more unreadable files")
    return lines


class CollectionsDialog(QDialog):
    """Create, fill, re-index and remove collections; choose one for this conversation.

    Signals:
        chosen(str): "Use in this conversation" was pressed for this collection.
    """

    chosen = Signal(str)

    def __init__(self, index_path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Document collections")
        self.setObjectName("CollectionsDialog")
        self.index_path = index_path
        self.prompts = CollectionPrompts()
        self.worker: _Worker | None = None
        self.list = QListWidget(self)
        self.list.setAccessibleName("Collections")
        self.detail = QLabel(self)
        self.detail.setObjectName("Muted")
        self.detail.setWordWrap(True)
        self.embedder = EmbedderChoice(self)
        self.embedder.chosen.connect(self.change_embedder)
        self.embedder.refused.connect(self.detail.setText)
        self.progress = IndexProgress(self._cancel, self)
        self.new_name = self._make_name_row()
        self.buttons: dict[str, QPushButton] = {"cancel": self.progress.cancel}
        row = QHBoxLayout()
        for key, text, slot in (
            ("new", "New…", self._new),
            ("files", "Add files…", self._add_files),
            ("folder", "Add folder…", self._add_folder),
            ("reindex", "Re-index", self._reindex),
            ("remove", "Remove", self._remove),
            ("use", "Use in this conversation", self._use),
        ):
            button = QPushButton(text, self)
            button.setAutoDefault(False)  # Enter in the name field creates; it must not press New… again
            button.clicked.connect(slot)
            self.buttons[key] = button
            row.addWidget(button)
        # Cancel sits beside the progress bar, both shown only while indexing: in the row of
        # buttons it widened the dialog when it appeared, and the dialog stayed wide after.
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.name_row)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.embedder)
        layout.addWidget(self.detail)
        layout.addWidget(self.progress)
        layout.addLayout(row)
        layout.addWidget(close)
        self.list.currentItemChanged.connect(lambda *_: self._show_detail())
        self.resize(640, 420)
        self.reload()

    def _make_name_row(self) -> QLineEdit:
        """New…: the name is typed in a field of the dialog's width (Enter creates, Esc puts it away)."""
        self.name_row = QWidget(self)
        field = QLineEdit(self.name_row)
        field.setPlaceholderText("Name of the new collection, e.g. Manuals")
        field.setAccessibleName("New collection name")
        field.returnPressed.connect(self._create_named)
        create = QPushButton("Create", self.name_row)
        create.setProperty("kind", "primary")
        create.setAutoDefault(False)
        create.clicked.connect(self._create_named)
        create.setEnabled(False)
        field.textChanged.connect(lambda text: create.setEnabled(bool(text.strip())))
        cancel = QPushButton("Cancel", self.name_row)
        cancel.setAutoDefault(False)
        cancel.clicked.connect(self._put_name_away)
        row = QHBoxLayout(self.name_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("New collection:", self.name_row))
        row.addWidget(field, 1)
        row.addWidget(create)
        row.addWidget(cancel)
        self.name_row.hide()
        return field

    def _create_named(self) -> None:
        name = self.new_name.text().strip()
        if name:
            self._put_name_away()
            self.create_collection(name)

    def _put_name_away(self) -> None:
        self.new_name.clear()
        self.name_row.hide()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and self.name_row.isVisible():
            self._put_name_away()  # Esc in the name field puts the field away, not the dialog
            return
        super().keyPressEvent(event)

    # -- reading -----------------------------------------------------------------------------

    def _index(self) -> DocIndex:
        return DocIndex.open(self.index_path)

    def reload(self, select: str | None = None) -> None:
        current = select or self.selected()
        self.list.clear()
        try:
            with self._index() as index:
                infos = [index.info(c) for c in index.collections()]
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        for info in infos:
            pending = f", {info.indexing} unfinished" if info.indexing else ""
            failed = f", {info.failed} unreadable" if info.failed else ""
            item = QListWidgetItem(
                f"{shown(info.collection.name)} — {info.ready} file{'s' * (info.ready != 1)}, "
                f"{info.chunks:,} passage{'s' * (info.chunks != 1)}{failed}{pending}"
            )
            item.setData(Qt.ItemDataRole.UserRole, info.collection.name)
            self.list.addItem(item)
            if info.collection.name == current:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self._show_detail()

    def selected(self) -> str | None:
        item = self.list.currentItem()
        return None if item is None else str(item.data(Qt.ItemDataRole.UserRole))

    def _show_detail(self) -> None:
        name = self.selected()
        busy = self.worker is not None
        for key in ("files", "folder", "reindex", "remove", "use"):
            self.buttons[key].setEnabled(name is not None and not busy)
        self.buttons["new"].setEnabled(not busy)
        self.embedder.show_spec(None)
        if name is None:
            self.detail.setText("No collections yet: New… makes one from files and folders.")
            return
        try:
            with self._index() as index:
                coll = index.collection(name)
                roots = index.roots(coll)
                failed = [f for f in index.files(coll).values() if f.status == "failed"]
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        self.embedder.show_spec(coll.embedder)
        self.embedder.combo.setEnabled(not busy)  # the worker embeds with the collection's model
        self.detail.setText("\n".join(_detail_lines(roots, [f.error for f in failed])))

    # -- actions -----------------------------------------------------------------------------

    def _new(self) -> None:
        self.name_row.show()
        self.new_name.setFocus(Qt.FocusReason.OtherFocusReason)

    def create_collection(self, name: str) -> None:
        """A new collection embeds with the default model; an existing name is selected as it is."""
        try:
            with self._index() as index:
                existed = index.find_collection(name) is not None
                index.create_collection(name, DEFAULT_EMBEDDER)  # never changes an existing one's embedder
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        self.reload(select=name)
        if existed:
            self.detail.setText(f"“{shown(name)}” already exists: selected, its files and embedding model unchanged.")

    def _add_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add files", last_folder("documents"), FILE_FILTER)
        if files:
            remember("documents", files[0])
            self.add_paths([Path(f) for f in files])

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add folder", last_folder("documents"))
        if folder:
            remember("documents", Path(folder).parent)
            self.add_paths([Path(folder)])

    def add_paths(self, paths: Sequence[Path]) -> None:
        name = self.selected()
        if name is None:
            return
        try:
            with self._index() as index:
                index.add_roots(index.collection(name), [p.resolve() for p in paths])
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        self.index_selected()

    def _reindex(self) -> None:
        self.index_selected()

    def change_embedder(self, spec: str) -> None:
        """Give the selected collection another embedding model (`spec` as stored), asking first
        when its vectors would go; a new model's embeddings are then made at once."""
        name = self.selected()
        if name is None or self.worker is not None:
            return
        try:
            with self._index() as index:
                info = index.info(index.collection(name))
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        if info.collection.embedder == spec:
            return
        if info.vectors and not self.prompts.confirm(self, "Change the embedding model?", _change_question(info, spec)):
            self._show_detail()  # the combo back to the collection's model
            return
        try:
            with self._index() as index:
                index.set_embedder(info.collection, spec)
        except EngineError as exc:
            self._show_detail()
            self.detail.setText(str(exc))
            return
        self.reload(select=name)
        if spec and info.files:  # words alone keep their passages: nothing to read again
            self.index_selected()

    def index_selected(self) -> _Worker | None:
        """Index the selected collection on a worker thread (progress shown, Cancel stops it)."""
        name = self.selected()
        if name is None or self.worker is not None:
            return None
        path = self.index_path

        def job(progress: Callable[[Progress], None], cancel: CancelToken) -> IndexReport:
            with DocIndex.open(path) as index:  # its own connection, on the worker's thread
                coll = index.collection(name)
                worker.bytes = ByteCount(find_files(index.roots(coll))[0])  # the bar moves by bytes
                embedder = shared_embedder(coll.embedder) if coll.embedder else None  # kept loaded
                return index_collection(index, coll, embedder=embedder, progress=progress, cancel=cancel)

        worker = self.worker = _Worker(job)
        worker.progressed.connect(self._on_progress)
        worker.finished.connect(self._on_finished)
        self.progress.start()
        self._show_detail()  # the folders stay listed while they are read
        worker.runner.start()
        return worker

    def _on_progress(self, progress: Progress, done_bytes: int, total_bytes: int) -> None:
        self.progress.show_progress(progress, done_bytes, total_bytes)

    def _on_finished(self, report: object) -> None:
        self.worker = None
        self.progress.hide()
        self.reload()
        if isinstance(report, EngineError):
            self.detail.setText(str(report))
        elif isinstance(report, IndexReport):
            folders = self.detail.text().splitlines()[:1]  # "Folders and files: …" stays in sight
            self.detail.setText("\n".join(report_lines(report) + folders))

    def _cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancelled.cancel()

    def _remove(self) -> None:
        name = self.selected()
        if name is None:
            return
        try:
            with self._index() as index:
                index.remove_collection(index.collection(name))
        except EngineError as exc:
            self.detail.setText(str(exc))
            return
        self.reload()

    def _use(self) -> None:
        name = self.selected()
        if name is not None:
            self.chosen.emit(name)

    def reject(self) -> None:
        self._cancel()
        super().reject()
