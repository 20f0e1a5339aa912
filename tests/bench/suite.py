"""`ember bench`, engine side: every measurement that needs no window, as one plain dict.

- throughput and time to first token, Ember's engine against raw llama-cpp-python on one
  loaded model (`tests.bench.llama`, which documents the fairness rules);
- model load time and resident memory, in a fresh interpreter;
- the scaffolding guardrail's cost per piece (`tests.bench.scaffolding_filter.bench_filter`);
- history search over 10,000 messages (the history module's `bench_search`, when present);
- optionally native llama.cpp's `llama-bench` on the same model, interleaved with Ember's runs
  at the same KV depth (`tests.bench.native`);
- speculative decoding (prompt lookup; a draft model when given) and the KV cache types
  (`tests.bench.speculative`).

Everything here is a measurement to report, never a pass/fail check. The GUI stall test
lives in `desktop/` and runs in its own process, so Qt never loads into this one.
"""

from __future__ import annotations

import importlib
import os
import platform
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
from engine.child_env import child_env
from engine.llama.cpu_threads import default_threads
from engine.llama.llama import LlamaBackend
from engine.llama.load_errors import precheck_model_file
from engine.llama.offload import ALL_LAYERS
from models.library.settings import AUTO_GPU_LAYERS
from tests.bench import llama as bench_llama
from tests.bench import speculative as bench_spec
from tests.bench.cpu_variant import compare_variants
from tests.bench.cpu_variant import in_use as variant_in_use
from tests.bench.native import NativeRun
from tests.bench.scaffolding_filter import bench_filter
from tests.bench.vulkan import BUILD_SECONDS_CPU_ONLY, BUILD_SECONDS_WITH_VULKAN, compare_vulkan, vulkan_device

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run. The defaults are the full bench; `quick()` fits in about a minute."""

    model: Path | None = None
    runs: int = 7
    max_tokens: int = 128
    n_ctx: int = 2048
    threads: int | None = None
    filter_bytes: int = 1_000_000
    history_messages: int = 10_000
    llama_bench: Path | None = None  # a built `llama-bench` binary, for the native figure
    gpu_layers: int = AUTO_GPU_LAYERS  # as the app: as many as fit on the GPU, 0 = CPU only
    draft_model: Path | None = None  # a draft model for `spec_draft_speedup`
    decode_extras: bool = True  # speculative decoding and the KV cache types

    def quick(self) -> BenchConfig:
        return replace(self, runs=3, max_tokens=64, filter_bytes=250_000)

    def model_path(self) -> Path:
        if self.model is not None:
            return self.model
        from models.library.default_model import default_model_path

        return default_model_path()

    def thread_count(self) -> int:
        return self.threads or default_threads()


# -- the machine ---------------------------------------------------------------------------


def cpu_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def system_info(config: BenchConfig, model: Path) -> dict[str, Any]:
    import llama_cpp

    return {
        "cpu": cpu_name(),
        "logical_cpus": os.cpu_count() or 1,
        "threads": config.thread_count(),
        "load_average": load_average(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "llama_cpp_python": str(getattr(llama_cpp, "__version__", "?")),
        "model": model.name,
        "model_path": str(model),
        "n_ctx": config.n_ctx,
        "gpu_layers": config.gpu_layers,
    }


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


# -- the steps -----------------------------------------------------------------------------


def measure_load(config: BenchConfig, model: Path) -> dict[str, Any]:
    return bench_llama.measure_load(
        model, config.n_ctx, config.thread_count(), child_env(), gpu_layers=config.gpu_layers
    )


def measure_throughput(config: BenchConfig, model: Path, notes: list[str]) -> dict[str, Any]:
    """Ember against raw llama-cpp-python and, with `llama_bench`, native llama.cpp, interleaved."""
    backend = bench_llama.open_backend(model, config.n_ctx, config.thread_count(), config.gpu_layers)
    # Prompt lookup off: this compares the per-token cost with native's one token a step;
    # `spec_chat_ratio` (measure_decoding) is what lookup does on this same prompt.
    backend.prompt_lookup = False
    try:
        work = bench_llama.Workload.story(config.max_tokens)
        native = native_runner(config, model, backend, work)
        try:
            report = bench_llama.compare(backend, work, config.runs, native=native)
        except (OSError, RuntimeError, ValueError) as exc:
            if native is None:
                raise
            notes.append(f"llama-bench: {exc}; measured without it")
            return {**bench_llama.compare(backend, work, config.runs, warmup=False), **NO_NATIVE}
        if native is not None:
            report.update(
                native_depth=native.depth,
                native_flash_attn=native.flash_attn,
                native_test=f"tg{native.n_gen} @ d{native.depth}",
                native_command=" ".join(native.command()),
            )
        return report
    finally:
        backend.close()


NO_NATIVE: dict[str, Any] = {"native_tg_tps": None, "engine_vs_native_tps_ratio": None}


def native_runner(
    config: BenchConfig, model: Path, backend: LlamaBackend, work: bench_llama.Workload
) -> NativeRun | None:
    """One native llama-bench tg run at Ember's settings and prompt depth, or None if not asked."""
    if config.llama_bench is None:
        return None
    layers = ALL_LAYERS if backend.placement.n_gpu_layers == ALL_LAYERS else backend.n_gpu_layers
    return NativeRun(
        config.llama_bench,
        model,
        config.thread_count(),
        n_gen=config.max_tokens,
        depth=bench_llama.prompt_depth(backend, work),
        flash_attn=backend.flash_attn_mode,
        n_gpu_layers=layers,
    )


