"""Documents in the prompt: whole when they fit (measured by the caller's exact count), else retrieved passages."""

from __future__ import annotations

import random
from pathlib import Path

from doc_fixtures import filler, write_pdf

from engine.backends.scripted import ScriptedBackend
from engine.docs.context import INSTRUCTION, build_context
from engine.docs.fit import with_documents
from engine.docs.sources import Attachments


def _attach(tmp_path: Path, *files: tuple[str, str]) -> Attachments:
    paths = []
    for name, text in files:
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    attachments, problems = Attachments.load(paths)
    assert problems == []
    return attachments


def _words_fit(limit: int):  # type: ignore[no-untyped-def]
    return lambda content: len(content.split()) <= limit


def test_a_small_document_goes_in_whole_with_one_source(tmp_path: Path) -> None:
    text = "# Plan\n\nWe ship on Friday.\n\nThe budget is 40k."
    attachments = _attach(tmp_path, ("plan.md", text))
    ctx = build_context("When do we ship?", [attachments], _words_fit(1000), max_chars=100_000)
    assert ctx.whole and len(ctx.passages) == 1
    ref = ctx.passages[0]
    assert (ref.n, Path(ref.path).name, ref.page, ref.start, ref.end) == (1, "plan.md", None, 0, len(text))
    assert ref.text == text
    assert ctx.content == f"{INSTRUCTION}\n\n[1] plan.md\n{text}\n\nQuestion: When do we ship?"


def test_overlapping_passages_are_joined_back_into_the_whole_text(tmp_path: Path) -> None:
    text = filler(random.Random(5), 2000).strip()
    attachments = _attach(tmp_path, ("long.md", text))
    assert attachments.index.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 5
    whole = attachments.whole(1_000_000)
    assert whole is not None and [w.text for w in whole] == [text]


def test_a_document_too_big_for_the_context_is_retrieved_from(tmp_path: Path) -> None:
    body = filler(random.Random(9), 6000)
    cut = body.index("\n\n", len(body) // 3)
    body = body[:cut] + "\n\nThe launch code is PERSIMMON-7.\n\n" + body[cut + 2 :]
    attachments = _attach(tmp_path, ("big.md", body))
    ctx = build_context("What is the launch code?", [attachments], _words_fit(900), max_chars=1_000_000)
    assert not ctx.whole
    assert 1 <= len(ctx.passages) <= 12
    assert "PERSIMMON-7" in ctx.passages[0].text
    assert [p.n for p in ctx.passages] == list(range(1, len(ctx.passages) + 1))
    assert len(ctx.content.split()) <= 900
    assert body[ctx.passages[0].start : ctx.passages[0].end] == ctx.passages[0].text


def test_pdf_pages_are_cited_by_page(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "m.pdf", ["Cover.", "Returns are accepted within 30 days."])
    attachments, _ = Attachments.load([pdf])
    ctx = build_context("returns?", [attachments], _words_fit(1000), max_chars=100_000)
    assert [(p.n, p.page) for p in ctx.passages] == [(1, 1), (2, 2)]
    assert "[2] m.pdf, page 2\nReturns are accepted" in ctx.content


def test_unreadable_attachments_are_one_line_each_and_the_rest_is_used(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("Fine text about herons.")
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    attachments, problems = Attachments.load([tmp_path / "ok.md", tmp_path / "img.png", tmp_path / "gone.txt"])
    assert problems == [
        "gone.txt: not found",
        "img.png: unsupported type (.png); Ember reads text, Markdown, source code, HTML, PDF, DOCX and EPUB "
        "(also as .gz, .bz2, .xz)",
    ]
    assert len(attachments) == 1


def test_with_documents_measures_through_the_backend_and_leaves_room_for_the_reply(tmp_path: Path) -> None:
    body = filler(random.Random(11), 3000) + "\n\nThe password hint is aubergine.\n"
    attachments = _attach(tmp_path, ("notes.md", body))
    backend = ScriptedBackend.from_texts("ok")
    backend.n_ctx = 1200
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the hint?"}]
    fitted, ctx = with_documents(backend, messages, [attachments], max_tokens=200)  # type: ignore[arg-type]
    assert fitted[0] == messages[0] and fitted[-1]["content"] == ctx.content
    assert not ctx.whole and "aubergine" in ctx.passages[0].text
    assert backend.count_prompt_tokens(fitted) <= 1200 - 200
    # the same question with room for everything: the document goes in whole
    backend.n_ctx = 20_000
    _, whole = with_documents(backend, messages, [attachments], max_tokens=200)  # type: ignore[arg-type]
    assert whole.whole and len(whole.passages) == 1
