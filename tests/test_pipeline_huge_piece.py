"""A huge piece goes through the reply pipeline in slices, with the same result (issue #14)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import Piece
from engine.reply.pipeline import MAX_PIECE_CHARS, ReplyPipeline

MARKERS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "x" * 50, "word "]


def _run(pieces: list[str]) -> tuple[str, str]:
    pipeline = ReplyPipeline()
    for text in pieces:
        pipeline.feed(Piece(text))
    pipeline.flush()
    return pipeline.content, pipeline.thinking


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(MARKERS), min_size=1, max_size=40), st.integers(0, MAX_PIECE_CHARS))
def test_one_huge_piece_equals_the_same_text_in_small_pieces(parts: list[str], pad: int) -> None:
    # Padding moves the markers across the slice boundaries.
    text = "p" * pad + "".join(parts) + "q" * MAX_PIECE_CHARS
    small = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert _run([text]) == _run(small)


def test_a_megabyte_piece_is_one_content_delta() -> None:
    pipeline = ReplyPipeline()
    deltas = pipeline.feed(Piece("x" * 1_000_000))
    assert [len(d.text) for d in deltas] == [1_000_000]
