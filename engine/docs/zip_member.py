"""One member of a ZIP container (an EPUB, a .docx), inflated within a limit.

A member's declared size can lie: it is inflated a piece at a time and refused as soon as it
passes `limit`, so a zip bomb costs at most `limit` bytes of memory.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

from engine.docs.errors import DocumentError
from engine.docs.names import shown

PIECE = 1 << 20  # inflated this much at a time
# What reading a damaged or hostile container raises (zipfile's own, a cut stream, a bad deflate
# stream, an unsupported method, an encrypted member): each means "not a readable file".
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    ValueError,
)


def inflated_member(path: Path, archive: zipfile.ZipFile, member: str | zipfile.ZipInfo, limit: int) -> bytes:
    """The member's bytes; a `DocumentError` once they pass `limit` (nothing more is inflated)."""
    name = member.filename if isinstance(member, zipfile.ZipInfo) else member
    pieces: list[bytes] = []
    size = 0
    with archive.open(member) as opened:
        while piece := opened.read(PIECE):
            size += len(piece)
            if size > limit:
                raise DocumentError(
                    path, f"inflates past its limit ({shown(name)}: over {limit >> 20} MB; a zip bomb?); refused"
                )
            pieces.append(piece)
    return b"".join(pieces)
