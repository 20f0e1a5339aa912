"""The picker's details pane: what Ember knows about the selected model, before loading it.

Every value that came out of a file is untrusted text (a model's name or BOS token can
hold markup), so the facts are rendered as escaped HTML in a read-only browser that never
follows links or loads anything; the full metadata (as JSON) waits behind a Details expander.
"""

from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTextBrowser, QToolButton, QVBoxLayout, QWidget

from desktop.core.model_rows import ModelRow, detail_items, memory_estimate, memory_note
from desktop.qt.models.fast_copy_offer import FastCopyOffer


def details_html(row: ModelRow, *, everything: bool = False) -> str:
    """The facts table; with `everything`, the reader's own words and the whole metadata as JSON."""
    cells = "".join(
        f"<tr><td style='padding-right:12px'><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
        for k, v in detail_items(row)
    )
    parts = [f"<h3>{html.escape(row.name)}</h3>", f"<table cellspacing='2'>{cells}</table>"]
    if everything and row.error:
        parts.append(f"<p><b>Technical reason</b></p><p>{html.escape(row.error)}</p>")
    if everything and row.metadata is not None:
        raw = json.dumps(row.metadata.to_json(), indent=2, ensure_ascii=False)
        parts.append(f"<p><b>All metadata</b></p><pre style='white-space: pre-wrap'>{html.escape(raw)}</pre>")
    return "".join(parts)


class ModelDetails(QWidget):
    """A memory line, a warning (the model cannot load, or will not fit), then the facts."""

    PLACEHOLDER = "Select a model to see its details."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.memory = QLabel(self)
        self.memory.setObjectName("MemoryNote")
        self.memory.setAccessibleName("Memory estimate")
        self.memory.setWordWrap(True)
        self.memory.setTextFormat(Qt.TextFormat.PlainText)
        self.memory.setContentsMargins(2, 0, 2, 4)
        self.warning = QLabel(self)
        self.warning.setObjectName("MemoryWarning")
        self.warning.setAccessibleName("Memory warning")
        self.warning.setWordWrap(True)
        self.warning.setTextFormat(Qt.TextFormat.PlainText)
        self.warning.setContentsMargins(8, 6, 8, 6)
        self.offer = FastCopyOffer(self)  # a slow-format file: a faster copy, on request
        self.browser = QTextBrowser(self)
        self.browser.setObjectName("ModelFacts")
        self.browser.setAccessibleName("Model details")
        self.browser.setOpenLinks(False)
        self.browser.setOpenExternalLinks(False)
        self.expander = QToolButton(self)  # the metadata dump, for those who want it
        self.expander.setObjectName("DetailsExpander")
        self.expander.setCheckable(True)
        self.expander.setAutoRaise(True)
        self.expander.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.expander.setArrowType(Qt.ArrowType.RightArrow)
        self.expander.setText("Details")
        self.expander.setAccessibleName("Show all metadata")
        self.expander.toggled.connect(self._on_expanded)
        self._row: ModelRow | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.memory)
        layout.addWidget(self.warning)
        layout.addWidget(self.offer)
        layout.addWidget(self.browser, 1)
        layout.addWidget(self.expander)
        self.show_row(None)

    def show_row(self, row: ModelRow | None) -> None:
        self._row = row
        self.expander.setVisible(row is not None and (row.metadata is not None or bool(row.error)))
        self.offer.show_row(row)
        if row is None:
            self.browser.setPlainText(self.PLACEHOLDER)
            self._show_memory("", None)
            return
        self.browser.setHtml(details_html(row, everything=self.expander.isChecked()))
        estimate = memory_estimate(row)
        note = memory_note(estimate) if estimate is not None else ""
        warning = estimate.warning if estimate is not None else None
        self._show_memory(note, f"Can't load this model: {row.problem or row.error}" if row.error else warning)

    def _on_expanded(self, on: bool) -> None:
        self.expander.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.expander.setAccessibleName("Hide the metadata" if on else "Show all metadata")
        self.show_row(self._row)

    def _show_memory(self, note: str, warning: str | None) -> None:
        self.memory.setText(note)
        self.memory.setVisible(bool(note))
        self.warning.setText(warning or "")
        self.warning.setVisible(bool(warning))
