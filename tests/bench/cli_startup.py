"""Start-up in `ember bench`: each figure beside `python -c pass`, in the same environment.

- `startup_version_ms`: `ember --version` as a process, start to exit;
- `startup_history_list_ms`: `ember history list` on an empty history, the same way;
- `startup_window_first_paint_ms`, `startup_model_ready_ms`: `ember` (the window, offscreen,
  the built-in model) from the process's start to its first paint and to its model being
  ready (`tests.tools.startup_probe` reports both);
- `startup_python_floor_ms`: `python -c pass`, the floor every figure stands on.

Each is the median of a few runs, interleaved, each in a fresh throwaway EMBER_HOME.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from engine.child_env import python_child
from engine.errors import BenchError

ENTRY = "from desktop.cli.main import main; raise SystemExit(main())"  # what the `ember` script runs
PROBE = "from tests.tools.startup_probe import main; raise SystemExit(main())"
FIELDS = (
    "startup_python_floor_ms",
    "startup_version_ms",
    "startup_history_list_ms",
    "startup_window_first_paint_ms",
    "startup_model_ready_ms",
)


def measure_startup(runs: int = 3, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    samples: dict[str, list[float]] = {field: [] for field in FIELDS}
    for _ in range(runs):
        samples["startup_python_floor_ms"].append(_process_ms("pass"))
        samples["startup_version_ms"].append(_process_ms(ENTRY, "--version"))
        samples["startup_history_list_ms"].append(_process_ms(ENTRY, "history", "list"))
        painted, ready = _window_ms()
        samples["startup_window_first_paint_ms"].append(painted)
        samples["startup_model_ready_ms"].append(ready)
        say("start-up: one round done")
    out: dict[str, Any] = {field: round(statistics.median(values), 1) for field, values in samples.items()}
    out["startup_runs"] = runs
    return out


def _process_ms(code: str, *args: str) -> float:
    with tempfile.TemporaryDirectory(prefix="ember-startup-") as home:
        child = python_child(code, *args, EMBER_HOME=home)
        start = time.perf_counter()
        done = subprocess.run(
            child.argv, capture_output=True, text=True, check=False, timeout=120, env=child.env, cwd=child.cwd
        )
        elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise BenchError(
            f"{' '.join(args) or 'python'} failed ({done.returncode}): "
            f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}"
        )
    return elapsed


def _window_ms() -> tuple[float, float]:
    """(first paint, model ready), in ms from the process's start."""
    seen: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ember-startup-") as home:
        probe = python_child(PROBE, EMBER_HOME=home, QT_QPA_PLATFORM="offscreen")
        start = time.perf_counter()
        with subprocess.Popen(
            probe.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=probe.env, cwd=probe.cwd
        ) as child:
            assert child.stdout is not None
            for line in child.stdout:
                word = line.split(" ", 1)[0].strip()
                seen.setdefault(word, (time.perf_counter() - start) * 1000)
                if word == "failed":
                    raise BenchError(f"the window's model did not load: {line.strip()}")
            child.wait(timeout=120)
    if "painted" not in seen or "ready" not in seen:
        raise BenchError(f"the window did not report its start-up (saw {sorted(seen) or 'nothing'})")
    return seen["painted"], seen["ready"]


def report_rows(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    if r.get("startup_version_ms") is None:
        return []
    floor = r["startup_python_floor_ms"]
    return [
        row(
            "start-up",
            f"ember --version {r['startup_version_ms']} ms, history list {r['startup_history_list_ms']} "
            f"ms (python -c pass {floor} ms)",
        ),
        row(
            "window",
            f"first paint {r['startup_window_first_paint_ms']} ms, model ready "
            f"{r['startup_model_ready_ms']} ms (offscreen, built-in model)",
        ),
    ]
