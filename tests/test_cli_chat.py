"""`ember chat` end to end, in a subprocess, on a script and on the real default model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MALFORMED = "The model returned a malformed reply — please try again."


def ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "desktop", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def _script(tmp_path: Path, replies: list[list[object]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return f"script:{path}"


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_a_script_replays_exactly(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<think>let me see</think>", "Hel", "lo", "!"]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["thinking", "content", "content", "content", "done"]
    assert events[0]["text"] == "let me see"
    assert "".join(str(e["text"]) for e in events if e["type"] == "content") == "Hello!"
    stats = events[-1]["stats"]
    assert isinstance(stats, dict) and {"tokens", "ttft_ms", "tokens_per_s", "total_ms", "retries",
                                        "scaffold_stripped"} <= stats.keys()


def test_plain_output_is_the_answer(tmp_path: Path, ember_home: Path) -> None:
    result = ember("chat", "--backend", _script(tmp_path, [["Hello", " there"]]), "hi", home=ember_home)
    assert (result.returncode, result.stdout) == (0, "Hello there\n")


def test_recovery_then_answer(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<|tool_call_start|>[read()]<|tool_call_end|>"], ["Clean."]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    types = [e["type"] for e in _events(result.stdout)]
    assert result.returncode == 0 and types == ["recovery", "content", "done"]
    assert "tool_call" not in result.stdout


def test_the_terminal_malformed_case_exits_3(tmp_path: Path, ember_home: Path) -> None:
    backend = _script(tmp_path, [["<|tool_call_start|>[x]<|tool_call_end|>"], ["<|tool_calls|>"]])
    result = ember("chat", "--events", "--backend", backend, "hi", home=ember_home)
    events = _events(result.stdout)
    assert result.returncode == 3
    assert [e["type"] for e in events] == ["recovery", "error"]
    assert events[-1] == {"type": "error", "kind": "malformed_reply", "message": MALFORMED}


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


def test_version(ember_home: Path) -> None:
    result = ember("--version", home=ember_home)
    assert result.returncode == 0 and result.stdout.startswith("ember ")


@pytest.mark.slow
def test_the_default_model_answers(ember_home: Path) -> None:
    result = ember("chat", "--events", "--temperature", "0", "--max-tokens", "24",
                   "What is the capital of France?", home=ember_home)
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert events[-1]["type"] == "done"
    content = "".join(str(e["text"]) for e in events if e["type"] == "content")
    assert "Paris" in content
