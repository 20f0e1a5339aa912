"""A passage is indexed with its file's title and the headings above it (its head), never shown with them."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from engine.docs.chunk import Chunk, chunk_blocks, title_of
from engine.docs.extract import Block
from engine.docs.index import Collection, DocIndex
from engine.docs.indexer import index_collection
from engine.docs.schema import SCHEMA_VERSION

GUIDE = (
    "# Frobnicator\n\nIntro words about the tool.\n\n"
    "## Building\n\nRun make.\n\n"
    "### On Windows\n\nUse the MSVC solution in the build folder.\n\n"
    "## Usage\n\nPass a file.\n\n"
    "Signals\n-------\n\nSIGHUP reloads.\n\nSIGTERM stops the daemon after the current request is done.\n"
)


def test_each_passage_carries_its_title_and_the_headings_it_sits_under() -> None:
    chunks = list(chunk_blocks([Block(GUIDE, None, 0)], target=60, overlap=0, title="frob README"))
    by_text = {c.text.splitlines()[-1]: c for c in chunks}
    assert by_text["Use the MSVC solution in the build folder."].head == (
        "frob README — Frobnicator › Building\n"  # its own heading is in its text
    )
    assert by_text["SIGHUP reloads."].head == "frob README — Frobnicator\n"  # "## Usage" begins it
    underlined = by_text["SIGTERM stops the daemon after the current request is done."]
    assert underlined.head == "frob README — Frobnicator › Signals\n"  # underlined with ---: level 2, as Usage
    for c in chunks:  # the passage itself is still exactly the span of the text
        assert GUIDE[c.start : c.end] == c.text and c.indexed == c.head + c.text


def test_headings_carry_over_from_one_block_to_the_next() -> None:
    blocks = [Block("# Part One\n\nFirst.\n\n", None, 0), Block("More of part one.\n", None, 20)]
    assert [c.head for c in chunk_blocks(blocks, title="")][-1] == "Part One\n"


def test_a_title_is_the_name_made_readable_and_a_generic_name_keeps_its_folder() -> None:
    assert title_of(Path("/usr/share/doc/zstd/README.md.gz")) == "zstd README"
    assert title_of(Path("/home/a/tax-2026_receipts.pdf")) == "tax 2026 receipts"
    assert title_of(Path("/docs/NEWS")) == "docs NEWS"
    assert title_of(Path("/x/.gz")) == "gz"
    # A name that is not UTF-8 (DC-27): the title can still be stored and embedded
    bad = title_of(Path(os.fsdecode(b"/docs/bad\xff\xfeutf8.txt")))
    assert bad == "bad\ufffd\ufffdutf8" and bad.encode("utf-8")


def test_a_passage_is_found_by_its_title_and_headings(tmp_path: Path) -> None:
    folder = tmp_path / "frob"
    folder.mkdir()
    (folder / "README.md").write_text(GUIDE, encoding="utf-8")
    (folder / "other.md").write_text("Nothing about building here. Use the blue door.\n", encoding="utf-8")
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [folder])
        index_collection(index, coll)
        # Neither "frob" nor "windows" is in the passage's own words, only in its title and heading.
        hits = index.search(coll, "frob windows", 3)
        assert hits and hits[0].text.endswith("Use the MSVC solution in the build folder.")
        assert "frob" not in hits[0].text.lower()  # what the model is shown is the passage alone


def _add(index: DocIndex, coll: Collection, path: str, chunks: list[Chunk]) -> int:
    file_id = index.begin_file(coll, path, "h", 0, 0)
    index.add_chunks(file_id, chunks)
    index.finish_file(file_id, pages=0, chunks=len(chunks))
    return file_id


def test_a_version_3_index_is_upgraded_and_its_passages_deleted_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "docs.sqlite3"
    with DocIndex.open(db) as index:
        coll = index.create_collection("Harbour")
        _add(index, coll, "/old.md", [Chunk("The lighthouse keeper feeds cormorants.", None, 0, 39)])
    conn = sqlite3.connect(db, isolation_level=None)  # as Ember before heads left it
    conn.executescript(
        "DROP TRIGGER fts_1_delete; ALTER TABLE chunks DROP COLUMN head; "
        "CREATE TRIGGER fts_1_delete AFTER DELETE ON chunks WHEN old.collection_id = 1 BEGIN "
        "INSERT INTO fts_1 (fts_1, rowid, text) VALUES ('delete', old.id, old.text); END; PRAGMA user_version = 3;"
    )
    conn.close()
    with DocIndex.open(db) as index:
        assert index.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        coll = index.collection("Harbour")
        new = _add(index, coll, "/new.md", [Chunk("Waves broke over the pier.", None, 0, 26, "Storm log\n")])
        assert [Path(h.path).name for h in index.search(coll, "storm", 5)] == ["new.md"]
        assert [Path(h.path).name for h in index.search(coll, "cormorant", 5)] == ["old.md"]
        index.drop_files([new])  # the trigger takes out the head's terms too
        index.conn.execute("INSERT INTO fts_1 (fts_1) VALUES ('integrity-check')")
        assert index.search(coll, "storm", 5) == []
