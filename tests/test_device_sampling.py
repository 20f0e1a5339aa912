"""Greedy sampling inside the model's graph (llama.cpp's backend sampling), as on a GPU.

llama.cpp runs an attached chain in the graph of whichever device holds the output layer, the
CPU too, so these tests run it on the CPU by marking the placement offloaded. One greedy chain
stays attached from request to request: attaching or detaching one makes llama.cpp reserve its
scheduler again (buffers freed and reallocated), counted here in llama.cpp's own log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.backends.base import Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.events import Piece

QUESTION = [{"role": "user", "content": "Name three colours of the rainbow."}]
RESERVING = "sched_reserve: reserving ..."


@pytest.fixture
def in_graph(smollm_path: Path) -> Iterator[object]:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=1024, n_gpu_layers=0)
    backend.placement = replace(backend.placement, offloaded=1)  # samples as it would on a GPU
    yield backend
    backend.close()


def _ids(backend, request: Request) -> list[int]:  # type: ignore[no-untyped-def]
    info = StreamInfo()
    return [p.token_id for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece) and p.token_id]


def _greedy(max_tokens: int = 12, grammar: str | None = None) -> Request:
    return make_request(QUESTION, sampling=Sampling.greedy(), max_tokens=max_tokens).with_(grammar=grammar)


def _reserves(caplog: pytest.LogCaptureFixture) -> int:
    return sum(RESERVING in r.getMessage() for r in caplog.records)


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_the_reply_sampled_in_the_graph_is_the_hosts(smollm, in_graph) -> None:  # type: ignore[no-untyped-def]
    smollm.reset_cache()
    assert _ids(in_graph, _greedy()) == _ids(smollm, _greedy())
    assert in_graph._device_greedy.attached is not None  # pyright: ignore[reportPrivateUsage]


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_one_chain_stays_attached_across_greedy_requests(in_graph, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.DEBUG, logger="engine.llama_cpp")
    first = _ids(in_graph, _greedy())
    attached = in_graph._device_greedy.attached  # pyright: ignore[reportPrivateUsage]
    caplog.clear()
    in_graph.reset_cache()
    assert _ids(in_graph, _greedy()) == first
    assert in_graph._device_greedy.attached is attached  # pyright: ignore[reportPrivateUsage]
    assert _reserves(caplog) == 0  # no buffer freed and reallocated between the two


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_a_request_sampled_on_the_host_detaches_it_once(in_graph, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.DEBUG, logger="engine.llama_cpp")
    _ids(in_graph, _greedy(4))
    caplog.clear()
    answer = _ids(in_graph, _greedy(4, grammar='root ::= "yes" | "no"'))  # a grammar samples on the host
    assert len(answer) >= 1 and in_graph._device_greedy.attached is None  # pyright: ignore[reportPrivateUsage]
    assert _reserves(caplog) == 1
    _ids(in_graph, _greedy(4))
    assert in_graph._device_greedy.attached is not None  # pyright: ignore[reportPrivateUsage]
