"""Add server…: an OpenAI-compatible server (llama.cpp server, vLLM, Ollama) as a library model.

The dialog contacts only the URL the user typed, and only when they press Fetch models
(off the GUI thread). Saving puts the server and model in the library and the API key in
`models.library.remote_keys`, never in the library file. An empty key field keeps a key already
saved for that URL, so adding a second model of one server does not need it again.
"""

from __future__ import annotations

import asyncio
import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncSlot

from desktop.core.model_choice import remote_label
from engine.api.errors import EngineError
from engine.api.library import RemoteServer, load_api_key, load_library_state, save_api_key, save_library_state
from engine.api.servers import OpenAIBackend, list_models

log = logging.getLogger("desktop.servers")

URL_HINT = "http://localhost:8080/v1"


def normalize_url(text: str, api_key: str | None = None) -> str:
    """The base URL as the backend will use it; ConfigError for a bad URL or key (no network)."""
    return OpenAIBackend(text, api_key=api_key or None).base_url


class ServerDialog(QDialog):
    """Base URL, optional API key, Fetch models, pick one, Save.

    Signals:
        saved(object): the `RemoteServer` just added to the library.
    """

    saved = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServerDialog")
        self.setWindowTitle("Add server")
        self.url = QLineEdit(self)
        self.url.setPlaceholderText(URL_HINT)
        self.api_key = QLineEdit(self)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("Optional")
        self.fetch = QPushButton("Fetch models", self)
        self.model = QComboBox(self)
        self.model.setEditable(True)  # some servers list nothing; the id can be typed
        self.model.setMinimumContentsLength(24)
        self.status = QLabel(self)
        self.status.setObjectName("ServerStatus")
        self.status.setAccessibleName("Server status")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )
        self._lay_out()
        self.fetch.clicked.connect(self._on_fetch)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        self.url.textChanged.connect(self._on_url_changed)

    def _lay_out(self) -> None:
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.api_key)
        row = QHBoxLayout()
        row.addWidget(self.model, 1)
        row.addWidget(self.fetch)
        form.addRow("Model", row)
        self.url.setAccessibleName("Server URL")
        self.api_key.setAccessibleName("API key")
        self.model.setAccessibleName("Model")
        note = QLabel("Ember contacts this server only when you fetch its models or chat with it.", self)
        note.setObjectName("Muted")
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(460)

    # -- fetching --------------------------------------------------------------------------

    def _key_for(self, base_url: str) -> str | None:
        return self.api_key.text().strip() or load_api_key(base_url)

    def _on_url_changed(self) -> None:
        self.status.clear()

    @asyncSlot()
    async def _on_fetch(self) -> None:
        await self.fetch_models()

    async def fetch_models(self) -> list[str]:
        """Ask the server for its models (a worker thread); a failure is shown, never raised."""
        try:
            base = normalize_url(self.url.text(), self.api_key.text().strip())
        except EngineError as exc:
            self._say(str(exc))
            return []
        self.fetch.setEnabled(False)
        self._say(f"Asking {base} for its models…")
        try:
            key = self._key_for(base)
            # A closure, not arguments: qasync's executor logs a callback's arguments at DEBUG.
            ids = await asyncio.to_thread(lambda: list_models(base, key))
        except EngineError as exc:  # the backend's message is readable and redacted
            self._say(f"Could not list the models: {exc}")
            return []
        finally:
            self.fetch.setEnabled(True)
        self._show_models(ids)
        return ids

    def _show_models(self, ids: list[str]) -> None:
        self.model.clear()
        self.model.addItems(ids)
        self._say(f"{len(ids)} model(s) available." if ids else "The server lists no models; type the model id.")

    def _say(self, text: str) -> None:
        self.status.setText(text)

    # -- saving ----------------------------------------------------------------------------

    def save(self) -> None:
        key = self.api_key.text().strip()
        try:
            base = normalize_url(self.url.text(), key)
        except EngineError as exc:
            self._say(str(exc))
            return
        model = self.model.currentText().strip()
        if not model:
            self._say("Choose a model first (Fetch models lists what the server offers).")
            return
        server = RemoteServer(remote_label(model, base), base, model)
        try:
            if key:  # empty keeps the key saved for this URL, if any
                save_api_key(base, key)
            save_library_state(load_library_state().with_remote_server(server))
        except OSError as exc:
            self._say(f"Could not save the server: {exc}")
            return
        log.info("saved remote server %s", server.name)
        self.saved.emit(server)
        self.accept()
