"""Extraction per format (through its library) and chunking that follows structure with offsets."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from doc_fixtures import write_docx, write_encrypted_pdf, write_pdf, write_scanned_pdf, write_zip_bomb_docx

from engine.docs.chunk import chunk_blocks, chunk_spans
from engine.docs.errors import DocumentError
from engine.docs.extract import Block, extract, kind_of


def test_pdf_keeps_page_numbers(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "r.pdf", ["First page about apples.", "Second page about pears."])
    blocks = list(extract(pdf))
    assert [b.page for b in blocks] == [1, 2]
    assert "pears" in blocks[1].text and "pears" not in blocks[0].text


def test_docx_headings_become_markdown_and_paragraphs_stay_apart(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "d.docx", "Budget", ["Travel costs rose.", "Rent stayed flat."])
    text = "".join(b.text for b in extract(path))
    assert text == "# Budget\n\nTravel costs rose.\n\nRent stayed flat."


def test_html_drops_scripts_and_keeps_blocks(tmp_path: Path) -> None:
    path = tmp_path / "p.html"
    path.write_text(
        "<html><head><style>p{}</style></head><body><h2>Title</h2><p>One &amp; two</p>"
        "<script>alert(1)</script><ul><li>a</li><li>b</li></ul></body></html>"
    )
    text = "".join(b.text for b in extract(path)).strip()
    assert "alert" not in text and "p{}" not in text
    assert text.split("\n\n")[:4] == ["## Title", "One & two", "a", "b"]


def test_text_offsets_point_back_into_the_file(tmp_path: Path) -> None:
    body = "# Notes\n\nFirst paragraph.\n\n" + "word " * 600 + "\n\n## Later\n\nThe end."
    path = tmp_path / "n.md"
    path.write_text(body)
    chunks = list(chunk_blocks(extract(path)))
    assert len(chunks) >= 3
    for c in chunks:
        assert body[c.start : c.end] == c.text
    assert any(c.text.startswith("## Later") for c in chunks)  # a heading starts a passage


def test_long_paragraphs_overlap_and_passages_stay_bounded() -> None:
    text = " ".join(f"w{i}" for i in range(2000))
    spans = list(chunk_spans(text, target=300, overlap=60))
    assert all(e - s <= 300 for s, e in spans)
    assert all(b[0] < a[1] for a, b in itertools.pairwise(spans))  # each overlaps the one before
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_a_code_fence_is_not_cut_at_its_blank_lines() -> None:
    text = "Intro.\n\n```\nline one\n\nline two\n```\n\nAfter."
    texts = [text[s:e] for s, e in chunk_spans(text, target=30, overlap=0)]
    assert "```\nline one\n\nline two\n```" in texts


def test_only_headings_at_a_line_start_begin_a_passage() -> None:
    text = (
        "# Title\n\nPrices rose by #3 and the #tag stayed.\n## Costs\nRent.\n#nospace line\n"
        "   # indented\n####### seven\n###### Six\nEnd."
    )
    starts = [text[s:e].split("\n")[0] for s, e in chunk_spans(text, target=1000, overlap=0)]
    assert starts == ["# Title", "## Costs", "###### Six"]


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: write_scanned_pdf(p / "scan.pdf"), "scan.pdf: has no text layer"),
        (lambda p: write_encrypted_pdf(p / "locked.pdf"), "locked.pdf: is encrypted"),
        (lambda p: write_zip_bomb_docx(p / "bomb.docx"), "bomb.docx: would inflate to"),
    ],
)
def test_hostile_files_are_one_line_naming_the_file(tmp_path: Path, make, says: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    started = time.monotonic()
    with pytest.raises(DocumentError) as info:
        list(extract(path))
    assert str(info.value).startswith(says)
    assert "\n" not in str(info.value)
    assert time.monotonic() - started < 10


def test_unsupported_and_binary_files_are_refused(tmp_path: Path) -> None:
    png = tmp_path / "photo.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(DocumentError, match=r"^photo.png: unsupported type \(\.png\)"):
        list(extract(png))
    fake = tmp_path / "data.txt"
    fake.write_bytes(b"abc\x00def")
    with pytest.raises(DocumentError, match=r"^data.txt: looks binary"):
        list(extract(fake))
    notpdf = tmp_path / "broken.pdf"
    notpdf.write_text("not a pdf at all")
    with pytest.raises(DocumentError, match=r"^broken.pdf: "):
        list(extract(notpdf))


def test_unknown_suffix_is_sniffed() -> None:
    assert kind_of(Path(__file__)) == "text"


def test_a_large_text_file_streams_in_bounded_blocks(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    line = "2026-01-01 INFO something happened in the system today\n"
    with path.open("w") as f:
        for _ in range(60_000):  # about 3.3 MB
            f.write(line)
    sizes: list[int] = []
    offset = 0
    for block in extract(path):
        assert isinstance(block, Block)
        assert block.start == offset
        offset += len(block.text)
        sizes.append(len(block.text))
    assert offset == path.stat().st_size
    assert max(sizes) <= 1 << 20 and len(sizes) >= 3
