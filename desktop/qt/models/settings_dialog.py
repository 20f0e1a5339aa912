"""Per-model settings: load-time (context, GPU layers, threads) and per-turn (sampling, length,
system prompt), saved through `models.library.settings` under the model file's path.

The context box cannot go past the model's training context; the GPU box is disabled,
with the reason beside it, when this llama.cpp build cannot offload.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from pathlib import Path

import shiboken6
from PySide6.QtCore import QRegularExpression, Qt, Signal
from PySide6.QtGui import QRegularExpressionValidator, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from desktop.core.model_choice import ModelChoice
from desktop.qt.look.last_folder import choose_gguf
from desktop.qt.models.settings_help import with_reset
from engine.api.errors import GGUFError
from engine.api.models import (
    MAX_SEED,
    MIN_CONTEXT_LENGTH,
    ModelMetadata,
    ModelSettings,
    model_defaults,
    save_model_settings,
)
from engine.api.values import ContextPolicy

log = logging.getLogger("desktop.settings")

NO_GPU = "This llama.cpp build has no GPU support"
BUILD_STEPS = re.compile(r"this build has no Vulkan module: .*", re.DOTALL)  # `ember doctor`'s developer steps
GPU_DEVICE_TIP = (
    "The device models run on: automatic takes the best real GPU (software Vulkan devices such as "
    "lavapipe only when chosen here). It applies when Ember next starts; EMBER_GPU_DEVICE overrides it."
)
MAX_CONTEXT = 1 << 24  # models.library.settings' own ceiling, for files that do not say
LOAD_TIME_NOTE = (
    "Context length, GPU layers, threads, the KV cache and drafting apply when the model "
    "loads; saving a change to them reloads the model if it is the one in use."
)
KV_CACHE_LABELS = {
    "f16": "F16 (exact)",
    "q8_0": "Q8_0 (about half the memory)",
    "q4_0": "Q4_0 (about a quarter; less exact)",
}
DRAFT_TIP = (
    "Speculative decoding: a smaller model with the same vocabulary guesses tokens ahead and "
    "this model checks them in one step. The reply is the same; it comes faster when the "
    "guesses are good. Leave empty for none."
)

# The per-reply fields with a Reset beside them: (label, the dialog's widget and the setting's name).
SAMPLING_FIELDS = (
    ("Temperature", "temperature"),
    ("Top P", "top_p"),
    ("Top K", "top_k"),
    ("Min P", "min_p"),
    ("Repeat penalty", "repeat_penalty"),
    ("Seed", "seed"),
    ("Max reply tokens", "max_tokens"),
    ("System prompt", "system_prompt"),
)


async def gpu_support() -> bool:
    """Whether llama.cpp can offload here (off the GUI thread: the first call imports it)."""
    from engine.api.machine import gpu_offload_supported

    try:
        return await asyncio.to_thread(gpu_offload_supported)
    except (ImportError, OSError, AttributeError) as exc:  # no usable llama.cpp: no GPU either
        log.info("GPU support unknown (%s); offload disabled", exc)
        return False


async def open_settings_dialog(
    parent: QWidget, choice: ModelChoice, label: str, meta: ModelMetadata | None
) -> ModelSettingsDialog | None:
    """Open (window-modal, not blocking) the settings of `choice`'s file; None if it has none."""
    file, settings = choice.model_file, choice.settings
    if file is None or settings is None:
        return None
    gpu = await gpu_support()
    from engine.api.machine import gpu_pick  # the pick was made while llama.cpp was asked, above

    pick = gpu_pick()
    if not shiboken6.isValid(parent):
        return None  # the parent closed while llama.cpp was being asked
    dialog = ModelSettingsDialog(
        parent,
        model_file=file,
        label=label,
        settings=settings,
        n_ctx_train=meta.n_ctx_train if meta else None,
        n_layers=meta.block_count if meta else None,
        gpu_supported=gpu,
    )
    if pick is not None:
        dialog.show_gpu(pick.line(), [(f"{i} · {d.label()} · {d.kind}", str(i)) for i, d in enumerate(pick.devices)])
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog


