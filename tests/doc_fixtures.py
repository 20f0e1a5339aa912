"""Documents written by the tests: PDFs with a text layer (fpdf2), DOCX (python-docx), HTML, hostile files."""

from __future__ import annotations

import random
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.bench.docs_corpus import prose

WORDS = (
    "river stone window garden market ledger harbor candle meadow copper lantern orchard violet thunder "
    "pepper saddle timber velvet anchor bridge cellar falcon glacier hammer island jacket kettle ladder "
    "magnet needle oyster pillar quartz ribbon signal tunnel umbrella valley walnut yarrow zephyr basket "
    "canyon dagger engine feather goblet hollow insect jungle kernel lemon mirror nutmeg olive parrot"
).split()


def filler(rng: random.Random, words: int) -> str:
    """Deterministic prose-like text: sentences of common words, paragraphs every ~60 words."""
    return prose(rng, words, WORDS)


def write_pdf(path: Path, pages: Sequence[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path, pages: int = 2) -> Path:
    """Pages with only drawings (as a scan has only images): no text layer."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 120, 160, style="F")
    pdf.output(str(path))
    return path


def write_encrypted_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Secret text behind a password.")
    pdf.set_encryption(owner_password="owner", user_password="user")
    pdf.output(str(path))
    return path


def write_docx(path: Path, heading: str, paragraphs: Sequence[str]) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(heading, 1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


def write_zip_bomb_docx(path: Path, inflated_mb: int = 128) -> Path:
    """A real DOCX-shaped zip whose document.xml inflates to `inflated_mb` MB (a few hundred KB on disk)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b" " * (1 << 20)
            for _ in range(inflated_mb):
                member.write(block)
    return path


def _pdf_file(path: Path, page_streams: Sequence[bytes | None]) -> Path:
    """A PDF written by hand, one Helvetica page per content stream (Flate-compressed).

    A None stream is a damaged page: its page object is replaced by bytes PDFium cannot parse.
    """
    import zlib

    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids: list[int] = []
    for stream in page_streams:
        data = zlib.compress(stream or b"BT ET", 9)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream")
        page = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % len(objects)
        )
        objects.append(page if stream is not None else b"\x07\x01 garbage \xff\xfe [[[ <<" * 4)
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids) + b"] /Count %d >>" % len(kids)
    out = bytearray(b"%PDF-1.4\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def text_stream(text: str, repeat: int = 1) -> bytes:
    """A page's content: `text` as one line per `repeat`, lines running off the page's bottom after ~80."""
    line = b"(" + text.encode("latin-1") + b") ' "
    return b"BT /F1 8 Tf 20 800 Td 10 TL " + line * repeat + b"ET"


def write_huge_page_pdf(path: Path, chars: int, pages_around: int = 1) -> Path:
    """`pages_around` ordinary pages, then one page drawing `chars` characters (80 a line, most off the
    page: a file of a few hundred KB), then `pages_around` ordinary pages again."""
    line = "huge page lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod"[:80]
    plain = [text_stream(f"ordinary page {i + 1} about harbor lanterns") for i in range(pages_around)]
    tail = [text_stream(f"ordinary page {pages_around + 2 + i} about copper kettles") for i in range(pages_around)]
    return _pdf_file(path, [*plain, text_stream(line, max(1, chars // 80)), *tail])


def write_damaged_pdf(path: Path, pages: int, damaged: range) -> Path:
    """`pages` pages ("page N about topic N"), those in `damaged` (1-based) unreadable."""
    return _pdf_file(
        path, [None if n in damaged else text_stream(f"page {n} about topic{n}") for n in range(1, pages + 1)]
    )


def write_lying_docx(path: Path, inflated_mb: int, declared: int = 1000) -> Path:
    """A DOCX whose document.xml says it holds `declared` bytes (size fields and CRC of its first
    `declared` bytes) while its stream inflates to `inflated_mb` MB."""
    import struct
    import zlib

    base = path.with_suffix(".base.docx")
    write_docx(base, "Lying", ["small"])
    head = b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="x">'
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename != "word/document.xml":
                out.writestr(info, src.read(info))
        with out.open("word/document.xml", "w") as member:
            member.write(head)
            block = b" " * (1 << 20)
            for _ in range(inflated_mb):
                member.write(block)
    base.unlink()
    data = bytearray(path.read_bytes())
    first = (head + b" " * declared)[:declared]
    crc = zlib.crc32(first)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("word/document.xml")
    local = info.header_offset
    struct.pack_into("<III", data, local + 14, crc, info.compress_size, declared)
    central = data.rfind(b"PK\x01\x02" + data[local + 4 : local + 10])  # this member's central entry
    at = central
    while True:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46 : at + 46 + name_len]) == b"word/document.xml":
            break
        at = data.find(b"PK\x01\x02", at + 4)
    struct.pack_into("<I", data, at + 16, crc)
    struct.pack_into("<I", data, at + 24, declared)
    path.write_bytes(bytes(data))
    return path


class WidthEmbedder:
    """Unit vectors of a fixed width: the width tells which model made them."""

    def __init__(self, name: str, width: int) -> None:
        self.name, self.width, self.calls = name, width, 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        rows = np.zeros((len(texts), self.width), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows
