"""The model library: folder scans, shards, projectors, persisted state, the last used model."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import gguf_factory as gf
import pytest

from models.library import jsonstore
from models.library.default_model import default_model_path
from models.library.paths import ember_paths
from models.library.scan import (
    MAX_RECENT,
    LibraryState,
    RemoteServer,
    Source,
    last_used_entry,
    last_used_model,
    library_entries,
    library_file,
    load_library_state,
    note_opened,
    note_server_used,
    save_library_state,
    scan_folder,
)


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    """A folder with every kind of file a user's model folder holds."""
    root = tmp_path / "zoo"
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / ".cache").mkdir()
    gf.write_tiny_llama(root / "alpha.gguf")
    gf.write_tiny_llama(root / "nested" / "deeper" / "beta.GGUF", gf.LLAMA3, gf.LLAMA3_TOKENS)
    gf.write_tiny_llama(root / "nested" / "split.gguf", split_max_tensors=8)  # three shards
    gf.write_projector(root / "alpha-mmproj-f16.gguf")
    gf.write_projector(root / "vision-encoder.gguf")  # a projector without "mmproj" in its name
    gf.write_tiny_llama(root / ".cache" / "hidden.gguf")
    (root / "notes.txt").write_text("not a model")
    (root / "fake.gguf").write_text("this is not GGUF either")
    (root / "empty.gguf").write_bytes(b"")
    return root


def test_scan_finds_models_recursively_and_skips_the_rest(zoo: Path) -> None:
    found = scan_folder(zoo)
    names = [m.path.relative_to(zoo).as_posix() for m in found]
    assert names == ["alpha.gguf", "nested/deeper/beta.GGUF", "nested/split-00001-of-00003.gguf"]


def test_split_shards_are_one_model_with_the_size_summed(zoo: Path) -> None:
    split = next(m for m in scan_folder(zoo) if "split" in m.path.name)
    shards = sorted((zoo / "nested").glob("split-*.gguf"))
    assert split.shard_count == 3
    assert split.size_bytes == sum(p.stat().st_size for p in shards)
    assert split.error is None


def test_a_missing_shard_is_reported(zoo: Path) -> None:
    (zoo / "nested" / "split-00002-of-00003.gguf").unlink()
    split = next(m for m in scan_folder(zoo) if "split" in m.path.name)
    assert split.error == "missing shard 2 of 3"
    (zoo / "nested" / "split-00001-of-00003.gguf").unlink()
    orphan = next(m for m in scan_folder(zoo) if "split" in m.path.name)
    assert orphan.path.name == "split-00003-of-00003.gguf"
    assert orphan.error == "missing shard 1, 2 of 3"


def test_scan_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    assert scan_folder(tmp_path / "nope") == []


# --- state ------------------------------------------------------------------------------


def test_state_round_trips(tmp_path: Path) -> None:
    state = (
        LibraryState()
        .with_folder(tmp_path / "a")
        .with_folder(tmp_path / "b")
        .with_folder(tmp_path / "a")  # no duplicates
        .with_opened(tmp_path / "x.gguf")
        .with_remote_server(RemoteServer("lab", "http://10.0.0.2:8080/v1", "qwen3"))
        .with_remote_server(RemoteServer("ollama", "http://localhost:11434/v1"))
    )
    save_library_state(state)
    loaded = load_library_state()
    assert loaded == state
    assert loaded.folders == (tmp_path / "a", tmp_path / "b")
    assert loaded.last_used == tmp_path / "x.gguf"
    assert loaded.without_remote_server("lab").remote_servers == (RemoteServer("ollama", "http://localhost:11434/v1"),)
    assert loaded.without_folder(tmp_path / "a").folders == (tmp_path / "b",)


LAB = RemoteServer("lab", "http://10.0.0.2:8080/v1", "qwen3")