def _spin(lo: int, hi: int, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    if special:
        box.setSpecialValueText(special)  # shown for the minimum
    return box


def _section(title: str) -> QLabel:
    label = QLabel(f"<b>{title}</b>")
    label.setContentsMargins(0, 6, 0, 0)
    return label


def _real(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    return box


class ModelSettingsDialog(QDialog):
    """Edit one model's settings; Save writes them.

    Signals:
        saved(object): the `ModelSettings` just written for this model.
    """

    saved = Signal(object)

    def __init__(
        self,
        parent: QWidget | None,
        *,
        model_file: Path,
        label: str,
        settings: ModelSettings,
        n_ctx_train: int | None,
        n_layers: int | None,
        gpu_supported: bool,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ModelSettingsDialog")
        self.setWindowTitle(f"Settings — {label}")
        self.setMinimumWidth(460)
        self.model_file = model_file
        self.n_ctx_train = n_ctx_train
        self._build_fields(n_ctx_train, n_layers)
        self._set_gpu_supported(gpu_supported)
        self.error = QLabel(self)
        self.error.setObjectName("SettingsError")
        self.error.setWordWrap(True)
        self.error.hide()
        self._lay_out(n_ctx_train)
        self.set_values(settings)

    # -- building --------------------------------------------------------------------------

    def _build_fields(self, n_ctx_train: int | None, n_layers: int | None) -> None:
        self.context = _spin(MIN_CONTEXT_LENGTH, n_ctx_train or MAX_CONTEXT)
        self.context.setSingleStep(1024)
        self.context.setSuffix(" tokens")
        self.context.setGroupSeparatorShown(True)
        self.gpu_layers = _spin(-1, n_layers if n_layers is not None else 999, "All layers")
        self.gpu_note = QLabel(NO_GPU)
        self.gpu_note.setObjectName("Muted")
        self.threads = _spin(0, 4096, "Automatic")
        self.gpu_device = QComboBox()  # editable: a device's name works too (EMBER_GPU_DEVICE overrides it)
        self.gpu_device.setEditable(True)
        self.gpu_device.addItem("Automatic (the best GPU)", "")
        self.gpu_device.addItem("CPU only", "cpu")
        self.gpu_device.setToolTip(GPU_DEVICE_TIP)
        self.gpu_where = QLabel("")
        self.gpu_where.setObjectName("Muted")
        self.gpu_where.setWordWrap(True)
        self.kv_cache = QComboBox()
        for value, text in KV_CACHE_LABELS.items():
            self.kv_cache.addItem(text, value)
        self.kv_cache.setToolTip(
            "The type the context's keys and values are stored in: a quantized cache "
            "fits a longer context in the same memory"
        )
        self.prompt_lookup = QCheckBox("Draft from the conversation (faster when a reply repeats it)")
        self.prompt_lookup.setToolTip("Speculative decoding by prompt lookup: the same reply, token for token")
        self.draft_model = QLineEdit()
        self.draft_model.setPlaceholderText("None (path of a smaller GGUF of the same family)")
        self.draft_model.setToolTip(DRAFT_TIP)
        self.projector = QLineEdit()
        self.projector.setPlaceholderText("The mmproj file beside the model, if one fits (or a path)")
        self.projector.setToolTip(
            "The vision projector (mmproj GGUF) that lets this model see pictures; "
            "one whose width does not fit the model is refused when it loads"
        )
        self.temperature = _real(0.0, 5.0, 0.05)
        self.top_p = _real(0.0, 1.0, 0.05)
        self.top_k = _spin(0, 100_000, "Off")
        self.min_p = _real(0.0, 1.0, 0.01, 3)
        self.repeat_penalty = _real(0.0, 5.0, 0.05)
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("Random")
        self.seed.setValidator(QRegularExpressionValidator(QRegularExpression(r"\d{0,10}"), self.seed))
        self.max_tokens = _spin(0, MAX_CONTEXT, "Until the model stops")
        self.max_tokens.setGroupSeparatorShown(True)
        self.context_policy = QComboBox()
        for policy in ContextPolicy:
            self.context_policy.addItem(policy.label, policy.value)
        self.context_policy.setToolTip(
            "What the model sees once a conversation outgrows the context "
            "(each conversation can choose its own beside the composer)"
        )
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("Optional: instructions the model sees before every conversation")
        self.system_prompt.setTabChangesFocus(True)

    def _set_gpu_supported(self, supported: bool) -> None:
        self.gpu_layers.setEnabled(supported)
        self.gpu_note.setVisible(not supported)
        self.gpu_layers.setToolTip("" if supported else NO_GPU)

    def _lay_out(self, n_ctx_train: int | None) -> None:
        form = QFormLayout()
        trained = f"Trained for {n_ctx_train:,} tokens" if n_ctx_train else "Training context unknown"
        rows: list[tuple[str, QWidget]] = [
            ("", _section("Loading the model")),
            ("Context length", self.context),
            ("", QLabel(trained)),
            ("GPU layers", self.gpu_layers),
            ("", self.gpu_note),
            ("GPU device", self.gpu_device),
            ("", self.gpu_where),
            ("CPU threads", self.threads),
            ("KV cache", self.kv_cache),
            ("Speculative decoding", self.prompt_lookup),
            ("Draft model", self._draft_row()),
            ("Vision projector", self.projector),
            ("", _section("Every reply")),
            *((name, self._resettable(name, attribute)) for name, attribute in SAMPLING_FIELDS),
            ("When the conversation is full", self.context_policy),
        ]
        for name, widget in rows:
            form.addRow(name, widget)
            if name and not widget.accessibleName():
                widget.setAccessibleName(name)
        note = QLabel(LOAD_TIME_NOTE, self)
        note.setObjectName("Muted")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults,
            self,
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults).clicked.connect(
            lambda: self.set_values(model_defaults(self.model_file).capped(self.n_ctx_train))
        )
        self.buttons = buttons
        layout = QVBoxLayout(self)
        self.fields_area = _scrolled(form, self)
        layout.addWidget(self.fields_area, 1)
        layout.addWidget(note)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

    def _resettable(self, name: str, attribute: str) -> QWidget:
        field: QWidget = getattr(self, attribute)
        field.setAccessibleName(name)
        return with_reset(field, name, lambda: self._reset(attribute))

    def _reset(self, attribute: str) -> None:
        """One field back to the model's own default (recommended, built-in); the others stay."""
        current = self._current_or_none()
        if current is not None:
            self.set_values(
                dataclasses.replace(current, **{attribute: getattr(model_defaults(self.model_file), attribute)})
            )

    def _current_or_none(self) -> ModelSettings | None:
        try:
            return self.values()
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return None

    def _draft_row(self) -> QWidget:
        row = QWidget(self)
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.draft_model, 1)
        self.draft_browse = QPushButton("Browse…", row)
        self.draft_browse.setAccessibleName("Choose a draft model file")
        self.draft_browse.clicked.connect(self._browse_draft)
        layout.addWidget(self.draft_browse)
        self.draft_model.setAccessibleName("Draft model")
        return row

    def _browse_draft(self) -> None:
        path = choose_gguf(self, "Choose a draft model")
        if path is not None:
            self.draft_model.setText(str(path))

    # -- values ----------------------------------------------------------------------------

    def set_values(self, s: ModelSettings) -> None:
        self.context.setValue(s.context_length)  # the spin box clamps to the training context
        self.gpu_layers.setValue(s.gpu_layers)
        self.threads.setValue(s.threads or 0)
        found = self.gpu_device.findData(s.gpu_device)
        if found >= 0:
            self.gpu_device.setCurrentIndex(found)
        else:
            self.gpu_device.setEditText(s.gpu_device)
        self.kv_cache.setCurrentIndex(max(0, self.kv_cache.findData(s.kv_cache)))
        self.prompt_lookup.setChecked(s.prompt_lookup)
        self.draft_model.setText(s.draft_model or "")
        self.projector.setText(s.projector or "")
        self.temperature.setValue(s.temperature)
        self.top_p.setValue(s.top_p)
        self.top_k.setValue(s.top_k)
        self.min_p.setValue(s.min_p)
        self.repeat_penalty.setValue(s.repeat_penalty)
        self.seed.setText("" if s.seed is None else str(s.seed))
        self.max_tokens.setValue(s.max_tokens or 0)
        self.system_prompt.setPlainText(s.system_prompt)
        self.context_policy.setCurrentIndex(max(0, self.context_policy.findData(s.context_policy)))

    def values(self) -> ModelSettings:
        """The settings as entered; ValueError with a readable message when one is out of range."""
        seed_text = self.seed.text().strip()
        seed = int(seed_text) if seed_text else None
        if seed is not None and seed > MAX_SEED:
            raise ValueError(f"The seed must be at most {MAX_SEED}.")
        return ModelSettings(
            context_length=self.context.value(),
            gpu_layers=self.gpu_layers.value(),
            threads=self.threads.value() or None,
            gpu_device=self._gpu_device(),
            kv_cache=str(self.kv_cache.currentData()),
            prompt_lookup=self.prompt_lookup.isChecked(),
            draft_model=self.draft_model.text().strip() or None,
            projector=self.projector.text().strip() or None,
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            top_k=self.top_k.value(),
            min_p=self.min_p.value(),
            repeat_penalty=self.repeat_penalty.value(),
            seed=seed,
            max_tokens=self.max_tokens.value() or None,
            system_prompt=self.system_prompt.toPlainText(),
            context_policy=str(self.context_policy.currentData()),
        )

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_to_screen()

    def _fit_to_screen(self) -> None:
        """Tall enough for every field where the screen allows; on a short screen (a 768-pixel
        laptop) the fields scroll and the buttons stay in view."""
        area, inner = self.fields_area, self.fields_area.widget()
        if inner is None:
            return
        width = area.viewport().width()
        full = inner.heightForWidth(width) if inner.hasHeightForWidth() else inner.sizeHint().height()
        missing = full - area.viewport().height()
        if missing <= 0:
            return
        screen = self.screen()
        room = int(screen.availableGeometry().height() * 0.9) if screen is not None else self.height() + missing
        self.resize(self.width(), min(self.height() + missing, room))

    def show_gpu(self, line: str, devices: list[tuple[str, str]]) -> None:
        """Where models run here (`GPU: Vulkan · … · chosen`) and the devices to choose from."""
        self.gpu_where.setText(_for_users(line))
        if self.isVisible():
            self._fit_to_screen()  # the line can take three rows: grow rather than cut it
        current = self._gpu_device()
        for text, value in devices:
            self.gpu_device.addItem(text, value)
        found = self.gpu_device.findData(current)
        if found >= 0:
            self.gpu_device.setCurrentIndex(found)

    def _gpu_device(self) -> str:
        """The chosen item's value, or what was typed (a device's name)."""
        text = self.gpu_device.currentText().strip()
        index = self.gpu_device.findText(text)
        return str(self.gpu_device.itemData(index)) if index >= 0 else text

    def save(self) -> None:
        try:
            settings = self.values()
            check_projector(self.model_file, settings.projector)
            save_model_settings(self.model_file, settings)
        except (ValueError, OSError, GGUFError) as exc:
            self.error.setText(f"Not saved: {exc}")
            self.error.show()
            return
        log.info("saved settings for %s", self.model_file.name)
        self.saved.emit(settings)
        self.accept()


def check_projector(model: Path, projector: str | None) -> None:
    """GGUFError (one line) when the chosen projector does not go with the model."""
    if not projector:
        return
    from engine.api.models import pair, read_metadata

    pair(model, read_metadata(model).embedding_length, Path(projector).expanduser())


def _scrolled(form: QFormLayout, parent: QWidget) -> QScrollArea:
    """The fields, in an area that scrolls only when the screen is too short for them all."""
    inner = QWidget()
    inner.setObjectName("SettingsFields")
    inner.setLayout(form)
    area = QScrollArea(parent)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(inner)
    # As wide as the fields need with the scroll bar beside them: nothing is cut on the right.
    area.setMinimumWidth(inner.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width())
    return area


def _for_users(line: str) -> str:
    """The GPU line as the dialog says it: build commands (`bash packaging/…`, `uv sync`) belong to
    `ember doctor` and the README, so here they become one plain sentence that points there."""
    return BUILD_STEPS.sub('this build has no GPU support (the README\'s "Using a GPU" says how to add it)', line)
