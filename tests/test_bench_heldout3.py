"""Issue #50's third held-out set: well formed, and every labelled quote really is in its answer file."""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pytest

from tests.bench.docs_heldout3_corpus import KEYS, MANIFEST, answer_key, problems, write_corpus
from tests.bench.docs_heldout3_questions import KEYWORD, KEYWORD_SET, PARAPHRASE, PARAPHRASE_SET

ALL = PARAPHRASE_SET + KEYWORD_SET

# Programs a paraphrase must not name. "make" and "stress" are left out: they are also
# English words, and the paraphrases use "make" as the verb.
PROGRAMS = ("lsof", "gnupg", "gpg", "zstd", "node", "nodejs", "readline", "pip", "openssh", "ssh")
PROGRAMS += ("passwd", "expat", "tar", "tmux", "xz", "lzma")


def test_the_set_has_32_paraphrases_and_21_keyword_questions_over_17_files() -> None:
    assert len(MANIFEST) == len(KEYS) == 17
    assert len(PARAPHRASE) == 32 and len(KEYWORD) == 21
    assert {q.key for q in ALL} == KEYS  # every file answers something, every answer is a file
    assert len({q.text for q in ALL}) == 53
    assert all(q.quote.strip() for q in ALL)


def test_paraphrases_do_not_name_their_program() -> None:
    for q in PARAPHRASE_SET:
        for program in PROGRAMS:
            assert not re.search(rf"\b{re.escape(program)}\b", q.text.lower()), (program, q.text)


def _visible_text(path: Path) -> str:
    """What a reader sees, without any whitespace (HTML tags dropped), to find a quote in."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # make's NEWS is ISO-8859-1, as a real folder may hold
        text = data.decode("latin-1")
    if ".html" in path.name:
        text = html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"(?s)<(script|style)\b.*?</\1>", "", text)))
    return re.sub(r"\s+", "", text)


def test_every_quote_is_in_its_answer_file(tmp_path: Path) -> None:
    written, missing = write_corpus(tmp_path)
    if missing:
        pytest.skip("the held-out corpus is not on this machine: " + "; ".join(missing))
    assert sorted(p.name for p in written) == sorted(name for _, name, _ in MANIFEST)
    texts = {answer_key(p.name): _visible_text(p) for p in written}
    for q in ALL:
        assert re.sub(r"\s+", "", q.quote) in texts[q.key], (q.key, q.quote)


def test_a_file_missing_or_changed_leaves_the_corpus_unwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.bench.docs_heldout3_corpus as corpus

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


def test_no_file_is_one_another_set_already_uses() -> None:
    others = set()
    for module in ("docs_heldout_corpus", "docs_heldout2_corpus", "docs_debian_corpus"):
        text = (Path(__file__).parent / "bench" / f"{module}.py").read_text(encoding="utf-8")
        others |= set(re.findall(r'"([^"\s]+)"', text))
    for source, _, _ in MANIFEST:
        relative = source.removeprefix("/usr/share/doc/")
        assert source not in others and relative not in others, source
