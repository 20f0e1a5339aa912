"""The token meter beside the composer: "1,240 / 4,096", counted with the model's own tokenizer.

It counts what the next message would send: the conversation as the context policy keeps it,
plus the draft, with the passages of the documents attached to it as the turn will put them in
(`ConversationDocs.counted`). Typing restarts a short timer; when it fires, the count runs on the engine's
counting thread (`ConversationScreen.measure_draft`), never on the UI thread, and only the newest
draft's result is shown. Its menu chooses the conversation's context policy.
"""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtGui import QAction, QActionGroup, QShowEvent
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

from desktop.core.controller import ChatController
from desktop.qt.look.menu_heading import add_heading
from desktop.qt.look.theme import SPACE_MD
from engine.api.conversations import Meter
from engine.api.values import ContextPolicy

DEBOUNCE_MS = 200  # a pause in typing this long triggers a count
UNKNOWN = "– / –"
RESERVED_CTX = 32_768  # the count's room before a model says its own context size


class ContextMeter(QToolButton):
    """Shows the next prompt's size against the context (the window's one count); its menu picks
    the context policy."""

    def __init__(self, controller: ChatController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ContextMeter")
        self.setAccessibleName("Context used")
        self.setAutoRaise(True)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.controller = controller
        self._draft = ""
        self._asked = 0  # drafts asked about; a result for an older one is dropped
        self._running = False
        self._cut = False  # earlier messages are outside the context
        self.meter: Meter | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._tick)
        self._task: asyncio.Task[None] | None = None
        self._menu, self._actions = self._make_menu()
        self.setMenu(self._menu)
        self.setText(UNKNOWN)
        self._keep_width(0)  # from the first paint: a backend that never counts keeps the same layout

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._keep_width(self.meter.n_ctx if self.meter is not None else 0)  # larger text, the same room

    def _make_menu(self) -> tuple[QMenu, dict[ContextPolicy, QAction]]:
        menu = QMenu(self)
        add_heading(menu, "When the conversation is full")
        group = QActionGroup(menu)
        actions: dict[ContextPolicy, QAction] = {}
        for policy in ContextPolicy:
            action = QAction(policy.label, menu)
            action.setCheckable(True)
            action.triggered.connect(lambda _checked=False, p=policy: self.choose(p))
            group.addAction(action)
            menu.addAction(action)
            actions[policy] = action
        menu.aboutToShow.connect(self._check_current)
        return menu, actions

    def _check_current(self) -> None:
        self._actions[self.controller.screen.policy].setChecked(True)

    def set_cut(self, cut: bool) -> None:
        """Whether earlier messages fall outside the context (the count is then of the rest)."""
        self._cut = cut
        if self.meter is not None:
            self.show_meter(self.meter)

    def choose(self, policy: ContextPolicy) -> None:
        self.controller.screen.set_policy(policy)
        self.recount()

    # -- counting --------------------------------------------------------------------------

    def draft_changed(self, text: str) -> None:
        self._draft = text
        self._timer.start()

    def recount(self) -> None:
        """Count again soon (the conversation, the model or the policy changed)."""
        self._timer.start()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.recount()

    def _tick(self) -> None:
        # Nobody sees a hidden meter (a closed window, whose loop may be gone): count when shown.
        if not self.isVisible():
            return
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
        if not loop.is_closed():
            self._task = loop.create_task(self._count())

    async def _count(self) -> None:
        if self._running:  # one count at a time; the newest draft is counted when it ends
            self._timer.start()
            return
        self._running = True
        self._asked += 1
        asked, draft = self._asked, self._draft
        try:
            meter = await self.controller.screen.measure_draft(draft)
        finally:
            self._running = False
        if asked == self._asked:
            self.show_meter(meter)

    def streaming(self, tokens: int) -> None:
        """A reply streams: the count moves with it (the next recount, when it ends, is exact).
        Not while a recount is due: a regenerate's meter still holds the version it replaces."""
        if self.meter is None or tokens <= 0 or self._timer.isActive() or self._running:
            return
        text = f"{self.meter.used + tokens:,} / {self.meter.n_ctx:,}"
        self.setText(text)
        self.setToolTip(f"About {self.meter.used + tokens:,} of {self.meter.n_ctx:,} tokens, with the reply so far")

    def _cut_note(self) -> str:
        return " · earlier left out" if self._cut else ""

    def _keep_width(self, n_ctx: int) -> None:
        """As wide as the largest count this context allows, and never narrower than a usual
        count: the figure changes with every token while a reply streams, and from "– / –" to a
        count when the model has loaded, and the composer's layout must not jump with it."""
        widest = f"{max(n_ctx, RESERVED_CTX):,} / {max(n_ctx, RESERVED_CTX):,}" + self._cut_note()
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(widest) + 2 * SPACE_MD)

    def show_meter(self, meter: Meter | None) -> None:
        self.meter = meter
        if meter is None:
            self._keep_width(0)  # the room a count takes, so the box keeps its layout when one comes
            self.setText(UNKNOWN)
            self.setToolTip("The loaded model does not report token counts")
            self.setProperty("over", False)
            return
        text = meter.text + self._cut_note()
        self.setText(text)
        self._keep_width(meter.n_ctx)
        outside = (
            "\nEarlier messages are outside the context; the count is of what the model still sees."
            if self._cut
            else ""
        )
        documents = f"attached documents {meter.documents:,}; " if meter.documents else ""
        tip = (
            f"Next request: {meter.used:,} of {meter.n_ctx:,} tokens (draft {meter.draft:,}; {documents}"
            f"{meter.reserve:,} kept for the reply).{outside}\n"
            f"Context policy: {self.controller.screen.policy.label}"
        )
        self.setToolTip(f"{meter.problem}\n\n{tip}" if meter.problem else tip)
        self.setProperty("over", bool(meter.problem))
        self.style().unpolish(self)
        self.style().polish(self)
