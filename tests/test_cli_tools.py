"""`ember chat --tools`: approval on the terminal, `--yes`, `--events` shapes, history and export."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from desktop.cli.chat_tools import TerminalApprover, parse_tools
from desktop.cli.main import main
from engine.errors import ConfigError
from engine.events import ToolCall
from engine.history.export import export_json, export_markdown
from engine.history.store import HistoryStore
from engine.tools.permissions import Decision
from models.library.paths import ember_paths

CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'


def script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": [[r] for r in replies]}), encoding="utf-8")
    return f"script:{path}"


def events(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_yes_runs_the_call_and_events_carry_call_and_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backend = script(tmp_path, CALC, "It is 42.")
    status = main(["chat", "--backend", backend, "--tools", "builtin", "--yes", "--events", "what is 6*7?"])
    out = capsys.readouterr().out
    assert status == 0
    evs = events(out)
    assert [e["type"] for e in evs] == ["tool_call", "tool_result", "content", "done"]
    call, result = evs[0], evs[1]
    assert call == {"type": "tool_call", "id": call["id"], "name": "calculator", "arguments": {"expression": "6 * 7"}}
    assert result == {"type": "tool_result", "id": call["id"], "content": "42"}
    assert "<tool_call>" not in out


def test_without_a_terminal_or_yes_the_call_is_denied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    backend = script(tmp_path, CALC, "Then I cannot compute it.")
    status = main(["chat", "--backend", backend, "--tools", "builtin", "--events", "what is 6*7?"])
    captured = capsys.readouterr()
    assert status == 0
    evs = events(captured.out)
    assert [e["type"] for e in evs] == ["tool_call", "tool_denied", "content", "done"]
    assert '"expression": "6 * 7"' in captured.err  # the arguments were shown in full
    assert "denied" in captured.err


def test_plain_output_keeps_the_answer_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["chat", "--backend", script(tmp_path, CALC, "42."), "--tools", "builtin", "--yes", "q"])
    captured = capsys.readouterr()
    assert (status, captured.out) == (0, "42.\n")
    assert "tool result: 42" in captured.err


def test_calls_approvals_and_results_are_recorded_and_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter(["a"])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(answers))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    assert main(["chat", "--backend", script(tmp_path, CALC, "42."), "--tools", "builtin", "q"]) == 0
    # The next turn of the same conversation is not asked: "always" was remembered.
    assert main(["chat", "-c", "--backend", script(tmp_path, CALC, "Still 42."), "--tools", "builtin", "q2"]) == 0
    capsys.readouterr()
    with HistoryStore(ember_paths().history_db) as store:
        conv = store.latest_conversation()
        assert conv is not None
        assert conv.settings["tools_always"] == ["calculator"]
        replies = [m for m in store.path(conv.id) if m.role == "assistant"]
        tools = [m.stats["tools"] for m in replies]
        assert tools[0] == [
            {
                "id": "call_1",
                "name": "calculator",
                "arguments": {"expression": "6 * 7"},
                "at": 0,
                "approval": "approved_always",
                "result": "42",
                "error": False,
            }
        ]
        assert tools[1][0]["approval"] == "always"
        exported = export_json(store, conv.id)
        assert exported["messages"][1]["stats"]["tools"] == tools[0]
        markdown = export_markdown(store, conv.id)
        assert "**Tool call** `calculator`" in markdown and '"expression": "6 * 7"' in markdown

    # --ask-again undoes "always": the tool asks again (here: no terminal, so it is denied) and is forgotten.
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert (
        main(
            [
                "chat",
                "-c",
                "--ask-again",
                "--backend",
                script(tmp_path, CALC, "Ok."),
                "--tools",
                "builtin",
                "--events",
                "q3",
            ]
        )
        == 0
    )
    assert '"type": "tool_denied"' in capsys.readouterr().out
    with HistoryStore(ember_paths().history_db) as store:
        conv = store.latest_conversation()
        assert conv is not None and not conv.settings.get("tools_always")


@pytest.mark.parametrize(
    ("answer", "decision"), [("y", Decision.APPROVE), ("n", Decision.DENY), ("", Decision.DENY), ("a", Decision.ALWAYS)]
)
def test_terminal_approver_answers(answer: str, decision: Decision) -> None:
    out = io.StringIO()
    approver = TerminalApprover(yes=False, ask=lambda _: answer, out=out, interactive=True)
    assert approver(ToolCall("c1", "read_file", {"path": "notes/todo.txt"})) is decision
    assert '"path": "notes/todo.txt"' in out.getvalue() and "read_file" in out.getvalue()


def test_bad_tool_options_fail_with_one_line_before_loading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--tools", "web", "q"]) == 2
    assert capsys.readouterr().err == "ember: --tools: unknown entry 'web' (use builtin and/or mcp:NAME)\n"
    assert main(["chat", "--tools", "builtin", "--allow-folder", str(tmp_path / "nope"), "q"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        parse_tools("builtin,mcp:")


def test_replay_puts_earlier_calls_back_before_their_answers(tmp_path: Path) -> None:
    from engine.session.messages import branch_messages

    with HistoryStore(tmp_path / "h.db") as store:
        conv = store.create_conversation()
        q = store.add_message(conv.id, "user", "6*7?", parent_id=None)
        records = [
            {
                "id": "call_1",
                "name": "calculator",
                "arguments": {"expression": "6*7"},
                "approval": "approved",
                "result": "4" * 5000,
                "error": False,
            },
            {"id": "call_2", "name": "read_file", "arguments": {"path": "x"}, "approval": "denied"},
        ]
        store.add_message(conv.id, "assistant", "42.", parent_id=q, stats={"tools": records})
        out = branch_messages(store.path(conv.id), replay_tools=True)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["function"]["name"] for c in out[1].get("tool_calls", [])] == ["calculator", "read_file"]
    assert len(out[2]["content"]) <= 2_000 and "[result cut:" in out[2]["content"]
    assert out[3]["content"].startswith("The user denied")
    assert out[4] == {"role": "assistant", "content": "42."}


def test_ember_tools_on_a_fresh_home_says_no_folders_are_granted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "No folders granted" in out and "Granted folders" not in out
