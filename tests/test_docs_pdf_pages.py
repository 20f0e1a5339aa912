"""A long PDF read by this thread and helper processes: same pages, same order, nothing lost."""

from __future__ import annotations

import io
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.docs import pdf_pages
from engine.docs.pdf_child import ERROR, LENGTH, TEXT, PageUnreadable, _answer, pypdfium2
from engine.docs.pdf_pages import GROUP, WINDOW, _Board, _Helper, page_texts
from tests.doc_fixtures import filler, write_pdf

PAGES = 5 * GROUP + 3  # a last group that is not full


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(4)
    path = tmp_path_factory.mktemp("pdf") / "long.pdf"
    return write_pdf(path, [f"Page {i + 1}. " + filler(rng, 30) for i in range(PAGES)])


@pytest.fixture
def helped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Helpers start at once, whatever the pace; the list gets each group a helper read.

    This thread reads small pages far faster than a helper starts, so once helpers were started
    it begins its next group only when one of them has read a group (or after 60 s): the helpers'
    share is then certain, not a race.
    """
    monkeypatch.setattr(pdf_pages, "HELP_AFTER_S", 0.0)
    groups: list[int] = []
    started: list[_Helper] = []
    ask, init, read_here = _Helper._ask, _Helper.__init__, pdf_pages.page_text

    def counted(self: _Helper, stdin: Any, stdout: Any, group: int) -> Any:
        pages = ask(self, stdin, stdout, group)
        groups.append(group)
        return pages

    def kept(self: _Helper, path: Path, board: _Board) -> None:
        init(self, path, board)
        started.append(self)

    def waits_for_a_helper(pdf: Any, index: int) -> str:
        deadline = time.monotonic() + 60
        while started and index % GROUP == 0 and not groups and time.monotonic() < deadline:
            time.sleep(0.01)
        return read_here(pdf, index)

    monkeypatch.setattr(_Helper, "_ask", counted)
    monkeypatch.setattr(_Helper, "__init__", kept)
    monkeypatch.setattr(pdf_pages, "page_text", waits_for_a_helper)
    return groups


def _read(path: Path, helpers: int) -> list[tuple[int, Any]]:
    pdf = pypdfium2().PdfDocument(str(path))
    try:
        return list(page_texts(pdf, path, lambda: False, helpers))
    finally:
        pdf.close()


def test_pages_read_with_helpers_are_the_pages_read_alone(long_pdf: Path, helped: list[int]) -> None:
    alone = _read(long_pdf, helpers=0)
    assert not helped
    together = _read(long_pdf, helpers=2)
    assert together == alone
    assert [i for i, _ in together] == list(range(PAGES))
    assert all(isinstance(t, str) and t.startswith(f"Page {i + 1}.") for i, t in together)
    assert helped, "no helper read a group"


def test_a_helper_killed_midway_loses_no_page(long_pdf: Path, helped: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ask = _Helper._ask  # the counting one

    def dies_after_one(self: _Helper, stdin: Any, stdout: Any, group: int) -> Any:
        if helped:
            assert self._proc is not None
            self._proc.kill()
        return ask(self, stdin, stdout, group)

    monkeypatch.setattr(_Helper, "_ask", dies_after_one)
    pages = _read(long_pdf, helpers=1)
    assert [i for i, _ in pages] == list(range(PAGES))
    assert len(helped) == 1  # it read one group, then died; this thread read the rest


def test_a_helper_that_cannot_start_loses_no_page(long_pdf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_pages, "HELP_AFTER_S", 0.0)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    asked: list[int] = []
    monkeypatch.setattr(_Helper, "_ask", lambda self, stdin, stdout, group: asked.append(group))
    assert [i for i, _ in _read(long_pdf, helpers=1)] == list(range(PAGES))
    assert not asked


def test_a_helper_finding_another_file_is_not_used(long_pdf: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The file was replaced after this process opened it: the helper sees other pages and stops."""
    monkeypatch.setattr(pdf_pages, "HELP_AFTER_S", 0.0)
    asked: list[int] = []
    monkeypatch.setattr(_Helper, "_ask", lambda self, stdin, stdout, group: asked.append(group))
    other = write_pdf(tmp_path / "other.pdf", ["one page only"])
    pdf = pypdfium2().PdfDocument(str(long_pdf))
    try:
        pages = list(page_texts(pdf, other, lambda: False, 1))
    finally:
        pdf.close()
    assert pages == _read(long_pdf, helpers=0) and not asked


