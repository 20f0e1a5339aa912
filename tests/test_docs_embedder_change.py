"""Changing a collection's embedding model: its old vectors go and its files are embedded again.

Vectors of two models (different widths, different meanings) were once kept side by side and
the mismatched ones silently skipped. Scripted embedders stand in for the models.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doc_fixtures import WidthEmbedder
from gguf_factory import write_tiny_llama

from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection


def _widths(index: DocIndex, coll_id: int) -> set[int]:
    rows = index.conn.execute(
        "SELECT length(v.vec) FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id "
        "WHERE f.collection_id = ?",
        (coll_id,),
    )
    return {int(r[0]) // 4 for r in rows}


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("The spare key is under the blue pot.\n")
    (folder / "b.md").write_text("The boiler is serviced every October.\n")
    return folder


def test_a_new_embedder_drops_the_old_vectors_and_the_next_run_embeds_every_file_again(tmp_path: Path) -> None:
    old, new = WidthEmbedder("old", 3), WidthEmbedder("new", 5)
    with DocIndex.open(tmp_path / "d.sqlite3") as index:
        coll = index.create_collection("Notes", "old.gguf")
        index.add_roots(coll, [_folder(tmp_path)])
        index_collection(index, coll, embedder=old)
        assert _widths(index, coll.id) == {3} and index.info(coll).vectors == 2
        coll = index.set_embedder(coll, "new.gguf")
        assert coll.embedder == "new.gguf" and index.info(coll).vectors == 0
        report = index_collection(index, coll, embedder=new)
        assert len(report.indexed) == 2 and report.unchanged == 0 and new.calls == 2
        assert _widths(index, coll.id) == {5} and index.info(coll).vectors == 2
        # the same model again changes nothing; the next run skips every file
        assert index.set_embedder(coll, "new.gguf") == coll and index.info(coll).vectors == 2
        assert index_collection(index, coll, embedder=new).unchanged == 2
        # BM25 alone: the vectors go, the passages stay, nothing is read again
        coll = index.set_embedder(coll, "")
        assert index.info(coll).vectors == 0 and index.info(coll).chunks == 2
        assert index_collection(index, coll).unchanged == 2


def test_creating_an_existing_collection_never_switches_its_embedder(tmp_path: Path) -> None:
    with DocIndex.open(tmp_path / "d.sqlite3") as index:
        first = index.create_collection("Notes", "")
        again = index.create_collection("Notes", "default")
        assert again == first and index.collection("Notes").embedder == ""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from desktop.cli.main import main

    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def scripted_models(monkeypatch: pytest.MonkeyPatch) -> dict[str, WidthEmbedder]:
    """`shared_embedder` for the command line: a scripted embedder per stored spec."""
    made: dict[str, WidthEmbedder] = {}

    def shared(spec: str) -> WidthEmbedder:
        return made.setdefault(spec, WidthEmbedder(spec, 3 if spec == "default" else 7))

    monkeypatch.setattr("desktop.cli.cmd_docs.shared_embedder", shared)
    return made


def test_the_command_line_re_embeds_a_collection_given_another_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scripted_models: dict[str, WidthEmbedder]
) -> None:
    folder = _folder(tmp_path)
    assert _run(capsys, "docs", "add", "Notes", str(folder))[0] == 0  # the default embedder
    own = write_tiny_llama(tmp_path / "own-embed.gguf", extra={"llama.pooling_type": 1})
    status, out, err = _run(capsys, "docs", "add", "Notes", str(folder), "--embedder", str(own), "--json")
    assert status == 0, err
    assert err == (
        "ember: collection 'Notes': embedding model changed, its vectors dropped; its 2 files are embedded "
        "again at this index run\n"
    )
    assert len(json.loads(out)["indexed"]) == 2 and scripted_models[str(own.resolve())].calls == 2
    info = json.loads(_run(capsys, "docs", "list", "Notes", "--json")[1])
    assert info["embedder"] == str(own.resolve()) and info["vectors"] == info["passages"] == 2
    # Adding more without --embedder keeps the collection's model and re-embeds nothing.
    status, out, err = _run(capsys, "docs", "add", "Notes", str(folder), "--json")
    assert status == 0 and err == "" and json.loads(out)["unchanged"] == 2
    status, _, err = _run(capsys, "docs", "add", "Notes", str(folder), "--embedder", "none")
    assert status == 0 and err.endswith("its vectors dropped; BM25 alone from now on\n")
    info = json.loads(_run(capsys, "docs", "list", "Notes", "--json")[1])
    assert info["embedder"] is None and info["vectors"] == 0 and info["passages"] == 2
