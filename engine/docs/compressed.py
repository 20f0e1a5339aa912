"""Single compressed files (`README.gz`, `notes.md.bz2`, `log.txt.xz`), read as the text they hold.

Debian's /usr/share/doc is mostly `.gz` (11 of 15 files of a real documentation folder were
skipped without a word before). A compressed file is inflated a piece at a time through the same
bounds as any other file, counted by what comes out, not by what the header claims:

- at most `MAX_INFLATED` bytes (the characters one PDF or DOCX may give, `MAX_FILE_CHARS`);
- a ratio bomb is refused: past `RATIO_FLOOR` bytes out, more than `MAX_RATIO` bytes out for one
  byte in (text compresses 3-10×, a repetitive log 50-100×; gzip's own ceiling is about 1,000×,
  which is what a bomb uses).

Only text (plain, Markdown, HTML) is read from inside: the name without its compression suffix
says the kind, else the first inflated bytes are sniffed, as for any other file. A compressed
PDF, DOCX or archive (`.tar.gz`) is not a document Ember reads, and says so.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast

from engine.docs.errors import DocumentError
from engine.docs.regular import open_regular

MAX_INFLATED = 256 << 20
MAX_RATIO = 200
RATIO_FLOOR = 1 << 20  # small files may compress far better than that (a page of one repeated line)
SUFFIXES = frozenset({".gz", ".bz2", ".xz"})
# What a damaged stream raises, by module: each means "not a readable compressed file".
_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError)


def is_compressed(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES


def inner_name(path: Path) -> Path:
    """`README.md.gz` -> `README.md`: the name that says what the compressed file holds."""
    return path.with_name(path.name[: -len(path.suffix)])


class _Inflating:
    """A compressed file's bytes as they come out, counted against the bounds."""

    def __init__(self, path: Path, raw: BinaryIO, packed_size: int) -> None:
        self.path = path
        self.packed = max(1, packed_size)
        self.out = 0
        suffix = path.suffix.lower()
        if suffix == ".gz":
            self._stream: BinaryIO = cast(BinaryIO, gzip.GzipFile(fileobj=raw, mode="rb"))
        elif suffix == ".bz2":
            self._stream = cast(BinaryIO, bz2.BZ2File(raw, mode="rb"))
        else:
            self._stream = cast(BinaryIO, lzma.LZMAFile(raw, mode="rb"))

    def read(self, size: int) -> bytes:
        try:
            data = self._stream.read(size)
        except _ERRORS as exc:
            raise DocumentError(self.path, f"is not a readable {self.path.suffix} file ({_reason(exc)})") from exc
        self.out += len(data)
        if self.out > MAX_INFLATED:
            raise DocumentError(self.path, f"inflates past {MAX_INFLATED >> 20} MB; refused")
        if self.out > RATIO_FLOOR and self.out > MAX_RATIO * self.packed:
            raise DocumentError(self.path, f"inflates more than {MAX_RATIO}× its size (a compression bomb?); refused")
        return data


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:120]
    return text or type(exc).__name__


@contextmanager
def open_inflated(path: Path, *, follow: bool = True) -> Generator[_Inflating]:
    """The file's inflated bytes through `read(n)`; a DocumentError (one line) when the stream is bad."""
    with open_regular(path, follow=follow) as raw:
        yield _Inflating(path, raw, os.fstat(raw.fileno()).st_size)
