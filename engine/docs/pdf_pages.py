"""A long PDF's pages read on more than one core, handed on in page order.

PDFium serves one thread per process, so a PDF of hundreds of pages is read by this thread and,
once the pages left look worth it, by helper processes too (`engine.docs.pdf_child`, started
with `python -c`; the frozen app answers `-c` the same way). Every reader takes the next group
of pages from one board; the board hands the groups on in order and lets no reader run more
than a few groups (or 8 MiB of text) ahead of the consumer, so memory stays bounded however
long the PDF and however large its pages.

    for index, text in page_texts(pdf, path, stop, helpers=1):   # text: str or PageUnreadable
        ...

A short PDF, a machine with one core or `helpers=0` never starts a helper. A helper that
cannot start, or dies, gives its group back and this thread reads it: nothing is lost, only
the speed. Closing the iterator (cancel, an error while writing) kills the helpers.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from engine.backends.cpu_threads import usable_cpus
from engine.child_env import python_child
from engine.docs.pdf_child import CHILD_CODE, ENCODING_ERRORS, ERROR, LENGTH, READY, TEXT, PageUnreadable, page_text

GROUP = 16  # pages a reader takes at a time
WINDOW = 6  # groups read at most ahead of the one the consumer waits for…
AHEAD_CHARS = 8 << 20  # …and no new group taken while this much text waits (a hostile PDF's huge pages)
# Helpers start only when the pages left would take this long here: twice the ~0.2 s a helper
# takes to start (Python, then PDFium), so a short PDF never waits on one.
HELP_AFTER_S = 0.4
MAX_HELPERS = 3
_WAIT_S = 0.05  # how often a waiting reader looks whether it was stopped

Page = tuple[int, "str | PageUnreadable"]


def default_helpers() -> int:
    """Helper processes worth starting here: one per core beyond the first, at most MAX_HELPERS."""
    return max(0, min(MAX_HELPERS, usable_cpus() - 1))


def page_texts(pdf: Any, path: Path, stop: Callable[[], bool], helpers: int) -> Iterator[Page]:
    """Every page of the open `pdf` (the file at `path`) as (0-based index, text), in order."""
    board = _Board(pages=len(pdf))
    team: list[_Helper] = []
    reading_s, read_here = 0.0, 0  # time spent reading here (not waiting on a slow consumer), pages read
    try:
        while not stop():
            for page in board.ready_pages():
                if stop():
                    return
                yield page
            group = board.claim(wait=False)
            if group is None:
                if board.all_handed_on():
                    return
                board.wait_for_change()
                continue
            started = time.perf_counter()
            pages = _read_group(pdf, board, group, stop)
            board.put(group, pages)
            reading_s += time.perf_counter() - started
            read_here += len(pages)
            if helpers and not team and read_here and board.worth_help(reading_s / read_here):
                team = [_Helper(path, board) for _ in range(helpers)]
    finally:
        board.close()
        for helper in team:
            helper.close()


def _read_group(pdf: Any, board: _Board, group: int, stop: Callable[[], bool]) -> list[Page]:
    out: list[Page] = []
    for index in board.page_range(group):
        if stop():
            break  # a cancel is seen between pages; the part read is never handed on
        try:
            out.append((index, page_text(pdf, index)))
        except PageUnreadable as exc:
            out.append((index, exc))
    return out


class _Board:
    """Which groups are taken, which are read, and which the consumer has had, under one lock."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.groups = -(-pages // GROUP)
        self._change = threading.Condition()
        self._next_claim = 0
        self._returned: list[int] = []  # groups a dead helper gave back
        self._read: dict[int, list[Page]] = {}
        self._ahead_chars = 0  # text in groups read and not yet handed on
        self._next_out = 0
        self._closed = False

    def page_range(self, group: int) -> range:
        return range(group * GROUP, min(self.pages, (group + 1) * GROUP))

    def claim(self, wait: bool) -> int | None:
        """The next group to read; None when none is left, the window is full (wait=False) or closed."""
        with self._change:
            while not self._closed:
                if self._returned:
                    return self._returned.pop()
                if self._next_claim >= self.groups:
                    return None
                if self._next_claim < self._next_out + WINDOW and self._ahead_chars < AHEAD_CHARS:
                    self._next_claim += 1
                    return self._next_claim - 1
                if not wait:
                    return None
                self._change.wait(_WAIT_S)
            return None

    def put(self, group: int, pages: list[Page]) -> None:
        with self._change:
            self._read[group] = pages
            self._ahead_chars += _chars(pages)
            self._change.notify_all()

    def give_back(self, group: int) -> None:
        with self._change:
            self._returned.append(group)
            self._change.notify_all()

    def ready_pages(self) -> Iterator[Page]:
        """The pages of the groups read, in order, up to the first one not read yet."""
        while True:
            with self._change:
                pages = self._read.pop(self._next_out, None)
                if pages is None:
                    return
                self._ahead_chars -= _chars(pages)
                self._next_out += 1
                self._change.notify_all()
            yield from pages

    def all_handed_on(self) -> bool:
        with self._change:
            return self._next_out >= self.groups

    def wait_for_change(self) -> None:
        with self._change:
            if self._next_out not in self._read and not self._returned:
                self._change.wait(_WAIT_S)

    def worth_help(self, s_per_page: float) -> bool:
        """Whether the pages not yet taken would take HELP_AFTER_S more at `s_per_page`.

        Behind a slow consumer (an embedder) a helper reads its few groups ahead, then waits idle.
        """
        with self._change:
            left = self.pages - self._next_claim * GROUP
            return left > 0 and s_per_page * left > HELP_AFTER_S

    def close(self) -> None:
        with self._change:
            self._closed = True
            self._change.notify_all()


