"""The composer's "Reply format" button and the JSON Schema editor it opens.

The editor checks the schema as it is typed (JSON syntax, then the JSON Schema meta-schema,
offline) and says what is wrong in one line under it; Save stays disabled until it is valid.
"""

from __future__ import annotations

import json
from functools import partial

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QResizeEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.look.style import monospace_font
from engine.api.session import SCHEMA_TEMPLATE, FormatKind, ReplyFormat, parse_schema_text

_MENU: tuple[tuple[FormatKind, str], ...] = (
    ("text", "Plain text"),
    ("json", "Any JSON object"),
    ("schema", "JSON schema…"),
)
_SHORT: dict[FormatKind, str] = {"text": "Text", "json": "JSON", "schema": "Schema"}
_TIPS: dict[FormatKind, str] = {
    "text": "Replies are ordinary text.",
    "json": "Replies are one JSON object.",
    "schema": "Replies are JSON matching your schema.",
}


class OneLineLabel(QLabel):
    """A label that shows the first line of its text, elided to its width; the whole text is the tooltip."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the dialog

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        first_line = self._full.splitlines()[0] if self._full else ""
        self.setText(self.fontMetrics().elidedText(first_line, Qt.TextElideMode.ElideRight, max(40, self.width())))


class SchemaDialog(QDialog):
    """Edit the JSON Schema that replies must match."""

    def __init__(self, text: str = SCHEMA_TEMPLATE, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Reply format: JSON schema")
        self.setObjectName("SchemaDialog")
        self.resize(520, 420)
        intro = QLabel("Replies will be JSON that matches this schema.", self)
        intro.setWordWrap(True)
        self.editor = QPlainTextEdit(self)
        self.editor.setAccessibleName("JSON schema")
        self.editor.setFont(monospace_font())
        self.editor.setTabChangesFocus(True)
        self.error = OneLineLabel(self)
        self.error.setObjectName("SchemaError")
        self.error.setAccessibleName("Schema problem")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.editor.textChanged.connect(self._validate)
        self.editor.setPlainText(text)
        self._schema: dict[str, object] | None = None
        self._validate()

    @property
    def save_button(self) -> QPushButton:
        return self.buttons.button(QDialogButtonBox.StandardButton.Save)

    def schema(self) -> dict[str, object] | None:
        """The schema as typed, when it is valid."""
        return self._schema

    def _validate(self) -> None:
        self._schema, problem = parse_schema_text(self.editor.toPlainText())
        self.error.set_full_text(problem)  # one line, however long the validator's message
        self.save_button.setEnabled(self._schema is not None)


class ReplyFormatButton(QToolButton):
    """ "Reply: Text ▾" with a menu: Plain text, Any JSON object, JSON schema…

    Signals:
        formatChosen(object): the user picked a `ReplyFormat`.
    """

    formatChosen = Signal(object)
    formatShown = Signal(object)  # the format now shown (chosen, or the open conversation's)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ReplyFormatButton")
        self.setAccessibleName("Reply format")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self._format = ReplyFormat()
        self.dialog: SchemaDialog | None = None
        self._actions = self._build_menu()
        self.show_format(self._format)

    def _build_menu(self) -> dict[FormatKind, QAction]:
        menu = QMenu("Reply format", self)
        group = QActionGroup(menu)
        actions: dict[FormatKind, QAction] = {}
        for kind, label in _MENU:
            action = menu.addAction(label)
            action.setCheckable(True)
            action.setToolTip(_TIPS[kind])
            group.addAction(action)
            action.triggered.connect(partial(self._on_chosen, kind))
            actions[kind] = action
        self.setMenu(menu)
        return actions

    @property
    def current(self) -> ReplyFormat:
        return self._format

    def show_format(self, fmt: ReplyFormat) -> None:
        """Show the open conversation's format (no signal)."""
        self._format = fmt
        self.setText(f"{_SHORT[fmt.kind]}  ▾")
        self.setToolTip(f"Reply format: {fmt.label}. {_TIPS[fmt.kind]}")
        self._actions[fmt.kind].setChecked(True)
        self.formatShown.emit(fmt)

    def open_schema_editor(self) -> SchemaDialog:
        """Open the schema editor (window-modal, not blocking the event loop)."""
        current = self._format.schema_value
        text = json.dumps(current, indent=2) if current else SCHEMA_TEMPLATE
        self.dialog = SchemaDialog(text, self.window())
        self.dialog.accepted.connect(self._on_schema_saved)
        self.dialog.rejected.connect(lambda: self.show_format(self._format))  # the menu's check goes back
        self.dialog.open()
        return self.dialog

    def _on_chosen(self, kind: FormatKind, _checked: bool = False) -> None:
        if kind == "schema":
            self.open_schema_editor()
            return
        self._choose(ReplyFormat(kind))

    def _on_schema_saved(self) -> None:
        schema = self.dialog.schema() if self.dialog is not None else None
        if schema is not None:
            self._choose(ReplyFormat("schema", schema))

    def _choose(self, fmt: ReplyFormat) -> None:
        self.show_format(fmt)
        self.formatChosen.emit(fmt)
