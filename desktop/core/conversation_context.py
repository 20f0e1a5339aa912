"""How much of the open conversation the model sees: its context policy, the composer's meter, the cut."""

from __future__ import annotations

from desktop.core.chat_views import ChatView, ContextView
from desktop.core.conversation_docs import ConversationDocs
from desktop.core.conversation_screen import ConversationScreen
from desktop.core.history_session import HISTORY_ERRORS, Branch
from desktop.core.model_slot import ModelSlot
from engine.api.conversations import Meter
from engine.api.session import Engine
from engine.api.values import ContextPolicy, Fit


class ConversationContext:
    """The open conversation measured against the loaded model's context window."""

    def __init__(
        self, engine: Engine, models: ModelSlot, screen: ConversationScreen, documents: ConversationDocs, view: ChatView
    ) -> None:
        self.engine = engine
        self.models = models
        self.screen = screen
        self.session = screen.session
        self.documents = documents
        self.view = view

    @property
    def policy(self) -> ContextPolicy:
        """This conversation's policy (else the model's default)."""
        try:
            return self.session.policy(self.models.turn_settings())
        except HISTORY_ERRORS:
            return self.models.turn_settings().context_policy

    def set_policy(self, policy: ContextPolicy) -> None:
        """Use `policy` for this conversation from its next message (saved in its settings)."""
        self.screen.save_settings("Couldn't save the context policy", context_policy=policy)

    async def measure_draft(self, draft: str) -> Meter | None:
        """The composer meter for `draft` (None when the model cannot count or none is loaded)."""
        documents = await self.documents.counted()
        try:
            return await self.session.meter_async(self.engine, draft, self.models.turn_settings(), documents)
        except HISTORY_ERRORS:
            return None

    async def refresh(self, branch: Branch | None = None) -> None:
        """Show where the model's view of the open conversation begins (after opening it: its `branch`)."""
        path = None if branch is None else [item.message for item in branch]
        try:
            fitted = await self.session.context_cut_async(self.engine, self.models.turn_settings(), path)
        except HISTORY_ERRORS:
            return
        if fitted is not None:
            self.show(fitted)

    def show(self, fit: Fit) -> None:
        if isinstance(self.view, ContextView):
            self.view.show_context_cut(fit.resume_turn, fit.kept_head)