def _chars(pages: list[Page]) -> int:
    return sum(len(text) for _, text in pages if isinstance(text, str))


class _Helper:
    """One helper process and the thread here that feeds it groups and puts its pages on the board."""

    def __init__(self, path: Path, board: _Board) -> None:
        self._board = board
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, args=(path,), name="ember-pdf-helper", daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        proc = self._start(path)
        if proc is None or proc.stdin is None or proc.stdout is None or proc.stdout.read(1) != READY:
            return
        while (group := self._board.claim(wait=True)) is not None:
            try:
                pages = self._ask(proc.stdin, proc.stdout, group)
            except (OSError, ValueError, EOFError):
                self._board.give_back(group)  # died or was killed: this thread's reader takes the group
                return
            self._board.put(group, pages)

    def _start(self, path: Path) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self._closed:
                return None
            try:
                child = python_child(CHILD_CODE, os.path.abspath(path), str(self._board.pages))
                self._proc = subprocess.Popen(child.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL, env=child.env, cwd=child.cwd)
            except OSError:
                return None
            return self._proc

    def _ask(self, stdin: IO[bytes], stdout: IO[bytes], group: int) -> list[Page]:
        pages = self._board.page_range(group)
        stdin.write(f"{pages.start} {len(pages)}\n".encode())
        stdin.flush()
        out: list[Page] = []
        for index in pages:
            head = _exactly(stdout, 1 + LENGTH.size)
            data = _exactly(stdout, LENGTH.unpack(head[1:])[0])
            if head[:1] == TEXT:
                out.append((index, data.decode("utf-8", ENCODING_ERRORS)))
            elif head[:1] == ERROR:
                out.append((index, PageUnreadable(data.decode("utf-8", "replace"))))
            else:
                raise ValueError("the PDF helper answered out of turn")
        return out

    def close(self) -> None:
        """Kill the helper (its pages are no longer wanted) and wait for its thread."""
        with self._lock:
            self._closed = True
            proc = self._proc
        if proc is not None:
            proc.kill()  # its thread, reading or writing, now meets the end of the pipe
            proc.wait()
        self._thread.join()
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass


def _exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the PDF helper stopped")
    return data
