"""The sidebar's way into the archive: a button at the bottom, "Archived (3)", that swaps the list.

Checked, the list shows the archived conversations (a heading above it says so) and the
button reads "Back to conversations". Hidden while nothing is archived and the list is
not showing the archive.
"""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton, QWidget


class ArchiveToggle(QPushButton):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ArchiveToggle")
        self.setCheckable(True)
        self.setFlat(True)
        self._count = 0
        self.toggled.connect(lambda _on: self._show())
        self._show()

    @property
    def count(self) -> int:
        return self._count

    def set_count(self, count: int) -> None:
        self._count = count
        self._show()

    def _show(self) -> None:
        if self.isChecked():
            self.setText("←  Back to conversations")
            self.setToolTip("Show the conversation list again")
        else:
            self.setText(f"Archived ({self._count})  →")
            self.setToolTip("Conversations set aside: open, search or unarchive them here")
        self.setAccessibleName(self.text().replace("→", "").replace("←", "").strip())
        self.setVisible(self.isChecked() or self._count > 0)
