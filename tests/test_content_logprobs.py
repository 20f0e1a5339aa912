"""Which tokens' log probabilities reach a client: the content's, through the real guardrail."""

from __future__ import annotations

from engine.events import ContentDelta, Piece, TokenLogprob, TokenLogprobs
from engine.reply.pipeline import ReplyPipeline
from engine.turns.content_logprobs import ContentLogprobs


def _sorted(script: list[tuple[str, bool]]) -> tuple[list[str], str]:
    """(the tokens whose entries were sent, the content) for pieces (text, special)."""
    pipeline, logprobs = ReplyPipeline(), ContentLogprobs()
    out: list[object] = []
    for text, special in script:
        piece = Piece(text, special=special, logprobs=(TokenLogprob(text, (), -1.0),))
        before = pipeline.stripped_chars
        deltas = pipeline.feed(piece)
        out += logprobs.sort(piece, deltas, pipeline.stripped_chars > before)
    out += logprobs.sort(None, pipeline.flush(), False)
    tokens = [t.token for e in out if isinstance(e, TokenLogprobs) for t in e.tokens]
    return tokens, "".join(e.text for e in out if isinstance(e, ContentDelta))


def test_stripped_tool_markup_sends_no_entries() -> None:
    tokens, content = _sorted(
        [("Sure", False), ("<|tool_call_start|>", True), ("[f()]", False), ("<|tool_call_end|>", True), (".", False)]
    )
    assert content == "Sure." and tokens == ["Sure", "."]


def test_a_held_marker_prefix_that_turns_out_text_keeps_its_entries() -> None:
    tokens, content = _sorted([("a <", False), ("b", False)])
    assert content == "a <b" and tokens == ["a <", "b"]


def test_an_end_of_turn_token_sends_nothing() -> None:
    tokens, content = _sorted([("Yes", False), ("<|im_end|>", True)])
    assert content == "Yes" and tokens == ["Yes"]
