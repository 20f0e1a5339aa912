"""The collections dialog's "Embedding model" control: the window's `ember docs add --embedder`.

Scripted embedders stand in for the models (no real model runs here); the GGUFs chosen are tiny
synthetic ones, read only for their header.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_fixtures import WidthEmbedder
from gguf_factory import write_tiny_llama
from gui_helpers import WAIT_MS
from pytestqt.qtbot import QtBot

from desktop.qt.chat.documents_ui import CollectionPrompts, CollectionsDialog
from desktop.qt.chat.embedder_choice import CHOOSE_LABEL, DEFAULT_LABEL, NONE_LABEL, EmbedderPrompts
from engine.docs.embed import DEFAULT_EMBEDDER
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection


class Prompts(CollectionPrompts, EmbedderPrompts):
    """Canned answers to the dialog's question and file dialog, and what was asked."""

    def __init__(self) -> None:
        self.answer = True
        self.file: Path | None = None
        self.asked: list[str] = []

    def confirm(self, parent: object, title: str, text: str) -> bool:
        self.asked.append(text)
        return self.answer

    def gguf_file(self, parent: object) -> Path | None:
        return self.file


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> dict[str, WidthEmbedder]:
    """The dialog's `shared_embedder`: a scripted embedder per stored choice, 3 wide for the default."""
    made: dict[str, WidthEmbedder] = {}

    def shared(spec: str) -> WidthEmbedder:
        return made.setdefault(spec, WidthEmbedder(spec, 3 if spec == DEFAULT_EMBEDDER else 7))

    monkeypatch.setattr("desktop.qt.chat.documents_ui.shared_embedder", shared)
    return made


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An index with "Notes": two files, embedded by the default model (3 wide)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("The spare key is under the blue pot.\n")
    (folder / "b.md").write_text("The boiler is serviced every October.\n")
    path = tmp_path / "docs.sqlite3"
    with DocIndex.open(path) as index:
        coll = index.create_collection("Notes", DEFAULT_EMBEDDER)
        index.add_roots(coll, [folder])
        index_collection(index, coll, embedder=WidthEmbedder("default", 3))
        assert index.info(coll).vectors == 2
    return path


@pytest.fixture
def dialog(qtbot: QtBot, db: Path) -> Iterator[tuple[CollectionsDialog, Prompts]]:
    made = CollectionsDialog(db)
    qtbot.addWidget(made)
    prompts = Prompts()
    made.prompts = prompts
    made.embedder.prompts = prompts
    yield made, prompts
    made.reject()  # a worker still running is told to stop


def _pick(dialog: CollectionsDialog, text: str) -> None:
    """What a user's click on the combo's item does."""
    combo = dialog.embedder.combo
    index = combo.findText(text)
    assert index >= 0, [combo.itemText(i) for i in range(combo.count())]
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def _stored(db: Path) -> tuple[str, int, int]:
    with DocIndex.open(db) as index:
        info = index.info(index.collection("Notes"))
        return info.collection.embedder, info.vectors, info.chunks


def _items(dialog: CollectionsDialog) -> list[str]:
    combo = dialog.embedder.combo
    return [combo.itemText(i) for i in range(combo.count())]


def test_the_detail_and_the_combo_show_each_collections_choice(qtbot: QtBot, db: Path, tmp_path: Path) -> None:
    own = write_tiny_llama(tmp_path / "nomic-embed-text.gguf", extra={"llama.pooling_type": 1})
    with DocIndex.open(db) as index:
        index.create_collection("Words", "")
        index.create_collection("Own", str(own))
    dialog = CollectionsDialog(db)
    qtbot.addWidget(dialog)
    expected = {"Notes": DEFAULT_LABEL, "Words": NONE_LABEL, "Own": "nomic-embed-text.gguf"}
    for name, label in expected.items():
        dialog.reload(select=name)
        assert dialog.embedder.combo.currentText() == label and dialog.embedder.combo.isEnabled()
        assert "Embedding model" not in dialog.detail.text()  # the control says it, once
        assert dialog.embedder.note.isHidden()  # an embedding model: nothing to warn about
    assert _items(dialog) == [DEFAULT_LABEL, NONE_LABEL, "nomic-embed-text.gguf", CHOOSE_LABEL]
    dialog.reload(select="Words")
    assert _items(dialog) == [DEFAULT_LABEL, NONE_LABEL, CHOOSE_LABEL]  # only the current file is listed


