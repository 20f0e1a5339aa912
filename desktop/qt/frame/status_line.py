"""The window's status bar: model, device and the last reply's speed.

The context used is not repeated here: the composer's meter is the one live count.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from desktop.core.model_choice import ModelInfo
from desktop.qt.look.style import SPACING
from engine.api.values import TurnStats

SPEED_TIP = "Tokens written per second in the last reply"


def speed_text(stats: TurnStats) -> str:
    """`39 tok/s`: the reply's speed, plainly (the drafting figures are in `speed_tip`)."""
    return f"{stats.tokens_per_s:.0f} tok/s" if stats.tokens_per_s else ""


def speed_tip(stats: TurnStats) -> str:
    """The speed's tooltip: with speculative drafting, how many guessed tokens the model kept."""
    if not stats.drafted:
        return SPEED_TIP
    share = 100 * stats.accepted // stats.drafted
    return (
        f"{SPEED_TIP}. Ember guessed {stats.drafted} tokens ahead and the model kept {stats.accepted} "
        f"({share} %); every shown token is still the model's own choice."
    )


def _room_for(label: QLabel, text: str) -> int:
    margins = label.contentsMargins()
    return label.fontMetrics().horizontalAdvance(text) + margins.left() + margins.right() + SPACING // 2


class StatusLine(QStatusBar):
    """Model, device and the last reply's speed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._device = ""
        self.model = self._add("Model", "No model")
        self.device = self._add("Device", "")
        self.speed = self._add("Reply speed", "")

    def _add(self, name: str, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setAccessibleName(name)
        label.setContentsMargins(SPACING // 2, 0, SPACING // 2, 0)
        self.addPermanentWidget(label)
        return label

    def show_model(self, info: ModelInfo | None) -> None:
        self.model.setText(info.label if info else "No model")
        self._device = info.device if info else ""
        self.device.setToolTip(info.device_note or self._device if info else "")
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """In a narrow window drop what is said elsewhere, so the rest is never cut off.

        First the model's name (the header's chip shows it), then the device's note (its
        tooltip keeps it: "CPU · this build has no GPU support" becomes "CPU"). Measured from
        the texts, not by trying: showing a label to measure it would re-lay the bar each time.
        """
        room = (self.parentWidget() or self).width()
        short = self._device.split(" · ")[0]
        rest = self._needed(skip=(self.model, self.device))
        with_model = rest + _room_for(self.model, self.model.text()) + _room_for(self.device, self._device)
        full_device = rest + _room_for(self.device, self._device) <= room
        if self.model.isHidden() != (with_model > room):
            self.model.setVisible(with_model <= room)
        text = self._device if full_device else short
        if self.device.text() != text:
            self.device.setText(text)

    def _needed(self, skip: tuple[QWidget, ...]) -> int:
        # Its widgets: these labels, the serve toggle and network indicator added later, the grip.
        parts = self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        shown = [w for w in parts if not w.isHidden() and w not in skip]
        return sum(w.sizeHint().width() + SPACING // 2 for w in shown) + SPACING * 2

    def show_stats(self, stats: TurnStats) -> None:
        """A reply ended: its speed."""
        self.speed.setText(speed_text(stats))
        self.speed.setToolTip(speed_tip(stats) if stats.tokens_per_s else "")
        self._fit()

    def show_speed(self, tokens_per_s: float) -> None:
        """The live speed while a reply streams (none: cleared)."""
        self.speed.setText(f"{tokens_per_s:.0f} tok/s" if tokens_per_s > 0 else "")
        self.speed.setToolTip(SPEED_TIP if tokens_per_s > 0 else "")
        self._fit()

    def clear_stats(self) -> None:
        self.speed.clear()
