"""Chat-template family detection from the template text alone (no rendering).

The family tells the engine which thinking and scaffolding formats to expect. Detection
is by distinctive literals; the order of the rules matters because several families
share ChatML's `<|im_start|>` (LFM2, Phi-4, Qwen3 with thinking).
"""

from __future__ import annotations

import re
from enum import StrEnum

from models.formats import PREFILL_OPENERS, closer_for


class TemplateFamily(StrEnum):
    CHATML = "chatml"
    QWEN3_THINKING = "qwen3-thinking"  # ChatML plus <think>…</think>
    LLAMA3 = "llama3"
    LLAMA2 = "llama2"
    MISTRAL = "mistral"
    GEMMA = "gemma"
    LFM2 = "lfm2"
    HARMONY = "harmony"  # GPT-OSS
    DEEPSEEK = "deepseek"
    PHI = "phi"
    GRANITE = "granite"
    COMMAND_R = "command-r"
    SEED_OSS = "seed-oss"
    GLM = "glm"
    GENERIC = "generic"  # a template Ember does not recognise
    NONE = "none"  # the file carries no template


def _all(*needles: str) -> tuple[str, ...]:
    return needles


# (family, any-of groups): the family matches when every literal of any one group occurs.
_RULES: tuple[tuple[TemplateFamily, tuple[tuple[str, ...], ...]], ...] = (
    (TemplateFamily.HARMONY, (_all("<|channel|>", "<|start|>"),)),
    (TemplateFamily.LFM2, (
        _all("<|tool_call_start|>"), _all("<|tool_list_start|>"),
        _all("<|startoftext|>", "<|im_start|>"),
    )),
    (TemplateFamily.PHI, (_all("<|im_sep|>"), _all("<|user|>", "<|assistant|>", "<|end|>"))),
    (TemplateFamily.DEEPSEEK, (_all("<｜Assistant｜>"), _all("<｜User｜>"))),
    (TemplateFamily.SEED_OSS, (_all("<seed:bos>"),)),
    (TemplateFamily.GLM, (_all("[gMASK]"),)),
    (TemplateFamily.GRANITE, (_all("<|start_of_role|>"),)),
    (TemplateFamily.COMMAND_R, (_all("<|START_OF_TURN_TOKEN|>"),)),
    (TemplateFamily.QWEN3_THINKING, (_all("<|im_start|>", "<think>"),)),
    (TemplateFamily.CHATML, (_all("<|im_start|>"),)),
    (TemplateFamily.LLAMA3, (_all("<|start_header_id|>"),)),
    (TemplateFamily.GEMMA, (_all("<start_of_turn>"), _all("<|turn>"))),
    (TemplateFamily.LLAMA2, (_all("[INST]", "<<SYS>>"),)),
    (TemplateFamily.MISTRAL, (_all("[INST]"),)),
)  # fmt: skip


def detect_family(template: str | None) -> TemplateFamily:
    """The family of a Jinja chat template; NONE without one, GENERIC when unrecognised."""
    if not template or not template.strip():
        return TemplateFamily.NONE
    for family, groups in _RULES:
        if any(all(n in template for n in group) for group in groups):
            return family
    return TemplateFamily.GENERIC


# Jinja string literals, single- or double-quoted, with backslash escapes.
_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"", re.DOTALL)


def _opens_thinking(literal: str) -> bool:
    for opener in PREFILL_OPENERS:
        at = literal.rfind(opener)
        if at >= 0 and closer_for(opener) not in literal[at:]:
            return True
    return False


def thinking_prefill(template: str | None) -> bool:
    """True when the generation prompt itself opens a thinking block.

    Such templates (Qwen3-Thinking-2507, QwQ, DeepSeek-R1-0528) end the prompt with
    `<think>\\n`, so the reply starts inside the reasoning and only `</think>` appears in
    the output. Detected from the literals after the last `add_generation_prompt`: one that
    opens `<think>` without closing it. Qwen3's hybrid template, which writes the empty
    pair `<think>\\n\\n</think>` to switch thinking off, does not count.
    """
    if not template:
        return False
    at = template.rfind("add_generation_prompt")
    if at < 0:
        return False
    for m in _LITERAL.finditer(template, at):
        literal = m.group(1) if m.group(1) is not None else m.group(2)
        if _opens_thinking(literal):
            return True
    return False
