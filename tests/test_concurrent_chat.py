"""Two `ember chat -c` at once: the stored thread is always what each model was given (issue #14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.history.conversation_lock import ConversationBusy, ConversationLock
from engine.history.store import HistoryStore
from models.library.paths import ember_paths

ROOT = Path(__file__).resolve().parents[1]


def _chat(home: Path, script: Path, prompt: str) -> subprocess.Popen[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "desktop", "chat", "-c", "--events", "--backend", f"script:{script}", prompt],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _until_stored(conversation_id: int, text: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with HistoryStore(ember_paths().history_db) as store:
            if any(m.content == text for m in store.path(conversation_id)):
                return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} was never stored")


@pytest.mark.slow  # starts a process
def test_two_continuing_chats_serialise_and_each_sees_the_other(tmp_path: Path, ember_home: Path) -> None:
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(model="m")
    slow = {"replies": [[{"text": "answer ", "delay_ms": 1500}, {"text": "done", "delay_ms": 1500}]]}
    script = tmp_path / "s.json"
    script.write_text(json.dumps(slow))
    first = _chat(ember_home, script, "question one")
    _until_stored(conv.id, "question one")  # the first turn is under way…
    second = _chat(ember_home, script, "question two")  # …when the second starts
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with HistoryStore(ember_paths().history_db) as store:
        path = store.path(conv.id)
    roles = [(m.role, m.content) for m in path]
    # Whichever came first, the thread alternates question/answer: no question is stored
    # under another's unanswered question, and no answer is attached out of order.
    assert [r for r, _ in roles] == ["user", "assistant", "user", "assistant"]
    assert {roles[0][1], roles[2][1]} == {"question one", "question two"}
    assert roles[1][1] == roles[3][1] == "answer done"


def test_the_lock_waits_then_proceeds(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    order: list[str] = []
    waited = threading.Event()
    with ConversationLock(db, 7):

        def second() -> None:
            with ConversationLock(db, 7, on_wait=waited.set):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        assert waited.wait(10)
        order.append("first")
    t.join(10)
    assert order == ["first", "second"]
    with ConversationLock(db, 8):  # other conversations are not held up
        pass


def test_a_lock_held_too_long_is_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    with ConversationLock(db, 1):
        lock = ConversationLock(db, 1, wait_s=0.1)
        with pytest.raises(ConversationBusy, match="still running"):
            lock.acquire()
        assert not lock.held


def test_the_window_does_not_record_while_ember_chat_answers_and_never_waits(tmp_path: Path) -> None:
    from desktop.core.history_session import open_history
    from engine.history.types import HistoryError
    from engine.session.session import Ask, Turn
    from engine.session.settings import resolve

    session, notice = open_history()
    assert session.saved, notice
    settings = resolve()

    def send(text: str) -> Turn:
        return session.begin(session.prepare(Ask.send(text), settings), model="m")

    try:
        first = send("from the window")
        first.close()  # the turn is over: the lock is free again
        cid = session.conversation_id
        assert cid is not None
        with ConversationLock(session.store.db_path, cid):  # `ember chat -c` is answering
            with pytest.raises(HistoryError, match="ember chat"):
                send("second")
        again = send("third")  # free again
        with pytest.raises(ConversationBusy):  # and a CLI writer would now wait for the window
            ConversationLock(session.store.db_path, cid, wait_s=0).acquire()
        again.close()
        assert [m.content for m in session.store.path(cid) if m.role == "user"] == ["from the window", "third"]
    finally:
        session.close()
