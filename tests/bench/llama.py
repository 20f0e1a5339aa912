"""Ember's engine against raw llama-cpp-python, on one loaded model: tokens/s and time to first token.

Fairness rules (see `ember bench`):

- ONE `Llama` serves both sides: the raw side calls `create_chat_completion(stream=True)` on
  the `Llama` inside the engine's `LlamaBackend`, so threads, context and weights are shared.
- Both sides get the same final messages: `TurnRunner` folds its no-tools line into the
  system message, and the raw side is given exactly that folded list.
- Greedy decoding, fixed seed, repeat penalty 1.0, the same `max_tokens` on both sides; the
  prompt is one that runs to `max_tokens`, and `outputs_match` checks the texts agree.
- The raw side is raw: Ember's abort callback (a Python call from llama.cpp between graph
  nodes, which lets a stop interrupt a long prompt) is detached for the raw runs and
  re-attached for the engine's, so the raw figure does not carry Ember's costs.
- No KV-prefix reuse: `llm.reset()` before every run, so each run evaluates the whole
  prompt and time to first token includes the full prompt evaluation on both sides.
- One timing harness measures both: TTFT is call → first visible text; tokens/s is
  (tokens − 1) / (first visible text → stream exhausted), i.e. the decode rate, as
  llama-bench's tg figure is. Runs are interleaved, alternating which side goes first.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.backends.base import Message, Request, Sampling, make_request
from engine.child_env import python_child
from engine.errors import BenchError
from engine.events import ContentDelta, Event, ThinkingDelta, TurnDone, TurnError, TurnStats
from engine.llama.llama import LlamaBackend
from engine.turns.rounds import fold_system
from engine.turns.runner import NO_TOOLS_LINE, TurnRunner
from models.library.settings import AUTO_GPU_LAYERS

BENCH_PROMPT = "Write a long story about a dragon who learns to bake bread."
KV_REUSE = "none: llm.reset() before every run, so each run evaluates the full prompt"
SEED = 0


@dataclass(frozen=True, slots=True)
class RunTiming:
    """One generation, timed from outside."""

    ttft_ms: float
    tokens: int
    decode_s: float  # first visible text → end of stream
    text: str
    drafted: int = 0  # speculative decoding's draft tokens (engine runs only)
    accepted: int = 0

    @property
    def tokens_per_s(self) -> float:
        return (self.tokens - 1) / self.decode_s if self.tokens > 1 and self.decode_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Workload:
    """What both sides generate: the engine's request and the raw side's identical messages."""

    request: Request
    raw_messages: list[Message]

    @classmethod
    def story(cls, max_tokens: int, prompt: str = BENCH_PROMPT) -> Workload:
        request = make_request([{"role": "user", "content": prompt}], sampling=Sampling.greedy(), max_tokens=max_tokens)
        return cls(request, [m.copy() for m in fold_system(request.messages, NO_TOOLS_LINE)])


class _Clock:
    """Call start, first visible text, end."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None

    def seen(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def timing(self, tokens: int, text: str, stats: TurnStats | None = None) -> RunTiming:
        end = time.perf_counter()
        first = self.first if self.first is not None else end
        drafted, accepted = (stats.drafted, stats.accepted) if stats else (0, 0)
        return RunTiming(round((first - self.start) * 1000, 2), tokens, end - first, text, drafted, accepted)


def time_raw(backend: LlamaBackend, work: Workload) -> RunTiming:
    """Raw llama-cpp-python on the backend's `Llama`: `create_chat_completion(stream=True)`.

    Ember's abort callback is attached only while it evaluates a prompt, so the raw runs
    never carry it.
    """
    return _time_raw(backend.raw(), work)


def _time_raw(llm: Any, work: Workload) -> RunTiming:
    llm.reset()
    clock = _Clock()
    parts: list[str] = []
    stream = llm.create_chat_completion(
        messages=work.raw_messages,
        stream=True,
        temperature=0.0,
        repeat_penalty=1.0,
        max_tokens=work.request.max_tokens,
        seed=SEED,
    )
    for chunk in stream:
        text = chunk["choices"][0]["delta"].get("content")
        if text:
            clock.seen()
            parts.append(text)
    return clock.timing(len(parts), "".join(parts))


def time_engine(backend: LlamaBackend, work: Workload) -> RunTiming:
    """Ember: `TurnRunner(LlamaBackend).run(...)`, the whole pipeline down to events."""
    backend.reset_cache()
    clock = _Clock()
    parts: list[str] = []
    stats: TurnStats | None = None
    for event in TurnRunner(backend).run(work.request):
        stats = _absorb(event, clock, parts) or stats
    return clock.timing(stats.tokens if stats else 0, "".join(parts), stats)


def _absorb(event: Event, clock: _Clock, parts: list[str]) -> TurnStats | None:
    match event:
        case ContentDelta(text=text) | ThinkingDelta(text=text):
            clock.seen()
            parts.append(text)
        case TurnDone(stats=stats):
            return stats
        case TurnError(message=message):
            raise BenchError(f"the engine's turn failed: {message}")
        case _:
            pass
    return None


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


def interleaved_rounds(sides: list[Callable[[], Any]], runs: int) -> Iterator[list[Any]]:
    """`runs` interleaved rounds of every side, rotating which goes first; results in side order."""
    for i in range(runs):
        results: list[Any] = [None] * len(sides)
        for k in range(len(sides)):
            j = (i + k) % len(sides)
            results[j] = sides[j]()
        yield results


def prompt_depth(backend: LlamaBackend, work: Workload) -> int:
    """The KV depth at which Ember starts generating: its prompt's length in tokens."""
    ids, _ = backend.prompt_tokens(work.request.with_(messages=tuple(work.raw_messages)))
    return len(ids)


def compare(
    backend: LlamaBackend, work: Workload, runs: int, *, warmup: bool = True, native: Callable[[], float] | None = None
) -> dict[str, Any]:
    """Interleaved raw/engine(/native) runs after a warm-up; medians and the ratios.

    `native` runs one native llama-bench measurement and returns its tg tokens/s; it joins
    each round, so every side sees the same machine load.
    """

    def raw() -> RunTiming:
        return time_raw(backend, work)

    def engine() -> RunTiming:
        return time_engine(backend, work)

    # Ember's bounded template first: a hostile template then fails with Ember's one line
    # rather than the OverflowError llama-cpp-python's own renderer raises for it.
    prompt_depth(backend, work)
    if warmup:
        raw()
        engine()
    sides: list[Callable[[], Any]] = [raw, engine] if native is None else [raw, engine, native]
    rounds = list(interleaved_rounds(sides, max(1, runs)))
    report = {
        **summarize([(r[0], r[1]) for r in rounds], work.request.max_tokens),
        "flash_attn": backend.flash_attn_mode,
        "where": backend.where,
    }
    if native is not None:
        report.update(summarize_native([(r[1], r[2]) for r in rounds]))
    return report


def summarize_native(pairs: list[tuple[RunTiming, float]]) -> dict[str, Any]:
    """Ember against native llama-bench tg at the same depth, from interleaved (engine, native) pairs."""
    native = _median([n for _, n in pairs])
    engine_tps = _median([e.tokens_per_s for e, _ in pairs])
    ratios = [e.tokens_per_s / n for e, n in pairs if n > 0]
    return {
        "native_tg_tps": native,
        "native_tg_runs": [round(n, 2) for _, n in pairs],
        "engine_vs_native_tps_ratio": round(engine_tps / native, 3) if native else None,
        "native_pairwise_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
    }


def summarize(pairs: list[tuple[RunTiming, RunTiming]], max_tokens: int) -> dict[str, Any]:
    """The throughput figures from (raw, engine) pairs."""
    raw_tps = _median([r.tokens_per_s for r, _ in pairs])
    engine_tps = _median([e.tokens_per_s for _, e in pairs])
    raw_ttft = _median([r.ttft_ms for r, _ in pairs])
    engine_ttft = _median([e.ttft_ms for _, e in pairs])
    ratios = [e.tokens_per_s / r.tokens_per_s for r, e in pairs if r.tokens_per_s > 0]
    return {
        "engine_vs_raw_tps_ratio": round(engine_tps / raw_tps, 3) if raw_tps else None,
        "pairwise_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "engine_tps": engine_tps,
        "raw_tps": raw_tps,
        "engine_ttft_ms": engine_ttft,
        "raw_ttft_ms": raw_ttft,
        "ttft_ms": {"engine": engine_ttft, "raw": raw_ttft},
        "engine_tps_runs": [round(e.tokens_per_s, 2) for _, e in pairs],
        "raw_tps_runs": [round(r.tokens_per_s, 2) for r, _ in pairs],
        "engine_tokens": int(statistics.median([e.tokens for _, e in pairs])),
        "raw_tokens": int(statistics.median([r.tokens for r, _ in pairs])),
        "outputs_match": all(r.text == e.text for r, e in pairs),
        "runs": len(pairs),
        "max_tokens": max_tokens,
        "kv_reuse": KV_REUSE,
    }


# -- load time and memory, in a fresh interpreter --------------------------------------------


def rss_mb() -> float:
    """This process's resident memory (VmRSS), else its peak (ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def load_probe(model: str, n_ctx: int, threads: int, gpu_layers: int = AUTO_GPU_LAYERS) -> dict[str, float]:
    """Import llama.cpp, load the model as the app does, and read the memory it holds."""
    started = time.perf_counter()
    import llama_cpp  # noqa: F401  # pyright: ignore[reportUnusedImport]

    imported = time.perf_counter()
    base = rss_mb()
    backend = LlamaBackend(model, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=gpu_layers)
    loaded = time.perf_counter()
    after_load = rss_mb()
    try:
        work = Workload.story(1)
        for _ in TurnRunner(backend).run(work.request):
            pass
        after_first = rss_mb()
    finally:
        backend.close()
    return {
        "import_ms": round((imported - started) * 1000, 1),
        "load_ms": round((loaded - imported) * 1000, 1),
        "rss_before_load_mb": base,
        "rss_mb": after_load,
        "rss_after_first_token_mb": after_first,
    }


def probe_main() -> None:
    model, n_ctx, threads, gpu_layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(load_probe(model, n_ctx, threads, gpu_layers)))


def measure_load(
    model: Path,
    n_ctx: int,
    threads: int,
    env: dict[str, str],
    timeout_s: float = 300,
    gpu_layers: int = AUTO_GPU_LAYERS,
) -> dict[str, Any]:
    """`load_probe` in a fresh interpreter, so nothing is already imported or mapped."""
    code = "from tests.bench.llama import probe_main; probe_main()"
    child = python_child(code, str(model.absolute()), str(n_ctx), str(threads), str(gpu_layers), env=env)
    result = subprocess.run(
        child.argv, capture_output=True, text=True, env=child.env, cwd=child.cwd, timeout=timeout_s, check=False
    )
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"the load probe failed: {tail}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def open_backend(model: Path, n_ctx: int, threads: int, gpu_layers: int = AUTO_GPU_LAYERS) -> LlamaBackend:
    return LlamaBackend(model, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=gpu_layers)
