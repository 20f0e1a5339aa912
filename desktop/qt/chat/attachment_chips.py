"""Attachments you can see: chips above the message box, the same on the sent question, a drop overlay.

Pictures and files attached to the next message show as chips above the box (a thumbnail, or
the file's name), each with × to take it out; a click opens it (a picture full size in a
window, a file in its own application). The sent question shows the same chips without ×,
and a reopened conversation shows its pictures again. Files and screenshots come by the
paperclip, by pasting (Ctrl+V of a screenshot or of copied files) or by dropping anywhere on
the chat, where a "Drop files here" overlay shows while something is dragged over.

Pictures are decoded by `QImageReader` only after its header size passed the pixel bound,
and straight at the size shown (`setScaledSize`), so a hostile picture costs no more memory
than its chip. Pictures go with the message (`desktop.core.pending_images`); other files go
to the paperclip's documents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QMimeData, QObject, QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QAction,
    QDesktopServices,
    QDragEnterEvent,
    QDropEvent,
    QImage,
    QImageReader,
    QImageWriter,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import (
    QBoxLayout,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.pending_images import PendingImages, sort_dropped
from desktop.qt.chat.composer import ComposerBar
from desktop.qt.chat.documents_ui import DocumentsButton
from desktop.qt.chat.message_view import UserMessage
from engine.api.conversations import DamagedImage
from engine.api.text import escaped as shown
from engine.api.values import MAX_PIXELS, ImageData

THUMB = 48  # a chip's picture, in pixels (its longer side)
VIEW_MAX = 2048  # a picture opened full size is shown at most this large
NAME_CHARS = 24


def decode(data: bytes, longest: int) -> QImage | None:
    """The picture scaled to at most `longest` pixels on its longer side; None if it is refused or broken."""
    buffer = QBuffer()
    buffer.setData(QByteArray(data))
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buffer)
    reader.setAutoTransform(True)
    size = reader.size()
    if not size.isValid() or size.width() * size.height() > MAX_PIXELS:
        return None
    scale = min(1.0, longest / max(size.width(), size.height(), 1))
    reader.setScaledSize(QSize(max(1, round(size.width() * scale)), max(1, round(size.height() * scale))))
    image = reader.read()
    return None if image.isNull() else image


def png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    QImageWriter(buffer, QByteArray(b"png")).write(image)
    return bytes(buffer.data().data())


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 9] + "…" + name[-8:]


class Chip(QFrame):
    """One attachment: thumbnail or name, × when it can be taken out; a click opens it.

    Signals:
        removeRequested(): × was pressed.
        opened(): the chip was clicked (or Enter pressed on it).
    """

    removeRequested = Signal()
    opened = Signal()

    def __init__(self, name: str, picture: QImage | None, *, removable: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AttachmentChip")
        self.name = name
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAccessibleName(f"Attachment {name}")
        self.setToolTip(f"{name} — click to open")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 2 if removable else 6, 2)
        layout.setSpacing(4)
        self.thumbnail = QLabel(self)
        if picture is not None:
            self.thumbnail.setPixmap(QPixmap.fromImage(picture))
        else:
            self.thumbnail.setText("📄")
        layout.addWidget(self.thumbnail)
        layout.addWidget(QLabel(_short(name), self))
        self.remove_button: QToolButton | None = None
        if removable:
            self.remove_button = QToolButton(self)
            self.remove_button.setText("×")
            self.remove_button.setAutoRaise(True)
            self.remove_button.setAccessibleName(f"Remove {name}")
            self.remove_button.setToolTip(f"Remove {name}")
            self.remove_button.clicked.connect(self.removeRequested)
            layout.addWidget(self.remove_button)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(event.position().toPoint()):
            self.opened.emit()
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: object) -> None:
        from PySide6.QtGui import QKeyEvent

        if isinstance(event, QKeyEvent) and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            self.opened.emit()
            return
        if isinstance(event, QKeyEvent):
            super().keyPressEvent(event)


class PictureWindow(QDialog):
    """A picture full size (at most VIEW_MAX pixels on its longer side), scrollable."""

    def __init__(self, image: ImageData, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PictureWindow")
        self.setWindowTitle(image.name)
        picture = decode(image.data, VIEW_MAX)
        label = QLabel(self)
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        if picture is None:
            label.setText(f"{image.name} cannot be shown (a damaged or oversized picture).")
        else:
            label.setPixmap(QPixmap.fromImage(picture))
        self.label = label
        area = QScrollArea(self)
        area.setWidget(label)
        area.setWidgetResizable(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(area)
        self.resize(
            min(900, (picture.width() if picture else 400) + 24), min(700, (picture.height() if picture else 200) + 24)
        )


def open_picture(image: ImageData, parent: QWidget | None) -> PictureWindow:
    window = PictureWindow(image, parent)
    window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    window.show()
    return window


def open_file(path: Path) -> None:
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


def picture_chip(image: ImageData, *, removable: bool, parent: QWidget | None = None) -> Chip:
    chip = Chip(image.name, decode(image.data, THUMB), removable=removable, parent=parent)
    chip.opened.connect(lambda: open_picture(image, chip.window()))
    return chip


def damaged_chip(image: DamagedImage, parent: QWidget | None = None) -> Chip:
    """A stored picture that could not be read back: its place, its name, why (nothing opens)."""
    chip = Chip(f"{image.name} (unavailable)", None, removable=False, parent=parent)
    chip.thumbnail.setText("⚠")
    chip.setToolTip(image.note)
    chip.setAccessibleDescription(image.note)
    chip.setCursor(Qt.CursorShape.ArrowCursor)
    return chip


def file_chip(path: Path, *, removable: bool, parent: QWidget | None = None) -> Chip:
    chip = Chip(path.name, None, removable=removable, parent=parent)
    chip.opened.connect(lambda: open_file(path))
    return chip


def state_chip(label: str, tip: str, parent: QWidget | None = None) -> Chip:
    """A chip for something the next message goes with that is not a file: the collection it
    searches, the tools it may use. No picture; × turns it off."""
    chip = Chip(label, None, removable=True, parent=parent)
    chip.setObjectName("StateChip")
    chip.thumbnail.hide()
    chip.setToolTip(tip)
    chip.setCursor(Qt.CursorShape.ArrowCursor)
    if chip.remove_button is not None:
        chip.remove_button.setToolTip(f"Turn off: {label}")
        chip.remove_button.setAccessibleName(f"Turn off {label}")
    return chip


class ChipRow(QWidget):
    """A row of chips; hidden while empty."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AttachmentChips")
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self.chips: list[Chip] = []
        self.hide()

    def set_chips(self, chips: Sequence[Chip]) -> None:
        for old in self.chips:
            old.hide()
            old.deleteLater()
        while self._layout.count():
            self._layout.takeAt(0)
        self.chips = list(chips)
        for chip in self.chips:
            chip.setParent(self)
            self._layout.addWidget(chip)
        self._layout.addStretch(1)
        self.setVisible(bool(self.chips))