def measure_decoding(config: BenchConfig, model: Path, notes: list[str], *, memory: bool = True) -> dict[str, Any]:
    """Speculative decoding and the KV cache types, each side by side in one interleaved run."""
    threads, layers = config.thread_count(), config.gpu_layers
    backend = bench_llama.open_backend(model, config.n_ctx, threads, layers)
    try:
        report = bench_spec.measure_speculative(backend, config.runs, config.max_tokens)
    finally:
        backend.close()
    if not report["spec_lookup_outputs_match"] or not report["spec_chat_outputs_match"]:
        notes.append("greedy replies differed with and without prompt lookup")
    if config.draft_model is not None:
        report.update(
            bench_spec.measure_draft(
                model, config.draft_model, config.n_ctx, threads, config.runs, config.max_tokens, layers
            )
        )
    else:
        report["spec_draft_speedup"] = None
    report.update(bench_spec.compare_kv(model, threads, config.runs, config.max_tokens, layers))
    # Both sides on the CPU (n_gpu_layers=0 in the children): the variant decides only what runs there.
    report.update(compare_variants(model, threads, config.runs, child_env()))
    report.update(compare_vulkan(model, threads, child_env()))
    if memory:
        report.update(bench_spec.measure_kv_memory(model, threads, layers, child_env()))
    return report


def measure_filter(n_bytes: int) -> dict[str, Any]:
    return {"filter_us_per_piece": round(bench_filter(n_bytes), 3), "filter_bytes": n_bytes}


def _find_bench_search() -> Callable[..., float] | None:
    """`bench_search(n_messages=…) -> ms` from the history module, wherever it lives."""
    for name in ("engine.history.store", "tests.bench.history"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(module, "bench_search", None)
        if callable(fn):
            return cast(Callable[..., float], fn)
    return None


def measure_history(n_messages: int, notes: list[str]) -> dict[str, Any]:
    fn = _find_bench_search()
    if fn is None:
        notes.append("history_search_ms: no bench_search in engine.history.store yet")
        return {"history_search_ms": None, "history_messages": n_messages}
    try:
        ms = round(float(fn(n_messages=n_messages)), 2)
    except (sqlite3.Error, OSError) as exc:  # e.g. a Python whose SQLite lacks full-text search
        notes.append(f"history_search_ms: {type(exc).__name__}: {exc}")
        return {"history_search_ms": None, "history_messages": n_messages}
    return {"history_search_ms": ms, "history_messages": n_messages}


# -- the whole run -------------------------------------------------------------------------


def _quiet(_message: str) -> None:
    pass


def run_engine_bench(config: BenchConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run every engine-side measurement; the report dict has a `notes` list for gaps."""
    say = progress or _quiet
    model = config.model_path()
    precheck_model_file(model)
    notes: list[str] = []
    report: dict[str, Any] = system_info(config, model)
    say("loading the model in a fresh process")
    report.update(measure_load(config, model))
    sides = "raw llama-cpp-python and native llama-bench" if config.llama_bench else "raw llama-cpp-python"
    say(f"engine vs {sides}: {config.runs} interleaved rounds of {config.max_tokens} tokens")
    report.update(measure_throughput(config, model, notes))
    report.setdefault("native_tg_tps", None)
    report.setdefault("engine_vs_native_tps_ratio", None)
    if not report["outputs_match"]:
        notes.append("the raw and engine replies differed; tokens/s are per generated token")
    if config.decode_extras:
        say("speculative decoding (prompt lookup, draft model) and the KV cache types")
        report.update(measure_decoding(config, model, notes))
    say("guardrail cost")
    report.update(measure_filter(config.filter_bytes))
    say(f"history search over {config.history_messages} messages")
    report.update(measure_history(config.history_messages, notes))
    report.setdefault("cpu_variant", variant_in_use())  # measured above, or named without measuring
    report.setdefault("vulkan_device", vulkan_device())
    report.setdefault("vulkan_vs_cpu_tps_ratio", None)
    report.setdefault("build_seconds_cpu_only", BUILD_SECONDS_CPU_ONLY)
    report.setdefault("build_seconds_with_vulkan", BUILD_SECONDS_WITH_VULKAN)
    report["notes"] = notes
    return report


if __name__ == "__main__":  # pragma: no cover - a manual entry point
    import json

    print(json.dumps(run_engine_bench(BenchConfig().quick(), lambda m: print(m, file=sys.stderr)), indent=2))
