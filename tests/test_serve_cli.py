"""`ember serve` from the command line, and Ember talking to Ember through its own `openai:` backend."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import Served, serve

from desktop.cli.main import main
from engine.backends.base import make_request
from engine.backends.openai import OpenAIBackend
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.events import ContentDelta, ThinkingDelta, ToolCall, TurnDone
from engine.turns.runner import TurnRunner

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def scripted() -> Iterator[tuple[Served, ScriptedBackend]]:
    backend = ScriptedBackend.from_texts(
        ["<think>", "Two and two.", "</think>", "Four", "."],
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}</tool_call>',
    )
    s = serve(backend)
    yield s, backend
    s.close()


def test_ember_talks_to_ember(scripted: tuple[Served, ScriptedBackend]) -> None:
    s, served_backend = scripted
    remote = OpenAIBackend(s.url, model="served")
    try:
        events = list(TurnRunner(remote).run(make_request([{"role": "user", "content": "2+2?"}]), CancelToken()))
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Four."
        assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Two and two."
        assert isinstance(events[-1], TurnDone)
        tools = ({"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}},)
        request = make_request([{"role": "user", "content": "add 2 and 2"}], tools=tools)
        calls = [e for e in TurnRunner(remote).run(request) if isinstance(e, ToolCall)]
        assert [(c.name, c.arguments) for c in calls] == [("add", {"a": 2, "b": 2})]
        # what Ember's backend sent arrived as Ember would have sent it locally
        assert served_backend.requests[1].tools is not None
        assert served_backend.requests[0].messages[-1] == {"role": "user", "content": "2+2?"}
    finally:
        remote.close()


def test_a_public_address_needs_an_api_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--backend", "script:none.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--api-key-env" in err


def test_an_unset_key_variable_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_TEST_KEY", raising=False)
    assert main(["serve", "--api-key-env", "EMBER_TEST_KEY", "--backend", "script:none.json"]) == 2
    assert "EMBER_TEST_KEY is not set" in capsys.readouterr().err


def test_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["hi"]]}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--backend", f"script:{script}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in use" in err


def test_bad_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--port", "70000"])
    assert exit_info.value.code == 2
    assert "port" in capsys.readouterr().err


@pytest.mark.slow
def test_ember_serve_runs_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Hello", " from", " the", " script."]]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "serve", "--port", "0", "--backend", f"script:{script}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match, line
        reply = httpx.post(
            f"{match.group(1)}/chat/completions",
            timeout=30,
            json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert reply.json()["choices"][0]["message"]["content"] == "Hello from the script."
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "stopped after 1 request\n" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
