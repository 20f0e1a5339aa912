"""TurnRecorder: what one turn leaves in the history, for every way a turn can end."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.backends.base import Message, make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError, TurnErrorKind, TurnStats
from engine.history.recorder import TurnRecorder, recorded
from engine.history.store import HistoryStore
from engine.history.types import HistoryError
from engine.runtime import Engine
from engine.session.messages import branch_messages
from engine.turns.context_policy import join_runs
from engine.turns.runner import TurnRunner

SPECIAL_ONLY = [{"text": "<|tool_calls|>", "special": True}]  # no visible text: the guardrail's empty reply


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[HistoryStore]:
    with HistoryStore(db) as s:
        yield s


@pytest.fixture
def conv(store: HistoryStore) -> int:
    return store.create_conversation(model="test.gguf").id


def rows(db: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Read through a separate connection: only what was committed is visible."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def assistant_rows(db: Path) -> list[tuple[object, ...]]:
    return rows(db, "SELECT content, thinking, status FROM messages WHERE role = 'assistant' ORDER BY id")


def prompt(recorder: TurnRecorder) -> list[Message]:
    """The branch ending at the recorder's question, as model messages (what a session sends)."""
    return branch_messages(recorder.store.path(recorder.conversation_id, leaf_id=recorder.user_message_id))


def feed(recorder: TurnRecorder, *events: Event) -> None:
    for event in events:
        recorder.on_event(event)


def run_turn(store: HistoryStore, conv: int, backend: ScriptedBackend, text: str) -> TurnRecorder:
    """What a front end does for one message: begin, build the prompt, record the events."""
    recorder = TurnRecorder(store, conv)
    with recorder:
        recorder.begin(text)
        request = make_request(prompt(recorder))
        for _ in recorded(TurnRunner(backend).run(request), recorder):
            pass
    return recorder


