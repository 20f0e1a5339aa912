"""What the window shows of zero-egress mode (the status bar's indicator) and of receipts (Details)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from PySide6.QtWidgets import QStatusBar
from pytestqt.qtbot import QtBot

from desktop.qt.chat.message_view import AssistantMessage
from desktop.qt.frame.network_indicator import NetworkIndicator
from engine.events import TurnStats
from engine.network.destinations import Destination
from engine.network.guard import Guard
from engine.network.ledger import Attempt, Ledger
from engine.network.policy import Allowed, EgressPolicy, PolicyView, load_settings
from models.library.paths import ember_paths

RECEIPT = {
    "backend": "llama.cpp",
    "device": "CPU · 2 threads",
    "model": {"file": "SmolLM2-135M-Instruct.Q4_1.gguf", "bytes": 1, "sha256": "b179c9523d0e6a0f98a3" + "0" * 44},
    "chat_template_sha256": "872be49dbb63" + "0" * 52,
    "sampling": {"temperature": 0.0, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0},
    "seed": 7,
    "reply": {"tokens": 9, "sha256": "924006b2b103" + "0" * 52},
}


def test_a_reply_with_a_receipt_shows_it_in_its_details(qtbot: QtBot) -> None:
    reply = AssistantMessage()
    qtbot.addWidget(reply)
    reply.show()
    reply.add_content("Hello")
    reply.finish(TurnStats())
    assert not reply.details_button.isVisibleTo(reply)
    reply.finish(TurnStats(receipt=RECEIPT))
    assert reply.details_button.isVisibleTo(reply)
    box = reply.show_details()
    text = box.text()
    box.close()
    for expected in (
        "Model file: SmolLM2-135M-Instruct.Q4_1.gguf",
        "Model SHA-256: b179c9523d0e6a0f",
        "Chat template SHA-256: 872be49dbb63",
        "Sampling: greedy; temperature 0.0",
        "Seed: 7",
        "Reply: 9 tokens",
    ):
        assert expected in text, text


def _guard(tmp_path: Path, *allowed: str) -> Guard:
    view = PolicyView(True, tuple(Allowed(Destination(a, 8080), "test") for a in allowed))
    return Guard(EgressPolicy.fixed(view, ember_paths()), Ledger(tmp_path / "ledger.jsonl"))


def test_the_indicator_says_offline_and_counts_attempts_from_any_thread(qtbot: QtBot, tmp_path: Path) -> None:
    status = QStatusBar()
    qtbot.addWidget(status)
    guard = _guard(tmp_path)
    indicator = NetworkIndicator(guard, status)
    assert indicator.text() == "No outgoing connections"
    assert "No connection attempted" in indicator.toolTip()
    attempt = Attempt(time.time(), "example.com:443", "connect", False, "remote server")
    worker = threading.Thread(target=guard.ledger.record, args=(attempt,))
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: indicator.text() == "No outgoing connections · 1 blocked", timeout=5000)
    assert "Blocked a connection to example.com:443 (remote server)" in indicator.toolTip()
    dialog = indicator.show_report()
    assert "connects only to the servers listed below" in dialog.summary.text()
    assert dialog.attempts.item(0).text().startswith("Blocked a connection to example.com:443")
    dialog.entry.setText("api.example.com:443")
    dialog.add_entry()
    dialog.entry.setText("not a host at all!")
    dialog.add_entry()
    assert dialog.problem.text()  # one clear line, nothing added
    assert dialog.entries() == ["api.example.com:443"]
    dialog.save()
    assert load_settings(ember_paths()).allow == ("api.example.com:443",)


def test_the_indicator_names_allowed_servers(qtbot: QtBot, tmp_path: Path) -> None:
    status = QStatusBar()
    qtbot.addWidget(status)
    indicator = NetworkIndicator(_guard(tmp_path, "localhost"), status)
    assert indicator.text() == "No outgoing connections"
