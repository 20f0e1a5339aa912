"""The history store: schema and migrations, the message tree, search, trash, concurrency, recovery."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.events import ContentDelta, TurnDone, TurnStats
from engine.history.recorder import TurnRecorder
from engine.history.schema import SCHEMA_VERSION
from engine.history.search import fts_query, make_snippet
from engine.history.store import HistoryStore, title_from_text
from engine.history.types import HIGHLIGHT_END, HIGHLIGHT_START, HistoryError, NotFoundError
from engine.session.settings import ConversationSettings
from tests.bench.history import bench_search


class Ticks:
    """A wall clock that moves one second per reading: orderings are deterministic."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[HistoryStore]:
    s = HistoryStore(db, now=Ticks())
    yield s
    s.close()


def chain(store: HistoryStore, conversation_id: int, *texts: str) -> list[int]:
    """Alternating user/assistant messages, each under the previous one."""
    ids: list[int] = []
    parent = store.conversation(conversation_id).active_leaf_id
    for i, text in enumerate(texts):
        parent = store.add_message(conversation_id, "user" if i % 2 == 0 else "assistant", text, parent_id=parent)
        ids.append(parent)
    return ids


# -- schema ---------------------------------------------------------------------------


def test_a_new_database_is_wal_with_foreign_keys_at_the_current_version(store: HistoryStore) -> None:
    assert store.execute("PRAGMA journal_mode")[0][0] == "wal"
    assert store.execute("PRAGMA foreign_keys")[0][0] == 1
    assert store.execute("PRAGMA user_version")[0][0] == SCHEMA_VERSION == 4
    assert store.execute("PRAGMA integrity_check")[0][0] == "ok"


# Version 1 written out by hand, as a v1 build of Ember left it (not imported from the module).
V1_DDL = """
CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')), content TEXT NOT NULL DEFAULT '',
    thinking TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'complete'
        CHECK (status IN ('streaming', 'complete', 'stopped', 'interrupted', 'error')),
    stats TEXT, created_at REAL NOT NULL);
CREATE INDEX messages_conversation ON messages (conversation_id, id);
CREATE INDEX conversations_updated ON conversations (updated_at);
PRAGMA user_version = 1;
"""


def write_v1(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(V1_DDL)
    conn.executemany(
        "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?)",
        [
            (1, "Tomatoes", "qwen.gguf", '{"system": "Be brief."}', 100.0, 130.0),
            (2, "", "", "{}", 200.0, 210.0),
        ],
    )
    conn.executemany(
        "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (1, 1, "user", "How do I grow tomatoes?", "", "complete", None, 101.0),
            (2, 1, "assistant", "Sun, water, patience.", "short", "complete", '{"tokens": 5}', 102.0),
            (3, 2, "user", "Tell me about gardens", "", "complete", None, 201.0),
            (4, 1, "user", "And peppers?", "", "complete", None, 120.0),
            (5, 1, "assistant", "Warmth and", "", "streaming", None, 121.0),
        ],
    )
    conn.commit()
    conn.close()


def test_a_version_1_database_migrates_forward(db: Path) -> None:
    write_v1(db)
    with HistoryStore(db) as store:
        assert store.execute("PRAGMA user_version")[0][0] == SCHEMA_VERSION
        assert store.execute("PRAGMA integrity_check")[0][0] == "ok"
        # The linear history became a chain, its last message the active leaf.
        path = store.path(1)
        assert [m.id for m in path] == [1, 2, 4, 5]
        assert [m.parent_id for m in path] == [None, 1, 2, 4]
        assert (path[1].thinking, path[1].stats) == ("short", {"tokens": 5})
        # A reply the v1 build was streaming when it died is now marked for what it is.
        assert path[-1].status == "interrupted"
        conv = store.conversation(1)
        assert (conv.title, conv.title_is_auto, conv.settings) == ("Tomatoes", False, {"system": "Be brief."})
        assert store.conversation(2).title_is_auto
        # The search index was built from the old rows.
        assert [h.conversation_id for h in store.search("peppers")] == [1]
        assert [h.conversation_id for h in store.search("garden")] == [2]
        # And the migrated conversation takes new turns.
        recorder = TurnRecorder(store, 1)
        recorder.begin("Thanks!")
        assert ConversationSettings.from_stored(store.conversation(1).settings).system == "Be brief."
    assert (db.parent / f"{db.name}.v1.bak").exists()  # a copy of the old file, taken before migrating


