"""The keyboard shortcuts sheet (F1 or Ctrl+/): every shortcut the window has, in one list."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QGridLayout, QLabel, QVBoxLayout, QWidget

from desktop.qt.look.theme import SPACE_LG, SPACE_MD, SPACE_SM

SHORTCUTS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Conversation",
        (
            ("Enter", "Send the message"),
            ("Shift+Enter", "New line in the message"),
            ("Esc", "Stop the reply"),
            ("Ctrl+N", "New conversation"),
            ("Ctrl+L", "Go to the message box"),
            ("Ctrl+Shift+C", "Copy the last reply"),
            ("Ctrl+R", "Answer the last question again"),
            ("Ctrl+K", "Search the conversations"),
        ),
    ),
    (
        "Conversation list",
        (
            ("F2", "Rename the selected conversation"),
            ("Ctrl+E", "Archive it, or take it out of the archive"),
            ("Delete", "Delete it (asks first, then offers Undo)"),
        ),
    ),
    (
        "Tool calls",
        (
            ("Enter or Y", "Approve the call"),
            ("A", "Always allow this tool in the conversation"),
            ("N", "Deny the call"),
        ),
    ),
    (
        "Window",
        (
            ("Ctrl+M", "Choose a model"),
            ("Ctrl+,", "Model settings"),
            ("Ctrl+B", "Show or hide the sidebar"),
            ("Ctrl+= / Ctrl+-", "Larger / smaller text"),
            ("Ctrl+0", "Default text size"),
            ("Ctrl+Shift+D", "Light or dark"),
            ("F1 or Ctrl+/", "This list"),
            ("Ctrl+Q", "Quit"),
        ),
    ),
)


class ShortcutsSheet(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ShortcutsSheet")
        self.setWindowTitle("Keyboard shortcuts")
        grid = QGridLayout()
        grid.setHorizontalSpacing(SPACE_LG)
        grid.setVerticalSpacing(SPACE_SM)
        row = 0
        for section, items in SHORTCUTS:
            heading = QLabel(section, self)
            heading.setObjectName("SheetHeading")
            grid.addWidget(heading, row, 0, 1, 2)
            row += 1
            for keys, what in items:
                key_label = QLabel(keys, self)
                key_label.setObjectName("ShortcutKeys")
                grid.addWidget(key_label, row, 0, Qt.AlignmentFlag.AlignRight)
                grid.addWidget(QLabel(what, self), row, 1)
                row += 1
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE_LG, SPACE_LG, SPACE_LG, SPACE_MD)
        layout.addLayout(grid)
        layout.addWidget(buttons)


def show_shortcuts_sheet(parent: QWidget) -> ShortcutsSheet:
    """Open the sheet (window-modal, not blocking the event loop); one at a time."""
    existing = parent.findChild(ShortcutsSheet)
    sheet = existing if isinstance(existing, ShortcutsSheet) else ShortcutsSheet(parent)
    sheet.open()
    return sheet
