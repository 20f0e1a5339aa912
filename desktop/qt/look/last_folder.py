"""File dialogs start where the last one of their kind ended (models, attachments, exports).

One small JSON file in the config folder maps a kind ("models", "attachments", …) to the
folder last used; a folder that is gone falls back to the home folder.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from engine.api.program import ember_paths, load_json_object, write_json_atomic

FILE_NAME = "last_folders.json"
GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"


def _file() -> Path:
    return ember_paths().config_dir / FILE_NAME


def last_folder(kind: str) -> str:
    """Where a dialog of `kind` starts: the folder last used for it, else the home folder."""
    try:
        saved = load_json_object(_file(), {}).get(kind)
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, str) and Path(saved).is_dir():
        return saved
    return str(Path.home())


def remember(kind: str, chosen: str | Path) -> None:
    """Note the folder of `chosen` (a file, or a folder itself) for the next dialog of `kind`."""
    if not str(chosen):
        return
    path = Path(chosen)
    folder = path if path.is_dir() else path.parent
    try:
        data = load_json_object(_file(), {})
        data[kind] = str(folder)
        write_json_atomic(_file(), data)
    except (OSError, ValueError):
        pass  # only a convenience: the next dialog starts at home


def choose_gguf(parent: QWidget, title: str) -> Path | None:
    """A GGUF file from the native dialog, started in (and noted as) the models' folder; None if cancelled.

    Chat, draft and embedding models usually sit together, so all three share that folder."""
    name, _ = QFileDialog.getOpenFileName(parent, title, last_folder("models"), GGUF_FILTER)
    if name:
        remember("models", name)
    return Path(name) if name else None
