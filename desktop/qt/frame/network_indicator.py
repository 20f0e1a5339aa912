"""The status bar's network indicator: "No outgoing connections", "2 outgoing connections · 1 blocked".

It shows what zero-egress mode (engine/network) is doing in this window's process: the
policy and the ledger's counts, updated as attempts happen (the ledger calls from any thread;
a queued signal brings it to the GUI thread) and when `network.json` or the saved servers
change. Its tooltip lists the latest attempts; a click opens the network dialog (plain sentences and
the allow list, `desktop/qt/frame/network_dialog.py`). The API server's incoming connections are not egress.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QLabel, QWidget

from desktop.qt.frame.network_dialog import NetworkDialog, attempt_sentence, indicator_words
from engine.api.network import Attempt, Guard

POLICY_POLL_MS = 2000  # how soon an edit of network.json or a saved server shows
TOOLTIP_ENTRIES = 8


class _Relay(QObject):
    attempted = Signal()


class NetworkIndicator(QLabel):
    def __init__(self, guard: Guard, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.guard = guard
        self.setAccessibleName("Network")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._relay = _Relay(self)
        self._relay.attempted.connect(self.refresh, Qt.ConnectionType.QueuedConnection)
        self._forget = guard.ledger.subscribe(self._on_attempt)
        self.destroyed.connect(lambda *_: self._forget())
        self._poll = QTimer(self)
        self._poll.setInterval(POLICY_POLL_MS)
        self._poll.timeout.connect(self.refresh)
        self._poll.start()
        self.refresh()

    def _on_attempt(self, _attempt: Attempt) -> None:  # any thread
        self._relay.attempted.emit()

    def refresh(self) -> None:
        ledger, view = self.guard.ledger, self.guard.view()
        allowed = len({a.destination for a in view.allowed})
        text = indicator_words(view.zero_egress, allowed, ledger.allowed_count, ledger.refused_count)
        if text != self.text():
            self.setText(text)
        self.setToolTip(self._tooltip(ledger.entries()[-TOOLTIP_ENTRIES:], view.zero_egress))

    @staticmethod
    def _tooltip(latest: list[Attempt], zero_egress: bool) -> str:
        head = (
            "Zero-egress mode: Ember connects only to servers you allowed."
            if zero_egress
            else "Zero-egress mode is off: Ember may connect anywhere."
        )
        lines = [attempt_sentence(a) for a in reversed(latest)] or ["No connection attempted since Ember started."]
        return "\n".join([head, "", *lines, "", "Click to see more and to change which servers are allowed."])

    def mousePressEvent(self, ev: QMouseEvent) -> None:
        if ev.button() == Qt.MouseButton.LeftButton:
            self.show_report()
        super().mousePressEvent(ev)

    def show_report(self) -> NetworkDialog:
        dialog = NetworkDialog(self.guard, self.window())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(lambda _result: self.refresh())
        dialog.open()
        return dialog