def test_closing_early_kills_the_helpers(long_pdf: Path, helped: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[_Helper] = []
    init = _Helper.__init__

    def kept(self: _Helper, path: Path, board: _Board) -> None:
        init(self, path, board)
        started.append(self)

    monkeypatch.setattr(_Helper, "__init__", kept)
    pdf = pypdfium2().PdfDocument(str(long_pdf))
    try:
        pages: Iterator[Any] = page_texts(pdf, long_pdf, lambda: False, 2)
        for _ in range(GROUP + 1):
            next(pages)
        pages.close()  # type: ignore[attr-defined]
    finally:
        pdf.close()
    assert len(started) == 2
    for helper in started:
        assert not helper._thread.is_alive()
        assert helper._proc is None or helper._proc.poll() is not None


def test_a_cancel_stops_the_reading(long_pdf: Path, helped: list[int]) -> None:
    pdf = pypdfium2().PdfDocument(str(long_pdf))
    seen: list[int] = []
    try:
        for index, _ in page_texts(pdf, long_pdf, lambda: len(seen) >= 3, 1):
            seen.append(index)
    finally:
        pdf.close()
    assert seen == [0, 1, 2]


def test_no_reader_runs_more_than_the_window_ahead() -> None:
    board = _Board(pages=GROUP * (WINDOW + 3))
    claimed = [board.claim(wait=False) for _ in range(WINDOW)]
    assert claimed == list(range(WINDOW))
    assert board.claim(wait=False) is None  # the consumer still waits for group 0
    board.put(0, [(0, "a")])
    assert list(board.ready_pages()) == [(0, "a")]
    assert board.claim(wait=False) == WINDOW


def test_no_new_group_is_taken_while_much_text_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_pages, "AHEAD_CHARS", 1000)
    board = _Board(pages=GROUP * 4)
    assert (board.claim(wait=False), board.claim(wait=False)) == (0, 1)
    board.put(1, [(GROUP, "x" * 1000)])  # a huge page, read ahead of group 0
    assert board.claim(wait=False) is None
    board.put(0, [(0, "a")])
    assert [i for i, _ in board.ready_pages()] == [0, GROUP]
    assert board.claim(wait=False) == 2


def test_a_group_given_back_is_read_next() -> None:
    board = _Board(pages=GROUP * 4)
    first, second = board.claim(wait=False), board.claim(wait=False)
    board.give_back(first or 0)
    assert (first, second, board.claim(wait=False)) == (0, 1, 0)


def test_an_unreadable_page_crosses_the_pipe_as_an_error() -> None:
    pdfium = pypdfium2()

    class Broken:
        def __getitem__(self, index: int) -> Any:
            raise pdfium.PdfiumError(f"page {index} is damaged")

    out = io.BytesIO()
    _answer(out, Broken(), 3)
    raw = out.getvalue()
    assert raw[:1] == ERROR and LENGTH.unpack(raw[1:5])[0] == len(raw) - 5
    helper = _Helper.__new__(_Helper)
    helper._board = _Board(pages=GROUP)
    text = "broken \ud800 map".encode("utf-8", "surrogatepass")
    answers = raw + b"".join(TEXT + LENGTH.pack(len(text)) + text for _ in range(GROUP - 1))
    pages = helper._ask(io.BytesIO(), io.BytesIO(answers), 0)
    assert isinstance(pages[0][1], PageUnreadable) and "page 3 is damaged" in str(pages[0][1])
    assert pages[1] == (1, "broken \ud800 map")


def test_a_short_pdf_or_one_core_starts_no_helper(long_pdf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    monkeypatch.setattr(_Helper, "__init__", lambda self, path, board: started.append(1))
    _read(long_pdf, helpers=1)  # ~80 small pages: far under HELP_AFTER_S on one core
    assert not started
    monkeypatch.setattr(pdf_pages, "usable_cpus", lambda: 1)
    assert pdf_pages.default_helpers() == 0
