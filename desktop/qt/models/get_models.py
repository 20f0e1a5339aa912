"""The window's "Get models" page: the catalogue ranked for this machine, Hub search, download in place.

It opens on the few catalogue models that fit this machine best (its free memory measured on
a worker thread: RAM, and the GPU through llama.cpp), each with its fit mark and reason,
size and licence link. The search box filters the catalogue as you type, offline; Enter (or
"Search Hugging Face") searches the Hub once downloads are allowed. A download runs on a
worker thread; its progress reaches the row through queued signals. The first download (or
Hub search) asks once "Allow downloads from HOST?". When a file is on disk its row offers
"Use this model", which the window loads through its model switcher.

Everything that talks to the Hub comes in through `HubServices` (desktop.core.hub_seam);
tests pass fakes.

Signals:
    useModel(object): load the model file at this Path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import shiboken6
from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from desktop.core.get_models import (
    HUB_ROWS,
    ModelOffer,
    cached_profile,
    catalogue_offers,
    default_offers,
    files_to_fetch,
    hub_offers,
    measure_free_memory,
    projector_to_fetch,
    quick_free_memory,
)
from desktop.core.hub_seam import HubServices, default_services
from desktop.qt.look.plain_question import answered, ask
from desktop.qt.look.style import fit_to_window, muted_text
from desktop.qt.look.theme import SPACE_MD, SPACE_SM
from desktop.qt.models.offer_row import OfferRow
from engine.api.errors import EmberError, one_line
from engine.api.library import CatalogueEntry, CatalogueError, search, shipped_catalogue
from engine.api.machine import FreeMemory
from engine.api.models import DEFAULT_CONTEXT_LENGTH, useful_tps
from engine.api.values import CancelToken

log = logging.getLogger("desktop.get_models")

PAGE_SIZE = (760, 640)
MIN_PAGE_SIZE = (560, 420)
PROGRESS_EVERY_S = 0.1  # at most ten progress updates a second reach the GUI thread
MEASURE, SEARCH = "measure", "search"  # the keys of the page's own jobs (a download's is its row's)


class ModelsPrompts:
    """The page's one question and its links (tests pass canned answers)."""

    def allow_downloads(self, parent: QWidget, host: str) -> bool:
        text = (
            f"Allow Ember to download models from {host}?\n\nEmber stays offline otherwise. You can see "
            "every connection it makes, and take this back, in the Network window (the status bar's "
            "connections)."
        )
        return answered(ask(parent, "Allow downloads?", text, "Allow", "Not now"))

    def open_link(self, url: str) -> None:
        QDesktopServices.openUrl(QUrl(url))


class Job(QObject):
    """One piece of Hub work on its own thread. Its signals carry its key and are connected to
    the page's methods, so they arrive on the GUI thread (queued)."""

    progressed = Signal(str, object)
    finished = Signal(str, object)  # the result, or an EmberError

    def __init__(self, key: str, work: Callable[[Callable[[Any], None], CancelToken], object]) -> None:
        super().__init__()
        self.key = key
        self._work = work
        self.cancel = CancelToken()
        self._last = 0.0
        self.runner = threading.Thread(target=self._run, name=f"ember-get-models-{key}", daemon=True)

    def _run(self) -> None:
        try:
            result: object = self._work(self._progress, self.cancel)
        except EmberError as exc:
            result = exc
        except Exception as exc:
            log.exception("Hub work failed")
            result = EmberError(one_line(f"{type(exc).__name__}: {exc}"))
        self.finished.emit(self.key, result)

    def _progress(self, progress: Any) -> None:
        now = time.monotonic()
        done = getattr(progress, "done", 0) >= getattr(progress, "total", 1)
        if done or now - self._last >= PROGRESS_EVERY_S:
            self._last = now
            self.progressed.emit(self.key, progress)


