"""`ember chat --schema` end to end, in a subprocess, on a script and on the real default model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "desktop", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def _files(tmp_path: Path, replies: list[str], schema: Any = CITY) -> tuple[str, str]:
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [[r] for r in replies]}))
    return str(schema_path), f"script:{script}"


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_the_value_is_printed_as_pretty_json(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ['{"city":"Paris"}'])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital of France?", home=ember_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{\n  "city": "Paris"\n}\n'


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


def test_exhaustion_reports_the_last_error_and_exits_3(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["Paris", '{"city": 7}', '{"capital": "Paris"}'])
    result = ember("chat", "--events", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert result.returncode == 3
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["structured_retry", "structured_retry", "error"]
    assert events[-1] == {"type": "error", "kind": "structured_output", "message": "'city' is a required property"}


def test_exhaustion_in_plain_mode_is_one_line_on_stderr(tmp_path: Path, ember_home: Path) -> None:
    schema, backend = _files(tmp_path, ["a", "b", "c"])
    result = ember("chat", "--schema", schema, "--backend", backend, "Capital?", home=ember_home)
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr.count("asking again") == 2
    assert result.stderr.splitlines()[-1].startswith("ember: no valid JSON after 3 attempts: invalid JSON")


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read schema"), ("{nope", "is not valid JSON"), ("[1, 2]", "not a valid JSON Schema"),
     ('{"type": "frobnicate"}', "not a valid JSON Schema")],
    ids=["unreadable", "not-json", "not-an-object", "invalid-schema"],
)
def test_a_bad_schema_file_exits_2_with_one_line(tmp_path: Path, ember_home: Path, content: str | None,
                                                 message: str) -> None:
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


@pytest.mark.slow
def test_the_default_model_answers_with_valid_json(tmp_path: Path, ember_home: Path) -> None:
    schema, _ = _files(tmp_path, [])
    result = ember("chat", "--events", "--schema", schema, "--temperature", "0", "--seed", "0", "--max-tokens", "48",
                   "--ctx", "2048", "What is the capital of France?", home=ember_home)
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert [e["type"] for e in events] == ["json", "done"]  # the grammar gets it right first time
    assert isinstance(events[0]["value"]["city"], str)
