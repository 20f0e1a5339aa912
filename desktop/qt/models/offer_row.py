"""One row of the "Get models" page: a model, its fit mark, its file menu, and its download in place.

The row shows the model's name, facts and licence link; the chosen file's "fits this machine"
mark with its reason; a Download button that turns into a progress bar with speed, time
left and Cancel while the file downloads, and into "Use this model" when it is on disk.

Signals:
    downloadRequested(object): this row (its chosen file) should be downloaded.
    useRequested(object): the downloaded file of this row should be loaded.
    cancelRequested(object): the running download of this row should stop.
    linkOpened(str): the licence link was activated.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QWidget,
)

from desktop.core.get_models import ModelOffer, OfferedFile, progress_text
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.theme import SPACE_MD, SPACE_SM, SPACE_XS
from engine.api.machine import Fit
from engine.api.models import format_bytes

MARKS = {Fit.GPU: "✓", Fit.CPU: "✓", Fit.PARTIAL: "◐", Fit.TOO_BIG: "✕"}


def mark_style(fit: Fit) -> str:
    """The chip's colours: readable text on a soft fill, the symbol saying it without colour too."""
    p = current_palette()
    text, fill, edge = {
        Fit.GPU: (p.accent_text, p.accent, p.accent),
        Fit.CPU: (p.text, p.surface_alt, p.border),
        Fit.PARTIAL: (p.warning_text, p.warning_bg, p.warning_border),
        Fit.TOO_BIG: (p.error_text, p.error_bg, p.error_border),
    }[fit]
    return (
        f"QLabel {{ color: {text}; background: {fill}; border: 1px solid {edge}; border-radius: 9px;"
        f" padding: 1px 8px; font-weight: 600; }}"
    )


