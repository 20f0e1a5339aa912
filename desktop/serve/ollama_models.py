"""What Ollama's `/api/tags`, `/api/show` and `/api/ps` say about a served model, read from its GGUF.

Size, SHA-256 digest, family, parameter size, quantisation, template, `general.architecture`
and the architecture's own keys (`llama.context_length`, …): what `ember models` reports, in
Ollama's field names. The digest reads the whole file, so it is computed once per file (path,
size, modification time) and kept in the data folder's digest cache
(`models.library.digests`); the other facts are kept in memory under the same key. A file
that cannot be read leaves the fields blank, as a model without a file (a remote backend) does.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.api.errors import GGUFError
from engine.api.models import file_sha256, format_parameters, metadata_from_header, read_header

log = logging.getLogger("desktop.serve")

_cache: dict[tuple[str, int, int], ModelFacts] = {}
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """One GGUF file as Ollama describes a model (blank: nothing known)."""

    size: int = 0
    digest: str = ""
    modified_at: str = ""
    family: str = ""
    parameter_size: str = ""
    quantization: str = ""
    template: str = ""
    model_info: dict[str, Any] = field(default_factory=dict[str, Any])

    def details(self) -> dict[str, Any]:
        families = [self.family] if self.family else None
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": families,
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization,
        }


BLANK = ModelFacts()


def facts_of(path: Path | None) -> ModelFacts:
    """The facts of the GGUF at `path` (cached per path, size and modification time); BLANK when
    there is no file or it cannot be read. Reads the file: call it off the event loop."""
    if path is None:
        return BLANK
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        return BLANK
    with _lock:
        found = _cache.get(key)
    if found is not None:
        return found
    try:
        found = _read(path, st.st_mtime)
    except (GGUFError, OSError) as exc:
        log.warning("serve: cannot describe %s for Ollama's API: %s", path.name, exc)
        return BLANK
    with _lock:
        _cache[key] = found
    return found


def _read(path: Path, mtime: float) -> ModelFacts:
    header = read_header(path)
    meta = metadata_from_header(path, header)
    arch = meta.architecture
    info: dict[str, Any] = {"general.architecture": arch, "general.parameter_count": meta.parameters}
    for key, value in header.kv.items():  # scalars only: arrays (the vocabulary) are large
        if key.startswith(("general.", f"{arch}.")) and isinstance(value, (bool, int, float, str)):
            info.setdefault(key, value)
    return ModelFacts(
        size=meta.size_bytes,
        digest=file_sha256(path),
        modified_at=datetime.fromtimestamp(mtime, UTC).isoformat().replace("+00:00", "Z"),
        family=arch,
        parameter_size=meta.size_label or format_parameters(meta.parameters),
        quantization=meta.quantization,
        template=meta.chat_template or "",
        model_info=info,
    )
