"""`ember history …` and the history side of `ember chat`, including a SIGKILL mid-reply."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from desktop.cli import cmd_chat
from desktop.cli.main import main
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore
from models.library.paths import ember_paths

ROOT = Path(__file__).resolve().parents[1]


def ember(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def ember_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    status, out, err = ember(capsys, *args)
    assert status == 0, err
    return json.loads(out)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    """The backend every in-process `ember chat` gets; its `requests` show what was sent."""
    scripted = ScriptedBackend.from_texts("Paris.", "About 2.1 million.", "Lyon.", "Marseille.")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    return scripted


def test_chat_records_and_continue_sends_the_branch(
    capsys: pytest.CaptureFixture[str], backend: ScriptedBackend
) -> None:
    assert ember(capsys, "chat", "--system", "Be brief.", "Capital of France?")[:2] == (0, "Paris.\n")
    assert ember(capsys, "chat", "-c", "Population?")[:2] == (0, "About 2.1 million.\n")
    assert list(backend.requests[1].messages[1:]) == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Population?"},
    ]
    assert backend.requests[1].messages[0]["content"].startswith("Be brief.")  # kept with the conversation
    (listed,) = ember_json(capsys, "history", "list", "--json")
    assert {"id", "title", "created_at", "updated_at"} <= listed.keys()
    assert listed["title"] == "Capital of France?"
    shown = ember_json(capsys, "history", "show", str(listed["id"]), "--json")
    assert [(m["role"], m["content"], m["status"]) for m in shown["messages"]] == [
        ("user", "Capital of France?", "complete"),
        ("assistant", "Paris.", "complete"),
        ("user", "Population?", "complete"),
        ("assistant", "About 2.1 million.", "complete"),
    ]
    assert {"thinking", "stats", "version", "versions"} <= shown["messages"][1].keys()


def test_no_history_and_conversation_options(capsys: pytest.CaptureFixture[str], backend: ScriptedBackend) -> None:
    ember(capsys, "chat", "first")
    ember(capsys, "chat", "second")  # a new conversation each time without -c
    assert ember(capsys, "chat", "--no-history", "off the record")[0] == 0
    listed = ember_json(capsys, "history", "list", "--json")
    assert [c["title"] for c in listed] == ["second", "first"]
    first_id = listed[1]["id"]
    ember(capsys, "chat", "--conversation", str(first_id), "more")
    assert [m["content"] for m in backend.requests[-1].messages if m["role"] == "user"] == ["first", "more"]
    status, _, err = ember(capsys, "chat", "--conversation", "999", "x")
    assert status == 2
    assert "no conversation 999" in err
    status, _, err = ember(capsys, "chat", "--no-history", "-c", "x")
    assert status == 2
    assert "--no-history" in err


def test_search_export_import_delete_restore(
    capsys: pytest.CaptureFixture[str], backend: ScriptedBackend, tmp_path: Path
) -> None:
    ember(capsys, "chat", "Where is the Eiffel tower?")
    (conv,) = ember_json(capsys, "history", "list", "--json")
    cid = str(conv["id"])
    (hit,) = ember_json(capsys, "history", "search", "eiffel", "--json")
    assert (hit["conversation_id"], hit["snippet"]) == (conv["id"], "Where is the Eiffel tower?")
    status, out, _ = ember(capsys, "history", "search", "paris")
    assert status == 0
    assert "Paris." in out

    status, md, _ = ember(capsys, "history", "export", cid, "--format", "md")
    assert status == 0
    assert "## Assistant\n\nParis." in md
    exported = tmp_path / "conv.json"
    assert ember(capsys, "history", "export", cid, "--format", "json", "-o", str(exported))[0] == 0
    status, out, _ = ember(capsys, "history", "import", str(exported))
    assert status == 0
    assert out.startswith("imported conversation")
    assert len(ember_json(capsys, "history", "list", "--json")) == 2

    assert ember(capsys, "history", "delete", cid)[0] == 0
    assert [c["id"] for c in ember_json(capsys, "history", "list", "--json")] != [conv["id"]]
    assert [c["id"] for c in ember_json(capsys, "history", "list", "--trash", "--json")] == [conv["id"]]
    assert ember(capsys, "history", "restore", cid)[0] == 0
    assert ember(capsys, "history", "rename", cid, "Towers")[0] == 0
    assert ember_json(capsys, "history", "show", cid, "--json")["title"] == "Towers"


def test_archive_leaves_the_list_and_archived_lists_it(
    capsys: pytest.CaptureFixture[str], backend: ScriptedBackend
) -> None:
    ember(capsys, "chat", "first")
    ember(capsys, "chat", "second")
    first, second = reversed([c["id"] for c in ember_json(capsys, "history", "list", "--json")])
    status, out, _ = ember(capsys, "history", "archive", str(first))
    assert status == 0 and f"ember history unarchive {first}" in out
    assert [c["id"] for c in ember_json(capsys, "history", "list", "--json")] == [second]
    status, _, err = ember(capsys, "history", "list")
    assert status == 0 and "1 archived not shown" in err
    (archived,) = ember_json(capsys, "history", "list", "--archived", "--json")
    assert archived["id"] == first and archived["archived_at"] is not None
    (hit,) = ember_json(capsys, "history", "search", "first", "--json")
    assert (hit["conversation_id"], hit["archived"]) == (first, True)
    assert ember(capsys, "history", "unarchive", str(first))[0] == 0
    assert [c["id"] for c in ember_json(capsys, "history", "list", "--json")] == [second, first]
    status, _, err = ember(capsys, "history", "list", "--archived")
    assert status == 0 and "nothing is archived" in err
    assert ember(capsys, "history", "archive", "999")[0] == 2


def test_unarchive_of_a_conversation_in_the_trash_says_it_is_there(
    capsys: pytest.CaptureFixture[str], backend: ScriptedBackend
) -> None:
    """HI-02: archive, delete, unarchive said "back in the list" while the trash still held it."""
    ember(capsys, "chat", "first")
    (cid,) = [str(c["id"]) for c in ember_json(capsys, "history", "list", "--json")]
    assert ember(capsys, "history", "archive", cid)[0] == 0
    assert ember(capsys, "history", "delete", cid)[0] == 0
    status, out, _ = ember(capsys, "history", "unarchive", cid)
    assert status == 0 and "back in the list" not in out
    assert out == (
        f"conversation {cid} is no longer archived, but it is in the trash "
        f"(ember history restore {cid} brings it back to the list)\n"
    )
    assert ember_json(capsys, "history", "list", "--archived", "--json") == []  # it is unarchived
    status, out, _ = ember(capsys, "history", "restore", cid)
    assert (status, out) == (0, f"restored conversation {cid}\n")
    assert [str(c["id"]) for c in ember_json(capsys, "history", "list", "--json")] == [cid]  # where the user expects


def test_restore_of_an_archived_conversation_says_where_it_went(
    capsys: pytest.CaptureFixture[str], backend: ScriptedBackend
) -> None:
    ember(capsys, "chat", "first")
    (cid,) = [str(c["id"]) for c in ember_json(capsys, "history", "list", "--json")]
    ember(capsys, "history", "archive", cid)
    ember(capsys, "history", "delete", cid)
    status, out, _ = ember(capsys, "history", "restore", cid)
    assert status == 0 and f"it is archived (ember history unarchive {cid} lists it)" in out
    assert ember_json(capsys, "history", "list", "--json") == []


def test_history_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = ember(capsys, "history", "show", "42")
    assert (status, err) == (2, "ember: no conversation 42\n")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    status, _, err = ember(capsys, "history", "import", str(bad))
    assert status == 2
    assert err.startswith("ember: ")
    assert "not valid JSON" in err
    status, out, err = ember(capsys, "history")  # no action: the list
    assert (status, out) == (0, "")
    assert "no conversations" in err


@pytest.mark.slow
def test_sigkill_mid_reply_leaves_a_sound_database(tmp_path: Path, ember_home: Path) -> None:
    words = [f"word{i} " for i in range(400)]
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"replies": [[{"text": w, "delay_ms": 25} for w in words]]}))
    db = ember_paths().history_db
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "chat", "--backend", f"script:{script}", "hi"],
        env={**os.environ, "EMBER_HOME": str(ember_home)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # Wait for a partial answer that has been rewritten at least once since it appeared.
        partial = _wait_for(lambda: _streaming_text(db), lambda text: text.count("word") >= 10, proc)
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup, no flush
        proc.wait(timeout=10)
    assert 0 < len(partial) < len("".join(words))

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with HistoryStore(db) as store:  # the next start finds the cut-off reply
        (conv,) = store.conversations()
        user, reply = store.path(conv.id)
        assert (user.role, user.content, user.status) == ("user", "hi", "complete")
        assert (reply.role, reply.status) == ("assistant", "interrupted")
        assert reply.content.startswith(partial)
        assert "".join(words).startswith(reply.content)
        assert [t.outcome for t in store.turns(conv.id)] == ["interrupted"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX-only")
def test_ctrl_c_keeps_the_partial_answer_as_stopped(tmp_path: Path, ember_home: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"replies": [[{"text": f"w{i} ", "delay_ms": 25} for i in range(400)]]}))
    db = ember_paths().history_db
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "chat", "--backend", f"script:{script}", "count"],
        env={**os.environ, "EMBER_HOME": str(ember_home)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(lambda: _streaming_text(db), bool, proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        proc.kill()
    with HistoryStore(db) as store:
        (conv,) = store.conversations()
        reply = store.path(conv.id)[-1]
        assert (reply.role, reply.status) == ("assistant", "stopped")
        assert reply.content.startswith("w0 ")
        assert [t.outcome for t in store.turns(conv.id)] == ["stopped"]


def _streaming_text(db: Path) -> str | None:
    if not db.exists():
        return None
    conn = sqlite3.connect(db, timeout=5)
    try:
        row = conn.execute("SELECT content FROM messages WHERE role = 'assistant' AND status = 'streaming'").fetchone()
    except sqlite3.OperationalError:  # the schema is still being created
        return None
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _wait_for(read: Any, ready: Any, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = read()
        if value is not None and ready(value):
            return str(value)
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"ember chat ended early ({proc.returncode}): {err}")
        time.sleep(0.05)
    pytest.fail("no partial answer appeared in time")
