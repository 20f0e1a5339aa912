"""Receipts someone edited or imported, and verdicts that name the real difference
(adversarial review 2: RC-03…06, RC-08, RC-09, RC-10).

A receipt travels with imports, so `--reproduce` checks each field it uses like any input:
one line, before any model is loaded, for a wrong type, a bad range or a prompt that cannot
fit. The verdict compares the device itself (not the note on why it is the CPU) and says
when the reply was made with a warm KV cache.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from desktop.core.receipt_text import receipt_lines
from engine.backends.base import Backend, PlainBackend, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece
from engine.history.store import HistoryStore
from engine.session.reproduce import CannotReproduce, reproduce
from models.library.digests import file_sha256
from models.library.paths import ember_paths

REPLY = "Blue."
CPU_RECORDED = "CPU · this build has no GPU support"
CPU_AGAIN = "CPU · GPU off in this model's settings"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class _Replies(PlainBackend):
    """Answers `text` with the receipt fields a real re-run fills in (cold, on the CPU)."""

    name = "fake llama.cpp"

    def __init__(self, text: str) -> None:
        self.text = text
        self.opened = True

    def close(self) -> None:
        pass

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        yield Piece(self.text, token_id=7)
        info.receipt = {
            "prompt": {"sha256": "p"},
            "reply": {"tokens": 1, "sha256": _sha(self.text)},
            "device": CPU_AGAIN,
            "kv_cache": {"type": "f16", "warm_tokens": 0, "shifted_tokens": 0},
        }


def _receipt(model: Path, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "backend": "llama.cpp",
        "model": {"file": model.name, "sha256": file_sha256(model)},
        "prompt": {"sha256": "p"},
        "reply": {"tokens": 1, "sha256": _sha(REPLY)},
        "max_tokens": 4,
        "context_size": 2048,
        "device": CPU_RECORDED,
        "sampling": {"temperature": 0.0},
        "seed": 1,
    }
    return base | over


def _run(tmp_path: Path, receipt: dict[str, Any], answer: str = REPLY, system: str = "") -> tuple[Any, list[Path]]:
    model = tmp_path / "m.gguf"
    opened: list[Path] = []
    with HistoryStore(ember_paths().ensure().history_db) as store:
        conv = store.create_conversation(title="t")
        user = store.add_message(conv.id, "user", "question", parent_id=None)
        if system:
            receipt = receipt | {"system": system}
        reply = store.add_message(conv.id, "assistant", REPLY, parent_id=user, stats={"receipt": receipt})

        def open_model(path: Path, _: Mapping[str, Any]) -> Backend:
            opened.append(path)
            return _Replies(answer)

        return reproduce(store, reply, open_model, lambda: iter([model])), opened


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF weights")
    return path


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("context_size", "abc", "context_size ('abc') is not a context size"),  # RC-03
        ("context_size", -5, "context_size (-5) is not a context size"),  # RC-06
        ("context_size", 0, "is not a context size"),
        ("context_size", 10**30, "is not a context size"),
        ("context_size", True, "is not a context size"),
        ("max_tokens", "x", "max_tokens ('x') is not a token count"),  # RC-04
        ("max_tokens", [1], "max_tokens (list) is not a token count"),
        ("seed", "junk", "seed ('junk') is not a seed"),
        ("system", {"a": 1}, "system (dict) is not text"),
        ("sampling", "hot", "sampling ('hot') is not a set of sampling settings"),
        ("sampling", {"temperature": "hot"}, "sampling.temperature ('hot') is not a number"),  # RC-05
        ("sampling", {"top_k": 1.5}, "sampling.top_k (1.5) is not an integer"),
    ],
)
def test_a_receipt_field_of_the_wrong_type_or_range_is_one_line(
    tmp_path: Path, model: Path, field: str, value: object, words: str
) -> None:
    with pytest.raises(CannotReproduce) as caught:
        _run(tmp_path, _receipt(model, **{field: value}))
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@pytest.mark.timeout(60)
def test_a_huge_receipt_is_refused_before_any_model_loads(tmp_path: Path, model: Path) -> None:
    start = time.monotonic()
    with pytest.raises(CannotReproduce, match="cannot fit the receipt's 2,048-token context"):
        _run(tmp_path, _receipt(model), system="x" * 50_000_000)
    assert time.monotonic() - start < 50  # a bound against the minutes this took; not a speed target


def test_a_differing_cpu_reply_does_not_blame_the_device(tmp_path: Path, model: Path) -> None:
    result, _ = _run(tmp_path, _receipt(model), answer="Red.")
    assert not result.matched
    assert "device" not in result.line, result.line
    assert "nothing the receipt records changed" in result.line


def test_a_warm_cache_reply_says_so_when_it_differs(tmp_path: Path, model: Path) -> None:
    receipt = _receipt(model, kv_cache={"type": "f16", "warm_tokens": 85, "shifted_tokens": 0})
    result, _ = _run(tmp_path, receipt, answer="Red.")
    assert result.line.endswith("(the reply reused 85 prompt tokens from a warm KV cache and the re-run started cold)")
    assert "device" not in result.line


def test_a_gpu_reply_re_run_on_the_cpu_names_the_device(tmp_path: Path, model: Path) -> None:
    result, _ = _run(tmp_path, _receipt(model, device="GPU · 30/30 layers · NVIDIA H200"), answer="Red.")
    assert "(changed since: device" in result.line


def test_receipt_lines_survive_wrong_types() -> None:
    lines = receipt_lines(
        {
            "backend": "llama.cpp",
            "model": ["x"],
            "sampling": {"temperature": "hot"},
            "reply": "r",
            "kv_cache": {"type": "q8_0", "warm_tokens": 31},
        }
    )
    assert "KV cache: warm (31 prompt tokens reused), q8_0" in lines
    assert any(line.startswith("Sampling: temperature hot") for line in lines)


P = (
    "Add a docstring to this function and show the whole function:\n\n```python\n"
    "def add_numbers(a, b):\n    result = a + b\n    return result\n```"
)
SYSTEM = "You are a helpful assistant. Answer clearly and show code in fenced blocks when asked."


@pytest.mark.slow
def test_real_cold_and_warm_replies_reproduce_or_name_the_warm_cache(smollm_path: Path) -> None:
    """RC-08/RC-09 with SmolLM2: the same greedy request made cold, then warm (all but its last
    prompt token cached). The cold one matches token for token; the warm one, computed in other
    batch shapes, either matches or its verdict names the warm cache, never the device."""
    from desktop.cli.history_reproduce import _open_model  # pyright: ignore[reportPrivateUsage]
    from engine.backends.base import Sampling
    from engine.llama.llama import LlamaBackend

    request = Request(
        messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": P}),
        sampling=Sampling(temperature=0.0, seed=1),
        max_tokens=96,
    )
    backend = LlamaBackend(smollm_path, n_ctx=2048, n_threads=1)
    try:
        made = []
        for _ in range(2):
            info = StreamInfo()
            text = "".join(p.text for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece))
            made.append((text, info.receipt))
    finally:
        backend.close()
    (cold_text, cold), (warm_text, warm) = made
    assert cold["kv_cache"] == {"type": "f16", "warm_tokens": 0, "shifted_tokens": 0}
    assert warm["kv_cache"]["warm_tokens"] == warm["prompt"]["tokens"] - 1
    with HistoryStore(ember_paths().ensure().history_db) as store:
        ids = []
        for text, receipt in made:
            conv = store.create_conversation(title="t")
            user = store.add_message(conv.id, "user", P, parent_id=None)
            ids.append(store.add_message(conv.id, "assistant", text, parent_id=user, stats={"receipt": receipt}))
        again = [reproduce(store, i, _open_model, lambda: iter([smollm_path])) for i in ids]
    assert again[0].matched, again[0].line
    assert "device" not in again[1].line
    if warm_text != cold_text:
        assert not again[1].matched
        assert "warm KV cache and the re-run started cold" in again[1].line, again[1].line
