"""Native llama.cpp's own `llama-bench`, run on the same model for comparison (a developer
instrument: it lives in tests/bench and runs from a source checkout, never in the wheel or the app).

llama-cpp-python ships llama.cpp's sources; building only the `llama-bench` target gives
the number the C++ runtime reaches without any Python. `tg` is the decode rate over `n_gen`
tokens, `pp` the prompt rate over `n_prompt` tokens.

`python -m tests.bench --llama-bench PATH` runs `NativeRun` once per round, interleaved with Ember's
runs, at the KV depth of Ember's prompt (`-d`): that gives `engine_vs_native_tps_ratio`.
`run_llama_bench` is the one-off form: one figure with Ember's flash-attention setting (like
for like) and one with llama-bench's defaults (`-fa auto`), the figure people quote;
`beside_quick` puts it beside the default run's figures (`python -m tests.bench --beside-quick --llama-bench PATH`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import BenchError

N_PROMPT = 64
N_GEN = 128
FA_CODES = {-1: "auto", 0: "off", 1: "on"}  # llama-bench's JSON `flash_attn` → its `-fa` value


def run_llama_bench(
    binary: Path, model: Path, threads: int, *, n_gen: int = N_GEN, flash_attn: str = "auto", timeout_s: float = 600
) -> dict[str, Any]:
    """`llama-bench -m MODEL -p 64 -n N -t THREADS -fa EMBER[,auto] -o json`, parsed."""
    modes = flash_attn if flash_attn == "auto" else f"{flash_attn},auto"
    cmd = [str(binary), "-m", str(model), "-p", str(N_PROMPT), "-n", str(n_gen), "-t", str(threads),
           "-fa", modes, "-o", "json"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"llama-bench failed ({result.returncode}): {tail}")
    return parse_llama_bench(result.stdout, flash_attn)


def beside_quick(
    binary: Path, model: Path, threads: int, report: dict[str, Any], notes: list[str], n_gen: int
) -> dict[str, Any]:
    """llama-bench's pp64/tg on the same model, and Ember / native for decoding (`report`'s
    `engine_tps`); a failed run is a note and empty figures, not a failed bench."""
    try:
        out = run_llama_bench(binary, model, threads, n_gen=n_gen, flash_attn="auto", timeout_s=45)
    except (BenchError, OSError, ValueError) as exc:
        notes.append(f"llama-bench: {exc}")
        return {"native_tg_tps": None, "engine_vs_native_tps_ratio": None}
    tps = report.get("engine_tps")
    out["engine_vs_native_tps_ratio"] = round(tps / out["native_tg_tps"], 3) if tps else None
    return out


def parse_llama_bench(stdout: str, flash_attn: str = "auto") -> dict[str, Any]:
    """The tg (and pp) rows for Ember's flash-attention setting, plus the default tg row."""
    rows: list[dict[str, Any]] = json.loads(stdout)
    out: dict[str, Any] = {"native_flash_attn": flash_attn}
    for row in rows:
        mode = FA_CODES.get(int(row.get("flash_attn", -1)), "?")
        n_prompt, n_gen = int(row.get("n_prompt", 0)), int(row.get("n_gen", 0))
        rate = round(float(row["avg_ts"]), 2)
        if n_gen and not n_prompt:
            if mode == flash_attn:
                out.update(
                    native_tg_tps=rate,
                    native_tg_stddev=round(float(row.get("stddev_ts", 0.0)), 2),
                    native_test=f"tg{n_gen}",
                )
            if mode == "auto":
                out["native_tg_default_tps"] = rate
        elif n_prompt and not n_gen and mode == flash_attn:
            out["native_pp_tps"] = rate
        out.setdefault("native_build", str(row.get("build_commit", "")))
    if "native_tg_tps" not in out:
        raise BenchError(f"llama-bench printed no generation (tg) result with flash attention {flash_attn}")
    return out


@dataclass(frozen=True, slots=True)
class NativeRun:
    """One `llama-bench` tg measurement like Ember's: same model, threads, layers, flash attention,
    and the same KV depth (`-d`, Ember's prompt length), so both decode at the same context fill."""

    binary: Path
    model: Path
    threads: int
    n_gen: int
    depth: int
    flash_attn: str = "on"
    n_gpu_layers: int = 0  # -1 = all
    timeout_s: float = 300

    def command(self) -> list[str]:
        return _bench_command(self, n_prompt=0, n_gen=self.n_gen, depth=self.depth, reps=1)

    def __call__(self) -> float:
        """Run it once; its tg tokens/s."""
        return float(parse_llama_bench(_run(self.command(), self.timeout_s), self.flash_attn)["native_tg_tps"])


@dataclass(frozen=True, slots=True)
class NativePrompt:
    """`llama-bench -p N -n 0 -d D`: native llama.cpp reading N new prompt tokens after D in the KV cache.

    That is a time to first token at the hardware's floor: the first token is sampled from
    the prompt's last logits, so no decode step follows the prompt before it.
    """

    binary: Path
    model: Path
    threads: int
    flash_attn: str = "on"
    n_gpu_layers: int = 0  # -1 = all
    reps: int = 3
    timeout_s: float = 300

    def command(self, n_prompt: int, depth: int) -> list[str]:
        return _bench_command(self, n_prompt=n_prompt, n_gen=0, depth=depth, reps=self.reps)

    def __call__(self, n_prompt: int, depth: int) -> float:
        """Milliseconds to read the prompt (the mean of `reps` runs)."""
        return prompt_ms(_run(self.command(n_prompt, depth), self.timeout_s), n_prompt)


def _bench_command(run: NativeRun | NativePrompt, *, n_prompt: int, n_gen: int, depth: int, reps: int) -> list[str]:
    """`llama-bench` with the run's model, threads, layers (-1: all) and flash attention, JSON out."""
    ngl = 99 if run.n_gpu_layers < 0 else run.n_gpu_layers
    return [str(run.binary), "-m", str(run.model), "-p", str(n_prompt), "-n", str(n_gen), "-d", str(depth),
            "-t", str(run.threads), "-ngl", str(ngl), "-fa", run.flash_attn, "-r", str(reps),
            "-o", "json"]  # fmt: skip


def _run(command: list[str], timeout_s: float) -> str:
    """llama-bench's stdout; BenchError with its last error line when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"llama-bench failed ({result.returncode}): {tail}")
    return result.stdout


def prompt_ms(stdout: str, n_prompt: int) -> float:
    """The pp row's time for `n_prompt` tokens, in ms, from llama-bench's JSON."""
    rows: list[dict[str, Any]] = json.loads(stdout)
    for row in rows:
        if int(row.get("n_prompt", 0)) == n_prompt and not int(row.get("n_gen", 0)):
            if "avg_ns" in row:
                return float(row["avg_ns"]) / 1e6
            return n_prompt / float(row["avg_ts"]) * 1000
    raise BenchError(f"llama-bench printed no prompt (pp{n_prompt}) result")
