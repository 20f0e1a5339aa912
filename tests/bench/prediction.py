"""Predicted against measured decoding, side by side, for every model this machine can run in the bench.

One machine profile (`engine.llama.machine_profile`, on the built-in model), then for each
model its prediction from that profile and `ember bench`'s own measurement (`engine.bench.quick`),
in the same run: the machine is shared, so only figures taken together compare. `--rounds N`
repeats profile and models alternately and reports the medians (each round's profile predicts
that round's measurements). The built-in model and Gemma 3 270M (a dev dependency,
`tests.real_models`) give `fit_decode_prediction_ratio` and `fit_decode_prediction_ratio_gemma`
(issue #48: within 0.67-1.5). `machine_profile_seconds` sits beside `bench_turn_seconds`, one
timed turn of `ember bench` on the built-in model.

    python -m tests.bench.prediction [--threads N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from engine.bench import quick
from engine.llama import machine_profile
from engine.llama.cpu_threads import default_threads
from models.gguf.meta import read_metadata
from models.library.default_model import shipped_model_path
from models.library.speed import predict_meta


def _say(message: str) -> None:
    sys.stderr.write(f"bench prediction: {message}…\n")


def _models(notes: list[str]) -> dict[str, Path]:
    models = {"builtin": shipped_model_path()}
    try:
        from tests.real_models import gemma_file

        models["gemma"] = gemma_file()
    except BaseException as exc:  # pytest's skip when the dev packages are missing is a BaseException
        notes.append(f"Gemma 3 270M not measured: {exc}")
    return models


def collect(threads: int, say: Any = _say, notes: list[str] | None = None, rounds: int = 1) -> dict[str, Any]:
    """The figures (medians over `rounds` alternating rounds); `notes` says what could not be measured."""
    notes = [] if notes is None else notes
    models = _models(notes)
    runs = [_round(threads, models, say) for _ in range(rounds)]
    report = {key: _median([r.get(key) for r in runs]) for key in runs[0]}
    if rounds > 1:
        report["rounds"] = {key: [r.get(key) for r in runs] for key in runs[0] if "ratio" in key or "seconds" in key}
    return report


def _round(threads: int, models: dict[str, Path], say: Any) -> dict[str, Any]:
    say("measuring the machine profile on the built-in model")
    start = time.perf_counter()
    profile = machine_profile.measure(threads, save="never", typical=True)  # as the turns are measured
    report: dict[str, Any] = {"machine_profile_seconds": round(time.perf_counter() - start, 1)}
    for name, path in models.items():
        meta = read_metadata(path)
        guess = predict_meta(profile, meta)
        say(f"measuring {path.name}")
        measured = quick.measure(path, threads, 0, say)
        suffix = "" if name == "builtin" else f"_{name}"
        tps = measured.get("engine_tps")
        report.update(
            {
                f"predicted_tps{suffix}": round(guess.decode_tps, 2),
                f"measured_tps{suffix}": tps,
                f"predicted_pp_tps{suffix}": round(guess.prompt_tps, 1),
                f"measured_pp_tps{suffix}": measured.get("engine_pp_tps"),
                f"fit_decode_prediction_ratio{suffix}": round(guess.decode_tps / tps, 3) if tps else None,
            }
        )
        if name == "builtin" and tps:  # one timed turn: the prompt, then the rest of its tokens
            turn = measured["engine_ttft_ms"] / 1000 + (quick.MAX_TOKENS - 1) / tps
            report["bench_turn_seconds"] = round(turn, 1)
    return report


def _median(values: list[Any]) -> Any:
    numbers = [v for v in values if isinstance(v, int | float)]
    return round(statistics.median(numbers), 3) if numbers else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.prediction")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds of profile and models (medians)")
    args = p.parse_args(argv)
    notes: list[str] = []
    report = collect(args.threads or default_threads(), notes=notes, rounds=max(1, args.rounds))
    print(json.dumps({**report, "notes": notes}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
