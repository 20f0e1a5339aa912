"""Ledgers and stored stats that someone else wrote: bounded, typed, strict JSON out
(adversarial review 2: NW-10…17, IM-03, RC-11).

The network ledger is replaced by a FIFO, a 2 GB sparse file, lines with NaN, 1e400, a
100,000-deep value and a newline in a destination; a conversation's stats hold NaN and a
100,000-deep value. Nothing hangs, nothing raises, every JSON written parses strictly.
"""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from engine.history.export import export_json
from engine.history.store import HistoryStore
from engine.network.ledger import LEDGER_FILE, TAIL_BYTES, Attempt, Ledger, read_ledger_file
from engine.network.report import network_report, report_lines
from models.library.paths import ember_paths

DEEP = "[" * 100_000 + "]" * 100_000


def _strict(text: str) -> object:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))


def _ledger_path() -> Path:
    path = ember_paths().data_dir / LEDGER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _entry(**over: object) -> str:
    data: dict[str, object] = {
        "time": 1.7e9,
        "destination": "evil:1",
        "action": "connect",
        "allowed": True,
        "feature": "x",
    }
    return json.dumps(data | over)


def _ember(*argv: str) -> int:
    from desktop.cli.main import main

    return main(list(argv))


def _hostile_lines() -> list[str]:
    return [
        _entry(time=float("nan")),  # json.dumps writes NaN
        _entry(time=float("inf")),
        '{"time": 1e400, "destination": "a:1", "action": "connect", "allowed": true, "feature": "x"}',
        '{"time": ' + DEEP[:50_000] + ', "destination": "a:1"}',
        DEEP,
        _entry(time=1e17),
        _entry(time=-1e17),
        _entry(allowed="yes"),
        _entry(destination=["a"]),
        _entry(destination="evil:1\nember: 0 connections"),  # NW-14: would forge a report line
        _entry(destination="good:1"),
    ]


def test_hostile_ledger_lines_are_skipped_or_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    _ledger_path().write_text("\n".join(_hostile_lines()) + "\n", encoding="utf-8")
    entries = read_ledger_file(_ledger_path())
    assert [e.destination for e in entries] == ["evil:1", "evil:1", "evil:1\nember: 0 connections", "good:1"]
    lines = report_lines(network_report(ember_paths()))
    assert not any(line.startswith("ember:") for line in lines)
    assert any("evil:1\\nember: 0 connections" in line for line in lines)
    assert _ember("doctor", "--network") == 0
    out = capsys.readouterr().out
    assert "\nember: 0 connections" not in out and "good:1" in out
    assert _ember("doctor", "--network", "--json") == 0
    assert _ember("network", "--json") == 0
    for text in capsys.readouterr().out.splitlines():
        _strict(text)


def test_attempt_line_survives_any_time() -> None:
    for when in (1e17, -1e17, 0.0):
        assert "connect" in Attempt(when, "a:1", "connect", True, "x").line()
    assert (
        Attempt.from_json({"time": float("nan"), "destination": "a", "action": "c", "allowed": True, "feature": "f"})
        is None
    )