class GetModelsDialog(QDialog):
    useModel = Signal(object)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        services: Callable[[], HubServices] = default_services,
        prompts: ModelsPrompts | None = None,
        entries: Sequence[CatalogueEntry] | None = None,
        free_memory: Callable[[], FreeMemory] = measure_free_memory,
        quick_memory: Callable[[], FreeMemory] = quick_free_memory,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("GetModels")
        self.setWindowTitle("Get models")
        self.setMinimumSize(*MIN_PAGE_SIZE)
        fit_to_window(self, PAGE_SIZE, MIN_PAGE_SIZE)
        self.prompts = prompts or ModelsPrompts()
        self._services_factory = services
        self._services: HubServices | None = None
        self._free_memory = free_memory
        self.free = quick_memory()
        self.entries, catalogue_problem = _entries(entries)
        self.offers: list[ModelOffer] = []
        self.hub_results: list[ModelOffer] = []
        self.rows: list[OfferRow] = []
        self.jobs: dict[str, Job] = {}  # row key (or "search"/"measure") -> its running job
        self.show_all = False
        self._build()
        self.refresh_offers()
        if catalogue_problem:
            self.say(catalogue_problem)
        self._measure()

    # -- building --------------------------------------------------------------------------

    def _build(self) -> None:
        self.machine = QLabel(self)
        self.machine.setObjectName("Muted")
        self.machine.setWordWrap(True)
        self.machine.setAccessibleName("This machine")
        self.search_box = QLineEdit(self)
        self.search_box.setPlaceholderText("Search the catalogue; Enter searches Hugging Face")
        self.search_box.setAccessibleName("Search models")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.textChanged.connect(self._on_text)
        self.search_box.returnPressed.connect(self.search_hub)
        self.hub_button = QPushButton("Search Hugging Face", self)
        self.hub_button.setAutoDefault(False)
        self.hub_button.clicked.connect(self.search_hub)
        self.heading = QLabel(self)
        self.heading.setObjectName("SectionHeading")
        self.more = QPushButton(self)
        self.more.setFlat(True)
        self.more.setAutoDefault(False)
        self.more.clicked.connect(self._toggle_all)
        self.list_host = QWidget(self)
        self.list_layout = QVBoxLayout(self.list_host)
        self.list_layout.setContentsMargins(0, 0, 0, 0)
        self.list_layout.setSpacing(SPACE_SM)
        self.list_area = QScrollArea(self)
        self.list_area.setWidgetResizable(True)
        self.list_area.setWidget(self.list_host)
        self.list_area.setFrameShape(QScrollArea.Shape.NoFrame)
        # Rows wrap their words; they never scroll sideways.
        self.list_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.message = QLabel(self)
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.close_button = QPushButton("Close", self)
        self.close_button.setAutoDefault(False)
        self.close_button.clicked.connect(self.reject)
        self._lay_out()
        self.search_box.setFocus()  # typing searches at once
        self.setStyleSheet(
            f"#Muted {{ color: {muted_text(self.palette()).name()}; }} "
            "#OfferTitle, #SectionHeading { font-weight: 600; }"
        )

    def _lay_out(self) -> None:
        layout = QVBoxLayout(self)
        layout.setSpacing(SPACE_SM)
        layout.setContentsMargins(SPACE_MD, SPACE_MD, SPACE_MD, SPACE_MD)
        layout.addWidget(self.machine)
        search = QHBoxLayout()
        search.addWidget(self.search_box, 1)
        search.addWidget(self.hub_button)
        layout.addLayout(search)
        head = QHBoxLayout()
        head.addWidget(self.heading)
        head.addStretch(1)
        head.addWidget(self.more)
        layout.addLayout(head)
        layout.addWidget(self.list_area, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.message, 1)
        bottom.addWidget(self.close_button)
        layout.addLayout(bottom)

    def say(self, text: str) -> None:
        self.message.setText(text)

    # -- the services (the Hub side) --------------------------------------------------------

    def services(self) -> HubServices:
        if self._services is None:
            self._services = self._services_factory()
        return self._services

    @property
    def models_dir(self) -> Path:
        try:
            return self.services().models_dir
        except EmberError:  # a bad HF_ENDPOINT: the rows still show what is on disk; the Hub's actions say why
            from engine.api.program import ember_paths

            return ember_paths().models_dir

    def _gate(self) -> HubServices | None:
        """The services once downloads are allowed (asking once), else None with the reason said."""
        try:
            found = self.services()
        except EmberError as exc:  # HF_ENDPOINT that is no Hub address (`https://[::1`, a port over 65535)
            self.say(str(exc))
            return None
        if not found.allowed():
            if not self.prompts.allow_downloads(self, found.client.host):
                self.say(f"Downloads from {found.client.host} stay off; nothing was fetched.")
                return None
            found.allow()
        return found

    # -- the rows --------------------------------------------------------------------------

    def _start(self, key: str, work: Callable[[Callable[[Any], None], CancelToken], object]) -> Job:
        job = Job(key, work)
        job.progressed.connect(self._on_progress)
        job.finished.connect(self._on_finished)
        self.jobs[key] = job
        job.runner.start()
        return job

    def _on_finished(self, key: str, result: object) -> None:
        job = self.jobs.pop(key, None)
        if key == MEASURE:
            self._on_measured(result)
        elif key == SEARCH:
            self._on_searched(result)
        elif job is not None:
            self._on_downloaded(key, job, result)

    def _measure(self) -> None:
        free_memory = self._free_memory
        self._start(MEASURE, lambda _progress, _cancel: free_memory())

    def _on_measured(self, result: object) -> None:
        if isinstance(result, FreeMemory):
            self.free = result
            if not any(r.downloading for r in self.rows):  # never rebuild under a download
                self.refresh_offers()

    def refresh_offers(self) -> None:
        self.machine.setText(
            f"This machine: {self.free.describe()}. Marks are for a "
            f"{_context_words()} context; a model's settings can change it."
        )
        self.offers = catalogue_offers(
            self.entries, self.free, self.models_dir, profile=cached_profile(), useful_tps=useful_tps()
        )
        self.show_rows()

    def _on_text(self) -> None:
        self.hub_results = []
        self.show_rows()

    def _toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.show_rows()

    def visible_offers(self) -> list[ModelOffer]:
        text = self.search_box.text().strip()
        if text:
            matching = {e.key for e in search(self.entries, text)}
            return [o for o in self.offers if o.key in matching] + self.hub_results
        return list(self.offers) if self.show_all else default_offers(self.offers)

    def show_rows(self) -> None:
        offers = self.visible_offers()
        text = self.search_box.text().strip()
        if text:
            self.heading.setText(
                f"{len(offers)} matching “{text}”"
                if offers
                else f"Nothing in the catalogue matches “{text}”; press Enter to search Hugging Face"
            )
            self.more.hide()
        else:
            self.heading.setText(
                "All catalogue models, best for this machine first" if self.show_all else "Best for this machine"
            )
            self.more.setText("Show fewer" if self.show_all else f"Show all {len(self.offers)}")
            self.more.show()
        keep = {r.offer.key: r for r in self.rows if r.downloading}
        for row in self.rows:
            if row.offer.key not in keep:
                row.setParent(None)
                row.deleteLater()
        self.rows = []
        while self.list_layout.count():
            self.list_layout.takeAt(0)
        for offer in offers:
            row = keep.pop(offer.key, None) or self._row(offer)
            self.rows.append(row)
            self.list_layout.addWidget(row)
        for hidden in keep.values():  # a download under way stays listed whatever the filter
            self.rows.append(hidden)
            self.list_layout.addWidget(hidden)
        self.list_layout.addStretch(1)

    def _row(self, offer: ModelOffer) -> OfferRow:
        row = OfferRow(offer, self.list_host)
        row.downloadRequested.connect(self.download)
        row.useRequested.connect(self._use)
        row.cancelRequested.connect(self.cancel)
        row.linkOpened.connect(self.prompts.open_link)
        return row

    def row(self, key: str) -> OfferRow | None:
        return next((r for r in self.rows if r.offer.key == key), None)

    # -- Hub search ------------------------------------------------------------------------

    def search_hub(self) -> Job | None:
        text = self.search_box.text().strip()
        if not text:
            self.say("Type what to look for on Hugging Face, then press Enter.")
            self.search_box.setFocus()
            return None
        if SEARCH in self.jobs:
            return None
        services = self._gate()
        if services is None:
            return None
        client, free, models_dir = services.client, self.free, services.models_dir

        def work(_progress: Callable[[Any], None], _cancel: CancelToken) -> list[ModelOffer]:
            repos = list(client.search(text))[:HUB_ROWS]
            listings = {r.repo: r.gguf_files if r.gguf_files is not None else client.list_gguf(r.repo) for r in repos}
            return hub_offers(repos, listings, free, models_dir)

        self.hub_button.setEnabled(False)
        self.say(f"Searching {services.client.host} for “{text}”…")
        return self._start(SEARCH, work)

    def _on_searched(self, result: object) -> None:
        self.hub_button.setEnabled(True)
        if isinstance(result, EmberError):
            self.say(str(result))
            return
        found = cast(list[ModelOffer], result) if isinstance(result, list) else []
        known = {o.repo for o in self.offers}
        self.hub_results = [o for o in found if o.repo not in known]
        self.say(
            f"{len(self.hub_results)} {'repository' if len(self.hub_results) == 1 else 'repositories'} "
            "with GGUF files on Hugging Face."
            if self.hub_results
            else "Hugging Face has no other GGUF repositories for that."
        )
        self.show_rows()

    # -- downloads -------------------------------------------------------------------------

    def download(self, row: OfferRow) -> Job | None:
        """Download the row's chosen file (with the rest of a split model, a vision model's projector)."""
        if row.offer.key in self.jobs:
            return None
        services = self._gate()
        if services is None:
            return None
        repo, wanted, entry = row.offer.repo, row.chosen().name, row.offer.entry
        client, fetch, dest = services.client, services.download, services.models_dir

        def work(progress: Callable[[Any], None], cancel: CancelToken) -> list[Path]:
            listing = list(client.list_gguf(repo))
            # A vision model's projector comes in the same item: one progress, both or neither in place.
            files = files_to_fetch(listing, wanted) + projector_to_fetch(listing, entry)
            return fetch(files, dest, client=client, progress=progress, cancel=cancel)

        row.start()
        self.say("")
        return self._start(row.offer.key, work)

    def _on_progress(self, key: str, progress: Any) -> None:
        row = self.row(key)
        if row is not None:
            row.show_progress(
                int(progress.done),
                int(progress.total),
                float(progress.bytes_per_s),
                progress.seconds_left,
                float(getattr(progress, "waiting_s", 0.0)),
            )

    def _on_downloaded(self, key: str, job: Job, result: object) -> None:
        row = self.row(key)
        if row is None or not shiboken6.isValid(row):
            return
        paths = cast(list[Path], result) if isinstance(result, list) else []
        if paths:
            path = Path(paths[0])
            row.finish(path, f"Downloaded to {path.parent}.")
        elif job.cancel.cancelled:
            row.finish(None, "Download cancelled; what was downloaded is kept.", resumable=True)
        else:
            row.finish(
                None, str(result) if isinstance(result, EmberError) else "The download did not finish.", resumable=True
            )

    def cancel(self, row: OfferRow) -> None:
        job = self.jobs.get(row.offer.key)
        if job is not None:
            job.cancel.cancel()
            row.cancelling()

    def _use(self, row: OfferRow) -> None:
        if row.downloaded is not None:
            self.useModel.emit(row.downloaded)
            self.accept()

    def reject(self) -> None:
        for job in self.jobs.values():
            job.cancel.cancel()  # a download stops with the page; a later one resumes it
        super().reject()


def _entries(entries: Sequence[CatalogueEntry] | None) -> tuple[tuple[CatalogueEntry, ...], str]:
    if entries is not None:
        return tuple(entries), ""
    try:
        return shipped_catalogue(), ""
    except CatalogueError as exc:
        return (), str(exc)


def _context_words() -> str:
    return f"{DEFAULT_CONTEXT_LENGTH:,}-token"
