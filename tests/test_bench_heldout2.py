"""Issue #50's second held-out set: well formed, and every labelled quote really is in its answer file."""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pytest

from tests.bench.docs_heldout2_corpus import KEYS, MANIFEST, answer_key, problems, write_corpus
from tests.bench.docs_heldout2_questions import KEYWORD, KEYWORD_SET, PARAPHRASE, PARAPHRASE_SET

ALL = PARAPHRASE_SET + KEYWORD_SET


def test_the_set_has_40_paraphrases_and_25_keyword_questions_over_20_files() -> None:
    assert len(MANIFEST) == len(KEYS) == 20
    assert len(PARAPHRASE) == 40 and len(KEYWORD) == 25
    assert {q.key for q in ALL} == KEYS  # every file answers something, every answer is a file
    assert len({q.text for q in ALL}) == 65


def test_paraphrases_do_not_name_their_program() -> None:
    for q in PARAPHRASE_SET:
        program = q.key.split("-")[0].lower()
        assert not re.search(rf"\b{re.escape(program)}\b", q.text.lower()), q.text


def _visible_text(path: Path) -> str:
    """What a reader sees, without any whitespace (HTML tags dropped), to find a quote in."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    text = data.decode("utf-8")
    if ".html" in path.name:
        text = html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"(?s)<(script|style)\b.*?</\1>", "", text)))
    return re.sub(r"\s+", "", text)


def test_every_quote_is_in_its_answer_file(tmp_path: Path) -> None:
    written, missing = write_corpus(tmp_path)
    if missing:
        pytest.skip("the held-out corpus is not on this machine: " + "; ".join(missing))
    texts = {answer_key(p.name): _visible_text(p) for p in written}
    for q in ALL:
        assert re.sub(r"\s+", "", q.quote) in texts[q.key], (q.key, q.quote)


def test_a_file_missing_or_changed_leaves_the_corpus_unwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.bench.docs_heldout2_corpus as corpus

    changed = tmp_path / "README"
    changed.write_text("not the file the questions were written on\n", encoding="utf-8")
    source, name, digest = corpus.MANIFEST[0]
    monkeypatch.setattr(
        corpus, "MANIFEST", ((str(changed), name, digest), (str(tmp_path / "absent.gz"), "absent.gz", digest))
    )
    written, missing = write_corpus(tmp_path / "out")
    assert written == [] and not (tmp_path / "out").exists()
    assert missing == [
        f"{changed}: differs from the file the questions were written on (SHA-256)",
        f"{tmp_path / 'absent.gz'}: missing",
    ]
    assert problems() == missing
    assert source.startswith("/")
