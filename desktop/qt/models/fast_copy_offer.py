"""The picker's offer to make a faster copy of a slow-format file (`ember models optimize`, in a child).

The work (requantize, compare quality, time) runs in its own process, so the window stays
responsive and a big model's two copies never share the window's memory; its one JSON line
says what was written, or its one stderr line why not.
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QProcess
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from desktop.core.model_rows import ModelRow
from engine.api.models import offer_text
from engine.api.program import function_child


class FastCopyOffer(QWidget):
    """One line of text and a button; hidden for files already fast (and for the built-in model)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.button = QPushButton("Make a faster copy", self)
        self.button.setAccessibleName("Make a faster copy")
        self.button.clicked.connect(self.start)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 0, 2, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        self.path: Path | None = None
        self.process: QProcess | None = None
        self.setVisible(False)

    def show_row(self, row: ModelRow | None) -> None:
        if self.process is not None:
            return  # a copy is being made: keep its progress on screen
        # The built-in model (a choice without a path) converts itself in the background.
        own_file = row is not None and row.choice.path is not None and row.metadata is not None
        text = offer_text(row.metadata) if own_file and row is not None and row.metadata is not None else None
        self.path = row.choice.path if text and row is not None else None
        self.label.setText(text or "")
        self.button.setEnabled(True)
        self.setVisible(text is not None)

    def start(self) -> None:
        if self.path is None or self.process is not None:
            return
        child = function_child("engine.rewrite.optimize_file:run_child", str(self.path))
        self.process = QProcess(self)
        self.process.setWorkingDirectory(child.cwd)
        self.process.finished.connect(self._finished)
        self.process.start(child.argv[0], child.argv[1:])
        self.button.setEnabled(False)
        self.label.setText("Making a faster copy and checking its quality (a minute or more)…")

    def _finished(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        out = bytes(process.readAllStandardOutput().data()).decode("utf-8", "replace").strip().splitlines()
        err = bytes(process.readAllStandardError().data()).decode("utf-8", "replace").strip().splitlines()
        self.label.setText(result_text(out[-1] if out else None, err[-1] if err else "the copy failed"))

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.waitForFinished(2000)


def result_text(json_line: str | None, error: str) -> str:
    """What the child's last lines mean for the user, in one line."""
    try:
        data = json.loads(json_line) if json_line else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return f"No copy made: {error}"
    if data.get("path"):
        return f"Written: {Path(str(data['path'])).name} ({data.get('reason', '')}). Add it with Add file…"
    return f"No copy made: {data.get('reason', error)}"
