"""Documents written by the tests: PDFs with a text layer (fpdf2), DOCX (python-docx), HTML, hostile files."""

from __future__ import annotations

import random
import zipfile
from collections.abc import Sequence
from pathlib import Path

from engine.bench.docs_corpus import prose

WORDS = ("river stone window garden market ledger harbor candle meadow copper lantern orchard violet thunder "
         "pepper saddle timber velvet anchor bridge cellar falcon glacier hammer island jacket kettle ladder "
         "magnet needle oyster pillar quartz ribbon signal tunnel umbrella valley walnut yarrow zephyr basket "
         "canyon dagger engine feather goblet hollow insect jungle kernel lemon mirror nutmeg olive parrot").split()


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
