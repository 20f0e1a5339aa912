"""`ember bench` without flags: how fast this model is here, in well under a minute.

One load, then a warm-up turn and `rounds` timed turns through Ember's own pipeline
(`TurnRunner`): decoding (tokens after the first over the time after it) and the time to the
first visible token; beside each turn the prompt read alone from an empty cache to its first
token (prompt reading: a turn's first visible token can come after a whole attempt that showed
nothing, then the retry's prompt, and its time is not the prompt's). (With
`--llama-bench`, a source checkout puts native llama.cpp's figures beside them: tests/bench/native.py.)
The long comparisons are `python -m tests.bench`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from engine.backends.base import Backend, Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.errors import BenchError
from engine.events import ContentDelta, ThinkingDelta, TurnDone, TurnError, TurnStats
from engine.turns.runner import TurnRunner

PROMPT = "Summarise the following licence in three sentences, then list who may use the software.\n\n{text}"
TEXT_CHARS = 1_000  # about 250 tokens of the licence: a prompt long enough to time its reading
N_CTX, MAX_TOKENS = 2048, 64
TURNS_BUDGET_S = 25.0  # timed turns stop once they have taken this long (at least one runs)

Progress = Callable[[str], None]


class Timed(Backend, Protocol):
    """What the bench times (`LlamaBackend`): a backend whose KV cache it can empty."""

    prompt_lookup: bool

    def reset_cache(self) -> None: ...
    def prompt_tokens(self, request: Request) -> tuple[list[int], str]: ...


def request(text: str) -> Request:
    prompt = PROMPT.format(text=text[:TEXT_CHARS])
    return make_request([{"role": "user", "content": prompt}], sampling=Sampling.greedy(), max_tokens=MAX_TOKENS)


def time_turn(backend: Timed, req: Request) -> tuple[float, float, int]:
    """(time to first token s, decode seconds, tokens) of one turn from an empty KV cache."""
    backend.reset_cache()
    start = time.perf_counter()
    first: float | None = None
    tokens = 0
    for event in TurnRunner(backend).run(req):
        match event:
            case ContentDelta() | ThinkingDelta():
                first = first or time.perf_counter()
            case TurnDone(stats=stats):
                tokens = answer_tokens(stats)
            case TurnError(message=message):
                raise BenchError(f"the turn failed: {message}")
            case _:
                pass
    end = time.perf_counter()
    first = first or end
    return first - start, end - first, tokens


def answer_tokens(stats: TurnStats) -> int:
    """The tokens of the attempt that answered. A turn retried after a reply with no visible
    answer counts every attempt's tokens, but the time after its first visible token is the last
    attempt's alone (Gemma 3 270M here: 128 tokens over 64 tokens' time, decoding read ×2)."""
    reply = (stats.receipt or {}).get("reply")
    n: object = cast(dict[str, object], reply).get("tokens") if isinstance(reply, dict) else None
    return n if isinstance(n, int) and 0 < n <= stats.tokens else stats.tokens


def prompt_seconds(backend: Timed, req: Request) -> float:
    """Seconds to read `req`'s prompt from an empty KV cache and sample its first token, nothing decoded after it."""
    backend.reset_cache()
    start = time.perf_counter()
    for _ in backend.stream(req.with_(max_tokens=1), CancelToken(), StreamInfo()):
        pass
    return time.perf_counter() - start


def measure(model: Path, threads: int, gpu_layers: int, say: Progress, rounds: int = 3) -> dict[str, Any]:
    """Load, warm up, then up to `rounds` turns within `TURNS_BUDGET_S`: the medians."""
    from engine.llama.llama import LlamaBackend  # llama.cpp loads here, not with `ember bench`'s import
    from engine.rewrite.quant_quality import TEXT_FILE

    say("loading the model")
    start = time.perf_counter()
    backend = LlamaBackend(model, n_ctx=N_CTX, n_threads=threads, n_gpu_layers=gpu_layers)
    load_ms = (time.perf_counter() - start) * 1000
    try:
        return {
            "load_ms": round(load_ms),
            **measure_loaded(backend, request(TEXT_FILE.read_text("utf-8")), say, rounds),
        }
    finally:
        backend.close()


def measure_loaded(backend: Timed, req: Request, say: Progress, rounds: int = 3) -> dict[str, Any]:
    """`measure` on a loaded backend: a warm-up, then each timed turn and its prompt read alone."""
    backend.prompt_lookup = False  # the per-token cost, as llama-bench's tg measures it
    n_prompt = len(backend.prompt_tokens(req)[0])
    say(f"a short warm-up, then up to {rounds} turns of {MAX_TOKENS} tokens on a {n_prompt}-token prompt")
    time_turn(backend, req.with_(max_tokens=4))  # pages the weights in; the timed turns then compare
    runs = _timed_turns(backend, req, rounds)
    ttft = statistics.median(r[0] for r in runs)
    tps = statistics.median((r[2] - 1) / r[1] for r in runs if r[1] > 0 and r[2] > 1) if runs else None
    return {
        "prompt_tokens": n_prompt,
        "engine_ttft_ms": round(ttft * 1000, 1),
        "engine_pp_tps": round(n_prompt / statistics.median(r[3] for r in runs), 1),
        "engine_tps": round(tps, 2) if tps else None,
        "max_tokens": MAX_TOKENS,
        "runs": len(runs),
    }


def _timed_turns(backend: Timed, req: Request, rounds: int) -> list[tuple[float, float, int, float]]:
    start = time.perf_counter()
    runs = [(*time_turn(backend, req), prompt_seconds(backend, req))]
    while len(runs) < rounds and time.perf_counter() - start < TURNS_BUDGET_S:
        runs.append((*time_turn(backend, req), prompt_seconds(backend, req)))
    return runs


def predicted(model: Path, threads: int, say: Progress) -> dict[str, Any]:
    """A profile measured now, under the turns' own load (medians), and `model`'s predicted speeds."""
    from engine.llama import machine_profile
    from models.gguf.meta import read_metadata
    from models.library.speed import predict_meta

    say("measuring the machine profile on the built-in model")
    start = time.perf_counter()
    # typical: as the turns are measured; the fastest figures cached where none is, for `ember models PATH`
    profile = machine_profile.measure(threads, save="if_none", typical=True)
    seconds = time.perf_counter() - start
    meta = read_metadata(model)
    guess = predict_meta(profile, meta)
    return {
        "machine_profile_seconds": round(seconds, 1),
        "predicted_tps": round(guess.decode_tps, 2),
        "predicted_pp_tps": round(guess.prompt_tps, 1),
    }


def prediction_ratio(report: dict[str, Any]) -> float | None:
    """Predicted over measured decoding (`fit_decode_prediction_ratio`): 1.0 is a perfect prediction."""
    measured = report.get("engine_tps")
    return round(report["predicted_tps"] / measured, 3) if measured else None
