"""Prompt formats for a GGUF that carries no chat template: usually a base model.

A base model continues text; it never learned a chat format's turn markers. Prompted in
Gemma's own format, Gemma 3 270M (the base model) echoes the question and then junk
until the token limit, and never writes `<end_of_turn>`; prompted as a plain transcript
(`engine.llama.plain_transcript`) it answers "The capital of France is Paris." and
goes on with the next `User:` line, where the reply ends. So a file without a template
gets the plain transcript, unless its own name says it was instruction-tuned (a chat
model whose template was lost in conversion: `general.finetune` "it", "Instruct", …).

Such a file gets one of llama.cpp's built-in formats (`llama_chat_apply_template`), the
one its architecture's models use, and only when that format's markers are special tokens
of its own vocabulary: written as plain text (ChatML's `<|im_start|>` in Gemma's
vocabulary) the model copies them, they never end the reply, and they leak into it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

BASE_MODEL_NOTE = (
    "This file has no chat template: it looks like a base model, which continues text rather than answering"
)


@dataclass(frozen=True, slots=True)
class BuiltinFormat:
    """One of llama.cpp's built-in chat formats, and what it needs from a vocabulary."""

    name: str  # llama.cpp's own name for it
    markers: tuple[str, ...]  # each must be one special token, or the format is not used
    turn_openers: tuple[str, ...]  # generated, they start another turn: the reply is over


FORMATS: Mapping[str, BuiltinFormat] = {f.name: f for f in (
    BuiltinFormat("gemma", ("<start_of_turn>", "<end_of_turn>"), ("<start_of_turn>",)),
    BuiltinFormat("llama3", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"), ("<|start_header_id|>",)),
    BuiltinFormat("chatml", ("<|im_start|>", "<|im_end|>"), ("<|im_start|>",)),
    BuiltinFormat("phi3", ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
                  ("<|system|>", "<|user|>", "<|assistant|>")),
    BuiltinFormat("mistral-v3", ("[INST]", "[/INST]"), ("[INST]",)),
    BuiltinFormat("granite", ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"), ("<|start_of_role|>",)),
    BuiltinFormat("command-r", ("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
                                "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>"), ("<|START_OF_TURN_TOKEN|>",)),
    BuiltinFormat("deepseek3", ("<｜User｜>", "<｜Assistant｜>"), ("<｜User｜>",)),
)}  # fmt: skip

# general.architecture -> the formats its instruction-tuned models use, the likeliest first.
# "llama" covers Llama 2/3, Mistral and SmolLM files alike: the vocabulary decides.
ARCHITECTURE_FORMATS: Mapping[str, tuple[str, ...]] = {
    "gemma": ("gemma",), "gemma2": ("gemma",), "gemma3": ("gemma",), "gemma3n": ("gemma",),
    "llama": ("llama3", "mistral-v3", "chatml"), "llama4": ("llama3",),
    "qwen2": ("chatml",), "qwen2moe": ("chatml",), "qwen3": ("chatml",), "qwen3moe": ("chatml",),
    "smollm3": ("chatml",), "internlm2": ("chatml",),
    "phi3": ("phi3", "chatml"),
    "granite": ("granite",), "granitemoe": ("granite",),
    "command-r": ("command-r",), "cohere2": ("command-r",),
    "deepseek2": ("deepseek3",),
}  # fmt: skip


# Words of a model's name that mean instruction tuning ("gemma-3-1b-it", "Llama-3.2-1B-Instruct").
_TUNED_WORDS = frozenset({"it", "instruct", "chat", "sft", "dpo", "orpo", "rlhf", "assistant"})
_WORD = re.compile(r"[a-z0-9]+")


def instruction_tuned(names: Iterable[str | None]) -> bool:
    """Whether any of a file's names (general.finetune, general.name, …) says it was tuned to chat."""
    return any(w in _TUNED_WORDS or w.startswith("instruct") for n in names if n for w in _WORD.findall(n.lower()))


def builtin_format(architecture: str, is_special: Callable[[str], bool]) -> BuiltinFormat | None:
    """The built-in format for a template-less chat model of `architecture`, or None.

    `is_special(text)` tells whether `text` is one special (control or user-defined) token
    of the file's vocabulary.
    """
    for name in ARCHITECTURE_FORMATS.get(architecture, ()):
        fmt = FORMATS[name]
        if all(is_special(m) for m in fmt.markers):
            return fmt
    return None


def candidate_markers(architecture: str) -> frozenset[str]:
    """Every marker `builtin_format` may ask about for `architecture` (a vocabulary scan's targets)."""
    return frozenset(m for name in ARCHITECTURE_FORMATS.get(architecture, ()) for m in FORMATS[name].markers)