def add_question_chips(
    message: UserMessage,
    images: Sequence[ImageData],
    files: Sequence[Path] = (),
    damaged: Sequence[DamagedImage] = (),
) -> None:
    """The sent question's attachments, under its bubble, without ×; a damaged picture as a placeholder."""
    if not images and not files and not damaged:
        return
    row = ChipRow(message)
    row.set_chips(
        [picture_chip(i, removable=False) for i in images]
        + [damaged_chip(d) for d in damaged]
        + [file_chip(f, removable=False) for f in files]
    )
    layout = message.layout()
    if isinstance(layout, QBoxLayout):
        layout.insertWidget(1, row, 0, Qt.AlignmentFlag.AlignRight)


class DropOverlay(QLabel):
    """ "Drop files here" over the chat while files are dragged over it: nearly opaque, so the
    words under it (suggestions, shortcut hints) do not show through and collide with it."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(
            "<div style='font-size:18pt'>Drop files here</div>"
            "<div style='font-size:10pt'>Pictures go to the model with your next message;"
            " other files are read as documents</div>",
            parent,
        )
        self.setObjectName("DropOverlay")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.hide()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        fill = self.palette().color(QPalette.ColorRole.Window)
        fill.setAlpha(235)
        painter.fillRect(self.rect(), fill)
        pen = QPen(self.palette().color(QPalette.ColorRole.Highlight), 2, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.drawRoundedRect(self.rect().adjusted(6, 6, -7, -7), 10, 10)
        painter.end()
        super().paintEvent(event)  # the words, over the fill

    def cover(self) -> None:
        parent = self.parentWidget()
        if parent is not None:
            self.setGeometry(parent.rect())
        self.raise_()
        self.show()


CANNOT_SEE = (
    "This model can't see pictures, so it would get your message without them. "
    "<a href='choose'>Choose a model that can see pictures…</a> or remove them."
)


class Attachments(QObject):
    """The window's attachments: the chips above the box, routing, paste, drop anywhere.

    Signals:
        chooseModelRequested(): the "Choose a model that can see pictures…" link was clicked.
    """

    chooseModelRequested = Signal()

    def __init__(
        self, window: QMainWindow, composer: ComposerBar, pending: PendingImages, docs: DocumentsButton | None
    ) -> None:
        super().__init__(window)
        self.window = window
        self.docs = docs
        self.pending = pending
        self.composer = composer
        self.row = ChipRow()
        self.tools: QAction | None = None  # "Let the model use tools": on shows a "Tools on" chip
        self.model_sees: Callable[[], bool] = lambda: True  # the loaded model takes pictures
        self.warning = QLabel(CANNOT_SEE)
        self.warning.setObjectName("PictureWarning")
        self.warning.setWordWrap(True)
        self.warning.setTextFormat(Qt.TextFormat.RichText)
        self.warning.linkActivated.connect(lambda _link: self.chooseModelRequested.emit())
        self.warning.hide()
        self.problem = ""  # the last refusal shown (for tests and the status bar)
        self._sending_files: list[Path] = []
        self._routing: set[asyncio.Task[None]] = set()  # drops being read on a worker
        self.chat = self._place_row()
        self.overlay = DropOverlay(self.chat or window)
        self._wire()
        self.refresh()

    def _place_row(self) -> QWidget | None:
        """Above the composer row, in the chat column (None when the layout is not the expected one)."""
        composer_row = self.composer.parentWidget()
        chat = composer_row.parentWidget() if composer_row is not None else None
        layout = chat.layout() if chat is not None else None
        if composer_row is None or not isinstance(layout, QBoxLayout):
            return None
        self.row.setParent(chat)
        self.row.setContentsMargins(12, 4, 12, 0)
        layout.insertWidget(layout.indexOf(composer_row), self.row)
        self.warning.setParent(chat)
        self.warning.setContentsMargins(16, 4, 16, 0)
        layout.insertWidget(layout.indexOf(self.row), self.warning)
        return chat

    def _wire(self) -> None:
        edit = self.composer.edit
        if self.docs is not None:  # dropped and chosen files come here first: pictures stay, the rest are documents
            self.docs.route = self.route
            self.docs.changed.connect(self.refresh)
        edit.filesDropped.connect(self.route)
        edit.imagePasted.connect(self.paste)
        self.composer.submitted.connect(self._snapshot)
        self.pending.changed.append(self.refresh)
        self.pending.on_sent.append(self._on_sent)
        self.window.setAcceptDrops(True)
        self.window.installEventFilter(self)
        if self.chat is not None:
            self.chat.installEventFilter(self)

    # -- what arrives ------------------------------------------------------------------------

    def route(self, paths: Sequence[str | Path]) -> None:
        """Pictures go with the message; other files to the paperclip's documents. The files are
        read on a worker thread (`sort_dropped`): a pipe or a slow disk never holds the window."""
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # no loop (the window is closing)
            return
        task = loop.create_task(self._route([Path(p) for p in paths]))
        self._routing.add(task)  # kept until done: a task only weakly referenced may be collected
        task.add_done_callback(self._routing.discard)

    @property
    def reading(self) -> bool:
        """Whether dropped files are still being read (their chips are not there yet)."""
        return bool(self._routing)

    async def _route(self, paths: list[Path]) -> None:
        files: list[Path] = []
        for dropped in await asyncio.to_thread(sort_dropped, paths):
            if dropped.image is not None:
                self._note(self.pending.add(dropped.image))
            elif dropped.problem:
                self._note(dropped.problem)
            else:
                files.append(dropped.path)
        if files and self.docs is not None:
            self.docs.attach(files)
        elif files:
            self._note(f"{files[0].name}: only pictures can be attached here")

    def paste(self, source: QMimeData) -> None:
        """A picture without a file (a screenshot): checked, kept as PNG."""
        image = source.imageData()
        if not isinstance(image, QImage) or image.isNull():
            self._note("the pasted picture could not be read")
            return
        if image.width() * image.height() > MAX_PIXELS:
            self._note(f"the pasted picture is {image.width()}×{image.height()} pixels; too large")
            return
        self._note(self.pending.add_bytes(png_bytes(image), f"pasted-{len(self.pending.items) + 1}.png"))

    def _note(self, problem: str | None) -> None:
        if problem:
            self.problem = problem
            self.window.statusBar().showMessage(problem, 8000)

    # -- what shows --------------------------------------------------------------------------

    def show_tools(self, toggle: QAction) -> None:
        """Show a "Tools on" chip while `toggle` is on (its × turns the tools off)."""
        self.tools = toggle
        toggle.toggled.connect(lambda _on: self.refresh())
        self.refresh()

    def refresh(self) -> None:
        """Everything the next message goes with, as chips: pictures, files (new or still attached),
        the collection it searches, the tools."""
        chips = [self._pending_chip(i, image) for i, image in enumerate(self.pending.items)]
        for path in self._pending_files():
            chip = file_chip(path, removable=True)
            chip.removeRequested.connect(lambda p=path: self._detach(p))
            chips.append(chip)
        chips += self._state_chips()
        self.row.set_chips(chips)
        # Said when the picture is attached, not after Send: the way out is a click away.
        self.warning.setVisible(bool(self.pending.items) and not self.model_sees())

    def _state_chips(self) -> list[Chip]:
        chips: list[Chip] = []
        collection = self.docs.docs.collection if self.docs is not None else None
        if collection:
            chip = state_chip(
                f"Collection: {shown(collection)}",
                f"Each message searches the collection “{shown(collection)}”; × stops that",
            )
            chip.removeRequested.connect(self._stop_collection)
            chips.append(chip)
        if self.tools is not None and self.tools.isChecked():
            chip = state_chip("Tools on", "The model may use tools in this conversation; × turns them off")
            chip.removeRequested.connect(lambda: self._tools_off())
            chips.append(chip)
        return chips

    def _stop_collection(self) -> None:
        if self.docs is not None:
            self.docs.docs.choose_collection(None)
            self.docs.refresh()
            self.docs.changed.emit()
        self.composer.focus_edit()

    def _tools_off(self) -> None:
        if self.tools is not None:
            self.tools.setChecked(False)
        self.composer.focus_edit()

    def _pending_chip(self, index: int, image: ImageData) -> Chip:
        chip = picture_chip(image, removable=True)
        chip.removeRequested.connect(lambda: self._remove(index))
        return chip

    def _remove(self, index: int) -> None:
        self.pending.remove(index)
        self.composer.focus_edit()

    def _pending_files(self) -> list[Path]:
        """The files the next message is read with: new ones, and those still attached from before."""
        if self.docs is None:
            return []
        docs = self.docs.docs
        return [*docs.pending, *(p for p in docs.attached if p not in docs.pending)]

    def _detach(self, path: Path) -> None:
        if self.docs is not None:
            self.docs.docs.detach(path)
            self.docs.refresh()
            self.docs.changed.emit()
        self.composer.focus_edit()

    def _snapshot(self, _text: str) -> None:
        self._sending_files = list(self.docs.docs.pending) if self.docs is not None else []  # new with this one

    def _on_sent(self, images: Sequence[ImageData]) -> None:
        questions = self.window.findChildren(UserMessage)
        if questions:
            add_question_chips(questions[-1], images, self._sending_files)
        self._sending_files = []

    # -- drop anywhere -----------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if watched is self.chat and kind == QEvent.Type.Resize and self.overlay.isVisible():
            self.overlay.cover()
        if watched is not self.window:
            return False
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and isinstance(event, QDragEnterEvent | QDropEvent):
            mime = event.mimeData()
            if mime.hasUrls() or mime.hasImage():
                event.acceptProposedAction()
                self.overlay.cover()
                return True
        if kind == QEvent.Type.DragLeave:
            self.overlay.hide()
        if kind == QEvent.Type.Drop and isinstance(event, QDropEvent):
            self.overlay.hide()
            self.drop(event.mimeData())
            event.acceptProposedAction()
            return True
        return False

    def drop(self, mime: QMimeData) -> None:
        files = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
        if files:
            self.route(files)
        elif mime.hasImage():
            self.paste(mime)
        self.composer.focus_edit()
