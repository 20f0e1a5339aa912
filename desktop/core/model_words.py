"""A model file described in words a person reads: one summary line, and what is wrong with a bad file.

The picker shows "Llama · 135M · Q4_1 · 98 MB · 8K context · thinks" under each file name,
and "Incomplete download: 1.0 MB of about 98 MB" or "Not a GGUF model (this is a PDF)" in
place of the header reader's byte offsets and magic bytes (those stay one click away, under
Details). No Qt here.
"""

from __future__ import annotations

import re
from pathlib import Path

from engine.api.models import MarkerKind, ModelMetadata, format_bytes

# The first bytes of files people save under a .gguf name by mistake, and what to call them.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
    (b"{", "a JSON text"),
    (b"<", "a web page"),  # an HTML error page saved by a failed download
    (b"version https://git-lfs", "a Git LFS pointer, not the model itself"),
)
_DATA_END = re.compile(r"tensor data ends at byte (\d+)")
_SNIFF_BYTES = 64


def _architecture(name: str) -> str:
    return name[:1].upper() + name[1:] if name and name != "—" else ""


def _tokens(n: int) -> str:
    """8192 -> "8K", 131072 -> "128K", 2048 -> "2K", 1000 -> "1,000"."""
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def summary_line(meta: ModelMetadata, size_bytes: int, *, vision: bool = False, base_model: bool = False) -> str:
    """`Llama · 135M · Q4_1 · 98 MB · 8K context · vision · thinks`: what is known, in that order."""
    markers = {m.kind for m in meta.markers}
    parts = [
        _architecture(meta.architecture),
        meta.size_label or "",
        meta.quantization if meta.quantization and meta.quantization != "—" else "",
        format_bytes(size_bytes) if size_bytes else "",
        f"{_tokens(meta.n_ctx_train)} context" if meta.n_ctx_train else "",
        "vision" if vision else "",  # a fitting projector beside it (`ModelRow.projector`)
        "thinks" if MarkerKind.THINKING in markers or meta.thinking_prefill else "",
        "tools" if MarkerKind.TOOL_CALL in markers else "",
        "base model" if base_model else "",
    ]
    return " · ".join(p for p in parts if p)


def template_words(meta: ModelMetadata) -> str:
    """The chat template in words: its family (and that it pre-fills <think>), or what a base
    model is given instead."""
    if meta.base_model:
        how = f"llama.cpp's built-in {meta.builtin_template} format" if meta.builtin_template else "a plain transcript"
        return f"none in the file ({how} is used)"
    return f"{meta.template_family}" + (", pre-fills <think>" if meta.thinking_prefill else "")


def file_kind(path: Path) -> str | None:
    """What a file that is not a GGUF model is, from its first bytes ("a PDF"); None when unknown."""
    try:
        with path.open("rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return None
    stripped = head.lstrip()
    for signature, kind in _SIGNATURES:
        if stripped.startswith(signature):
            return kind
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "a text file"
    return None


def problem_words(error: str, path: Path | None, size_bytes: int) -> str:
    """The header reader's reason (byte offsets, magic bytes) as a sentence for a person."""
    if error.startswith("not a GGUF file") or error == "not a GGUF file":
        kind = file_kind(path) if path is not None else None
        return f"Not a GGUF model (this is {kind})" if kind else "Not a GGUF model (its contents are not a model)"
    if error.startswith("truncated"):
        have = format_bytes(size_bytes) if size_bytes else "part"
        end = _DATA_END.search(error)
        if end:
            return f"Incomplete download: {have} of about {format_bytes(int(end.group(1)))}"
        return f"Incomplete download: only {have} of it is here"
    if error.startswith("empty file"):
        return "Empty file (0 bytes): download it again"
    if error.startswith("missing") and "shards" in error:
        return f"Some parts of this split model are missing ({error.removeprefix('missing ')})"
    if error == "no such file":
        return "The file is no longer there"
    if "unsupported" in error and "version" in error:
        return "A GGUF version this Ember cannot read"
    return error[:1].upper() + error[1:]


def load_progress_words(percent: int | None) -> str:
    """How far a load is, after "Loading X…": " 40 %", and never " 100 %" while it is not done
    (llama.cpp reports every tensor read well before the model is ready to answer)."""
    if percent is None:
        return ""
    if percent >= 100:
        return " almost ready"
    return f" {max(0, percent)} %"
