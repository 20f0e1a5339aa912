"""`ember bench`, engine side: every measurement that needs no window, as one plain dict.

- throughput and time to first token, Ember's engine against raw llama-cpp-python on one
  loaded model (`engine.bench_llama`, which documents the fairness rules);
- model load time and resident memory, in a fresh interpreter;
- the scaffolding guardrail's cost per piece (`engine.scaffolding.bench_filter`);
- history search over 10,000 messages (the history module's `bench_search`, when present);
- optionally native llama.cpp's `llama-bench` on the same model (`engine.bench_native`).

Everything here is a measurement to report, never a pass/fail check. The GUI stall test
lives in `desktop/` and runs in its own process, so Qt never loads into this one.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import engine
from engine import bench_llama
from engine.errors import BenchError
from engine.llama_backend import default_threads
from engine.load_errors import precheck_model_file
from engine.scaffolding import bench_filter

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

    def quick(self) -> BenchConfig:
        return replace(self, runs=3, max_tokens=64, filter_bytes=250_000)

    def model_path(self) -> Path:
        if self.model is not None:
            return self.model
        from models.default_model import default_model_path

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
    }


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a measuring child: this checkout first on its import path."""
    env = dict(os.environ)
    root = str(Path(engine.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


# -- the steps -----------------------------------------------------------------------------


def measure_load(config: BenchConfig, model: Path) -> dict[str, Any]:
    return bench_llama.measure_load(model, config.n_ctx, config.thread_count(), subprocess_env())


def measure_throughput(config: BenchConfig, model: Path) -> dict[str, Any]:
    backend = bench_llama.open_backend(model, config.n_ctx, config.thread_count())
    try:
        work = bench_llama.Workload.story(config.max_tokens)
        return bench_llama.compare(backend, work, config.runs)
    finally:
        backend.close()


def measure_filter(n_bytes: int) -> dict[str, Any]:
    return {"filter_us_per_piece": round(bench_filter(n_bytes), 3), "filter_bytes": n_bytes}


def _find_bench_search() -> Callable[..., float] | None:
    """`bench_search(n_messages=…) -> ms` from the history module, wherever it lives."""
    for name in ("engine.history", "engine.history_bench"):
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
        notes.append("history_search_ms: no bench_search in engine.history yet")
        return {"history_search_ms": None, "history_messages": n_messages}
    return {"history_search_ms": round(float(fn(n_messages=n_messages)), 2), "history_messages": n_messages}


def measure_native(config: BenchConfig, model: Path, ember: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """llama-bench's tg figure next to Ember's (same threads, flash-attention setting), when asked."""
    empty: dict[str, Any] = {"native_tg_tps": None, "engine_vs_native_tps_ratio": None}
    if config.llama_bench is None:
        return empty
    from engine.bench_native import run_llama_bench

    engine_tps: float | None = ember.get("engine_tps")
    try:
        native = run_llama_bench(config.llama_bench, model, config.thread_count(), n_gen=config.max_tokens,
                                 flash_attn=str(ember.get("flash_attn", "auto")))
    except (OSError, RuntimeError, ValueError, BenchError) as exc:
        notes.append(f"llama-bench: {exc}")
        return empty
    tg = float(native["native_tg_tps"])
    native["engine_vs_native_tps_ratio"] = round(engine_tps / tg, 3) if engine_tps and tg else None
    return native


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
    say(f"engine vs raw llama-cpp-python: {config.runs} interleaved pairs of {config.max_tokens} tokens")
    report.update(measure_throughput(config, model))
    if not report["outputs_match"]:
        notes.append("the raw and engine replies differed; tokens/s are per generated token")
    say("guardrail cost")
    report.update(measure_filter(config.filter_bytes))
    say(f"history search over {config.history_messages} messages")
    report.update(measure_history(config.history_messages, notes))
    if config.llama_bench is not None:
        say("native llama-bench")
    report.update(measure_native(config, model, report, notes))
    report["notes"] = notes
    return report


if __name__ == "__main__":  # pragma: no cover - a manual entry point
    import json

    print(json.dumps(run_engine_bench(BenchConfig().quick(), lambda m: print(m, file=sys.stderr)), indent=2))
