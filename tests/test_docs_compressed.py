"""Compressed single files (.gz, .bz2, .xz) are read through the same bounds; skipped files are said."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
from pathlib import Path

import pytest

from engine.docs.errors import DocumentError
from engine.docs.extract import extract, kind_of
from engine.docs.index import DocIndex
from engine.docs.indexer import find_files, index_collection

README = (
    "# Frobnicator\n\nThe frobnicator reads its settings from /etc/frob.conf at start.\n\n"
    "## Signals\n\nSending SIGHUP makes the daemon reload the quokka table without a restart.\n"
)


def _text(path: Path) -> str:
    return "".join(b.text for b in extract(path))


@pytest.mark.parametrize(
    ("name", "pack"),
    [("README.gz", gzip.compress), ("notes.md.bz2", bz2.compress), ("daemon.log.xz", lzma.compress)],
)
def test_a_compressed_text_file_is_read_as_its_text(tmp_path: Path, name: str, pack: object) -> None:
    path = tmp_path / name
    path.write_bytes(pack(README.encode()))  # type: ignore[operator]
    assert kind_of(path) == "text"
    assert _text(path) == README


def test_a_gz_readme_in_a_folder_is_indexed_and_found_by_search(tmp_path: Path) -> None:
    docs = tmp_path / "doc" / "frob"
    docs.mkdir(parents=True)
    (docs / "README.gz").write_bytes(gzip.compress(README.encode()))
    (docs / "changelog.Debian.gz").write_bytes(gzip.compress(b"frob (1.2-1) unstable; urgency=low\n\n  * New.\n"))
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("doc")
        index.add_roots(coll, [tmp_path / "doc"])
        report = index_collection(index, coll)
        assert sorted(Path(p).name for p in report.indexed) == ["README.gz", "changelog.Debian.gz"]
        hits = index.search(coll, "reload the quokka table", 3)
    assert hits and Path(hits[0].path).name == "README.gz"
    assert "SIGHUP" in hits[0].text


def test_a_compression_bomb_is_refused_in_one_line_without_inflating_it_all(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (64 << 20), 9))  # 64 MB of newlines in about 64 KB: ~1,000×
    with pytest.raises(DocumentError) as info:
        _text(bomb)
    assert "compression bomb" in str(info.value) and "\n" not in str(info.value)


def test_a_damaged_stream_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "README.gz"
    broken.write_bytes(gzip.compress(README.encode() * 100)[:200])  # cut short
    with pytest.raises(DocumentError) as info:
        _text(broken)
    assert "README.gz" in str(info.value) and "\n" not in str(info.value)
    assert "not a readable .gz file" in str(info.value)


def test_files_in_a_folder_that_are_not_documents_are_listed_with_why(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (folder / "notes.txt").write_text("plain words\n", encoding="utf-8")
    inner = tmp_path / "inner.txt"
    inner.write_text("inside a tarball\n", encoding="utf-8")
    with tarfile.open(folder / "bundle.tar.gz", "w:gz") as tar:
        tar.add(inner, arcname="inner.txt")
    found, left_out, skipped = find_files([folder])
    assert found == [folder / "notes.txt"]
    assert left_out == []
    assert sorted(Path(p).name for p, _ in skipped) == ["bundle.tar.gz", "photo.png"]
    assert all("not a document Ember reads" in reason for _, reason in skipped)
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("mixed")
        index.add_roots(coll, [folder])
        report = index_collection(index, coll)
    assert [Path(p).name for p, _ in report.skipped] == ["bundle.tar.gz", "photo.png"]
    assert report.to_json()["skipped"] and not report.failed


def test_a_named_compressed_archive_says_it_holds_no_text(tmp_path: Path) -> None:
    archive = tmp_path / "report.pdf.gz"
    archive.write_bytes(gzip.compress(b"%PDF-1.7\n" + b"\0" * 100))
    with pytest.raises(DocumentError, match="holds no text Ember reads"):
        _text(archive)
