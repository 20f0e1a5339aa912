"""The one table of model formats: every consumer is built from it, so they cannot drift."""

from __future__ import annotations

import pytest

from engine.events import ContentDelta, Piece, ThinkingDelta
from engine.reply.pipeline import ReplyPipeline
from engine.reply.reasoning import ANSWER_HEADERS, THINKING_FORMATS
from engine.reply.scaffolding import DEFAULT_REGISTRY
from models.formats import (
    BY_KEY,
    FORMATS,
    PREFILL_OPENERS,
    MarkerKind,
    prefill_opener,
    thinking_formats,
    vocabulary_markers,
)
from models.gguf.templates import thinking_prefill
from tests.reply_text import registry_markers, split_thinking

KINDS = vocabulary_markers()  # what `ember models` scans a vocabulary for
ALL_MARKERS = frozenset(KINDS)


def test_keys_are_unique_and_stable() -> None:
    assert len(BY_KEY) == len(FORMATS)
    assert {"hermes", "harmony", "mistral", "llama3", "deepseek", "seed-oss", "kimi-k2"} <= set(BY_KEY)


def test_the_guardrail_the_splitter_and_the_vocabulary_scan_share_the_table() -> None:
    # Everything the guardrail strips and the splitter consumes is reported by `ember models`.
    assert registry_markers() <= ALL_MARKERS
    assert {m for f in THINKING_FORMATS for m in (f.opener, f.closer)} <= ALL_MARKERS
    assert THINKING_FORMATS == thinking_formats()
    assert {p.start for p in DEFAULT_REGISTRY} == {s.start for f in FORMATS for s in f.tool_calls}
    assert ANSWER_HEADERS == {h for f in FORMATS for h in f.answer_headers}
    assert {p.family for p in DEFAULT_REGISTRY} <= {f.label for f in FORMATS}


@pytest.mark.parametrize("marker", ["<longcat_tool_call>", "<｜DSML｜function_calls>", "<|tool_calls|>"])
def test_markers_the_guardrail_strips_are_in_the_vocabulary_scan(marker: str) -> None:
    assert marker in registry_markers()
    assert marker in ALL_MARKERS and KINDS[marker] is MarkerKind.TOOL_CALL


def test_marker_kinds() -> None:
    assert KINDS["<think>"] is KINDS["<|start|>"] is MarkerKind.THINKING
    assert KINDS["<|call|>"] is MarkerKind.TOOL_CALL


@pytest.mark.parametrize("opener", PREFILL_OPENERS)
def test_every_prefill_opener_is_detected_and_routed_to_thinking(opener: str) -> None:
    closer = next(f.closer for f in THINKING_FORMATS if f.opener == opener)
    template = f"{{% if add_generation_prompt %}}{{{{ 'assistant\\n{opener}\\n' }}}}{{% endif %}}"
    assert thinking_prefill(template)  # what the picker reports…
    assert prefill_opener(f"<|im_start|>assistant\n{opener}\n") == opener  # …is what the engine sees
    pipeline = ReplyPipeline(prefilled=opener)
    deltas = [
        *pipeline.feed(Piece("reasoning")),
        *pipeline.feed(Piece(closer)),
        *pipeline.feed(Piece("answer")),
        *pipeline.flush(),
    ]
    assert ThinkingDelta("reasoning") in deltas and pipeline.content == "answer"
    assert all(closer not in d.text for d in deltas if isinstance(d, ContentDelta))


def test_seed_think_prefill_keeps_reasoning_out_of_the_answer() -> None:
    assert "<seed:think>" in PREFILL_OPENERS
    assert split_thinking("plan</seed:think>Hi", prefilled="<seed:think>") == ("plan", "Hi")


def test_no_prefill() -> None:
    assert prefill_opener("<|im_start|>assistant\n") == ""
    assert prefill_opener("<think>\n\n</think>\n\n") == ""
