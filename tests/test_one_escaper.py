"""One rule for untrusted text (models/text.py): every escaper Ember had gives one answer now.

The inputs are the review's (code-review-3 §4): ESC, U+2028, LRM, a tab and an undecodable
file-name byte, through the network ledger, the documents' names, the terminal's text and
cells and the window's labels.
"""

from __future__ import annotations

import json
import re

import pytest

from desktop.cli.guard import SafeStream
from engine.docs.names import shown as docs_shown
from engine.network.ledger import shown as ledger_shown
from models.text import UNSAFE, cell, escaped, is_safe, json_text, label, terminal

# input → (one visible run, terminal, cell, label)
CASES = {
    "a\x1bb": ("a\\u001bb", "a\\u001bb", "a\\u001bb", "ab"),
    "a\u2028b": ("a\\u2028b", "a\\u2028b", "a b", "a b"),
    "a\u200eb": ("a\\u200eb", "a\\u200eb", "a\\u200eb", "ab"),
    "a\tb": ("a\\tb", "a\tb", "a b", "a b"),
    "a\udcffb": ("a\\xffb", "a\\xffb", "a\\xffb", "ab"),
    "evil\u202egnp.exe": ("evil\\u202egnp.exe", "evil\\u202egnp.exe", "evil\\u202egnp.exe", "evilgnp.exe"),
    "one\r\ntwo\rthree": ("one\\r\\ntwo\\rthree", "one\r\ntwo\\rthree", "one two three", "one two three"),
    "plain — text é 中": ("plain — text é 中",) * 4,
}


@pytest.mark.parametrize(("text", "expected"), CASES.items())
def test_every_escaper_follows_the_one_rule(text: str, expected: tuple[str, str, str, str]) -> None:
    one_run, term, table, window = expected
    assert escaped(text) == docs_shown(text) == ledger_shown(text) == one_run
    assert terminal(text) == term
    assert cell(text) == table
    assert label(text) == window


def test_no_unsafe_character_survives_a_rendering() -> None:
    every = "".join(sorted(_unsafe_set())) + "".join(chr(c) for c in range(0xD800, 0xE000))
    for rendered in (escaped(every), cell(every), label(every)):
        assert is_safe(rendered), rendered[:80]
    assert set(terminal(every)) & _unsafe_set() <= {"\n", "\t"}
    assert not is_safe("a\u2029b") and not not is_safe("a b")


def _unsafe_set() -> set[str]:
    """Every unsafe character below the surrogates (all of them but those lie below U+2100)."""
    return {chr(c) for c in range(0x2100) if re.fullmatch(f"[{UNSAFE}]", chr(c))}


def test_json_through_the_terminal_stays_json() -> None:
    class Sink:
        text = ""

        def write(self, t: str) -> int:
            self.text += t
            return len(t)

    sink = Sink()
    value = {"name": "a\u2028b\u200ec\x1b", "path": "x\udcffy"}
    SafeStream(sink).write(json.dumps(json_text(value), ensure_ascii=False) + "\n")  # type: ignore[arg-type]
    assert json.loads(sink.text) == {"name": "a\u2028b\u200ec\x1b", "path": "x\\xffy"}