@pytest.mark.timeout(30)
def test_a_fifo_ledger_never_blocks_reading_or_writing(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    os.mkfifo(path)
    done: list[object] = []

    def work() -> None:
        Ledger(path).record(Attempt(time.time(), "a:1", "connect", False, "x"))
        done.append(read_ledger_file(path))

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(20)
    assert done == [[]], "reading or writing a FIFO ledger blocked"


@pytest.mark.timeout(60)
def test_a_huge_sparse_ledger_is_read_by_its_tail(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    with path.open("wb") as f:
        f.truncate(2 * 1024**3)
        f.seek(0, os.SEEK_END)
        f.write(("\n" + _entry(destination="last:1") + "\n").encode())
    tracemalloc.start()
    try:
        assert [e.destination for e in read_ledger_file(path)] == ["last:1"]
        ledger = Ledger(path)  # appending trims by the tail too, not by reading 2 GB
        ledger.record(Attempt(time.time(), "new:1", "connect", True, "x"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * TAIL_BYTES, f"{peak:,} bytes to read a ledger"  # the review saw 4.2 GB
    assert path.stat().st_size <= TAIL_BYTES
    assert [e.destination for e in read_ledger_file(path)][-2:] == ["last:1", "new:1"]


def test_the_ledger_writes_strict_json(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_FILE
    Ledger(path).record(Attempt(float("nan"), "a:1", "connect", True, "x"))
    _strict(path.read_text(encoding="utf-8"))


def _store() -> HistoryStore:
    return HistoryStore(ember_paths().ensure().history_db)


def _conversation_with_stats(stats_json: str) -> int:
    store = _store()
    try:
        conv = store.create_conversation(model="m")
        user = store.add_message(conv.id, "user", "hi", parent_id=None)
        reply = store.add_message(conv.id, "assistant", "hello", parent_id=user)
        with store.transaction() as db:  # a hand edit, as the review made with sqlite3
            db.execute("UPDATE messages SET stats = ? WHERE id = ?", (stats_json, reply))
        return conv.id
    finally:
        store.close()


@pytest.mark.parametrize(
    "stats", ['{"tokens": NaN, "tokens_per_s": Infinity, "x": 1e400}', DEEP, '{"deep": ' + DEEP + "}"]
)
def test_history_show_and_export_survive_hostile_stats(stats: str, capsys: pytest.CaptureFixture[str]) -> None:
    conv = _conversation_with_stats(stats)
    assert _ember("history", "show", str(conv)) == 0
    assert "hello" in capsys.readouterr().out
    assert _ember("history", "show", str(conv), "--json") == 0
    _strict(capsys.readouterr().out)
    assert _ember("history", "export", str(conv), "--format", "json") == 0
    exported = _strict(capsys.readouterr().out)
    assert "hello" in json.dumps(exported)


def test_stats_with_nan_are_stored_as_strict_json() -> None:
    store = _store()
    try:
        conv = store.create_conversation(model="m")
        store.add_message(conv.id, "assistant", "x", parent_id=None, stats={"tokens_per_s": float("inf")})
        _strict(json.dumps(export_json(store, conv.id)))
    finally:
        store.close()


def test_the_windows_network_report_opens_over_a_hostile_ledger(qtbot: Any) -> None:
    from PySide6.QtWidgets import QStatusBar

    from desktop.qt.frame.network_indicator import NetworkIndicator
    from engine.network.guard import Guard
    from engine.network.policy import EgressPolicy, PolicyView

    _ledger_path().write_text("\n".join(_hostile_lines()) + "\n", encoding="utf-8")
    status = QStatusBar()
    qtbot.addWidget(status)
    guard = Guard(EgressPolicy.fixed(PolicyView(True), ember_paths()), Ledger(None))
    guard.ledger.record(Attempt(float("nan"), "evil:1\nforged", "connect", False, "x"))
    indicator = NetworkIndicator(guard, status)
    assert "forged" in indicator.toolTip() and "\nforged" not in indicator.toolTip()
    box = indicator.show_report()  # NW-13: raised ValueError (NaN) or RecursionError (deep)
    shown = "\n".join(box.attempts.item(i).text() for i in range(box.attempts.count()))
    assert "forged" in shown and "\nforged" not in shown and "unknown time" in shown  # escaped; NaN time in words
    box.close()


def test_an_import_with_nan_stats_exports_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """IM-03: the import was accepted and `history export --format json` then wrote NaN."""
    doc = {
        "format": "ember.conversation",
        "version": 1,
        "conversation": {"title": "t"},
        "messages": [
            {"id": 0, "role": "user", "content": "hi"},
            {
                "id": 1,
                "parent": 0,
                "role": "assistant",
                "content": "hello",
                "stats": {"tokens": float("nan"), "tokens_per_s": float("inf")},
            },
        ],
    }
    source = tmp_path / "conv.json"
    source.write_text(json.dumps(doc), encoding="utf-8")  # Python writes NaN and Infinity
    assert _ember("history", "import", str(source)) == 0
    capsys.readouterr()
    assert _ember("history", "export", "1", "--format", "json") == 0
    _strict(capsys.readouterr().out)
