"""`ember chat` (plain and `--schema`) end to end, in a subprocess, on a script and on the real default model."""

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

from engine.history.store import HistoryStore
from engine.history.types import Conversation
from models.library.paths import ember_paths

ROOT = Path(__file__).resolve().parents[1]
MALFORMED = "The model returned a malformed reply — please try again."
PARIS_BLOCK = '```json\n{\n  "city": "Paris"\n}\n```'
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def _script(tmp_path: Path, replies: list[list[object]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return f"script:{path}"


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.mark.slow  # starts a process
def test_a_script_replays_exactly(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<think>let me see</think>", "Hel", "lo", "!"]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["thinking", "content", "content", "content", "done"]
    assert events[0]["text"] == "let me see"
    assert "".join(str(e["text"]) for e in events if e["type"] == "content") == "Hello!"
    stats = events[-1]["stats"]
    assert (
        isinstance(stats, dict)
        and {"tokens", "ttft_ms", "tokens_per_s", "total_ms", "retries", "scaffold_stripped"} <= stats.keys()
    )


@pytest.mark.slow  # starts a process
def test_plain_output_is_the_answer(tmp_path: Path, ember_home: Path) -> None:
    result = ember("chat", "--backend", _script(tmp_path, [["Hello", " there"]]), "hi", home=ember_home)
    assert (result.returncode, result.stdout) == (0, "Hello there\n")


@pytest.mark.slow  # starts a process
def test_recovery_then_answer(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<|tool_call_start|>[read()]<|tool_call_end|>"], ["Clean."]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    types = [e["type"] for e in _events(result.stdout)]
    assert result.returncode == 0 and types == ["recovery", "content", "done"]
    assert "tool_call" not in result.stdout


@pytest.mark.slow  # starts a process
def test_the_terminal_malformed_case_exits_3(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<|tool_call_start|>[x]<|tool_call_end|>"], ["<|tool_calls|>"]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    events = _events(result.stdout)
    assert result.returncode == 3
    assert [e["type"] for e in events] == ["recovery", "error"]
    assert events[-1] == {"type": "error", "kind": "malformed_reply", "message": MALFORMED}


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    "args",
    [
        ["chat", "--max-tokens", "0", "hi"],
        ["chat", "--backend", "nonsense:x", "hi"],
        ["chat", "--backend", "script:/no/such/file.json", "hi"],
        ["chat", "--model", "/no/such/model.gguf", "hi"],
        ["chat"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], ember_home: Path) -> None:
    result = ember(*args, home=ember_home)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: ")
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # starts a process
def test_version(ember_home: Path) -> None:
    result = ember("--version", home=ember_home)
    assert result.returncode == 0 and result.stdout.startswith("ember ")


@pytest.mark.slow
def test_the_default_model_answers(ember_home: Path) -> None:
    result = ember(
        "chat",
        "--events",
        "--temperature",
        "0",
        "--max-tokens",
        "24",
        "What is the capital of France?",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert events[-1]["type"] == "done"
    content = "".join(str(e["text"]) for e in events if e["type"] == "content")
    assert "Paris" in content


# -- structured replies (--schema) ----------------------------------------------------------


def _files(tmp_path: Path, replies: list[str], schema: Any = CITY) -> tuple[str, str]:
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [[r] for r in replies]}))
    return str(schema_path), f"script:{script}"


@pytest.mark.slow  # starts a process
def test_the_value_is_printed_as_pretty_json(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ['{"city":"Paris"}'])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital of France?", home=ember_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{\n  "city": "Paris"\n}\n'


@pytest.mark.slow  # starts a process
def test_events_show_the_retry_then_the_value(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["Paris", '{"city": "Paris"}'])
    result = ember("chat", "--events", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["structured_retry", "json", "done"]
    assert events[0]["attempt"] == 2
    assert events[0]["error"].startswith("invalid JSON")
    assert events[1] == {"type": "json", "value": {"city": "Paris"}}
    assert events[2]["stats"]["attempts"] == 2


@pytest.mark.slow  # starts a process
def test_exhaustion_reports_the_last_error_and_exits_3(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["Paris", '{"city": 7}', '{"capital": "Paris"}'])
    result = ember("chat", "--events", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 3
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["structured_retry", "structured_retry", "error"]
    assert events[-1] == {"type": "error", "kind": "structured_output", "message": "'city' is a required property"}


@pytest.mark.slow  # starts a process
def test_exhaustion_in_plain_mode_is_one_line_on_stderr(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["a", "b", "c"])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr.count("asking again") == 2
    assert result.stderr.splitlines()[-1].startswith("ember: no valid JSON after 3 attempts: invalid JSON")


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read schema"),
        ("{nope", "is not valid JSON"),
        ("[1, 2]", "not a valid JSON Schema"),
        ('{"type": "frobnicate"}', "not a valid JSON Schema"),
    ],
    ids=["unreadable", "not-json", "not-an-object", "invalid-schema"],
)
def test_a_bad_schema_file_exits_2_with_one_line(
    tmp_path: Path, ember_home: Path, content: str | None, message: str
) -> None:
    _, backend = _files(tmp_path, ['{"city": "Paris"}'])
    schema = tmp_path / "bad-schema.json"
    if content is not None:
        schema.write_text(content)
    result = ember("chat", "--schema", str(schema), "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ember: ")
    assert message in lines[0]


# -- history: recorded exactly like a plain chat turn -------------------------------------


def _latest() -> tuple[Conversation, list[tuple[str, str, str]], list[str | None]]:
    """The latest conversation, its active branch as (role, content, status) and its turns' outcomes."""
    with HistoryStore(ember_paths().history_db) as store:
        conv = store.latest_conversation()
        assert conv is not None
        branch = [(m.role, m.content, m.status) for m in store.path(conv.id)]
        return conv, branch, [t.outcome for t in store.turns(conv.id)]


@pytest.mark.slow  # starts a process
def test_a_structured_turn_is_recorded(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["Paris", '{"city": "Paris"}'])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital of France?", home=ember_home)
    assert result.returncode == 0, result.stderr
    conv, branch, outcomes = _latest()
    assert conv.title == "Capital of France?"
    # The accepted reply is the answer; the refused first attempt is not kept.
    # Stored as the app shows a JSON reply, so the conversation reads the same in the window.
    assert branch == [("user", "Capital of France?", "complete"), ("assistant", PARIS_BLOCK, "complete")]
    assert outcomes == ["completed"]
    with HistoryStore(ember_paths().history_db) as store:
        (turn,) = store.turns(conv.id)
        assert turn.attempts == 2


@pytest.mark.slow  # starts a process
def test_exhaustion_is_recorded_as_an_error_keeping_the_question(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["a", "b", '{"capital": "Paris"}'])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 3
    conv, branch, outcomes = _latest()
    assert branch == [("user", "Capital?", "complete")]
    assert outcomes == ["error"]
    with HistoryStore(ember_paths().history_db) as store:
        (turn,) = store.turns(conv.id)
        assert (turn.error_kind, turn.error_message) == ("structured_output", "'city' is a required property")
        assert [m.role for m in store.messages(conv.id)] == ["user"]


@pytest.mark.slow  # starts a process
def test_no_history_records_nothing(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ['{"city": "Paris"}'])
    result = ember("chat", "--no-history", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 0, result.stderr
    with HistoryStore(ember_paths().history_db) as store:
        assert store.conversations() == []


@pytest.mark.slow  # starts a process
def test_continue_adds_the_structured_turn_to_the_latest_conversation(tmp_path: Path, ember_home: Path) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"replies": [["Paris."]]}))
    assert ember("chat", "--backend", f"script:{first}", "Capital of France?", home=ember_home).returncode == 0
    schema, backend = _files(tmp_path, ['{"city": "Paris"}'])
    result = ember("chat", "-c", "--schema", schema, "--backend", backend, "As JSON?", home=ember_home)
    assert result.returncode == 0, result.stderr
    conv, branch, outcomes = _latest()
    assert branch == [
        ("user", "Capital of France?", "complete"),
        ("assistant", "Paris.", "complete"),
        ("user", "As JSON?", "complete"),
        ("assistant", PARIS_BLOCK, "complete"),
    ]
    assert outcomes == ["completed", "completed"]
    with HistoryStore(ember_paths().history_db) as store:
        assert [c.id for c in store.conversations()] == [conv.id]


@pytest.mark.slow  # starts a process
def test_an_unknown_conversation_exits_2_before_a_model_loads(tmp_path: Path, ember_home: Path) -> None:
    schema, _ = _files(tmp_path, [])
    result = ember(
        "chat",
        "--conversation",
        "99",
        "--schema",
        schema,
        "--backend",
        "script:/nonexistent.json",
        "Capital?",
        home=ember_home,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert "ember history list" in result.stderr


def test_continue_sends_the_active_branch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli import cmd_chat
    from desktop.cli.main import main
    from engine.backends.scripted import ScriptedBackend

    scripted = ScriptedBackend.from_texts("Paris.", '{"city": "Paris"}')
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    schema, _ = _files(tmp_path, [])
    assert main(["chat", "Capital of France?"]) == 0
    assert main(["chat", "-c", "--schema", schema, "As JSON?"]) == 0
    assert capsys.readouterr().out.endswith('{\n  "city": "Paris"\n}\n')
    sent = [m for m in scripted.requests[1].messages if m["role"] != "system"]
    assert sent == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "As JSON?"},
    ]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX-only")
