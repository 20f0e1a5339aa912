"""The indexer's read-ahead: items in order, worker errors raised in the consumer, an early stop ends it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from engine.cancel import CancelToken
from engine.docs.read_ahead import ReadAhead


def test_items_arrive_in_order_from_another_thread() -> None:
    threads: set[str] = set()

    def produce(_gone: CancelToken) -> Iterator[int]:
        for i in range(50):
            threads.add(threading.current_thread().name)
            yield i

    assert list(ReadAhead(produce, depth=2, name="reader")) == list(range(50))
    assert threads == {"reader"}


def test_a_worker_error_is_raised_in_the_consumer() -> None:
    def produce(_gone: CancelToken) -> Iterator[int]:
        yield 1
        raise ValueError("page 2 cannot be read")

    got: list[int] = []
    with pytest.raises(ValueError, match="page 2"):
        got.extend(ReadAhead(produce))
    assert got == [1]


def test_stopping_early_ends_the_worker_and_closes_its_iterator_on_its_thread() -> None:
    closed_on: list[str] = []

    def produce(gone: CancelToken) -> Iterator[int]:
        try:
            i = 0
            while not gone.cancelled:
                yield i
                i += 1
        finally:
            closed_on.append(threading.current_thread().name)

    reader = ReadAhead(produce, depth=1, name="reader")
    for item in reader:
        if item == 3:
            break
    reader.close()  # idempotent; the loop's exit already stopped it
    assert closed_on == ["reader"]  # the generator's `finally` ran on the worker (PDFium's one thread)
    assert not any(t.name == "reader" for t in threading.enumerate())


def test_cancelling_the_callers_token_ends_the_producer_and_the_items() -> None:
    cancel = CancelToken()

    def produce(stop: CancelToken) -> Iterator[int]:
        i = 0
        while not stop.cancelled:
            yield i
            i += 1

    got: list[int] = []
    for item in ReadAhead(produce, depth=1, cancel=cancel):
        got.append(item)
        if item == 3:
            cancel.cancel()  # the producer sees it at its next item; the consumer's loop then ends
    assert got[:4] == [0, 1, 2, 3] and len(got) <= 6
