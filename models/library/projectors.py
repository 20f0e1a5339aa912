"""Pairing chat models with their vision projectors (`mmproj*.gguf`).

A model sees images when a projector goes with it: the one chosen in its settings, else a
sibling `mmproj*.gguf` in its folder whose projection width is the model's width (downloads
put them side by side; one that names the model is preferred when several fit). A chosen
projector that does not fit is refused in one line; a sibling that does not fit is passed
over (a folder of several models may hold several projectors). A sibling that fits but whose
header would make llama.cpp abort (`models.gguf.projector_check`) is passed over too, and named
in `refused`, so a picture sent to the model is refused with that reason rather than "no projector".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from models.errors import GGUFError
from models.gguf.names import is_gguf_name, is_projector_name
from models.gguf.projector import ProjectorInfo, pairing_problem, read_projector, unsafe


@dataclass(frozen=True, slots=True)
class Pairing:
    """A model's projector (None: the model is text only) and, when one was passed over, why."""

    projector: ProjectorInfo | None
    note: str = ""
    refused: str = ""  # a projector that fits the model but is unsafe: why (one line)


def sibling_projectors(model: Path) -> list[Path]:
    """The `mmproj*.gguf` files beside `model`, those that name the model first."""
    try:
        found = [
            p for p in model.parent.iterdir() if p.is_file() and is_projector_name(p.name) and is_gguf_name(p.name)
        ]
    except OSError:
        return []
    stem = model.stem.lower().split("-q")[0]
    return sorted(found, key=lambda p: (stem not in p.name.lower(), p.name))


def pair(model: Path, model_width: int | None, chosen: Path | None = None) -> Pairing:
    """The projector for `model`: `chosen` (GGUFError, one line, if it does not fit) or a sibling."""
    if chosen is not None:
        info = read_projector(chosen)
        problem = pairing_problem(info, model.name, model_width)
        if problem:
            raise GGUFError(problem, chosen)
        return Pairing(info)
    notes: list[str] = []
    refused = ""
    for path in sibling_projectors(model):
        try:
            info = read_projector(path)
        except GGUFError as exc:
            notes.append(str(exc))
            continue
        problem = pairing_problem(info, model.name, model_width)
        if problem is None:
            return Pairing(info)
        notes.append(problem)
        refused = refused or (problem if problem == unsafe(info) else "")
    return Pairing(None, "; ".join(notes), refused)
