"""Children that speak the CPU probe's protocol (engine/llama/cpu.py), run as real
functions in child processes. `broken` traps while merely loading (the score child),
`sapphirerapids` while decoding (its probe): both die of a real SIGILL."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

SCORES = {"x64": 1, "haswell": 50, "icelake": 80, "zen4": 90, "sapphirerapids": 99, "broken": 95}
INFO = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | OPENMP = 1 |"


def _name(path: str) -> str:
    return Path(path).name.removeprefix("libggml-cpu-").removesuffix(".so")


def score() -> int:
    for path in sys.argv[1:]:
        print("trying", path, flush=True)
        if _name(path) == "broken":
            os.kill(os.getpid(), signal.SIGILL)
        print("score", SCORES.get(_name(path), 0), path, flush=True)
    return 0


def probe() -> int:
    name = _name(sys.argv[1])
    print("features:", INFO, flush=True)
    if name == "sapphirerapids":
        os.kill(os.getpid(), signal.SIGILL)
    print("decoded", flush=True)
    return 0


def hang_while_scoring() -> int:
    print("trying", sys.argv[1], flush=True)
    time.sleep(30)
    return 0


def hang() -> int:
    time.sleep(30)
    return 0
