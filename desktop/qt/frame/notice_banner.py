"""The window-level notice under the header: one plain sentence, its details one click away."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.qt.frame.header import icon_button
from desktop.qt.look.appearance import current_palette
from desktop.qt.look.icons import themed_icon
from desktop.qt.look.theme import ICON_PX, SPACE_MD, SPACE_SM


class NoticeBanner(QFrame):
    """A window-level notice (e.g. the model did not load), with Choose model and Dismiss; hidden when none.

    Signals:
        chooseModelRequested(): the notice's "Choose model" button was pressed.
    """

    chooseModelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBanner")
        self.setAccessibleName("Notice")
        self.icon = QLabel(self)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAccessibleName("Notice text")
        self.details = QLabel(self)
        self.details.setObjectName("NoticeDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setAccessibleName("Notice details")
        self.details.hide()
        self.lasting = False
        self.details_button = QPushButton("Details", self)
        self.details_button.setCheckable(True)
        self.details_button.setAccessibleName("Show the details")
        self.details_button.toggled.connect(self.details.setVisible)
        self.choose_button = QPushButton("Choose model…", self)
        self.choose_button.setAccessibleName("Choose another model")
        self.choose_button.clicked.connect(self.chooseModelRequested)
        self.dismiss_button = icon_button(self, "IconButton", "close", "Dismiss notice", "Dismiss")
        self.dismiss_button.clicked.connect(self.hide)
        text = QVBoxLayout()
        text.setSpacing(SPACE_SM)
        text.addWidget(self.label)
        text.addWidget(self.details)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE_MD, SPACE_SM, SPACE_SM, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.choose_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def show_notice(
        self, text: str, details: str = "", *, offer_models: bool = False, lasting: bool = False, calm: bool = False
    ) -> None:
        """One plain sentence; `details` (e.g. llama.cpp's own words) one click away.

        A `lasting` notice (history is not being saved) stays when a model loads; others are
        about the model and go once one is ready. A `calm` one is a note, not a failure (a base
        model loaded as asked): drawn in the quiet note colours with an ⓘ, not as an error.
        """
        self.lasting = lasting
        if bool(self.property("calm")) != calm:
            self.setProperty("calm", calm)
            self.style().unpolish(self)
            self.style().polish(self)
            for label in (self.label, self.details):
                label.style().unpolish(label)
                label.style().polish(label)
        self._draw_icon()
        self.label.setText(text)
        self.details.setText(details)
        self.details_button.setChecked(False)
        self.details_button.setVisible(bool(details))
        self.choose_button.setVisible(offer_models)
        self.show()

    def recolour(self, colour: str) -> None:
        self._colour = colour
        self._draw_icon()

    def _draw_icon(self) -> None:
        calm = bool(self.property("calm"))
        colour = current_palette().muted if calm else getattr(self, "_colour", current_palette().error_text)
        self.icon.setPixmap(themed_icon("details" if calm else "error", colour).pixmap(ICON_PX, ICON_PX))
