"""Export as Markdown and JSON, and import of that JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.history.export import ImportFormatError, export_json, export_markdown, import_json
from engine.history.store import HistoryStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore(tmp_path / "history.sqlite3") as s:
        yield s


def sample(store: HistoryStore) -> int:
    """A conversation with versions on two levels, thinking, statuses, stats and a system prompt."""
    conv = store.create_conversation(title="Bread", model="qwen3.gguf", settings={"system": "Be brief."}).id
    q1 = store.add_message(conv, "user", "How do I bake bread?", parent_id=None)
    a1 = store.add_message(
        conv, "assistant", "Flour, water, *salt*.", parent_id=q1, thinking="recall recipe", stats={"tokens": 7}
    )
    q2 = store.add_message(conv, "user", "Sourdough?", parent_id=a1)
    store.add_message(conv, "assistant", "Use a starter", parent_id=q2, status="stopped")
    store.add_message(conv, "assistant", "A starter, then patience.", parent_id=q1)  # a regenerated answer
    store.switch_version(a1)
    return conv


def strip_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with file-local ids renumbered by position, so two exports compare."""
    pos = {m["id"]: i for i, m in enumerate(doc["messages"])}
    messages = [m | {"id": pos[m["id"]], "parent": pos.get(m["parent"])} for m in doc["messages"]]
    conv = doc["conversation"] | {"id": None, "active_leaf": pos.get(doc["conversation"]["active_leaf"])}
    return doc | {"conversation": conv, "messages": messages}


def test_json_round_trip_keeps_the_whole_tree(store: HistoryStore) -> None:
    conv = sample(store)
    exported = export_json(store, conv)
    text = json.dumps(exported)  # what a file holds
    imported = import_json(store, json.loads(text))
    assert imported.id != conv
    assert strip_ids(export_json(store, imported.id)) == strip_ids(exported)
    assert [m.content for m in store.path(imported.id)] == [m.content for m in store.path(conv)]
    assert imported.settings == {"system": "Be brief."}
    assert {h.conversation_id for h in store.search("sourdough")} == {conv, imported.id}


def test_markdown_shows_the_active_branch(store: HistoryStore) -> None:
    md = export_markdown(store, sample(store))
    assert md.startswith("# Bread\n")
    assert "## You\n\nHow do I bake bread?" in md
    assert "<summary>Thinking</summary>\n\nrecall recipe" in md
    assert "Flour, water, *salt*." in md
    assert "Use a starter\n\n*(stopped)*" in md
    assert "patience" not in md  # another version, not on the active branch


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ([], "not an Ember conversation"),
        ({"format": "ember.conversation", "version": 9}, "unsupported export version"),
        ({"format": "ember.conversation", "version": 1, "conversation": {}, "messages": {}}, "must be a list"),
        (
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {},
                "messages": [{"id": 1, "role": "wizard", "content": "x"}],
            },
            r"messages\[0\]\.role",
        ),
        (
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {},
                "messages": [{"id": 1, "parent": 7, "role": "user", "content": "x"}],
            },
            "not an earlier message",
        ),
        (
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {},
                "messages": [{"id": 1, "role": "user", "content": 5}],
            },
            "must be text",
        ),
        (
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {},
                "messages": [{"id": 1, "role": "user", "content": "x", "created_at": "yesterday"}],
            },
            "ISO 8601",
        ),
        (
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {},
                "messages": [{"id": 1, "role": "user", "content": "a"}, {"id": 1, "role": "user", "content": "b"}],
            },
            "used twice",
        ),
    ],
)
def test_a_bad_file_imports_nothing(store: HistoryStore, doc: Any, error: str) -> None:
    with pytest.raises(ImportFormatError, match=error):
        import_json(store, doc)
    assert store.conversations() == []
    assert store.execute("SELECT count(*) FROM messages")[0][0] == 0


def test_a_minimal_hand_written_file_imports(store: HistoryStore) -> None:
    conv = import_json(
        store,
        {
            "format": "ember.conversation",
            "version": 1,
            "conversation": {"title": "Notes"},
            "messages": [
                {"role": "user", "content": "hi"},
                {"parent": 0, "role": "assistant", "content": "hello", "status": "streaming"},
            ],
        },
    )
    path = store.path(conv.id)
    assert [(m.role, m.content, m.status) for m in path] == [
        ("user", "hi", "complete"),
        ("assistant", "hello", "interrupted"),
    ]
