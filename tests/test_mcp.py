"""MCP over stdio with the official SDK: a stub server written in the tests (ok, crash, hang)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from desktop.cli.main import main
from engine.backends.base import make_request
from engine.backends.scripted import ScriptedBackend
from engine.errors import ConfigError
from engine.events import ContentDelta, ToolResult
from engine.tools.mcp_config import ServerConfig, load_mcp_config
from engine.tools.mcp_tools import McpServers
from engine.tools.permissions import Decision, ToolUse
from engine.tools.registry import ToolError, ToolSet
from engine.turns.runner import TurnRunner
from models.library.paths import ember_paths

pytestmark = pytest.mark.slow

STUB = str(Path(__file__).with_name("mcp_stub_server.py"))


def stub(mode: str) -> ServerConfig:
    return ServerConfig(mode, sys.executable, (STUB, mode))


def servers(*modes: str, call_timeout_s: float = 5.0) -> McpServers:
    return McpServers({m: stub(m) for m in modes}, start_timeout_s=30.0, call_timeout_s=call_timeout_s)


def test_config_in_the_shape_other_clients_use(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    assert load_mcp_config(path) == {}
    path.write_text(json.dumps({"mcpServers": {"files": {"command": "srv", "args": ["-x"], "env": {"K": "v"}}}}))
    assert load_mcp_config(path) == {"files": ServerConfig("files", "srv", ("-x",), {"K": "v"})}
    for bad in (
        "{",
        '{"servers": {}}',
        '{"mcpServers": {"x": {"url": "http://h"}}}',
        '{"mcpServers": {"x": {"command": "c", "args": "a b"}}}',
    ):
        path.write_text(bad)
        with pytest.raises(ConfigError):
            load_mcp_config(path)


def test_a_server_starts_only_when_its_tools_are_needed_and_its_tool_runs() -> None:
    pool = servers("ok")
    try:
        assert not pool.servers["ok"].running
        (tool,) = pool.tools_for(["ok"])
        assert pool.servers["ok"].running
        assert (tool.name, tool.source, tool.parameters["required"]) == ("shout", "mcp:ok", ["text"])
        assert ToolSet([tool]).run("shout", {"text": "hi"}) == "HI!"
        with pytest.raises(ConfigError, match="no MCP server named 'nope'"):
            pool.tools_for(["nope"])
    finally:
        pool.close()
    assert not pool.servers["ok"].running


def test_a_crashing_server_gives_one_line_and_starts_again_next_time() -> None:
    pool = servers("crash")
    try:
        (tool,) = pool.tools_for(["crash"])
        with pytest.raises(ToolError) as failed:
            tool.run({"text": "hi"})
        assert "\n" not in str(failed.value) and "MCP server crash" in str(failed.value)
        assert not pool.servers["crash"].running
        assert [t.name for t in pool.tools_for(["crash"])] == ["shout"]  # restarted on demand
    finally:
        pool.close()


def test_a_hanging_call_times_out_with_one_line_and_the_chat_continues() -> None:
    pool = servers("hang", call_timeout_s=1.0)
    try:
        tools = ToolSet(pool.tools_for(["hang"]))
        backend = ScriptedBackend.from_texts(
            '<tool_call>{"name": "shout", "arguments": {"text": "x"}}</tool_call>', "The tool did not answer."
        )
        runner = TurnRunner(backend, ToolUse(tools, lambda _call: Decision.APPROVE))
        events = list(runner.run(make_request([{"role": "user", "content": "go"}])))
        (result,) = [e for e in events if isinstance(e, ToolResult)]
        assert result.error and result.content == "error: MCP server hang did not answer within 1 s while running shout"
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "The tool did not answer."
    finally:
        pool.close()


def test_a_server_that_cannot_start_is_left_out_with_one_line() -> None:
    pool = servers("boom", "ok")
    warnings: list[str] = []
    try:
        tools = pool.tools_for(["boom", "ok"], warn=warnings.append)
        assert [t.name for t in tools] == ["shout"]
        assert len(warnings) == 1 and warnings[0].startswith("MCP server boom could not start")
    finally:
        pool.close()


def test_a_server_tool_never_shadows_a_builtin_name() -> None:
    pool = servers("ok")
    try:
        (tool,) = pool.tools_for(["ok"], taken=["shout"])
        assert tool.name == "ok_shout"
        assert tool.run({"text": "a"}) == "A!"
    finally:
        pool.close()


def test_cli_chat_with_an_mcp_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ember_paths().ensure().config_dir / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"stub": {"command": sys.executable, "args": [STUB, "ok"]}}}))
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {"replies": [['<tool_call>{"name": "shout", "arguments": {"text": "hey"}}</tool_call>'], ["It shouted."]]}
        )
    )
    status = main(["chat", "--backend", f"script:{script}", "--tools", "mcp:stub", "--yes", "--events", "go"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == 0
    assert [e["type"] for e in events] == ["tool_call", "tool_result", "content", "done"]
    assert events[1]["content"] == "HEY!"
    assert main(["chat", "--tools", "mcp:other", "q"]) == 2
    assert "no MCP server named 'other'" in capsys.readouterr().err


def test_ember_tools_lists_per_source_and_starts_a_server_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    config = ember_paths().ensure().config_dir / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"stub": {"command": sys.executable, "args": [STUB, "ok"]}}}))
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "builtin:\n  current_time:" in out and "  read_file:" in out
    assert "mcp:stub: not started" in out
    assert main(["tools", "--mcp", "stub", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in listing["mcp:stub"]] == ["shout"]
    assert main(["tools", "--mcp", "nope"]) == 2
