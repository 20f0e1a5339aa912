"""Switching models from the window: the header's buttons, the picker, the settings dialog and
the "Get models" page (whose "Use this model" loads the downloaded file here).

Loading goes through `ChatController.load_model`, so the engine's worker thread does it
and the current model stays loaded (and selected) until the new one is ready; a failure
leaves it in place. Settings saved for the loaded model reach its next turn at once; a
change to context, GPU layers or threads also reloads it in the background, the way a
picked model loads (a reply already streaming finishes on the old one).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QWidget
from qasync import asyncSlot

from desktop.core.async_tasks import spawn
from desktop.core.controller import ChatController
from desktop.core.model_choice import ModelChoice, local_choice, same_model
from desktop.qt.frame.header import HeaderBar
from desktop.qt.models.get_models import GetModelsDialog
from desktop.qt.models.model_picker import FilePrompts, ModelPicker
from desktop.qt.models.settings_dialog import ModelSettingsDialog, open_settings_dialog
from engine.api.errors import GGUFError
from engine.api.models import ModelMetadata, ModelSettings, read_metadata

LOCAL_ONLY = "Settings are for local model files; a server uses its own."
# The settings a model is built with: changing one reloads it.
LOAD_TIME = ("context_length", "gpu_layers", "threads", "kv_cache", "prompt_lookup", "draft_model", "gpu_device")


def needs_reload(loaded: ModelSettings, saved: ModelSettings, n_ctx_train: int | None = None) -> bool:
    """Whether `saved` differs from the loaded model's settings in one that applies at load.

    Contexts are compared as loaded: capped at the training context (a saved 4096 and the
    2048 the dialog offers for a 2048-token model load the same).
    """
    loaded, saved = loaded.capped(n_ctx_train), saved.capped(n_ctx_train)
    return any(getattr(loaded, name) != getattr(saved, name) for name in LOAD_TIME)


def _trained_context(backend: object) -> int | None:
    """The loaded file's training context, when its backend tells (a llama backend does)."""
    n = getattr(getattr(backend, "metadata", None), "n_ctx_train", None)
    return n if isinstance(n, int) else None


def _load_time_of(loaded: ModelSettings, settings: ModelSettings) -> ModelSettings:
    """`settings` with the load-time values of `loaded` (what the engine actually runs)."""
    return dataclasses.replace(settings, **{name: getattr(loaded, name) for name in LOAD_TIME})


def _read_meta(path: Path) -> ModelMetadata | None:
    try:
        return read_metadata(path)
    except GGUFError:
        return None  # the dialog still opens, without the training-context cap


class ModelSwitcher(QObject):
    """Owns the picker; loads what it chooses through the controller."""

    def __init__(
        self,
        window: QWidget,
        header: HeaderBar,
        notify: Callable[..., None],  # NoticeBanner.show_notice
        controller: ChatController,
        prompts: FilePrompts | None = None,
    ) -> None:
        super().__init__(window)
        self._window = window  # the parent of the picker and the settings dialog
        self._header = header
        self._notify = notify
        self._controller = controller
        self.prompts = prompts or FilePrompts()  # tests swap in canned answers
        self.picker: ModelPicker | None = None
        self.get_models: GetModelsDialog | None = None
        # The "Get models" page's keyword arguments (its Hub services, prompts, catalogue, memory
        # figures): tests swap in fakes.
        self.page_options: dict[str, Any] = {}
        self.settings_dialog: ModelSettingsDialog | None = None
        header.model_button.clicked.connect(self.open_picker)
        header.settings_action.triggered.connect(self._on_settings)
        QShortcut(QKeySequence("Ctrl+M"), window, self.open_picker)
        self._sync_settings_button()

    @property
    def current(self) -> ModelChoice | None:
        return self._controller.models.choice

    def open_picker(self) -> ModelPicker:
        if self.picker is None or not shiboken6.isValid(self.picker):
            self.picker = ModelPicker(self._window, current=lambda: self.current, prompts=self.prompts)
            self.picker.chosen.connect(self._on_chosen)
            self.picker.settingsSaved.connect(self.apply_settings)
            self.picker.getModelsRequested.connect(self._from_picker)
        self.picker.show_and_refresh()
        return self.picker

    def _from_picker(self) -> None:
        if self.picker is not None and shiboken6.isValid(self.picker):
            self.picker.reject()
        self.open_get_models()

    def open_get_models(self) -> GetModelsDialog:
        """The "Get models" page; kept while the window lives (closing it cancels a download)."""
        if self.get_models is None or not shiboken6.isValid(self.get_models):
            self.get_models = GetModelsDialog(self._window, **self.page_options)
            self.get_models.setWindowModality(Qt.WindowModality.NonModal)
            self.get_models.useModel.connect(self._on_use_downloaded)
        self.get_models.show()
        self.get_models.raise_()
        self.get_models.activateWindow()
        return self.get_models

    @asyncSlot(object)
    async def _on_use_downloaded(self, path: Path) -> None:
        await self.load(local_choice(path))

    @asyncSlot(object)
    async def _on_chosen(self, choice: ModelChoice) -> None:
        await self.load(choice)

    async def load(self, choice: ModelChoice) -> bool:
        """Load `choice` in the background; on success show its notice and the model's, if any."""
        ok = await self._controller.models.load(choice)
        model = self._controller.models.model
        notes = [n for n in (choice.notice, model.note if model else "") if n]
        if ok and notes:
            # A note about the model it loaded (a base model), not a failure: calm, with the way on.
            self._notify(" ".join(notes), offer_models=True, calm=True)
        self._sync_settings_button()
        return ok

    def _sync_settings_button(self) -> None:
        choice = self.current
        local = choice is not None and choice.settings is not None
        action = self._header.settings_action
        action.setEnabled(local)
        action.setToolTip("Settings for the current model" if local else LOCAL_ONLY)

    def apply_settings(self, choice: ModelChoice) -> asyncio.Future[bool] | None:
        """Settings saved for `choice`: if it is the loaded model, its next turn uses them.

        When a load-time setting changed, the model also reloads in the background (the
        returned task); it keeps answering until the new one is ready.
        """
        current, settings = self.current, choice.settings
        if current is None or settings is None or not same_model(current, choice):
            return None
        updated = self._controller.models.choice = current.with_settings(settings)
        trained = _trained_context(self._controller.engine.backend)
        if current.settings is None or not needs_reload(current.settings, settings, trained):
            return None
        return spawn(self._reload(dataclasses.replace(updated, notice=None), current.settings))

    async def _reload(self, choice: ModelChoice, loaded: ModelSettings) -> bool:
        ok = await self.load(choice)
        current = self.current
        if not ok and current is not None and current.settings is not None and same_model(current, choice):
            # The old model is still the one answering: say so to the next settings dialog.
            self._controller.models.choice = current.with_settings(_load_time_of(loaded, current.settings))
        return ok

    @asyncSlot()
    async def _on_settings(self) -> None:
        await self.open_settings()

    async def open_settings(self) -> ModelSettingsDialog | None:
        """The current model's settings dialog (its header is read off the GUI thread)."""
        choice = self.current
        file = choice.model_file if choice is not None else None
        if choice is None or file is None:
            return None
        meta = await asyncio.to_thread(_read_meta, file)
        dialog = await open_settings_dialog(self._window, choice, choice.label, meta)
        if dialog is not None:
            dialog.saved.connect(lambda s: self._saved_for(choice, s))
            self.settings_dialog = dialog
        return dialog

    def _saved_for(self, choice: ModelChoice, settings: ModelSettings) -> None:
        self.apply_settings(choice.with_settings(settings))