def test_ctrl_c_records_the_turn_as_stopped(tmp_path: Path, ember_home: Path) -> None:
    schema, _ = _files(tmp_path, [])
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"replies": [[{"text": " ", "delay_ms": 25} for _ in range(800)]]}))
    db = ember_paths().history_db
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "chat", "--schema", schema, "--backend", f"script:{script}", "Capital?"],
        env={**os.environ, "EMBER_HOME": str(ember_home)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not _user_message_committed(db):  # committed before the first attempt starts
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)  # into the attempt
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        proc.kill()
    _, branch, outcomes = _latest()
    assert branch == [("user", "Capital?", "complete")]
    assert outcomes == ["stopped"]


def _user_message_committed(db: Path) -> bool:
    if not db.exists():
        return False
    conn = sqlite3.connect(db, timeout=5)
    try:
        return conn.execute("SELECT 1 FROM messages WHERE role = 'user'").fetchone() is not None
    except sqlite3.OperationalError:  # the schema is still being created
        return False
    finally:
        conn.close()


@pytest.mark.slow
def test_the_default_model_answers_with_valid_json(tmp_path: Path, ember_home: Path) -> None:
    schema, _ = _files(tmp_path, [])
    result = ember(
        "chat",
        "--events",
        "--schema",
        schema,
        "--temperature",
        "0",
        "--seed",
        "0",
        "--max-tokens",
        "48",
        "--ctx",
        "2048",
        "What is the capital of France?",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["json", "done"]  # the grammar gets it right first time
    assert isinstance(events[0]["value"]["city"], str)
