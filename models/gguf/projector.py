"""A vision projector's (`mmproj`) metadata, read from its header without loading it.

A projector turns an image into embeddings of the chat model's width: its projection width
must equal the model's `embedding_length`, or llama.cpp's multimodal library refuses the pair
at load. Converted files state the width (`clip.vision.projection_dim`, written as the text
model's width); older ones only through the last projection tensor's shape, which is read
as a fallback. `pairing_problem` says in one line why a projector does not go with a model,
including one whose header would make llama.cpp abort (`projector_check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from models.errors import GGUFError
from models.gguf.architectures import PROJECTOR_ARCHITECTURES
from models.gguf.header import GGUFHeader, MetaValue, kv_int, kv_str, read_header
from models.gguf.names import is_gguf_name, is_projector_name
from models.gguf.projector_check import projector_problem

# The projection's last tensor per projector kind: its output width is the model's width
# (shapes are GGUF's ne order: [in, out]).
_OUTPUT_TENSORS = (
    "mm.2.weight",
    "mm.model.fc.weight",
    "mm.input_projection.weight",
    "mm.fc.weight",
    "mm.down.weight",
    "mm.model.mlp.2.weight",
    "mm.1.weight",
    "mm.0.weight",
)


@dataclass(frozen=True, slots=True)
class ProjectorInfo:
    path: Path
    name: str
    projector_type: str  # clip.projector_type: "mlp", "idefics3", "gemma3", … ("" when unstated)
    vision: bool
    audio: bool
    image_size: int | None  # the encoder's native square size, in pixels
    projection_width: int | None  # None: neither stated nor derivable
    problem: str | None = None  # why clip could abort on it (projector_check); None: sound

    def summary(self) -> str:
        """One line for the picker: "vision projector (idefics3, 512 px) for models 576 wide"."""
        kind = "vision" if self.vision else "audio" if self.audio else "multimodal"
        details = ", ".join(x for x in (self.projector_type, f"{self.image_size} px" if self.image_size else "") if x)
        width = f" for models {self.projection_width} wide" if self.projection_width else ""
        return f"{kind} projector{f' ({details})' if details else ''}{width}"


def is_projector_header(header: GGUFHeader) -> bool:
    return header.kv.get("general.type") == "mmproj" or header.kv.get("general.architecture") in PROJECTOR_ARCHITECTURES


def read_projector(path: Path) -> ProjectorInfo:
    """The projector's metadata; GGUFError (one line) if the file is unreadable or no projector."""
    header = read_header(path, keep_tokens=False)
    if not is_projector_header(header):
        raise GGUFError("not a vision projector (mmproj) file", path)
    kv = header.kv
    vision = _bool(kv, "clip.has_vision_encoder", default=not _bool(kv, "clip.has_audio_encoder"))
    return ProjectorInfo(
        path=path,
        name=kv_str(kv, "general.name") or path.stem,
        projector_type=kv_str(kv, "clip.projector_type") or kv_str(kv, "clip.vision.projector_type") or "",
        vision=vision,
        audio=_bool(kv, "clip.has_audio_encoder"),
        image_size=kv_int(kv, "clip.vision.image_size", low=1),
        projection_width=kv_int(kv, "clip.vision.projection_dim", low=1)
        or kv_int(kv, "clip.audio.projection_dim", low=1)
        or _tensor_width(header),
        problem=projector_problem(header) if vision else None,
    )


def pairing_problem(projector: ProjectorInfo, model_name: str, embedding_length: int | None) -> str | None:
    """Why `projector` cannot serve a model of that width, in one line; None if it can (or if
    either width is unknown: llama.cpp will then judge at load)."""
    if not projector.vision:
        return f"{projector.path.name} is an audio projector; Ember passes only images"
    width = projector.projection_width
    if width is not None and embedding_length is not None and width != embedding_length:
        return (
            f"{projector.path.name} does not go with {model_name}: it projects images to {width} "
            f"values, the model's embeddings are {embedding_length} wide"
        )
    return unsafe(projector)


def unsafe(projector: ProjectorInfo) -> str | None:
    """Why llama.cpp could abort on the projector (one line), None if its header is sound."""
    return f"{projector.path.name} is refused: {projector.problem}" if projector.problem else None


def _tensor_width(header: GGUFHeader) -> int | None:
    by_name = {t.name: t for t in header.tensors}
    for name in _OUTPUT_TENSORS:
        tensor = by_name.get(name)
        if tensor is not None and len(tensor.shape) >= 2:
            return tensor.shape[1]
    return None


def _bool(kv: Mapping[str, MetaValue], key: str, *, default: bool = False) -> bool:
    v = kv.get(key)
    return v if isinstance(v, bool) else default


MAX_SIBLINGS = 20  # headers read to name the models a projector goes with


def projector_note(path: Path) -> str:
    """What a projector opened as a chat model is, and which models beside it it goes with."""
    try:
        info = read_projector(path)
    except GGUFError:
        return "a vision projector (mmproj), not a chat model; open the model it belongs to"
    fits = [p.name for p in _sibling_models(path) if _fits(_width(p), info.projection_width)]
    goes_with = f"; it goes with {', '.join(fits[:3])}" if fits else "; open the model it belongs to"
    return f"a {info.summary()}, not a chat model{goes_with}"


def _sibling_models(path: Path) -> list[Path]:
    try:
        names = sorted(
            p for p in path.parent.iterdir() if is_gguf_name(p.name) and not is_projector_name(p.name) and p != path
        )
    except OSError:
        return []
    return names[:MAX_SIBLINGS]


def _fits(width: int | bool | None, projection: int | None) -> bool:
    if width is False:
        return False
    return projection is None or width is None or width == projection


def _width(model: Path) -> int | bool | None:
    """The model's embedding width; False when it is no chat model (or unreadable)."""
    try:
        header = read_header(model, keep_tokens=False, stop_before=lambda key: key.startswith("tokenizer."))
    except GGUFError:
        return False
    if is_projector_header(header):
        return False
    arch = kv_str(header.kv, "general.architecture")
    return kv_int(header.kv, f"{arch}.embedding_length", low=1) if arch else False
