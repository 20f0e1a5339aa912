"""Archiving in the history store: the v3 -> v4 migration, the list, the count, search, the trash."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.history.schema import migrate
from engine.history.store import HistoryStore


class Ticks:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    s = HistoryStore(tmp_path / "history.sqlite3", now=Ticks())
    yield s
    s.close()


def conversation(store: HistoryStore, title: str, text: str) -> int:
    conv = store.create_conversation(title=title).id
    store.add_message(conv, "user", text, parent_id=None)
    return conv


def write_v3(db: Path) -> None:
    """A database as the version-3 build left it, with a conversation, a reply and a trashed one."""
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn, target=3)
    conn.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at, title_is_auto) VALUES (1, 'Soup', 10, 20, 0)"
    )
    conn.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at, deleted_at) VALUES (2, 'Gone', 10, 15, 16)"
    )
    conn.execute(
        "INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1, 1, 'user', 'leek soup?', 11)"
    )
    conn.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, created_at) "
        "VALUES (2, 1, 1, 'assistant', 'Leeks and potatoes.', 12)"
    )
    conn.execute("UPDATE conversations SET active_leaf_id = 2 WHERE id = 1")
    conn.close()


def test_a_version_3_database_migrates_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    write_v3(db)
    with HistoryStore(db, trash_retention_s=1e12) as store:
        assert store.execute("PRAGMA user_version")[0][0] == 4
        assert store.execute("PRAGMA integrity_check")[0][0] == "ok"
        assert [c.id for c in store.conversations()] == [1]  # nothing became archived
        assert [c.id for c in store.conversations(deleted=True)] == [2]  # the trash is kept
        assert [m.content for m in store.path(1)] == ["leek soup?", "Leeks and potatoes."]
        assert store.conversation(1).archived_at is None and store.archived_count() == 0
        assert [(h.conversation_id, h.archived) for h in store.search("potatoes")] == [(1, False)]
        store.archive(1)  # and the new column works on the old rows
        assert store.conversations() == [] and store.archived_count() == 1
    assert (tmp_path / "history.sqlite3.v3.bak").exists()


def test_archive_sets_aside_and_unarchive_brings_back(store: HistoryStore) -> None:
    old = conversation(store, "Old", "first")
    new = conversation(store, "New", "second")
    store.archive(old)
    assert [c.id for c in store.conversations()] == [new]
    assert [c.id for c in store.conversations(archived=True)] == [old]
    assert store.archived_count() == 1
    assert [m.content for m in store.path(old)] == ["first"]  # nothing lost
    store.unarchive(old)
    assert [c.id for c in store.conversations()] == [new, old]  # back in its place by last activity
    assert store.conversations(archived=True) == [] and store.archived_count() == 0


def test_archiving_twice_keeps_the_first_time(store: HistoryStore) -> None:
    conv = conversation(store, "Once", "x")
    store.archive(conv)
    first = store.conversation(conv).archived_at
    store.archive(conv)
    assert store.conversation(conv).archived_at == first


def test_search_finds_archived_conversations_and_marks_them(store: HistoryStore) -> None:
    kept = conversation(store, "Kept", "pumpkin pie")
    shelved = conversation(store, "Shelved", "pumpkin soup")
    store.archive(shelved)
    assert [(h.conversation_id, h.archived) for h in store.search("pumpkin")] == [(shelved, True), (kept, False)]


def test_a_new_message_takes_a_conversation_out_of_the_archive(store: HistoryStore) -> None:
    conv = conversation(store, "Again", "hello")
    store.archive(conv)
    store.add_message(conv, "user", "one more thing", parent_id=store.conversation(conv).active_leaf_id)
    assert [c.id for c in store.conversations()] == [conv] and store.archived_count() == 0


def test_a_deleted_archived_conversation_is_in_the_trash_not_the_archive(store: HistoryStore) -> None:
    conv = conversation(store, "Both", "x")
    store.archive(conv)
    store.delete(conv)
    assert store.archived_count() == 0 and store.conversations(archived=True) == []
    assert [c.id for c in store.conversations(deleted=True)] == [conv]
    store.restore(conv)  # restored as it was: archived
    assert store.archived_count() == 1 and store.conversations() == []