class OfferRow(QFrame):
    downloadRequested = Signal(object)
    useRequested = Signal(object)
    cancelRequested = Signal(object)
    linkOpened = Signal(str)

    def __init__(self, offer: ModelOffer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("OfferRow")
        self.offer = offer
        self.downloaded: Path | None = offer.downloaded
        self.downloading = False
        self.last_progress = (0, 0)  # (bytes done, total) of the running download
        self.kept = offer.kept  # (file, bytes kept, total) left part-way, now or earlier: Resume
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName(f"Model {offer.title}")
        self._build()
        self._show_file()

    # -- building --------------------------------------------------------------------------

    def _build(self) -> None:
        o = self.offer
        self.title = QLabel(o.title, self)
        self.title.setObjectName("OfferTitle")
        self.title.setToolTip(o.repo)
        self.facts = QLabel(o.facts, self)
        self.facts.setObjectName("Muted")
        self.licence = QLabel(f'<a href="{o.licence_url}">{o.licence}</a>', self)
        self.licence.setTextFormat(Qt.TextFormat.RichText)
        self.licence.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.licence.setToolTip(f"Licence: {o.licence_url}")
        self.licence.setAccessibleName(f"Licence {o.licence}")
        self.licence.linkActivated.connect(self.linkOpened.emit)
        self.mark = QLabel(self)
        self.mark.setObjectName("FitMark")
        self.mark.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.reason = QLabel(self)
        self.reason.setObjectName("Muted")
        self.reason.setWordWrap(True)
        self.files = QComboBox(self)
        self.files.setAccessibleName(f"File of {o.title}")
        for f in o.files:
            self.files.addItem(f"{f.label} — {f.verdict.fit.value}")
        self.files.setCurrentIndex(o.default_index)
        self.files.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.files.currentIndexChanged.connect(self._show_file)
        self.action = QPushButton(self)
        self.action.setAutoDefault(False)
        self.action.clicked.connect(self._on_action)
        self.progress = QProgressBar(self)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.progress_label = QLabel(self)
        self.progress_label.setObjectName("Muted")
        self.cancel = QPushButton("Cancel", self)
        self.cancel.setAutoDefault(False)
        self.cancel.setAccessibleName(f"Cancel the download of {o.title}")
        self.cancel.clicked.connect(lambda: self.cancelRequested.emit(self))
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setObjectName("OfferNote")
        self._lay_out()
        self._set_downloading(False)
        self.say("")

    def _lay_out(self) -> None:
        head = QHBoxLayout()
        head.setSpacing(SPACE_SM)
        head.addWidget(self.title)
        head.addWidget(self.mark)
        head.addStretch(1)
        head.addWidget(self.licence)
        grid = QGridLayout(self)
        grid.setContentsMargins(SPACE_MD, SPACE_SM, SPACE_MD, SPACE_SM)
        grid.setHorizontalSpacing(SPACE_MD)
        grid.setVerticalSpacing(SPACE_XS)
        grid.addLayout(head, 0, 0, 1, 2)
        grid.addWidget(self.facts, 1, 0, 1, 2)
        grid.addWidget(self.reason, 2, 0, 1, 2)
        # The download happens in place: the progress bar, its words and Cancel take the
        # Download button's row while it runs.
        controls = QHBoxLayout()
        controls.setSpacing(SPACE_SM)
        controls.addWidget(self.files)
        controls.addWidget(self.progress, 3)
        controls.addWidget(self.progress_label)
        controls.addStretch(1)
        controls.addWidget(self.cancel)
        controls.addWidget(self.action)
        grid.addLayout(controls, 3, 0, 1, 2)
        grid.addWidget(self.note, 4, 0, 1, 2)
        grid.setColumnStretch(0, 1)

    # -- state -----------------------------------------------------------------------------

    def chosen(self) -> OfferedFile:
        index = self.files.currentIndex()
        return self.offer.files[index if 0 <= index < len(self.offer.files) else self.offer.default_index]

    def _show_file(self) -> None:
        chosen = self.chosen()
        verdict = chosen.verdict
        self.mark.setText(f"{MARKS[verdict.fit]} {verdict.fit.label}")
        self.mark.setStyleSheet(mark_style(verdict.fit))
        self.mark.setToolTip(verdict.reason)
        self.mark.setAccessibleName(f"Fit: {verdict.fit.value}")
        speed = f" Predicted speed: {chosen.prediction.words()}." if chosen.prediction is not None else ""
        self.reason.setText(verdict.reason + speed)
        on_disk = self.downloaded is not None and self.downloaded.name == Path(chosen.name).name
        self._set_action(on_disk)

    def _set_action(self, on_disk: bool) -> None:
        chosen = self.chosen()
        if on_disk:
            self.action.setText("Use this model")
            self.action.setAccessibleName(f"Use {self.offer.title}")
            self.action.setToolTip(str(self.downloaded))
        elif self.kept is not None and self.kept[0] == chosen.name:
            # A cancelled (or cut) download keeps its part: the same button resumes it.
            self.action.setText(f"Resume download ({format_bytes(self.kept[1])} of {format_bytes(self.kept[2])} kept)")
            self.action.setAccessibleName(f"Resume the download of {self.offer.title} {chosen.quant}")
            self.action.setToolTip(f"Continue {Path(chosen.name).name} from where it stopped.")
        else:
            self.action.setText(f"Download {format_bytes(chosen.size)}")
            self.action.setAccessibleName(f"Download {self.offer.title} {chosen.quant}")
            gated = " This repository is gated: it needs a Hugging Face token." if self.offer.gated else ""
            self.action.setToolTip(f"Download {Path(chosen.name).name} from {self.offer.repo}.{gated}")

    @property
    def ready(self) -> bool:
        return self.action.text() == "Use this model"

    def _on_action(self) -> None:
        if self.ready:
            self.useRequested.emit(self)
        else:
            self.downloadRequested.emit(self)

    def _set_downloading(self, on: bool) -> None:
        self.downloading = on
        for w in (self.progress, self.progress_label, self.cancel):
            w.setVisible(on)
        self.action.setVisible(not on)
        self.files.setVisible(not on)  # the progress words name the file instead

    def start(self) -> None:
        self.say("")
        self.progress.setRange(0, 0)  # busy until the first figures arrive
        self.progress_label.setText(f"{self.chosen().quant}: asking the Hub for the file…")
        self.cancel.setEnabled(True)
        self._set_downloading(True)

    def show_progress(
        self, done: int, total: int, bytes_per_s: float, seconds_left: float | None, waiting_s: float = 0.0
    ) -> None:
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(done, total) / total))
        self.last_progress = (done, total)
        words = progress_text(done, total, bytes_per_s, seconds_left, waiting_s)
        self.progress_label.setText(f"{self.chosen().quant}: {words}")

    def cancelling(self) -> None:
        self.cancel.setEnabled(False)
        self.progress_label.setText("Stopping…")

    def finish(self, path: Path | None, note: str = "", *, resumable: bool = False) -> None:
        """The download ended: with the file at `path`, or not (`note` says why; `resumable`: a part is kept)."""
        self._set_downloading(False)
        if path is not None:
            self.downloaded = path
        done, total = self.last_progress
        self.kept = (self.chosen().name, done, total) if resumable and path is None and 0 < done < total else None
        self._show_file()
        self.say(note)

    def say(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))
