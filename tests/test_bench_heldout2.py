"""Issue #50's second held-out set: well formed, and every labelled quote really is in its answer file."""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pytest

import tests.bench.docs_heldout2 as bench
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


def test_the_bench_skips_the_set_with_a_note_when_its_corpus_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "problems", lambda: ["/usr/share/doc/bc/README: missing"])
    said: list[str] = []
    notes: list[str] = []
    out = bench.measure_heldout2(said.append, notes)
    assert out == {"docs_heldout2_skipped": ["/usr/share/doc/bc/README: missing"]}
    assert notes == said and "second held-out set skipped" in notes[0] and "bc/README: missing" in notes[0]
    assert bench.report_row(out, lambda label, value: f"{label}: {value}") == []


def test_the_bench_row_gives_both_kinds_recall_and_mrr() -> None:
    figures = {"recall_at_1": 0.5, "recall_at_5": 0.75, "mrr": 0.6}
    r = {
        "docs_heldout2_keyword": figures,
        "docs_heldout2_paraphrase": figures | {"recall_at_1": 0.4},
        "docs_heldout2_files": 20,
        "docs_heldout2_passages": 600,
    }
    assert bench.report_row(r, lambda label, value: f"{label}: {value}") == [
        "docs: second held-out set: keyword 0.5/0.75/0.6, paraphrase 0.4/0.75/0.6 "
        "(recall@1/@5/MRR, defaults; 20 files, 600 passages)"
    ]
