"""The log probabilities of the tokens that became a reply's content, and of no others.

OpenAI's `logprobs.content` covers the content's tokens only. Which part of the reply a token
becomes is known only once the guardrail has seen it: it may open or continue the thinking, wait
while a marker might be starting, or belong to tool-call markup that is stripped. Its entries wait
here until the pipeline decides: content carries them ahead of itself; thinking, stripped markup
and a control token that printed nothing drop them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from engine.events import ContentDelta, Piece, ThinkingDelta, TokenLogprob, TokenLogprobs
from engine.reply.pipeline import Delta


class ContentLogprobs:
    def __init__(self) -> None:
        self._pending: list[TokenLogprob] = []

    def sort(self, piece: Piece | None, deltas: Sequence[Delta], stripped: bool) -> Iterator[Delta | TokenLogprobs]:
        """`deltas` (what the pipeline made of `piece`; None: its flush), each content delta
        behind the entries of the tokens it stands for. `stripped`: the pipeline dropped markup."""
        if piece is not None:
            self._pending.extend(piece.logprobs)
        for delta in deltas:
            if isinstance(delta, ContentDelta) and self._pending:
                yield TokenLogprobs(tuple(self._pending))
                self._pending.clear()
            elif isinstance(delta, ThinkingDelta):
                self._pending.clear()
            yield delta
        if not deltas and (stripped or (piece is not None and piece.special)):
            self._pending.clear()