def test_the_user_message_is_committed_before_generation(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = TurnRecorder(store, conv)
    user_id = recorder.begin("How far is the Moon?")
    assert rows(db, "SELECT id, role, content FROM messages") == [(user_id, "user", "How far is the Moon?")]
    assert rows(db, "SELECT user_message_id, outcome, ended_at FROM turns") == [(user_id, None, None)]
    assert store.conversation(conv).title == "How far is the Moon?"


def test_the_reply_is_written_on_the_first_delta_then_about_once_a_second(
    db: Path, store: HistoryStore, conv: int
) -> None:
    clock = FakeClock()
    recorder = TurnRecorder(store, conv, clock=clock, flush_interval_s=1.0)
    recorder.begin("hi")
    recorder.on_event(ThinkingDelta("hmm"))
    assert assistant_rows(db) == [("", "hmm", "streaming")]
    clock.t = 0.5
    feed(recorder, ContentDelta("Hel"), ContentDelta("lo"))
    assert assistant_rows(db) == [("", "hmm", "streaming")]  # within the interval: not yet
    clock.t = 1.2
    recorder.on_event(ContentDelta(" there"))
    assert assistant_rows(db) == [("Hello there", "hmm", "streaming")]
    clock.t = 1.3
    recorder.on_event(ContentDelta("!"))
    recorder.flush()  # a GUI timer may flush between deltas
    assert assistant_rows(db) == [("Hello there!", "hmm", "streaming")]
    recorder.on_event(TurnDone(TurnStats(tokens=4)))
    assert assistant_rows(db) == [("Hello there!", "hmm", "complete")]
    (msg,) = [m for m in store.path(conv) if m.role == "assistant"]
    assert msg.stats["tokens"] == 4
    assert msg.model == ""


def test_a_completed_turn_is_recorded_once(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = run_turn(store, conv, ScriptedBackend.from_texts("<think>sums</think>Four."), "2+2?")
    assert recorder.outcome == "completed"
    (turn,) = store.turns(conv)
    assert (turn.outcome, turn.attempts, turn.retries, turn.scaffold_stripped) == ("completed", 1, 0, 0)
    assert turn.assistant_message_id == store.path(conv)[-1].id
    assert assistant_rows(db) == [("Four.", "sums", "complete")]
    # A stray second ending neither records again nor raises.
    recorder.on_event(TurnDone(TurnStats()))
    assert rows(db, "SELECT count(*) FROM turns WHERE outcome = 'completed'") == [(1,)]


def test_recovery_resets_the_reply_in_progress(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = TurnRecorder(store, conv)
    recorder.begin("hi")
    feed(
        recorder,
        ThinkingDelta("first try"),
        ContentDelta("  "),
        Recovery("empty_reply"),
        ContentDelta("Answer."),
        TurnDone(TurnStats(attempts=2)),
    )
    assert assistant_rows(db) == [("Answer.", "", "complete")]
    assert store.turns(conv)[0].attempts == 2


def test_a_malformed_turn_keeps_the_question_and_writes_no_answer(db: Path, store: HistoryStore, conv: int) -> None:
    backend = ScriptedBackend([["<think>hmm</think>", *SPECIAL_ONLY], SPECIAL_ONLY])
    recorder = run_turn(store, conv, backend, "Hello?")
    assert recorder.outcome == "malformed"
    assert assistant_rows(db) == []  # the row the thinking created is gone, its search entry too
    assert store.search("hmm") == []
    path = store.path(conv)
    assert [(m.role, m.content) for m in path] == [("user", "Hello?")]
    (turn,) = store.turns(conv)
    assert (turn.outcome, turn.error_kind, turn.attempts) == ("malformed", "malformed_reply", 2)
    assert turn.assistant_message_id is None
    assert "malformed" in turn.error_message


def test_try_again_after_a_malformed_turn_completes_exactly_once(store: HistoryStore, conv: int) -> None:
    backend = ScriptedBackend([SPECIAL_ONLY, SPECIAL_ONLY, ["Better."]])
    first = run_turn(store, conv, backend, "Hello?")
    assert first.user_message_id is not None
    again = TurnRecorder(store, conv)
    again.begin_regenerate(first.user_message_id)
    for _ in recorded(TurnRunner(backend).run(make_request(prompt(again))), again):
        pass
    assert [t.outcome for t in store.turns(conv)] == ["malformed", "completed"]
    assert [m.content for m in store.path(conv)] == ["Hello?", "Better."]


def test_an_error_keeps_partial_text_marked_error(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = TurnRecorder(store, conv)
    recorder.begin("hi")
    feed(recorder, ContentDelta("Half an"), TurnError(TurnErrorKind.BACKEND, "the server went away", TurnStats()))
    assert assistant_rows(db) == [("Half an", "", "error")]
    msg = store.path(conv)[-1]
    assert msg.stats["error_kind"] == "backend"
    (turn,) = store.turns(conv)
    assert (turn.outcome, turn.error_kind, turn.error_message) == ("error", "backend", "the server went away")


def test_an_error_before_any_text_writes_no_answer(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = run_turn(store, conv, ScriptedBackend([]), "hi")  # the script is out of replies
    assert recorder.outcome == "error"
    assert assistant_rows(db) == []
    assert store.turns(conv)[0].error_kind == "script"
    assert store.path(conv)[-1].content == "hi"


def test_stop_keeps_what_streamed(db: Path, store: HistoryStore, conv: int) -> None:
    recorder = TurnRecorder(store, conv)
    recorder.begin("count")
    feed(recorder, ContentDelta("one two"), TurnDone(TurnStats(finish_reason="cancelled")))
    assert assistant_rows(db) == [("one two", "", "stopped")]
    assert store.turns(conv)[0].outcome == "stopped"


def test_stop_before_any_text_leaves_the_question(db: Path, store: HistoryStore, conv: int) -> None:
    cancel = CancelToken()
    cancel.cancel()
    recorder = TurnRecorder(store, conv)
    recorder.begin("count")
    for _ in recorded(
        TurnRunner(ScriptedBackend.from_texts("one")).run(make_request(prompt(recorder)), cancel), recorder
    ):
        pass
    assert assistant_rows(db) == []
    assert store.turns(conv)[0].outcome == "stopped"
    assert store.path(conv)[-1].role == "user"


def _stream_then_raise(store: HistoryStore, conv: int, text: str, exc: BaseException) -> None:
    with TurnRecorder(store, conv) as recorder:
        recorder.begin("question")
        recorder.on_event(ContentDelta(text))
        raise exc


def test_leaving_early_marks_the_reply(db: Path, store: HistoryStore, conv: int) -> None:
    with pytest.raises(RuntimeError):
        _stream_then_raise(store, conv, "partial", RuntimeError("the view crashed"))
    with pytest.raises(KeyboardInterrupt):  # Ctrl+C: the user stopped it
        _stream_then_raise(store, conv, "also partial", KeyboardInterrupt())
    assert assistant_rows(db) == [("partial", "", "interrupted"), ("also partial", "", "stopped")]
    assert [t.outcome for t in store.turns(conv)] == ["interrupted", "stopped"]


def test_regenerate_adds_a_version_and_a_failed_one_changes_nothing(store: HistoryStore, conv: int) -> None:
    backend = ScriptedBackend([["First."], ["Second."], SPECIAL_ONLY, SPECIAL_ONLY])
    first = run_turn(store, conv, backend, "Say something")
    answer = first.assistant_message_id
    assert answer is not None
    again = TurnRecorder(store, conv)
    again.begin_regenerate(answer)  # regenerate from the answer itself
    for _ in recorded(TurnRunner(backend).run(make_request(prompt(again))), again):
        pass
    second = store.path(conv)[-1]
    assert second.content == "Second."
    assert store.versions(second.id) == (1, 2, (answer, second.id))
    # A regenerate that ends malformed leaves the conversation showing what it showed.
    third = TurnRecorder(store, conv)
    third.begin_regenerate(second.id)
    for _ in recorded(TurnRunner(backend).run(make_request(prompt(third))), third):
        pass
    assert store.path(conv)[-1].id == second.id
    assert store.versions(second.id).count == 2
    assert [t.kind for t in store.turns(conv)] == ["send", "regenerate", "regenerate"]


def test_edit_answers_a_new_version_and_keeps_the_old_branch(store: HistoryStore, conv: int) -> None:
    backend = ScriptedBackend([["A1."], ["A2."], ["A1 edited."]])
    q1 = run_turn(store, conv, backend, "Q1").user_message_id
    run_turn(store, conv, backend, "Q2")
    assert q1 is not None
    old_branch = [m.id for m in store.path(conv)]
    edit = TurnRecorder(store, conv)
    q1b = edit.begin_edit(q1, "Q1, better put")
    assert prompt(edit) == [{"role": "user", "content": "Q1, better put"}]
    for _ in recorded(TurnRunner(backend).run(make_request(prompt(edit))), edit):
        pass
    assert [m.content for m in store.path(conv)] == ["Q1, better put", "A1 edited."]
    assert store.versions(q1b) == (1, 2, (q1, q1b))
    assert [m.id for m in store.switch_version(q1)] == old_branch  # nothing later was destroyed
    with pytest.raises(HistoryError, match="not a user message"):
        TurnRecorder(store, conv).begin_edit(old_branch[1], "no")


def test_prompt_messages_follow_the_branch(store: HistoryStore) -> None:
    conv = store.create_conversation(settings={"system": "Be kind."}).id
    backend = ScriptedBackend([["<think>private</think>One."], SPECIAL_ONLY, SPECIAL_ONLY])
    run_turn(store, conv, backend, "first")
    run_turn(store, conv, backend, "unanswered")
    recorder = TurnRecorder(store, conv)
    recorder.begin("follow-up")
    path = store.path(conv, leaf_id=recorder.user_message_id)
    assert list(join_runs(branch_messages(path, system="Be kind."))) == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "One."},  # thinking is not sent back
        {"role": "user", "content": "unanswered\n\nfollow-up"},  # roles alternate for strict templates
    ]
    assert branch_messages(path, system="Override.")[0] == {"role": "system", "content": "Override."}


def test_a_failing_write_never_stops_the_reply(
    db: Path, store: HistoryStore, conv: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    recorder = TurnRecorder(store, conv, clock=clock)
    recorder.begin("hi")
    recorder.on_event(ContentDelta("a"))

    def disk_full(*args: object) -> None:
        raise HistoryError("history database error: database or disk is full")  # as the store reports it

    monkeypatch.setattr(store, "update_text", disk_full)
    clock.t = 5.0
    recorder.on_event(ContentDelta("b"))  # logged, not raised
    monkeypatch.undo()
    recorder.on_event(TurnDone(TurnStats()))
    assert assistant_rows(db) == [("ab", "", "complete")]


def test_the_recorder_works_on_the_event_loop_thread(db: Path, store: HistoryStore, conv: int) -> None:
    """The GUI's shape: the engine streams on its worker thread, the loop thread records."""

    async def main() -> None:
        engine = Engine(ScriptedBackend.from_texts(["Hel", "lo"]))
        recorder = TurnRecorder(store, conv)
        with recorder:
            recorder.begin("hi")
            async for event in engine.run_turn(make_request(prompt(recorder))):
                recorder.on_event(event)
        await engine.aclose()

    asyncio.run(main())
    assert assistant_rows(db) == [("Hello", "", "complete")]


def test_one_recorder_per_turn(store: HistoryStore, conv: int) -> None:
    recorder = TurnRecorder(store, conv)
    with pytest.raises(HistoryError, match="begin"):
        recorder.on_event(ContentDelta("x"))
    recorder.begin("a")
    with pytest.raises(HistoryError, match="one turn"):
        recorder.begin("b")
