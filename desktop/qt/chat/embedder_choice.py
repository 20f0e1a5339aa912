"""The collections dialog's "Embedding model" control: the default, none (words only), or a GGUF file.

The combo shows the selected collection's choice; picking another emits `chosen` with what the
collection will store (`DEFAULT_EMBEDDER`, "" for words alone, or a GGUF path), and the dialog
asks, changes it and indexes. A chosen file is checked first from its header, with the same
check as `ember docs add --embedder` (`embedder_kind`): a file that is not a GGUF, or cannot be
read, is refused in one line; a chat model is taken, with a line under the combo saying it
will be slow and its search poor.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from desktop.qt.look.last_folder import choose_gguf
from desktop.qt.look.style import warning_border, warning_fill
from engine.api.documents import DEFAULT_EMBEDDER, embedder_kind
from engine.api.errors import EngineError
from engine.api.text import escaped as shown

DEFAULT_LABEL = "Default (all-MiniLM-L6-v2)"
NONE_LABEL = "None (words only)"
CHOOSE_LABEL = "Choose a GGUF file…"
_CHOOSE = "\0choose"  # the file item's data: never a stored choice (a path has no NUL)


class EmbedderPrompts:
    """The file dialog (tests pass a fake)."""

    def gguf_file(self, parent: QWidget) -> Path | None:
        return choose_gguf(parent, "Choose an embedding model")


def describe(spec: str) -> str:
    """A collection's stored embedder in words, for the combo and the dialog's detail."""
    if spec == DEFAULT_EMBEDDER:
        return DEFAULT_LABEL
    return shown(Path(spec).name) if spec else NONE_LABEL


def chat_model_note(name: str) -> str:
    return (
        f"{shown(name)} is a chat model, not an embedding model: embedding will be slow (minutes where "
        "the default takes seconds) and search results poor. The default, or an embedding model such as "
        "nomic-embed, bge or e5, works better."
    )


def _reason(exc: EngineError) -> str:
    """The reader's one-line reason without its technical tail ("not a GGUF file (wrong magic …)")."""
    cause = exc.__cause__
    return str(cause if cause is not None else exc).split(" (", 1)[0]


def checked_file(path: Path) -> str:
    """`path` as a collection's embedder (resolved), or EngineError with one plain line."""
    path = path.expanduser().resolve()
    try:
        embedder_kind(path)
    except EngineError as exc:
        raise EngineError(
            f"{shown(path.name)} cannot be the embedding model: {_reason(exc)}. Nothing changed."
        ) from exc
    return str(path)


def note_for(spec: str) -> str:
    """The line under the combo for a stored choice: a chat model's warning, a file gone, or ''."""
    if spec in ("", DEFAULT_EMBEDDER):
        return ""
    path = Path(spec)
    try:
        kind = embedder_kind(path)
    except EngineError as exc:
        return f"{shown(path.name)} cannot be read ({_reason(exc)}): choose another embedding model."
    return "" if kind.encoder else chat_model_note(path.name)


class EmbedderChoice(QWidget):
    """ "Embedding model: [combo]" and a note under it.

    Signals:
        chosen(str): the user picked another choice (a file already checked).
        refused(str): the picked file cannot be an embedding model; one line, nothing changed.
    """

    chosen = Signal(str)
    refused = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompts = EmbedderPrompts()
        self.spec: str | None = None  # the shown collection's choice; None when none is selected
        self.combo = QComboBox(self)
        self.combo.setAccessibleName("Embedding model")
        self.combo.activated.connect(self._activated)  # the user's picks only, not show()
        self.note = QLabel(self)
        self.note.setObjectName("EmbedderWarning")
        self.note.setWordWrap(True)
        self.note.hide()
        p = self.palette()  # the models window's memory warning box, for the same kind of caution
        self.note.setStyleSheet(
            f"#EmbedderWarning {{ background: {warning_fill(p).name()}; border: 1px solid "
            f"{warning_border(p).name()}; border-radius: 6px; padding: 4px 6px; }}"
        )
        label = QLabel("Embedding model:", self)
        label.setBuddy(self.combo)
        row = QHBoxLayout()
        row.addWidget(label)
        row.addWidget(self.combo, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.note)
        self.show_spec(None)

    def show_spec(self, spec: str | None) -> None:
        """Show a collection's choice (None: no collection selected) and its note."""
        self.spec = spec
        self.combo.clear()
        self.combo.addItem(DEFAULT_LABEL, DEFAULT_EMBEDDER)
        self.combo.addItem(NONE_LABEL, "")
        if spec not in (None, "", DEFAULT_EMBEDDER):
            self.combo.addItem(describe(spec or ""), spec)
            self.combo.setItemData(2, spec, Qt.ItemDataRole.ToolTipRole)  # the whole path
        self.combo.addItem(CHOOSE_LABEL, _CHOOSE)
        self.combo.setCurrentIndex(max(0, self.combo.findData(spec)) if spec is not None else 0)
        self.combo.setEnabled(spec is not None)
        note = note_for(spec or "")
        self.note.setText(note)
        self.note.setVisible(bool(note))

    def _activated(self, index: int) -> None:
        picked = self.combo.itemData(index)
        if picked == _CHOOSE:
            self._choose_file()
        elif isinstance(picked, str) and picked != self.spec:
            self.chosen.emit(picked)

    def _choose_file(self) -> None:
        path = self.prompts.gguf_file(self)
        if path is None:
            self.show_spec(self.spec)  # back to the collection's own choice
            return
        try:
            spec = checked_file(path)
        except EngineError as exc:
            self.show_spec(self.spec)
            self.refused.emit(str(exc))
            return
        if spec == self.spec:
            self.show_spec(spec)
        else:
            self.chosen.emit(spec)
