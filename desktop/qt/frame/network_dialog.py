"""The network in plain sentences: what Ember connected to, and the servers it may reach (editable).

The status bar's indicator opens it. It says in words what zero-egress mode does, lists the
latest attempts ("Blocked a connection to example.com:443 (remote server), 12:03"), and
edits the allow list in `network.json` (each entry checked as `ember network allow` checks
it). Incoming connections to the API server are not egress and are not counted here.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.qt.look.theme import SPACE_SM
from engine.api.errors import ConfigError, EmberError
from engine.api.network import Attempt, Guard, NetworkSettings, check_entry, load_settings, save_settings, shown

ATTEMPTS_SHOWN = 12


def indicator_words(zero_egress: bool, allowed: int, connections: int, refused: int) -> str:
    """The status bar's words: "No outgoing connections", "2 outgoing connections · 1 blocked"."""
    if not zero_egress:
        head = "Network open"
    elif connections == 0:
        head = "No outgoing connections"
    else:
        head = f"{connections} outgoing connection{'s' if connections != 1 else ''}"
    if not zero_egress:
        head += f" · {connections} outgoing connection{'s' if connections != 1 else ''}"
    if refused:
        head += f" · {refused} blocked"
    return head


def _clock(stamp: float) -> str:
    """ "14:05", or "at an unknown time" for a stamp a hostile ledger made NaN or out of range."""
    try:
        return time.strftime("%H:%M", time.localtime(stamp))
    except (ValueError, OverflowError, OSError):
        return "at an unknown time"


def attempt_sentence(attempt: Attempt) -> str:
    """One attempt in words, on one line (names from the ledger are escaped: it is user-writable)."""
    when, where, feature = _clock(attempt.time), shown(attempt.destination), shown(attempt.feature)
    verb = "Connected" if attempt.allowed else "Blocked a connection"
    what = {"lookup": "a name lookup of", "send": "sending to"}.get(attempt.action)
    if what:
        verb = f"{'Allowed' if attempt.allowed else 'Blocked'} {what}"
        return f"{verb} {where} ({feature}), {when}"
    return f"{verb} to {where} ({feature}), {when}"


def summary_sentences(zero_egress: bool, connections: int, refused: int) -> list[str]:
    if zero_egress:
        first = (
            "Ember stays on this computer: it connects only to the servers listed below, "
            "and blocks everything else before it happens."
        )
    else:
        first = "Zero-egress mode is off: Ember may connect anywhere. Turn it on to block every other connection."
    made = (
        "It has made no outgoing connection since it started."
        if connections == 0
        else f"It has made {connections} outgoing connection{'s' if connections != 1 else ''} since it started."
    )
    blocked = f" {refused} attempt{'s were' if refused != 1 else ' was'} blocked." if refused else ""
    return [
        first,
        made + blocked,
        "Apps that use Ember's API server connect to it; those are not outgoing connections.",
    ]


class NetworkDialog(QDialog):
    """What went out, in sentences, and the allow list you can edit (saved to network.json)."""

    def __init__(self, guard: Guard, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NetworkDialog")
        self.setWindowTitle("Network")
        self.guard = guard
        self.paths = guard.policy.paths
        self.settings = self._read()
        ledger = guard.ledger
        self.summary = QLabel(
            "\n\n".join(summary_sentences(self.settings.zero_egress, ledger.allowed_count, ledger.refused_count)), self
        )
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.attempts = QListWidget(self)
        self.attempts.setAccessibleName("Latest connection attempts")
        self.attempts.setSelectionMode(QListWidget.SelectionMode.NoSelection)  # a record to read, not a choice
        latest = ledger.entries()[-ATTEMPTS_SHOWN:]
        self.attempts.addItems([attempt_sentence(a) for a in reversed(latest)] or ["Nothing was attempted."])
        self.zero_egress = QCheckBox("Block every connection except to the servers below (zero-egress mode)", self)
        self.zero_egress.setChecked(self.settings.zero_egress)
        self.allow = QListWidget(self)
        self.allow.setAccessibleName("Servers Ember may connect to")
        self.allow.addItems(list(self.settings.allow))
        self.entry = QLineEdit(self)
        self.entry.setPlaceholderText("A server to allow, e.g. api.example.com:443")
        self.entry.returnPressed.connect(self.add_entry)
        add = QPushButton("Allow", self)
        add.clicked.connect(self.add_entry)
        remove = QPushButton("Remove", self)
        remove.clicked.connect(self.remove_selected)
        self.problem = QLabel(self)
        self.problem.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Close, self)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.entry, 1)
        row.addWidget(add)
        row.addWidget(remove)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addSpacing(SPACE_SM)
        layout.addWidget(QLabel("Latest attempts", self))
        layout.addWidget(self.attempts, 1)
        layout.addSpacing(SPACE_SM)
        layout.addWidget(self.zero_egress)
        layout.addWidget(QLabel("Servers Ember may connect to (saved models' servers are allowed too)", self))
        layout.addWidget(self.allow, 1)
        layout.addLayout(row)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.resize(560, 520)

    def _read(self) -> NetworkSettings:
        try:
            return load_settings(self.paths)
        except (OSError, EmberError):
            return NetworkSettings()

    def add_entry(self) -> None:
        try:
            entry = check_entry(self.entry.text())
        except ConfigError as exc:
            self.problem.setText(str(exc))
            return
        if entry and entry not in self.entries():
            self.allow.addItem(entry)
        self.entry.clear()
        self.problem.clear()

    def remove_selected(self) -> None:
        for item in self.allow.selectedItems():
            self.allow.takeItem(self.allow.row(item))

    def entries(self) -> list[str]:
        return [self.allow.item(i).text() for i in range(self.allow.count())]

    def save(self) -> None:
        settings = NetworkSettings(zero_egress=self.zero_egress.isChecked(), allow=tuple(self.entries()))
        try:
            save_settings(self.paths, settings)
        except OSError as exc:
            self.problem.setText(f"Couldn't save the network settings: {exc}")
            return
        self.accept()