def test_the_last_used_is_a_file_or_a_server_never_both(tmp_path: Path) -> None:
    state = LibraryState().with_remote_server(LAB).with_opened(tmp_path / "x.gguf").with_server_used(LAB)
    assert (state.last_used, state.last_used_server) == (None, "qwen3 at http://10.0.0.2:8080/v1")
    assert state.recent == (tmp_path / "x.gguf",)  # the recent files stay
    save_library_state(state)
    assert load_library_state() == state and load_library_state().last_server == LAB
    assert json.loads(library_file().read_text())["last_used_server"] == LAB.key
    back = state.with_opened(tmp_path / "x.gguf")
    assert (back.last_used, back.last_used_server) == (tmp_path / "x.gguf", None)
    assert state.with_default_used() == dataclasses.replace(state, last_used_server=None)
    assert state.saved_server("http://10.0.0.2:8080/v1/", "qwen3") == LAB  # a trailing slash is the same URL
    assert state.saved_server("http://10.0.0.2:8080/v1", "other") is None
    assert state.without_remote_server("lab").last_server is None


def test_a_state_file_without_the_server_key_still_loads(tmp_path: Path) -> None:
    path = library_file()
    path.parent.mkdir(parents=True)
    old = {
        "version": 1,
        "folders": [],
        "recent": [str(tmp_path / "x.gguf")],
        "last_used": str(tmp_path / "x.gguf"),
        "remote_servers": [{"name": "lab", "base_url": LAB.base_url, "model": "qwen3"}],
    }
    path.write_text(json.dumps(old))
    state = load_library_state()
    assert state.last_used == tmp_path / "x.gguf" and state.last_used_server is None
    assert state.remote_servers == (LAB,)
    path.write_text(json.dumps({**old, "last_used_server": LAB.key}))  # both set (hand-edited): the file wins
    assert load_library_state().last_used_server is None
    path.write_text(json.dumps({**old, "last_used": None, "last_used_server": 3}))
    assert load_library_state() == LibraryState(recent=(tmp_path / "x.gguf",), remote_servers=(LAB,))


def test_a_saved_server_comes_back_and_a_removed_one_falls_back() -> None:
    save_library_state(LibraryState().with_remote_server(LAB))
    assert note_server_used("http://elsewhere/v1", "qwen3") is None  # not saved: not recorded
    assert load_library_state().last_used_server is None
    assert note_server_used(LAB.base_url, "qwen3") is not None
    assert last_used_entry() == (LAB, None)
    save_library_state(load_library_state().without_remote_server("lab"))
    path, notice = last_used_entry()
    assert path == default_model_path()
    assert notice is not None and LAB.key in notice and "built-in model" in notice


def test_recent_files_are_most_recent_first_deduplicated_and_capped(tmp_path: Path) -> None:
    state = LibraryState()
    for i in range(MAX_RECENT + 5):
        state = state.with_opened(tmp_path / f"m{i}.gguf")
    state = state.with_opened(tmp_path / "m10.gguf")
    assert len(state.recent) == MAX_RECENT
    assert state.recent[0] == state.last_used == tmp_path / "m10.gguf"
    assert state.recent.count(tmp_path / "m10.gguf") == 1
    assert tmp_path / "m0.gguf" not in state.recent
    assert tmp_path / "m10.gguf" not in state.without_recent(tmp_path / "m10.gguf").recent


def test_note_opened_persists(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    note_opened(model)
    assert load_library_state().last_used == model
    assert json.loads(library_file().read_text())["last_used"] == str(model)


def test_malformed_entries_in_the_state_file_are_dropped() -> None:
    path = library_file()
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "folders": ["/ok", 5, None, ""],
                "recent": "not a list",
                "last_used": 7,
                "remote_servers": [{"name": "a", "base_url": "http://x"}, {"name": "no url"}, "junk"],
                "future_key": True,
            }
        )
    )
    state = load_library_state()
    assert state.folders == (Path("/ok"),)
    assert state.recent == ()
    assert state.last_used is None
    assert state.remote_servers == (RemoteServer("a", "http://x"),)


