"""Documents whose text is far larger than the file: bounded by what comes out, not by declared sizes.

Cases from the adversarial review (docs/hardening.md, "Documents: text bounded by what is produced"):
DC-02/DC-03 a 114 KB PDF with one page of 20 MB of text (PDFium's text page for it took 3.3 GB, and
aborted the process under a memory limit); DC-08 a PDF with 14 of 40 pages damaged (all refused);
DC-16 a DOCX whose document.xml declares 1,000 bytes and inflates to far more; DC-20 HTML with one
unclosed tag of millions of attributes (quadratic: 18 MB took 68 s and 2.4 GB).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from doc_fixtures import write_damaged_pdf, write_huge_page_pdf, write_lying_docx

from engine.docs.errors import DocumentError
from engine.docs.extract import extract
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection

ROOT = Path(__file__).resolve().parents[1]

# Reads a file's blocks in a child under an address-space limit: a native allocation that fails
# there aborts the child (SIGABRT, as DC-03 saw) instead of filling the test machine's memory.
_READ = """
import sys
from pathlib import Path
from engine.docs.extract import extract
from engine.docs.errors import DocumentError
notes = []
try:
    blocks = list(extract(Path(sys.argv[1]), note=notes.append))
except DocumentError as exc:
    print("refused:", exc)
else:
    print("pages:", sorted({b.page for b in blocks}))
for note in notes:
    print("note:", note)
"""


def _read_limited(path: Path, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _READ, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        preexec_fn=limit,
    )


@pytest.mark.slow  # starts a process
@pytest.mark.skipif(sys.platform != "linux", reason="an address-space limit (RLIMIT_AS) as on Linux")
def test_a_page_of_twenty_megabytes_of_text_is_refused_in_one_line_and_the_other_pages_read(tmp_path: Path) -> None:
    """DC-02/DC-03: 250,000 text objects on one page; under a 1.5 GB limit the process used to abort."""
    pdf = write_huge_page_pdf(tmp_path / "huge.pdf", 20_000_000)
    assert pdf.stat().st_size < 200_000
    result = _read_limited(pdf, 1536 << 20)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "pages: [1, 3]" in result.stdout
    assert (
        "note: huge.pdf: page 2 cannot be read (too large to read: 250,000 objects, at most 100,000)" in result.stdout
    )


@pytest.mark.slow  # starts a process
@pytest.mark.skipif(sys.platform != "linux", reason="an address-space limit (RLIMIT_AS) as on Linux")
def test_text_drawn_off_the_page_costs_nothing(tmp_path: Path) -> None:
    """DC-02: 6 MB of text on one page, all but the first lines below its bottom edge. Under the
    object limit; its text page took about 1 GB, now only the visible lines are laid out."""
    pdf = write_huge_page_pdf(tmp_path / "tall.pdf", 6_000_000)
    result = _read_limited(pdf, 768 << 20)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "pages: [1, 2, 3]" in result.stdout and "note:" not in result.stdout
    blocks = list(extract(pdf))
    visible = next(b.text for b in blocks if b.page == 2)
    assert visible.startswith("huge page lorem ipsum") and 1_000 < len(visible) < 20_000  # the lines on the page


def test_a_pdf_with_damaged_pages_is_indexed_from_its_good_ones(tmp_path: Path) -> None:
    """DC-08: pages 20-33 of 40 cannot be loaded; the 26 others are indexed, the bad ones named."""
    pdf = write_damaged_pdf(tmp_path / "damaged.pdf", 40, range(20, 34))
    with DocIndex.memory() as index:
        coll = index.create_collection("D")
        index.add_roots(coll, [pdf])
        report = index_collection(index, coll)
        assert report.indexed == [str(pdf)] and report.pages == 26 and not report.failed
        assert report.notes == [
            (str(pdf), "damaged.pdf: pages 20-33 cannot be read (Failed to load page.); the other 26 pages were read")
        ]
        assert index.search(coll, "topic39")[0].page == 39
        assert not index.search(coll, "topic25")


def test_a_pdf_whose_every_page_is_damaged_is_refused_in_one_line(tmp_path: Path) -> None:
    pdf = write_damaged_pdf(tmp_path / "ruined.pdf", 3, range(1, 4))
    with pytest.raises(DocumentError, match=r"^ruined.pdf: pages 1-3 cannot be read \(Failed to load page.\)$"):
        list(extract(pdf))


def _peak_mb(read: object) -> float:
    tracemalloc.start()
    try:
        assert callable(read)
        read()
        return tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_docx_that_lies_about_its_size_inflates_no_further_than_it_declared(tmp_path: Path) -> None:
    """DC-16: document.xml declares 1,000 bytes and holds 200 MB; zipfile inflated it whole first."""
    bomb = write_lying_docx(tmp_path / "liar.docx", inflated_mb=200)

    def read() -> None:
        with pytest.raises(DocumentError, match=r"^liar.docx: is not a readable DOCX"):
            list(extract(bomb))

    assert _peak_mb(read) < 64


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_html_with_one_enormous_unclosed_tag_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """DC-20: `<a x="y" x="y" …` 4 MB long, never closed; the text before it is kept."""
    page = tmp_path / "attrs.html"
    page.write_text("<p>before the tag</p><a " + 'x="y" ' * 700_000)

    def read() -> None:
        text = "".join(b.text for b in extract(page))
        assert text.startswith("before the tag")

    assert _peak_mb(read) < 64


def test_an_unclosed_script_past_the_limit_is_still_never_indexed(tmp_path: Path) -> None:
    """The limit on an unparsed run drops it inside a script (DC-17's rule), and reads it as text elsewhere."""
    page = tmp_path / "script.html"
    page.write_text("<p>visible words</p><script>" + "secretvalue = 1; " * 200_000)
    text = "".join(b.text for b in extract(page))
    assert "visible words" in text and "secretvalue" not in text


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_text_of_one_pdf_is_cut_at_the_per_file_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per file: at most MAX_FILE_CHARS characters of a PDF or DOCX, said in a note (here 2,000)."""
    from doc_fixtures import write_pdf

    from engine.docs import extract as extract_module

    monkeypatch.setattr(extract_module, "MAX_FILE_CHARS", 2_000)
    pdf = write_pdf(tmp_path / "long.pdf", [f"page {i} " + "lantern " * 100 for i in range(10)])
    notes: list[str] = []
    blocks = list(extract(pdf, note=notes.append))
    assert sum(len(b.text) for b in blocks) == 2_000 and blocks[-1].page == 3
    assert notes == ["long.pdf: only the first 2,000 characters of text were read"]
