"""Schema patterns are checked in bounded time (SV-16, SV-17): never Python's backtracking `re`.

The report's patterns, `(.*.*)*#` on an ordinary sentence and `^(a+)+$` on forty `a`s and a `!`,
each hung `re` for good. Every check here runs under a generous bound against a hang (never a
speed target), and the command-line and server cases run as child processes with time limits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sse_stub import DONE, Reply, StubServer, chunk

from engine.errors import ConfigError
from engine.turns import schema_patterns
from engine.turns.schema_patterns import PatternTooCostly
from engine.turns.structured import ReplyError, compile_schema, parse_reply

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 60  # far above the few seconds a bounded check may take
SENTENCE_SCHEMA = {"type": "object", "additionalProperties": {"type": "string", "pattern": "(.*.*)*#"}}
SENTENCE = '{"name": "the quick brown fox jumps over the lazy dog"}'
AS_SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["a"]}
AS_REPLY = '{"a": "' + "a" * 38 + '!"}'


def _bounded(call: Any) -> tuple[Any, float]:
    start = time.monotonic()
    return call(), time.monotonic() - start


@pytest.mark.parametrize(
    ("schema", "reply"), [(SENTENCE_SCHEMA, SENTENCE), (AS_SCHEMA, AS_REPLY)], ids=["SV-16 sentence", "SV-17 a-run"]
)
def test_the_reports_patterns_are_checked_quickly(schema: dict[str, Any], reply: str) -> None:
    validator = compile_schema(schema)

    def check() -> str:
        with pytest.raises(ReplyError) as refused:
            parse_reply(reply, validator)
        return str(refused.value)

    message, took = _bounded(check)
    assert "does not match" in message
    assert took < HANG_S


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_check_past_its_budget_is_one_line_and_lets_other_threads_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the compile-time probes cannot foresee (here: no probes) is cut at the reply's budget."""
    monkeypatch.setattr(schema_patterns, "_PROBES", ())
    validator = compile_schema({"type": "string", "pattern": "(a|aa)+$"})  # exponential in `regex` too
    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        with pytest.raises(PatternTooCostly) as refused:
            _bounded(lambda: parse_reply(json.dumps("a" * 5000 + "b"), validator))
    finally:
        stop.set()
        ticker.join()
    assert isinstance(refused.value, ConfigError)
    assert "\n" not in str(refused.value) and "could not be checked" in str(refused.value)
    assert len(ticks) > 20  # the matcher released the GIL: this thread went on ticking


def test_pattern_properties_keep_their_meaning() -> None:
    validator = compile_schema(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert parse_reply('{"id": 1, "x_a": 2}', validator) == {"id": 1, "x_a": 2}
    with pytest.raises(ReplyError, match="'y' does not match any of the regexes: '\\^x_'"):
        parse_reply('{"y": 1}', validator)
    with pytest.raises(ReplyError, match="is not of type 'integer'"):
        parse_reply('{"x_a": "two"}', validator)
    typed = compile_schema(
        {"type": "object", "patternProperties": {"^n": {"type": "number"}}, "additionalProperties": {"type": "string"}}
    )
    assert parse_reply('{"n1": 1, "s": "x"}', typed) == {"n1": 1, "s": "x"}
    with pytest.raises(ReplyError):
        parse_reply('{"s": 5}', typed)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "string", "pattern": "(a"}, "does not compile"),
        ({"type": "string", "pattern": "a" * 5000}, "characters long"),
        ({"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}, "unevaluatedProperties"),
        ({"type": "string", "pattern": "^(a|aa)+$"}, "too costly to check"),
    ],
)
def test_unusable_patterns_are_refused_before_any_work(schema: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _bounded(lambda: compile_schema(schema))
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_probing_is_short() -> None:
    assert schema_patterns.pattern_problem({"pattern": "^[a-z]+@[a-z]+\\.[a-z]{2,}$"}) is None
    assert schema_patterns.PROBE_SECONDS <= 0.5


# -- the command line and the server ------------------------------------------------------------


def _ember(*args: str, home: Path, timeout: float = HANG_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "EMBER_HOME": str(home)},
    )


@pytest.mark.slow  # starts a process
def test_chat_schema_over_a_remote_server_ends(tmp_path: Path, ember_home: Path, stubs: list[StubServer]) -> None:
    """SV-17: the remote reply misses `^(a+)+$`; every attempt is refused quickly, then one line."""
    reply = Reply([chunk('{"a": "' + "a" * 38 + '!"}'), chunk(finish="stop"), DONE])
    stub = StubServer([reply, reply, reply])
    stubs.append(stub.start())
    schema = tmp_path / "redos.json"
    schema.write_text(json.dumps(AS_SCHEMA))
    assert _ember("network", "allow", stub.host, home=ember_home).returncode == 0
    done = _ember(
        "chat", "--backend", f"openai:{stub.url}", "--schema", str(schema), "--no-history", "x", home=ember_home
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("ember: no valid JSON after 3 attempts"), done.stderr
    assert "does not match '^(a+)+$'" in lines[-1]
    assert len(stub.requests) == 3


@pytest.mark.slow  # starts a process
def test_serve_answers_a_pattern_request_and_then_stops(tmp_path: Path, ember_home: Path) -> None:
    """SV-16: the catastrophic pattern costs one quick refusal; the next client is served; SIGTERM stops it."""
    script = tmp_path / "redos.json"
    script.write_text(json.dumps({"replies": [[SENTENCE], ["x"], ["x"], ["hello"]]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "serve", "--port", "0", "--backend", f"script:{script}"],
        cwd=ROOT,
        env={**os.environ, "EMBER_HOME": str(ember_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", proc.stdout.readline())
        assert match
        url = match.group(1) + "/chat/completions"
        fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": SENTENCE_SCHEMA}}
        first = httpx.post(
            url, json={"messages": [{"role": "user", "content": "x"}], "response_format": fmt}, timeout=HANG_S
        )
        assert first.status_code != 200 or "choices" in first.json()
        second = httpx.post(url, json={"messages": [{"role": "user", "content": "hi"}]}, timeout=HANG_S)
        assert second.status_code == 200 and second.json()["choices"][0]["message"]["content"] == "hello"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
