"""Long-chat figures for `ember bench`: time to first token as a conversation outgrows the context.

`measure_long_chat()` holds one conversation of `turns` turns with a real model (greedy,
short replies) under the truncate-middle policy, each turn fitted exactly as the app and the
CLI fit it, and reports the time to first token at turn 5 and at the last turn, side by side
in the same run. Because the window moves in steps and its start (system prompt and first
exchange) stays a stable prefix, llama.cpp reuses the KV cache for the part of the prompt
the previous turn already evaluated; the per-turn evaluated token counts show it. When the
window moves, the kept turns are shifted in the cache instead of evaluated again
(`engine/llama/kv_reuse.py`): `long_chat_evaluated_on_moves_max` stays a turn's size and
`long_chat_shifted_tokens` counts what the shifts kept.

`long_chat_prompt_renders_per_turn` counts the template renders (each with its
tokenization) the backend did per turn: the fit's candidates, the stream and any recount
share one rendering by content, so 1 is the target and a turn whose window moves costs one
more per candidate tried. With `native` (a built `llama-bench`), each of the two turns is
followed at once by native llama.cpp reading the same new tokens at the same KV depth
(`-p N -n 0 -d D`): `long_chat_ttft_vs_native` is Ember's time to first token over that.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.backends.base import Message, Request, Sampling, StreamInfo, ToolSpec, make_request
from engine.cancel import CancelToken
from engine.errors import BenchError
from engine.events import ContentDelta, TurnDone, TurnError
from engine.llama.llama import LlamaBackend
from engine.turns.context_policy import ContextPolicy
from engine.turns.context_window import fit_for
from engine.turns.runner import TurnRunner

NativeTtft = Callable[[int, int], float]  # (new prompt tokens, KV depth) -> native ms to first token

SYSTEM = "You are a helpful assistant. Answer briefly."
TOPICS = ("rivers", "bridges", "orchards", "comets", "glaciers", "lighthouses", "violins", "deserts")


def question(turn: int) -> str:
    """A different, ordinary question each turn (about 25 tokens)."""
    topic = TOPICS[turn % len(TOPICS)]
    return f"Question {turn}: tell me one short fact about {topic}, and how it relates to what we said before."


class _Watched:
    """The backend, keeping each stream's info (prompt and cached token counts)."""

    def __init__(self, inner: LlamaBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.infos: list[StreamInfo] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Any]:
        self.infos.append(info)
        return self.inner.stream(request, cancel, info)

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        return self.inner.count_prompt_tokens(messages, tools)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def check_grammar(self, gbnf: str) -> str | None:
        return self.inner.check_grammar(gbnf)

    def close(self) -> None:
        self.inner.close()


def measure_long_chat(
    model: Path,
    *,
    n_ctx: int = 2048,
    turns: int = 100,
    max_tokens: int = 16,
    threads: int | None = None,
    early_turn: int = 5,
    native: Callable[[LlamaBackend], NativeTtft] | None = None,
) -> dict[str, Any]:
    """Run the conversation; figures are in milliseconds and tokens (keys start with `long_chat_`).

    `native(backend)` gives the native time-to-first-token runner for the loaded model's settings.
    """
    backend = _Watched(LlamaBackend(model, n_ctx=n_ctx, n_threads=threads))
    try:
        runner = native(backend.inner) if native is not None else None
        rows = _converse(
            backend, turns, max_tokens, frozenset(_early(early_turn, turns)) | frozenset(_late(turns)), runner
        )
    finally:
        backend.close()
    return _report(rows, n_ctx, turns, early_turn)


def _converse(
    backend: _Watched,
    turns: int,
    max_tokens: int,
    compare_at: frozenset[int] = frozenset(),
    native: NativeTtft | None = None,
) -> list[dict[str, float]]:
    history: list[Message] = [{"role": "system", "content": SYSTEM}]
    rows: list[dict[str, float]] = []
    for turn in range(1, turns + 1):
        renders = backend.inner.renders
        history.append({"role": "user", "content": question(turn)})
        fit = fit_for(backend, history, ContextPolicy.TRUNCATE_MIDDLE, max_tokens)
        request = make_request(fit.messages, sampling=Sampling.greedy(), max_tokens=max_tokens)
        answer: list[str] = []
        for event in TurnRunner(backend).run(request, CancelToken()):
            if isinstance(event, ContentDelta):
                answer.append(event.text)
            elif isinstance(event, TurnError):
                raise BenchError(f"long chat turn {turn} failed: {event.message}")
            elif isinstance(event, TurnDone):
                info = backend.infos[-1]
                rows.append(
                    {
                        "ttft_ms": event.stats.ttft_ms,
                        "prompt": info.prompt_tokens,
                        "evaluated": info.prompt_tokens - info.cached_tokens,
                        "sent": len(fit.messages),
                        "dropped": len(fit.dropped),
                        "depth": info.cached_tokens,
                        "shifted": (info.receipt or {}).get("kv_cache", {}).get("shifted_tokens", 0),
                    }
                )
        rows[-1]["renders"] = backend.inner.renders - renders
        if native is not None and turn in compare_at:  # interleaved: right after Ember's own turn
            rows[-1]["native_ms"] = native(int(rows[-1]["evaluated"]), int(rows[-1]["depth"]))
        history.append({"role": "assistant", "content": "".join(answer) or "(no answer)"})
    return rows


