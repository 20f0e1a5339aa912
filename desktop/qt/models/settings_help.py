"""Hover help for every sampling field of the model settings, and the small Reset beside each.

The words say what a field does to the reply, in a sentence, the way LM Studio's hover help
does; Reset puts the model's own default back (recommended, built-in, in that order).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget

HELP: dict[str, str] = {
    "Temperature": "How adventurous the wording is. Lower (0.2) keeps replies focused and repeatable; "
    "higher (1.0 and up) makes them more varied and more likely to wander.",
    "Top P": "Only the most likely words that together make up this share of the chances are considered. "
    "1.0 turns it off; 0.9 trims unlikely words.",
    "Top K": "Only this many of the most likely next words are considered. Off considers them all.",
    "Min P": "Words less likely than this fraction of the most likely word are skipped. "
    "0.05 trims nonsense while keeping variety.",
    "Repeat penalty": "Makes words already used less likely, so the model does not loop. 1.0 is off; "
    "1.1–1.2 helps small models; too high hurts code and lists.",
    "Seed": "The same seed with the same settings gives the same reply. Leave empty for a fresh one each time.",
    "Max reply tokens": "The longest a reply may be, in tokens (about ¾ of a word each). "
    "A cap stops a model that runs on.",
    "System prompt": "Instructions the model reads before every conversation, such as a role or a style.",
    "Draft model": "A smaller model of the same family guesses ahead and this one checks the guesses: "
    "the same reply, sooner. Leave empty for none.",
}


def with_reset(field: QWidget, name: str, reset: Callable[[], None]) -> QWidget:
    """`field` with its hover help and a Reset button that puts the model's default back."""
    if name in HELP:  # a paragraph, so Qt wraps it instead of one line wider than the dialog
        field.setToolTip(f"<p>{escape(HELP[name])}</p>")
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(field, 1)
    button = QToolButton(row)
    button.setObjectName("ResetField")
    button.setText("Reset")
    button.setAutoRaise(True)
    button.setAccessibleName(f"Reset {name}")
    button.setToolTip(f"Back to this model's default {name.lower()}")
    button.clicked.connect(reset)
    layout.addWidget(button)
    return row