def test_corrupt_state_file_is_backed_up_and_replaced(caplog: pytest.LogCaptureFixture) -> None:
    path = library_file()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0\0\0\0{ half")  # what a crash mid-write leaves with other apps
    with caplog.at_level(logging.WARNING):
        assert load_library_state() == LibraryState()
    backups = list(path.parent.glob("library.json.corrupt-*"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == b"\0\0\0\0{ half"
    assert json.loads(path.read_text())["folders"] == []
    assert "replaced with defaults" in caplog.text


def test_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_library_state(LibraryState().with_folder(tmp_path / "old"))
    before = library_file().read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk vanished")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk vanished"):
        save_library_state(LibraryState().with_folder(tmp_path / "new"))
    assert library_file().read_bytes() == before  # the old file is untouched
    assert [p.name for p in library_file().parent.iterdir()] == ["library.json"]  # no temp file left


def test_atomic_write_fsyncs_before_replacing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    jsonstore.write_json_atomic(tmp_path / "x.json", {"a": 1})
    assert calls[:2] == ["fsync", "replace"]
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1}


# --- the whole library --------------------------------------------------------------------


def test_library_lists_builtin_models_dir_folders_and_recent(zoo: Path, tmp_path: Path) -> None:
    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    gf.write_tiny_llama(models_dir / "mine.gguf", gf.GEMMA, gf.GEMMA_TOKENS)
    loose = gf.write_tiny_llama(tmp_path / "loose.gguf", gf.HARMONY, gf.HARMONY_TOKENS)
    gone = tmp_path / "gone.gguf"
    state = LibraryState().with_folder(zoo).with_opened(gone).with_opened(loose).with_opened(zoo / "alpha.gguf")
    entries = library_entries(state)
    summary = [(e.source, e.path.name) for e in entries]
    assert summary == [
        (Source.BUILTIN, default_model_path().name),
        (Source.MODELS_DIR, "mine.gguf"),
        (Source.FOLDER, "alpha.gguf"),  # also a recent file: listed once
        (Source.FOLDER, "beta.GGUF"),
        (Source.FOLDER, "split-00001-of-00003.gguf"),
        (Source.RECENT, "loose.gguf"),
        (Source.RECENT, "gone.gguf"),
    ]
    by_name = {e.path.name: e for e in entries}
    assert by_name["mine.gguf"].metadata is not None
    assert str(by_name["mine.gguf"].metadata.template_family) == "gemma"
    assert by_name["gone.gguf"].error == "no such file"
    assert by_name["split-00001-of-00003.gguf"].shard_count == 3
    assert entries[0].metadata is not None
    assert entries[0].metadata.quantization == "Q4_1"


def test_unreadable_models_are_listed_with_their_reason(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    cut = gf.write_tiny_llama(folder / "cut.gguf")
    os.truncate(cut, cut.stat().st_size - 1000)
    entry = next(e for e in library_entries(LibraryState().with_folder(folder)) if e.path == cut)
    assert entry.metadata is None
    assert entry.error is not None
    assert entry.error.startswith("truncated")
    assert entry.to_json()["error"] == entry.error


def test_a_projector_opened_directly_is_not_a_library_model(tmp_path: Path) -> None:
    projector = gf.write_projector(tmp_path / "clip-vision.gguf")
    entries = library_entries(LibraryState().with_opened(projector))
    assert all(e.path != projector for e in entries)


def test_library_without_reading_headers(zoo: Path) -> None:
    entries = library_entries(LibraryState().with_folder(zoo), read=False)
    assert all(e.metadata is None for e in entries)
    assert len(entries) == 4  # built-in + three zoo models


# --- the last used model ---------------------------------------------------------------------


def test_last_used_model_comes_back(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    note_opened(model)
    assert last_used_model() == (model, None)


def test_without_history_the_default_opens_silently() -> None:
    assert last_used_model() == (default_model_path(), None)


def test_a_missing_last_model_falls_back_to_the_default_with_a_notice(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    note_opened(model)
    model.unlink()
    path, notice = last_used_model()
    assert path == default_model_path()
    assert notice is not None
    assert str(model) in notice
    assert "built-in model" in notice
