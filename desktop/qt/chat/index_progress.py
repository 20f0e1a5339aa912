"""Indexing a collection, shown as a person reads it: by bytes, in words beside the bar.

The bar moves by the bytes of the files read so far (one large PDF and ten small notes do not
weigh the same), its words sit beside it rather than across the fill (where half of them were
white on orange and half dark on white), and "pages" is said only when a paged file (a PDF)
was read. The finished report says how many files were indexed, unchanged and left out, and
why each left-out one was (a compressed file, a file that cannot be read).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from engine.api.documents import IndexReport, Progress, pace_words
from engine.api.models import format_bytes
from engine.api.text import escaped as shown

SHOWN_REASONS = 8  # left-out files listed by name, the rest counted


class ByteCount:
    """How many bytes of the files to index are read, from the file being read now."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._before: dict[str, int] = {}  # each file: the bytes of the files before it
        total = 0
        for path in paths:
            self._before[str(path)] = total
            try:
                total += os.stat(path).st_size
            except OSError:
                pass
        self.total = total

    def done(self, progress: Progress) -> int:
        if not progress.current:  # finished
            return self.total if progress.files_done else 0
        return self._before.get(progress.current, 0)


def progress_words(progress: Progress, done_bytes: int, total_bytes: int) -> str:
    """`Reading notes.txt · 1.2 MB of 3.4 MB · 4 of 18 files · 60 passages · 14.2 passages/s · about
    4 min left` (pages only when there are; the pace once the indexer can say it)."""
    parts = [f"Reading {shown(Path(progress.current).name)}" if progress.current else "Finishing"]
    if total_bytes:
        parts.append(f"{format_bytes(done_bytes)} of {format_bytes(total_bytes)}")
    parts.append(f"{progress.files_done} of {progress.files_total} file{'s' * (progress.files_total != 1)}")
    if progress.pages:
        parts.append(f"{progress.pages:,} page{'s' * (progress.pages != 1)}")
    parts.append(f"{progress.chunks:,} passage{'s' * (progress.chunks != 1)}")
    if pace := pace_words(progress.passages_per_s, progress.seconds_left):
        parts.append(pace)
    return " · ".join(parts)


def report_lines(report: IndexReport) -> list[str]:
    """What an index run did: counts first, then each file left out with its reason."""
    left_out = report.failed + report.skipped
    said = f"{len(report.indexed)} indexed, {report.unchanged} unchanged"
    if left_out:
        said += f", {len(left_out)} left out"
    if report.cancelled:
        said += " — stopped; Re-index goes on from here"
    lines = [said]
    lines += [shown(reason) for _, reason in left_out[:SHOWN_REASONS]]
    if len(left_out) > SHOWN_REASONS:
        lines.append(f"… and {len(left_out) - SHOWN_REASONS} more left out")
    lines += [shown(reason) for _, reason in report.notes[:SHOWN_REASONS]]
    return lines


class IndexProgress(QWidget):
    """The bar (no text on it), the words beside it, and Cancel: shown only while indexing."""

    def __init__(self, cancel: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar(self)
        self.bar.setTextVisible(False)
        self.bar.setAccessibleName("Indexing progress")
        self.words = QLabel(self)
        self.words.setObjectName("Muted")
        self.words.setWordWrap(True)
        self.cancel = QPushButton("Cancel indexing", self)
        self.cancel.clicked.connect(cancel)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.words)
        self.hide()

    def start(self) -> None:
        self.bar.setRange(0, 0)  # busy until the first figures come
        self.words.setText("Looking for files…")
        self.show()

    def show_progress(self, progress: Progress, done_bytes: int, total_bytes: int) -> None:
        if total_bytes:
            self.bar.setRange(0, 1000)
            self.bar.setValue(round(1000 * min(done_bytes, total_bytes) / total_bytes))
        else:
            self.bar.setRange(0, max(1, progress.files_total))
            self.bar.setValue(progress.files_done)
        self.words.setText(progress_words(progress, done_bytes, total_bytes))