def _report(rows: list[dict[str, float]], n_ctx: int, turns: int, early_turn: int) -> dict[str, Any]:
    early, last = rows[min(early_turn, len(rows)) - 1], rows[-1]
    tail = rows[-10:]
    moves = [b for a, b in itertools.pairwise(rows) if b["dropped"] > a["dropped"]]
    return {
        "long_chat_ctx": n_ctx,
        "long_chat_turns": turns,
        "long_chat_ttft_turn5_ms": round(early["ttft_ms"], 1),
        "long_chat_ttft_last_turn_ms": round(last["ttft_ms"], 1),
        "long_chat_ttft_ratio": round(last["ttft_ms"] / early["ttft_ms"], 2) if early["ttft_ms"] else None,
        "long_chat_ttft_last10_median_ms": round(statistics.median(r["ttft_ms"] for r in tail), 1),
        "long_chat_ttft_last10_max_ms": round(max(r["ttft_ms"] for r in tail), 1),
        "long_chat_evaluated_turn5": int(early["evaluated"]),
        "long_chat_evaluated_last_turn": int(last["evaluated"]),
        "long_chat_prompt_last_turn": int(last["prompt"]),
        "long_chat_window_moves": len(moves),
        # A move shifts the kept turns in the KV cache (kv_reuse): a refill would evaluate ~3/4 of it.
        "long_chat_evaluated_on_moves_max": int(max(r["evaluated"] for r in moves)) if moves else None,
        "long_chat_shifted_tokens": int(sum(r.get("shifted", 0) for r in rows)),
        "long_chat_first_cut_turn": next((i + 1 for i, r in enumerate(rows) if r["dropped"]), None),
        "long_chat_prompt_renders_per_turn": round(statistics.mean(r["renders"] for r in rows), 2),
        "long_chat_prompt_renders_max": int(max(r["renders"] for r in rows)),
        **_versus_native([rows[t - 1] for t in _early(early_turn, turns)], [rows[t - 1] for t in _late(turns)]),
    }


# One turn against native is one sample of a noisy machine (turn 5 read 742 ms once and 381 ms
# in the next run, for the same 36 tokens), so each end of the chat compares COMPARED turns.
COMPARED = 5


def _early(early_turn: int, turns: int) -> range:
    first = min(early_turn, turns)
    return range(first, min(first + COMPARED, turns + 1))


def _late(turns: int) -> range:
    return range(max(1, turns - COMPARED + 1), turns + 1)


def _versus_native(early: list[dict[str, float]], late: list[dict[str, float]]) -> dict[str, Any]:
    """Median Ember time to first token over median native, at each end (turns both sides measured)."""
    early = [r for r in early if "native_ms" in r]
    late = [r for r in late if "native_ms" in r]
    if not early or not late:
        return {"long_chat_ttft_vs_native": None}

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return {
        "long_chat_native_ttft_turn5_ms": round(median(early, "native_ms"), 1),
        "long_chat_native_ttft_last_turn_ms": round(median(late, "native_ms"), 1),
        "long_chat_depth_turn5": int(early[0]["depth"]),
        "long_chat_depth_last_turn": int(late[-1]["depth"]),
        "long_chat_native_turns_compared": len(early) + len(late),
        "long_chat_ttft_vs_native_turn5": _ratio(median(early, "ttft_ms"), median(early, "native_ms")),
        # the long end: the target
        "long_chat_ttft_vs_native": _ratio(median(late, "ttft_ms"), median(late, "native_ms")),
    }


def _ratio(ember: float, native: float) -> float | None:
    return round(ember / native, 2) if native else None
