"""Hostile input to `ember`: one line and the right exit status, never a traceback (issue #14).

Argument values, script files, odd files as models, a broken pipe, a poor terminal
encoding, EMBER_HOME under a file, a full disk, and terminal control characters in text
that came from model files, servers or imported conversations.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import gguf_factory as gf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.cli.common import EXIT_BROKEN_PIPE, EXIT_FAILED
from desktop.cli.guard import SafeStream, run_guarded
from desktop.cli.main import main
from engine.api.text import cell, terminal
from engine.backends.scripted import parse_script
from engine.errors import ConfigError
from engine.history.store import HistoryStore
from engine.history.types import HistoryError
from models.library.paths import ember_paths

ROOT = Path(__file__).resolve().parents[1]
HOSTILE_NAME = "Evil\x1b[2J\x1b]0;pwned\x07\u202eName\r\nsecond line"


def ember(
    *args: str, home: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "EMBER_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=120,
        input=stdin,
    )


def _one_line(result: subprocess.CompletedProcess[str], status: int) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: "), result.stderr
    assert result.returncode == status, result.stderr
    return lines[0]


def _script(tmp_path: Path, replies: list[list[Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return f"script:{path}"


def _main_status(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


# -- argument values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["chat", "   "], "the message is empty"),
        (["chat", ""], "the message is empty"),
        (["chat", "--temperature", "nan", "hi"], "--temperature"),
        (["chat", "--temperature", "inf", "hi"], "--temperature"),
        (["chat", "--temperature", "-1", "hi"], "--temperature"),
        (["chat", "--threads", "10000", "hi"], "--threads"),
        (["chat", "--ctx", "100000000", "hi"], "--ctx"),
        (["chat", "--conversation", "99999999999999999999999", "hi"], "--conversation"),
        (["chat", "--seed", "-5", "hi"], "--seed"),
        (["chat", "--backend", "openai:http://127.0.0.1:99999/v1", "hi"], "port"),
        (["history", "show", "99999999999999999999999"], "ID"),
        (["history", "list", "--limit", "-3"], "--limit"),
        (["bench", "--threads", "0"], "--threads"),
        (["--prompt", "  "], "the message is empty"),  # the app's --prompt, checked before Qt loads
    ],
)
def test_out_of_range_arguments_are_one_line_exit_2(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main_status(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ember: ") and needle in err


@pytest.mark.slow  # starts a process
def test_invalid_utf8_in_argv_is_refused(ember_home: Path) -> None:
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")  # what Python makes of Latin-1 bytes
    for args in (["chat", bad], ["chat", "--system", bad, "hi"], ["history", "search", bad]):
        line = _one_line(ember(*args, home=ember_home), 2)
        assert "not valid UTF-8" in line


number = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats().map(str),
    st.text(max_size=8),
    st.sampled_from(["nan", "-inf", "1e309", "0x10", " 3 ", "٣"]),
)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flag=st.sampled_from(["--temperature", "--threads", "--ctx", "--seed", "--max-tokens", "--conversation"]),
    value=number,
)
def test_any_numeric_flag_value_is_accepted_or_one_line(
    flag: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["ok"]]}))
    status = _main_status(["chat", "--no-history", "--backend", f"script:{script}", flag, value, "hi"])
    out, err = capsys.readouterr()
    if flag == "--conversation" and status == 2 and "cannot be combined" in err:
        return
    assert status in (0, 2), err
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("ember: ")
    else:
        assert out == "ok\n"


# -- script files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunk",
    [
        {"text": "a", "delay_ms": "slow"},
        {"text": "a", "delay_ms": -5},
        {"text": "a", "delay_ms": float("nan")},
        {"text": "a", "delay_ms": 1e309},
        {"text": "a", "delay_ms": True},
        {"text": "a", "special": "false"},
        {"text": "a", "user_defined": 1},
        {"text": 5},
        ["nested"],
        {"progress": [5, 1]},
        {"progress": [1]},
        {"progress": [True, 2]},
        {"progress": "half"},
        {"progress": [-1, 2]},
    ],
)
def test_malformed_script_values_are_config_errors(chunk: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_script({"replies": [[chunk]]})
    assert "\n" not in str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["text", "special", "user_defined", "delay_ms", "progress", "replies", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_is_a_script_or_a_config_error(data: Any) -> None:
    try:
        replies = parse_script(data)
    except ConfigError as exc:
        error = str(exc)
        assert "\n" not in error
        return
    for reply in replies:
        for chunk in reply:
            assert isinstance(chunk.special, bool) and 0 <= chunk.delay_ms <= 60_000
            assert chunk.progress is None or 0 <= chunk.progress[0] <= chunk.progress[1]


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("content", [b'{"replies": [["\xff"]]}', b"[" * 100_000, b'{"replies": ' * 50_000])
def test_unreadable_script_files_are_one_line(tmp_path: Path, ember_home: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    _one_line(ember("chat", "--no-history", "--backend", f"script:{path}", "hi", home=ember_home), 2)


# -- files that are not model files ------------------------------------------------------


@pytest.mark.slow  # starts a process
def test_a_fifo_as_the_model_is_refused_before_open(tmp_path: Path, ember_home: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    line = _one_line(ember("chat", "--model", str(fifo), "hi", home=ember_home), 2)
    assert "named pipe" in line


@pytest.mark.slow  # starts a process
def test_a_symlink_loop_as_the_model_is_one_line(tmp_path: Path, ember_home: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.symlink_to(b)
    b.symlink_to(a)
    line = _one_line(ember("chat", "--model", str(a), "hi", home=ember_home), 2)
    assert "symbolic link loop" in line


@pytest.mark.slow  # starts a process
def test_ember_home_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args in (["history", "list"], ["chat", "--backend", _script(tmp_path, [["ok"]]), "hi"]):
        line = _one_line(ember(*args, home=blocker / "home"), EXIT_FAILED)
        assert "not a folder" in line


# -- the output side ---------------------------------------------------------------------


@pytest.mark.slow  # starts a process
def test_a_closed_pipe_is_quiet_with_status_141(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["word " * 200_000]])
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "chat", "--no-history", "--backend", backend, "hi"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "EMBER_HOME": str(ember_home)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(20) == b"word " * 4
    proc.stdout.close()  # what `| head -c 20` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert err == ""


@pytest.mark.slow  # starts a process
def test_an_encoding_that_cannot_show_emoji(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["fire 🔥 done"]])
    result = ember(
        "chat", "--no-history", "--backend", backend, "hi", home=ember_home, env={"PYTHONIOENCODING": "ascii"}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "fire ? done\n"


@pytest.mark.slow  # starts a process
def test_control_characters_in_a_reply_are_shown_not_obeyed(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["a\x1b[2Jb\x9bc"], ["a\x1b[2Jb\x9bc"]])
    plain = ember("chat", "--no-history", "--backend", backend, "hi", home=ember_home)
    assert plain.stdout == "a\\u001b[2Jb\\u009bc\n"
    events = ember("chat", "--no-history", "--events", "--backend", backend, "hi", home=ember_home)
    texts = [e["text"] for e in map(json.loads, events.stdout.splitlines()) if e["type"] == "content"]
    assert "".join(texts) == "a\x1b[2Jb\x9bc"  # JSON output stays exact
    assert "\x1b" not in events.stdout and "\x9b" not in events.stdout


def test_ember_models_neutralises_a_hostile_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    gf.write_tiny_llama(models_dir / "evil.gguf", name=HOSTILE_NAME)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\r" not in out
    rows = [row for row in out.splitlines() if "Evil" in row]
    assert len(rows) == 1 and "evil.gguf" in rows[0]  # one row per model
    assert main(["models", str(models_dir / "evil.gguf")]) == 0
    assert "\x1b" not in capsys.readouterr().out
    assert main(["models", "--json", str(models_dir / "evil.gguf")]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == HOSTILE_NAME  # exact in JSON


def test_history_titles_are_neutralised_and_rename_refuses_controls(capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(model="m")
        store.rename(conv.id, HOSTILE_NAME)  # e.g. from an imported file
    assert main(["history", "list"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and "\x1b" not in out
    assert _main_status(["history", "rename", str(conv.id), "bad\x1b[2Jtitle"]) == 2
    assert "control characters" in capsys.readouterr().err


def test_history_rename_says_what_it_did_and_refuses_the_trash(capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(model="m")
        gone = store.create_conversation(model="m")
        store.delete(gone.id)
    assert main(["history", "rename", str(conv.id), "  Trip plans "]) == 0
    assert capsys.readouterr().out == f"renamed conversation {conv.id}: Trip plans\n"
    assert main(["history", "rename", str(gone.id), "x"]) == 2
    assert "in the trash" in capsys.readouterr().err


def test_history_show_all_needs_json(capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(model="m")
    assert main(["history", "show", str(conv.id), "--all"]) == 2
    assert "--json" in capsys.readouterr().err


@pytest.mark.slow  # starts a process
def test_a_deeply_nested_history_import_is_one_line(tmp_path: Path, ember_home: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    line = _one_line(ember("history", "import", str(path), home=ember_home), 2)
    assert "nested too deeply" in line


# -- the guard itself --------------------------------------------------------------------


def _history_error_from(cause: sqlite3.Error) -> HistoryError:
    """A HistoryError as the store raises it: the sqlite3 error is its cause."""
    error = HistoryError(f"history database error: {cause}")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "status", "needle"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/x/history.sqlite3"), 1, "disk is full"),
        (sqlite3.OperationalError("database or disk is full"), 1, "disk is full"),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/f/config"), 1, "not a folder"),
        (PermissionError(errno.EACCES, "Permission denied", "/ro"), 1, "Permission denied"),
        (OverflowError("Python int too large to convert to SQLite INTEGER"), 2, "too large"),
        (RecursionError("maximum recursion depth exceeded"), 2, "nested too deeply"),
        (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"), 2, "UTF-8"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 141, ""),
        (_history_error_from(sqlite3.OperationalError("database or disk is full")), 1, "disk is full"),
        (HistoryError("turn 3 is already finished"), 1, "turn 3 is already finished"),
    ],
)
def test_environment_failures_are_one_line(
    error: BaseException, status: int, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def command() -> int:
        raise error

    assert run_guarded(command) == status
    err = capsys.readouterr().err
    if needle:
        assert err.count("\n") == 1 and needle in err
    else:
        assert err == ""


@given(st.text())
def test_safe_text_leaves_no_control_characters(text: str) -> None:
    for out in (terminal(text).replace("\r\n", "\n"), cell(text)):
        assert not any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in out)
    assert "\n" not in cell(text)


@given(st.text())
def test_safe_stream_keeps_json_exact(text: str) -> None:
    class Sink:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def write(self, s: str) -> int:
            self.parts.append(s)
            return len(s)

    sink = Sink()
    SafeStream(sink).write(json.dumps({"t": text}, ensure_ascii=False))  # type: ignore[arg-type]
    assert json.loads("".join(sink.parts)) == {"t": text}


@pytest.mark.slow  # starts a process
def test_show_thinking_is_set_apart_from_the_answer(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<think>", "let me see", "</think>", "The answer."]])
    result = ember("chat", "--no-history", "--show-thinking", "--backend", backend, "hi", home=ember_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The answer.\n"
    assert result.stderr == "--- thinking ---\nlet me see\n--- end of thinking ---\n"
    quiet = ember("chat", "--no-history", "--backend", backend, "hi", home=ember_home)
    assert quiet.stderr == ""


def test_a_context_longer_than_the_model_was_trained_on_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli.cmd_chat import note_clamped_context
    from engine.backends.scripted import ScriptedBackend

    backend = ScriptedBackend.from_texts()  # declares its context size like a loaded model
    backend.n_ctx = 8192
    note_clamped_context(100_000, backend)
    assert "trained on 8192 tokens of context; using 8192, not 100000" in capsys.readouterr().err
    backend.n_ctx = 4096
    note_clamped_context(4096, backend)
    assert capsys.readouterr().err == ""
    note_clamped_context(4096, ScriptedBackend.from_texts())  # context unknown (as a server's): nothing to say
    assert capsys.readouterr().err == ""


def test_the_app_refuses_a_deeply_nested_import_with_one_line(tmp_path: Path) -> None:
    from desktop.core.history_session import HistorySession, open_history
    from engine.history.types import HistoryError

    session, notice = open_history()
    assert session.saved, notice
    nested = tmp_path / "nested.json"
    nested.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    try:
        with pytest.raises(HistoryError, match="nested too deeply"):
            HistorySession(session).import_file(nested)
    finally:
        session.close()


def test_crlf_line_endings_are_kept_but_a_lone_carriage_return_is_shown() -> None:
    assert terminal("a\r\nb") == "a\r\nb"
    assert terminal("100%\rgone") == "100%\\rgone"
    assert cell("a\r\nb") == "a b"


def test_an_import_with_lone_surrogates_is_one_line_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.core.history_session import HistorySession, open_history
    from engine.history.export import export_json
    from engine.history.types import HistoryError

    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(model="m")
        store.add_message(conv.id, "user", "PLACEHOLDER", parent_id=None)
        export = json.dumps(export_json(store, conv.id)).replace("PLACEHOLDER", "bad \\ud800 text")
        store.purge(conv.id)
    path = tmp_path / "bad.json"
    path.write_text(export)
    status = main(["history", "import", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "not valid Unicode" in err
    session, _ = open_history()
    assert session.saved
    try:
        with pytest.raises(HistoryError, match="not valid Unicode"):
            HistorySession(session).import_file(path)
        assert session.store.conversations() == []
    finally:
        session.close()


ARGV_WORDS = [
    "history",
    "list",
    "show",
    "search",
    "export",
    "import",
    "delete",
    "restore",
    "archive",
    "unarchive",
    "rename",
    "models",
    "--json",
    "--all",
    "--trash",
    "--archived",
    "--limit",
    "--format",
    "--purge",
    "-o",
    "1",
    "0",
    "-1",
    "x",
    "99999999999999999999",
    "\x1b[2J",
    "",
    " ",
    "md",
    "json",
    "/nonexistent",
    "--",
    "-",
]


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(st.sampled_from(ARGV_WORDS), min_size=1, max_size=6))
def test_random_history_and_models_argv_never_escapes_as_a_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] not in ("history", "models"):
        argv = ["history", *argv]
    if "import" in argv and "-" in argv:
        return  # would read the test's stdin
    status = _main_status(argv)
    out, err = capsys.readouterr()
    assert status in (0, 1, 2), (argv, err)
    assert "Traceback" not in err and "\x1b" not in out + err


def test_a_symlink_loop_is_an_ember_error_and_settings_keys_fall_back(tmp_path: Path) -> None:
    from models.errors import GGUFError
    from models.library.paths import resolve_model_file
    from models.library.settings import model_key

    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.symlink_to(b)
    b.symlink_to(a)
    if sys.version_info < (3, 13):  # from 3.13 resolve() leaves a loop as it is
        with pytest.raises(GGUFError, match="symbolic link loop"):
            resolve_model_file(a)
    assert model_key(a) == str(a)
