"""`ember bench`: how fast a model is on this machine, answered in well under a minute.

The model's prompt reading and decoding speed and its time to first token, through Ember's
own pipeline (`engine.bench.quick`).

The long comparisons (raw llama-cpp-python, native llama.cpp, the GUI under load, long chats,
documents, the API server, start-up, downloads) are developer instruments: they live in the
source checkout and run as `python -m tests.bench` (which reuses `add_common` and `collect`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from desktop.cli.arg_checks import threads_arg
from engine.api.errors import EmberError, EngineError

EXIT_OK, EXIT_FAILED = 0, 2


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="how fast a model is here, in well under a minute")
    add_common(p)
    p.set_defaults(func=run)


def add_common(p: argparse.ArgumentParser) -> None:
    """The flags the quick bench and the long comparisons (`python -m tests.bench`) share."""
    p.add_argument(
        "--model", type=Path, default=argparse.SUPPRESS, metavar="PATH", help="GGUF file (default: the built-in model)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--threads", type=threads_arg, default=None, metavar="N", help="llama.cpp threads (default: logical CPUs)"
    )
    p.add_argument(
        "--gpu-layers",
        type=_layers,
        default=-1,
        metavar="N",
        help="layers on the GPU: -1 as many as fit (the default, as the app), 0 CPU only",
    )


def _layers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -2
    if value < -1:
        raise argparse.ArgumentTypeError(f"expected -1 (as many as fit), 0 (CPU) or a layer count, got {text!r}")
    return value


def _say(message: str) -> None:
    sys.stderr.write(f"ember bench: {message}…\n")
    sys.stderr.flush()


# -- the default run -------------------------------------------------------------------------


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """The quick report: this model's speed here."""
    from engine.api.machine import bench_measure, bench_prediction, default_threads, prediction_ratio
    from engine.api.models import default_model_path, precheck_model_file

    started = time.perf_counter()
    model = Path(getattr(args, "model", None) or default_model_path()).expanduser()
    precheck_model_file(model)
    threads = args.threads or default_threads()
    notes: list[str] = []
    report: dict[str, Any] = {
        "model": model.name,
        "model_path": str(model),
        "cpu": _cpu_name(),
        "threads": threads,
        "logical_cpus": os.cpu_count() or 1,
        "load_average": _load(),
        "notes": notes,
    }
    report.update(bench_prediction(model, threads, _say))  # before the turns: a prediction, then the figure
    report.update(bench_measure(model, threads, args.gpu_layers, _say))
    report["fit_decode_prediction_ratio"] = prediction_ratio(report)
    report["load_average_end"] = _load()
    report["bench_default_seconds"] = round(time.perf_counter() - started, 1)
    return report


def _cpu_name() -> str:
    from engine.api.machine import read_cpuinfo

    for line in read_cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _num(value: Any, unit: str = "", digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"Ember bench: {r['model']}",
        f"CPU: {r['cpu']}, {r['threads']} threads (load average {r['load_average']} → {r['load_average_end']})",
        f"prompt reading      {_num(r['engine_pp_tps'])} tokens/s ({r['prompt_tokens']}-token prompt)",
        f"decoding            {_num(r['engine_tps'])} tokens/s",
        f"time to first token {_num(r['engine_ttft_ms'], ' ms', 0)}  (model load {_num(r['load_ms'], ' ms', 0)})",
    ]
    if r.get("predicted_tps") is not None:
        lines.append(
            f"predicted here      decoding {_num(r['predicted_tps'])}, prompt {_num(r.get('predicted_pp_tps'))} "
            f"tokens/s (predicted / measured decoding {_num(r.get('fit_decode_prediction_ratio'), digits=2)}; "
            f"machine profile {_num(r.get('machine_profile_seconds'))} s)"
        )
    if r.get("native_tg_tps") is not None:
        lines.append(
            f"native llama-bench  pp {_num(r.get('native_pp_tps'))}, tg {_num(r['native_tg_tps'])} tokens/s"
            f" (Ember / native decoding {_num(r['engine_vs_native_tps_ratio'], digits=3)})"
        )
    lines.append(f"answered in {r['bench_default_seconds']} s")
    lines += [f"note: {n}" for n in r["notes"]]
    return "\n".join(lines)


# -- the command -----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        report = collect(args)
    except (EngineError, EmberError, FileNotFoundError, RuntimeError) as exc:
        sys.stderr.write(f"ember: bench failed: {exc}\n")
        return EXIT_FAILED
    sys.stdout.write((json.dumps(report, ensure_ascii=False) if args.json else format_report(report)) + "\n")
    return EXIT_OK
