"""Predicted against measured decoding, side by side, for every model this machine can run in the bench.

One machine profile (`engine.backends.machine_profile`, on the built-in model), then for each
model its prediction from that profile and `ember bench`'s own measurement (`engine.bench.quick`),
in the same run: the machine is shared, so only figures taken together compare. The built-in
model and Gemma 3 270M (a dev dependency, `tests.real_models`) give `fit_decode_prediction_ratio`
and `fit_decode_prediction_ratio_gemma` (issue #48: within 0.67-1.5).

    python -m tests.bench.prediction [--threads N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.backends import machine_profile
from engine.backends.cpu_threads import default_threads
from engine.bench import quick
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


def collect(threads: int, say: Any = _say, notes: list[str] | None = None) -> dict[str, Any]:
    """The figures; `notes` (a list to append to) says what could not be measured."""
    notes = [] if notes is None else notes
    say("measuring the machine profile on the built-in model")
    start = time.perf_counter()
    profile = machine_profile.measure(threads, save=False, typical=True)  # as the turns are measured
    report: dict[str, Any] = {"machine_profile_seconds": round(time.perf_counter() - start, 1)}
    for name, path in _models(notes).items():
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
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.prediction")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    notes: list[str] = []
    print(json.dumps({**collect(args.threads or default_threads(), notes=notes), "notes": notes}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