def test_a_newer_schema_is_refused_and_left_untouched(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(HistoryError, match="newer"):
        HistoryStore(db)
    assert db.read_bytes() == before


def test_a_file_that_is_not_a_database_gives_a_readable_error(db: Path) -> None:
    db.write_bytes(b"\0" * 4096)  # what a crashed JSON saver leaves behind in other apps
    with pytest.raises(HistoryError, match=r"cannot (open|use) the history database"):
        HistoryStore(db)


# -- conversations --------------------------------------------------------------------


def test_conversations_are_listed_by_last_activity(store: HistoryStore) -> None:
    a = store.create_conversation(title="a").id
    b = store.create_conversation(title="b").id
    assert [c.id for c in store.conversations()] == [b, a]
    chain(store, a, "hello")
    assert [c.id for c in store.conversations()] == [a, b]
    latest = store.latest_conversation()
    assert latest is not None
    assert latest.id == a
    chain(store, b, "x")
    assert [c.id for c in store.conversations()] == [b, a]
    store.switch_version(store.path(a)[0].id)  # looking at a version is not activity
    assert [c.id for c in store.conversations()] == [b, a]


def test_rename_wins_over_automatic_titles(store: HistoryStore) -> None:
    conv = store.create_conversation().id
    assert store.set_auto_title(conv, "first words", only_if_untitled=True)
    assert not store.set_auto_title(conv, "other words", only_if_untitled=True)
    assert store.set_auto_title(conv, "a generated title")  # the later structured-output titler
    store.rename(conv, "  Mine  ")
    assert not store.set_auto_title(conv, "generated again")
    assert store.conversation(conv).title == "Mine"
    with pytest.raises(NotFoundError):
        store.rename(999, "x")


def test_titles_come_from_the_first_words() -> None:
    assert title_from_text("How do I grow **tomatoes** on a balcony in winter?") == "How do I grow tomatoes on…"
    assert title_from_text("# Hi") == "Hi"
    assert title_from_text("what is 6*7?") == "what is 6*7?"  # arithmetic, not emphasis
    assert title_from_text("**Why?** 2 * 3 in snake_case") == "Why? 2 * 3 in snake_case"
    assert title_from_text("* a _list_ item") == "a list item"
    assert title_from_text("   \n ") == "New conversation"
    assert len(title_from_text("x" * 500)) <= 49


def test_delete_is_undoable_until_purged(db: Path) -> None:
    clock = Ticks()
    store = HistoryStore(db, now=clock)
    conv = store.create_conversation(title="secret plans").id
    chain(store, conv, "the treasure is buried")
    store.delete(conv)
    assert store.conversations() == []
    assert store.search("treasure") == []
    assert [c.id for c in store.conversations(deleted=True)] == [conv]
    store.restore(conv)
    assert [h.conversation_id for h in store.search("treasure")] == [conv]
    store.delete(conv)
    store.close()
    clock.now += 8 * 24 * 3600  # past the trash retention: the next open empties it
    with HistoryStore(db, now=clock) as reopened:
        assert reopened.conversations(deleted=True) == []
        assert reopened.execute("SELECT count(*) FROM messages")[0][0] == 0
        assert reopened.search("treasure") == []


# -- the message tree -----------------------------------------------------------------


def test_edit_makes_a_version_and_keeps_what_followed(store: HistoryStore) -> None:
    conv = store.create_conversation().id
    q1, a1, q2, a2 = chain(store, conv, "q1", "a1", "q2", "a2")
    q1b = store.edit_message(q1, "q1 edited")
    assert [m.content for m in store.path(conv)] == ["q1 edited"]
    assert store.versions(q1b) == (1, 2, (q1, q1b))
    index, count, ids = store.versions(q1)
    assert (index, count, ids) == (0, 2, (q1, q1b))
    # Going back to version 1 brings back everything that followed it.
    assert [m.id for m in store.switch_version(q1)] == [q1, a1, q2, a2]
    assert store.versions(a2) == (0, 1, (a2,))


def test_switching_follows_the_latest_choice_below(store: HistoryStore) -> None:
    conv = store.create_conversation().id
    q1, a1, q2, a2 = chain(store, conv, "q1", "a1", "q2", "a2")
    a2b = store.add_message(conv, "assistant", "a2 again", parent_id=q2)
    store.switch_version(a2)  # the user prefers the first answer to q2
    a1b = store.add_message(conv, "assistant", "a1 again", parent_id=q1)
    assert [m.id for m in store.path(conv)] == [q1, a1b]
    assert [m.id for m in store.switch_version(a1)] == [q1, a1, q2, a2]
    assert a2b in store.versions(a2).ids


def test_an_empty_conversation_has_an_empty_path(store: HistoryStore) -> None:
    assert store.path(store.create_conversation().id) == []
    with pytest.raises(NotFoundError):
        store.path(12345)


def test_messages_cannot_hang_under_another_conversation(store: HistoryStore) -> None:
    a, b = store.create_conversation().id, store.create_conversation().id
    (q,) = chain(store, a, "q")
    with pytest.raises(HistoryError, match="not in conversation"):
        store.add_message(b, "user", "x", parent_id=q)


# -- search ---------------------------------------------------------------------------


def test_search_covers_titles_and_messages_by_word_prefix(store: HistoryStore) -> None:
    garden = store.create_conversation(title="Garden planning").id
    chain(store, garden, "When should I plant tomatoes?", "After the last frost.")
    cafe = store.create_conversation(title="Coffee").id
    chain(store, cafe, "Best café near the station?", "Try the one with the blue door.")
    assert [h.conversation_id for h in store.search("gard")] == [garden]
    hit = store.search("tomato")[0]
    assert (hit.conversation_id, hit.message_id is not None) == (garden, True)
    assert f"{HIGHLIGHT_START}tomatoes{HIGHLIGHT_END}" in hit.snippet
    assert hit.plain_snippet == "When should I plant tomatoes?"
    assert ("tomatoes", True) in hit.snippet_parts()
    # Diacritics and case do not matter; every word must match.
    assert [h.conversation_id for h in store.search("CAFE station")] == [cafe]
    assert store.search("cafe frost") == []
    title_hit = store.search("planning")[0]
    assert title_hit.message_id is None
    assert title_hit.plain_snippet == "Garden planning"


@pytest.mark.parametrize("text", ['"', "AND", "a OR b", "NEAR(x y)", "col:word", "*", "-x", "(((", "日本語"])
def test_search_treats_typed_syntax_as_text(store: HistoryStore, text: str) -> None:
    chain(store, store.create_conversation().id, "plain words only")
    store.search(text)  # never an FTS5 syntax error


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('say "hi" AND bye') == '"say"* "hi"* "AND"* "bye"*'
    assert fts_query("  ") == ""


def test_snippets_elide_long_text() -> None:
    text = " ".join(f"w{i}" for i in range(100)) + " needle " + " ".join(f"v{i}" for i in range(100))
    snippet = make_snippet(text, "needle")
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert f"{HIGHLIGHT_START}needle{HIGHLIGHT_END}" in snippet
    assert len(snippet.split()) <= 16


def test_a_hit_on_an_inactive_branch_can_be_revealed(store: HistoryStore) -> None:
    conv = store.create_conversation().id
    q, a = chain(store, conv, "question", "the old answer mentions zeppelins")
    store.add_message(conv, "assistant", "a new answer", parent_id=q)
    hit = store.search("zeppelin")[0]
    assert hit.message_id == a
    assert a not in [m.id for m in store.path(conv)]
    assert store.switch_version(a)[-1].id == a


def test_search_benchmark_runs() -> None:
    assert bench_search(n_messages=200, repeats=1) > 0


# -- turns, concurrency, recovery -----------------------------------------------------


def test_a_turn_finishes_exactly_once(store: HistoryStore) -> None:
    conv = store.create_conversation().id
    (q,) = chain(store, conv, "q")
    turn = store.start_turn(conv, q)
    store.finish_turn(turn, "completed", stats=TurnStats(attempts=1))
    with pytest.raises(HistoryError, match="already finished"):
        store.finish_turn(turn, "completed")
    # The schema itself refuses a second outcome, whoever writes.
    with pytest.raises(HistoryError, match="turn already finished"), store.transaction() as c:
        c.execute("UPDATE turns SET outcome = 'error' WHERE id = ?", (turn,))
    assert [t.outcome for t in store.turns(conv)] == ["completed"]


def test_a_reader_sees_consistent_rows_while_a_turn_streams(db: Path) -> None:
    HistoryStore(db).close()
    words = [f"word{i} " for i in range(300)]
    final = "".join(words)
    failures: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            with HistoryStore(db) as writer:
                conv = writer.create_conversation().id
                recorder = TurnRecorder(writer, conv, flush_interval_s=0.0)  # a write per delta
                recorder.begin("stream please")
                for w in words:
                    recorder.on_event(ContentDelta(w))
                recorder.on_event(TurnDone(TurnStats()))
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=write)
    seen: set[str] = set()
    with HistoryStore(db) as reader:
        thread.start()
        while not done.is_set():
            for conv in reader.conversations():
                for msg in reader.path(conv.id):
                    if msg.role == "assistant":
                        assert final.startswith(msg.content)  # never torn, never out of order
                        seen.add(msg.status)
            reader.search("word1")
        thread.join(timeout=30)
        assert not failures, failures
        (conv,) = reader.conversations()
        assert reader.path(conv.id)[-1].content == final
    assert "streaming" in seen or "complete" in seen


def test_recovery_leaves_a_live_writer_alone(db: Path) -> None:
    live = HistoryStore(db)
    conv = live.create_conversation().id
    recorder = TurnRecorder(live, conv)
    recorder.begin("hi")
    recorder.on_event(ContentDelta("partial"))
    # Another process (here: another store) starting up must not touch a stream in progress.
    with HistoryStore(db) as other:
        assert other.path(conv)[-1].status == "streaming"
    recorder.on_event(TurnDone(TurnStats()))
    assert live.path(conv)[-1].status == "complete"
    assert [t.outcome for t in live.turns(conv)] == ["completed"]

    dead = TurnRecorder(live, conv)
    dead.begin("again")
    dead.on_event(ContentDelta("cut off"))
    live.close()  # the writer goes away without finishing: its lock is gone
    with HistoryStore(db) as after:
        msg = after.path(conv)[-1]
        assert (msg.content, msg.status) == ("cut off", "interrupted")
        assert [t.outcome for t in after.turns(conv)] == ["completed", "interrupted"]