def test_switching_to_none_asks_then_drops_the_vectors_and_keeps_the_passages(
    dialog: tuple[CollectionsDialog, Prompts], db: Path, models: dict[str, WidthEmbedder]
) -> None:
    dlg, prompts = dialog
    prompts.answer = False
    _pick(dlg, NONE_LABEL)
    assert len(prompts.asked) == 1 and "its 2 files" in prompts.asked[0] and "words only" in prompts.asked[0]
    assert _stored(db) == (DEFAULT_EMBEDDER, 2, 2)  # declined: nothing changed
    assert dlg.embedder.combo.currentText() == DEFAULT_LABEL
    prompts.answer = True
    _pick(dlg, NONE_LABEL)
    assert _stored(db) == ("", 0, 2)
    assert dlg.worker is None and not models  # words alone: nothing to read or embed again
    assert dlg.embedder.combo.currentText() == NONE_LABEL


def test_a_chat_model_is_taken_with_a_warning_and_the_files_embedded_again(
    dialog: tuple[CollectionsDialog, Prompts], db: Path, tmp_path: Path, qtbot: QtBot, models: dict[str, WidthEmbedder]
) -> None:
    dlg, prompts = dialog
    prompts.file = write_tiny_llama(tmp_path / "smol-chat.gguf")  # a decoder, no pooling: a chat model
    _pick(dlg, CHOOSE_LABEL)
    assert len(prompts.asked) == 1 and "its 2 files are embedded again at the next index" in prompts.asked[0]
    note = dlg.embedder.note
    assert not note.isHidden() and "smol-chat.gguf is a chat model" in note.text() and "slow" in note.text()
    assert dlg.worker is not None  # indexing started, as for new files
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=WAIT_MS * 4)
    chosen = str(prompts.file.resolve())
    assert "2 indexed" in dlg.detail.text() and models[chosen].calls == 2
    assert _stored(db) == (chosen, 2, 2)
    assert dlg.embedder.combo.currentText() == "smol-chat.gguf" and not dlg.embedder.note.isHidden()


def test_an_embedding_model_is_taken_without_a_warning(
    dialog: tuple[CollectionsDialog, Prompts], db: Path, tmp_path: Path, qtbot: QtBot, models: dict[str, WidthEmbedder]
) -> None:
    dlg, prompts = dialog
    prompts.file = write_tiny_llama(tmp_path / "bge-small.gguf", extra={"llama.pooling_type": 2})
    _pick(dlg, CHOOSE_LABEL)
    assert dlg.embedder.note.isHidden()
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=WAIT_MS * 4)
    assert _stored(db) == (str(prompts.file.resolve()), 2, 2)


def test_a_bad_file_is_refused_in_one_line_and_nothing_changes(
    dialog: tuple[CollectionsDialog, Prompts], db: Path, tmp_path: Path, models: dict[str, WidthEmbedder]
) -> None:
    dlg, prompts = dialog
    text = tmp_path / "notes.gguf"
    text.write_text("hello, not a model")
    locked = write_tiny_llama(tmp_path / "locked.gguf", extra={"llama.pooling_type": 1})
    locked.chmod(0)
    cases = [
        (text, "not a GGUF file"),
        (tmp_path / "gone.gguf", "no such file"),
        (tmp_path, "is a directory, not a GGUF file"),
    ]
    if os.geteuid() != 0:  # root reads a file whatever its mode
        cases.append((locked, "permission denied"))
    for path, reason in cases:
        prompts.file = path
        _pick(dlg, CHOOSE_LABEL)
        line = dlg.detail.text()
        assert line == f"{path.name} cannot be the embedding model: {reason}. Nothing changed.", line
        assert _stored(db) == (DEFAULT_EMBEDDER, 2, 2)
        assert dlg.embedder.combo.currentText() == DEFAULT_LABEL and dlg.worker is None
    assert prompts.asked == [] and not models
    prompts.file = None  # the file dialog closed: nothing asked, nothing changed
    _pick(dlg, CHOOSE_LABEL)
    assert dlg.embedder.combo.currentText() == DEFAULT_LABEL and _stored(db) == (DEFAULT_EMBEDDER, 2, 2)
