"""Argument types for the `ember` parsers: values out of range are refused with one line.

Each function is an argparse `type=`: it returns the converted value or raises
`ArgumentTypeError`, which the parser prints as `ember: argument --x: …` (exit 2).
"""

from __future__ import annotations

import argparse
import math
import os

from engine.api.text import is_safe

MAX_ID = 2**63 - 1  # SQLite's INTEGER range
MAX_CTX = 1 << 20  # no GGUF model trains on more than a million tokens yet
MAX_TEMPERATURE = 5.0


def _refuse(message: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(message)


def text_arg(text: str) -> str:
    """Text as typed; refused when the terminal passed bytes that are not UTF-8.

    Python decodes such bytes in argv to lone surrogates, which cannot be encoded again
    (tokenizer, database), so they are refused here, before anything starts.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse("the text is not valid UTF-8 (check the terminal's encoding)") from None
    return text


def prompt_arg(text: str) -> str:
    """A message to send: valid UTF-8 and not empty or only whitespace."""
    text = text_arg(text)
    if not text.strip():
        raise _refuse("the message is empty")
    return text


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _refuse(f"expected a whole number, got {text!r}") from None


def id_arg(text: str) -> int:
    """A stored conversation id: a positive whole number within the database's range."""
    value = _whole(text)
    if not 1 <= value <= MAX_ID:
        raise _refuse(f"no conversation has the id {text!r} (ids are positive whole numbers)")
    return value


def threads_arg(text: str) -> int:
    """CPU threads: 1 to this machine's CPU count (more only slows decoding down)."""
    value = _whole(text)
    cpus = os.cpu_count() or 1
    if not 1 <= value <= cpus:
        raise _refuse(f"expected 1 to {cpus} (this machine's CPU count), got {text!r}")
    return value


def ctx_arg(text: str) -> int:
    """A context length in tokens: 128 (what the model settings accept) to 1,048,576."""
    from engine.api.models import MIN_CONTEXT_LENGTH  # not at start-up: it imports the backends

    value = _whole(text)
    if not MIN_CONTEXT_LENGTH <= value <= MAX_CTX:
        raise _refuse(f"expected {MIN_CONTEXT_LENGTH} to {MAX_CTX:,} tokens, got {text!r}")
    return value


def temperature_arg(text: str) -> float:
    """A sampling temperature: a finite number from 0 (greedy) to 5."""
    try:
        value = float(text)
    except ValueError:
        raise _refuse(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_TEMPERATURE):
        raise _refuse(f"expected a number from 0 to {MAX_TEMPERATURE:g}, got {text!r}")
    return value


def seed_arg(text: str) -> int:
    """A sampling seed: 0 to 2**32 - 1."""
    value = _whole(text)
    if not 0 <= value < 2**32:
        raise _refuse(f"expected 0 to {2**32 - 1}, got {text!r}")
    return value


def title_arg(text: str) -> str:
    """A conversation title: one line of printable text."""
    text = text_arg(text)
    if not is_safe(text):
        raise _refuse("a title must be one line without control characters")
    if not text.strip():
        raise _refuse("the title is empty")
    return text
