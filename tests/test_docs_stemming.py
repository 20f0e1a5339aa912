"""Stemming, per-collection BM25 statistics, and the in-place upgrade of an index built by the previous Ember."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.docs.chunk import Chunk
from engine.docs.index import Collection, DocIndex
from engine.docs.schema import SCHEMA_VERSION

V2 = Path(__file__).parent / "data" / "docs-v2.sqlite3"  # written by Ember before this change (schema 2)


def _add(index: DocIndex, coll: Collection, path: str, texts: list[str]) -> None:
    file_id = index.begin_file(coll, path, "h", 0, 0)
    index.add_chunks(file_id, [Chunk(t, None, 0, len(t)) for t in texts])
    index.finish_file(file_id, pages=0, chunks=len(texts))


def _names(index: DocIndex, coll: Collection, query: str) -> list[str]:
    return [Path(h.path).name for h in index.search(coll, query, k=10)]


def test_a_word_finds_its_other_forms_and_identifiers_still_match_themselves() -> None:
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/deed.md", ["The guardians of the estate must sign the deed."])
        _add(index, coll, "/code.py", ["Call parse_args() before getUserName() in main."])
        _add(index, coll, "/speech.md", ["Pronouncing difficult words takes practice."])
        assert _names(index, coll, "guardian") == ["deed.md"]
        assert _names(index, coll, "pronounced") == ["speech.md"]
        assert _names(index, coll, "getUserName") == ["code.py"]
        assert _names(index, coll, "parse_args") == ["code.py"]


def _ranking(index: DocIndex, coll: Collection, queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(h.text, round(h.score, 9)) for h in index.search(coll, q, k=5)] for q in queries]


def test_another_collection_does_not_move_the_first_ones_rankings() -> None:
    # "walnut" is rare in the first collection and everywhere in the second: with statistics shared
    # across collections (as before), its weight fell and the meadow passage overtook the walnut one.
    texts = ["walnut walnut harbor", "meadow harbor lantern"] + [
        f"{w} birch cedar" for w in "amber dune ember fjord grove heath".split()
    ]
    queries = ["walnut meadow", "harbor lantern", "walnut birch"]
    with DocIndex.memory() as index:
        first = index.create_collection("first")
        for i, t in enumerate(texts):
            _add(index, first, f"/f{i}.md", [t])
        before = _ranking(index, first, queries)
        assert [t for t, _ in before[0]][:2] == ["walnut walnut harbor", "meadow harbor lantern"]
        other = index.create_collection("other")  # unrelated, and full of the same words
        _add(index, other, "/o.md", ["walnut lantern"] * 300 + ["harbor birch"] * 50)
        assert _ranking(index, first, queries) == before
        index.remove_collection(other)
        assert index.conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'fts_%'").fetchone()[0] >= 1
        assert _ranking(index, first, queries) == before


def test_an_index_built_by_the_previous_ember_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "docs.sqlite3"
    shutil.copy(V2, db)
    with DocIndex.open(db) as index:
        assert index.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        estate, harbour = index.collection("Estate"), index.collection("Harbour")
        assert _names(index, estate, "guardian") == ["deed.md"]  # stemmed now
        assert _names(index, harbour, "guardians ships") == ["harbour.md"]
        assert _names(index, estate, "pronunciation") == [] and _names(index, estate, "pronounce") == ["speech.md"]
        assert index.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0] == 0
        assert index.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 3  # nothing lost
        for coll in (estate, harbour):
            index.conn.execute(f"INSERT INTO fts_{coll.id} (fts_{coll.id}) VALUES ('integrity-check')")
        index.remove_collection(harbour)  # deletes keep each table in step
        index.conn.execute(f"INSERT INTO fts_{estate.id} (fts_{estate.id}) VALUES ('integrity-check')")


def test_an_interrupted_upgrade_goes_on_where_it_stopped(tmp_path: Path) -> None:
    db = tmp_path / "docs.sqlite3"
    shutil.copy(V2, db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")  # as the upgrade leaves it after the first collection's transaction
    conn.execute("ALTER TABLE chunks ADD COLUMN collection_id INTEGER NOT NULL DEFAULT 0")
    conn.execute("UPDATE chunks SET collection_id = (SELECT collection_id FROM files WHERE id = chunks.file_id)")
    conn.execute(
        "CREATE VIRTUAL TABLE fts_1 USING fts5 (text, content = 'chunks', content_rowid = 'id', "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO fts_1 (rowid, text) SELECT id, text FROM chunks WHERE collection_id = 1")
    conn.execute("COMMIT")
    conn.close()
    with DocIndex.open(db) as index:
        assert index.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert _names(index, index.collection("Estate"), "guardian") == ["deed.md"]
        assert _names(index, index.collection("Harbour"), "guardian") == ["harbour.md"]


def test_a_first_version_database_is_upgraded_too(tmp_path: Path) -> None:
    """Version 1 added passages to FTS5 with an insert trigger; it must go, or passages would be indexed twice."""
    db = tmp_path / "docs.sqlite3"
    shutil.copy(V2, db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript(
        "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
        "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END; PRAGMA user_version = 1;"
    )
    conn.close()
    with DocIndex.open(db) as index:
        names = {str(r[0]) for r in index.conn.execute("SELECT name FROM sqlite_master")}
        assert "chunks_fts_insert" not in names and "chunks_fts" not in names
        estate = index.collection("Estate")
        _add(index, estate, "/new.md", ["A lighthouse keeper feeds cormorants."])
        assert _names(index, estate, "cormorant") == ["new.md"]


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1])
def test_a_newer_database_is_left_untouched(tmp_path: Path, version: int) -> None:
    from engine.docs.schema import DocsDatabaseError

    db = tmp_path / "docs.sqlite3"
    sqlite3.connect(db).execute(f"PRAGMA user_version = {version}").connection.commit()
    with pytest.raises(DocsDatabaseError):
        DocIndex.open(db)
