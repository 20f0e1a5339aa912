"""What a new, empty chat shows: the loaded model, three example prompts, the shortcuts.

A prompt button fills the composer (it does not send: the user may edit it first). With the
small built-in model (or none) loaded, a line names a better catalogue model that fits this
machine's free memory and links to the "Get models" page.

Signals:
    promptChosen(str): an example prompt was clicked.
    getModelsRequested(): the "Get models" link was followed.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from desktop.core.get_models import better_model_line, cached_profile, quick_free_memory
from desktop.core.model_choice import ModelInfo
from desktop.qt.look.icons import themed_icon
from desktop.qt.look.theme import SPACE_LG, SPACE_SM, SPACE_XL
from engine.api.errors import EmberError
from engine.api.library import shipped_catalogue

EXAMPLE_PROMPTS = (
    "Explain what a GGUF file is, in two sentences.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Give me three ideas for a short weekend trip, as a table.",
)
SHORTCUTS = (
    ("Enter", "send"),
    ("Shift+Enter", "new line"),
    ("Esc", "stop"),
    ("Ctrl+N", "new chat"),
    ("Ctrl+M", "models"),
    ("Ctrl+= / Ctrl+-", "text size"),
)
NO_MODEL_TEXT = "No model loaded yet"
GET_MODELS_LINK = "get-models"


def human_size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit in ("bytes", "KB") else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def model_summary(info: ModelInfo | None, model_file: Path | None) -> str:
    """ "SmolLM2 · 92.3 MB · runs on CPU" (what is known of it)."""
    if info is None:
        return NO_MODEL_TEXT
    parts = [info.label]
    if model_file is not None:
        try:
            parts.append(human_size(model_file.stat().st_size))
        except OSError:
            pass
    where = {
        "CPU": "runs on this computer's CPU",
        "GPU": "runs on this computer's GPU",
        "Remote": "runs on a server you configured",
        "Scripted": "a scripted demo backend",
    }
    parts.append(where.get(info.device, info.device))
    return " · ".join(p for p in parts if p)


class EmptyState(QWidget):
    """A new chat's welcome: model line, example prompts, shortcut hints."""

    promptChosen = Signal(str)
    getModelsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("EmptyState")
        title = QLabel("What can I help with?", self)
        title.setObjectName("EmptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model_line = QLabel(NO_MODEL_TEXT, self)
        self.model_line.setObjectName("EmptyModel")
        self.model_line.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model_line.setAccessibleName("Loaded model")
        self.model_line.setWordWrap(True)
        self.better = QLabel(self)
        self.better.setObjectName("BetterModel")
        self.better.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.better.setWordWrap(True)
        self.better.setTextFormat(Qt.TextFormat.RichText)
        self.better.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.better.setAccessibleName("A better model")
        self.better.linkActivated.connect(lambda _link: self.getModelsRequested.emit())
        self.better.hide()
        self.prompt_buttons = [self._prompt_button(text, i) for i, text in enumerate(EXAMPLE_PROMPTS, start=1)]
        self.hints = QLabel(self._hint_text(), self)
        self.hints.setObjectName("ShortcutHints")
        self.hints.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hints.setWordWrap(True)
        self.hints.setAccessibleName("Keyboard shortcuts")
        self._lay_out(title)

    def _prompt_button(self, text: str, n: int) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName("ExamplePrompt")
        button.setAccessibleName(f"Example prompt {n}: {text}")
        button.setToolTip("Put this in the message box")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        button.clicked.connect(lambda: self.promptChosen.emit(text))
        return button

    @staticmethod
    def _hint_text() -> str:
        # No-break spaces inside each pair, and a word joiner after "-" (a break is allowed after a
        # hyphen): a narrow row wraps between pairs, never a key from its words.
        nbsp, joiner = "\u00a0", "\u2060"
        return "     ".join(f"{keys}  {what}".replace(" ", nbsp).replace("-", "-" + joiner) for keys, what in SHORTCUTS)

    def _lay_out(self, title: QLabel) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE_XL, SPACE_XL * 2, SPACE_XL, SPACE_XL)
        layout.setSpacing(SPACE_SM)
        layout.addStretch(1)
        layout.addWidget(title)
        layout.addWidget(self.model_line)
        layout.addWidget(self.better)
        layout.addSpacing(SPACE_LG)
        grid = QGridLayout()
        grid.setSpacing(SPACE_SM)
        for i, button in enumerate(self.prompt_buttons):
            grid.addWidget(button, i, 0)
        layout.addLayout(grid)
        layout.addSpacing(SPACE_LG)
        layout.addWidget(self.hints)
        layout.addStretch(2)

    def show_model(self, info: ModelInfo | None, choice: object | None = None) -> None:
        model_file = getattr(choice, "model_file", None)
        self.model_line.setText(model_summary(info, model_file if isinstance(model_file, Path) else None))
        self.model_line.setToolTip(info.device_note if info is not None else "")
        kind = getattr(getattr(choice, "spec", None), "kind", "")
        builtin = kind == "llama" and getattr(choice, "path", True) is None
        self.show_better_model(info is None or builtin)

    def show_better_model(self, wanted: bool) -> None:
        """The "A better model: …" line, naming the best catalogue model for this machine's free memory."""
        if not wanted:
            self.better.hide()
            return
        try:
            line = better_model_line(shipped_catalogue(), quick_free_memory(), cached_profile())
        except EmberError:
            line = None
        named = html.escape(line) if line else "see which models fit this machine"
        self.better.setText(f'A better model: {named}. <a href="{GET_MODELS_LINK}">Get models…</a>')
        self.better.show()

    def refresh_style(self) -> None:
        from desktop.qt.look.appearance import ThemeManager  # the running app's colours

        colour = ThemeManager.for_app().palette.muted
        for button in self.prompt_buttons:
            button.setIcon(themed_icon("sparkle", colour))
