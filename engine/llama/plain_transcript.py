"""A conversation as a plain transcript, for a GGUF with no chat template and no built-in format.

A base model continues text. Given

    User: What is the capital of Japan?
    Assistant:

it writes the answer and, as a transcript goes on, the next `User:` line; that line ends
the reply (the label is a stop text, never shown). Earlier turns stay in the transcript,
so a conversation of several turns reads as one. All of it is tokenized as plain text:
a user's `<start_of_turn>` stays text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.llama.template import Segment

SOURCE = "plain transcript: User and Assistant lines"
LABELS = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}
# A new line that opens another turn: the reply before it is complete.
STOP_TEXTS = tuple(f"\n{label}:" for label in LABELS.values())
ANSWER = "Assistant:"


class PlainTranscript:
    """A `PromptFormat` with no markup: labelled lines, then `Assistant:` for the reply."""

    source = SOURCE
    stop_markers: tuple[str, ...] = ()
    stop_texts = STOP_TEXTS

    def segments(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None
    ) -> list[Segment]:
        """One segment of plain text: the labels hold no special tokens, and no message text
        may become one (tokenized apart, an SPM vocabulary would start every piece with a space)."""
        return [Segment(self.render(messages), trusted=False)]

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        lines: list[str] = []
        for m in messages:
            role = str(m.get("role") or "user")
            content = str(m.get("content") or "").strip()
            if role == "system":  # the transcript's preamble, unlabelled
                lines += [content, ""] if content else []
                continue
            lines.append(f"{LABELS.get(role, role.capitalize())}: {content}".rstrip())
        return "\n".join([*lines, ANSWER])
