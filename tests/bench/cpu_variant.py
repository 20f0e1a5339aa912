"""The CPU variant chosen at run time against the AVX2-only one (`haswell`), side by side (#24).

One process can hold one CPU variant, so each side is a child process with `EMBER_CPU_VARIANT`
set: the same model and threads, a 256-token prompt read in one batch (`pp`) and 64 single-token
decodes (`tg`), raw llama-cpp-python calls so that nothing but the variant differs. Rounds
alternate the two sides; each ratio is the chosen side's median over the portable side's median.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from engine.child_env import PythonChild, python_child
from engine.errors import BenchError
from engine.llama.cpu import FORCE_ENV, ensure_backends, lib_dir, variant_files

PORTABLE = "haswell"  # AVX2 + FMA + F16C + BMI2: what the one-variant build used (-DGGML_NATIVE=OFF)
N_PROMPT, N_GEN = 256, 64
TIMEOUT_S = 600.0

MEASURE_CODE = """
import json, sys, time
from engine.llama.cpu import ensure_backends
choice = ensure_backends()
from engine.llama.llama_plain import new_llama
threads, n_prompt, n_gen = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = new_llama(model_path=sys.argv[1], n_ctx=512, n_batch=n_prompt, n_ubatch=n_prompt,
                n_threads=threads, n_threads_batch=threads, n_gpu_layers=0, verbose=False)
prompt = llm.tokenize(b"The quick brown fox jumps over the lazy dog, then naps in the sun. " * 40)[:n_prompt]
start = time.perf_counter()
llm.eval(prompt)
pp = len(prompt) / (time.perf_counter() - start)
token = llm.tokenize(b" the", add_bos=False)[0]
start = time.perf_counter()
for _ in range(n_gen):
    llm.eval([token])
tg = n_gen / (time.perf_counter() - start)
print(json.dumps({"variant": choice.chosen if choice else None, "pp": pp, "tg": tg}))
"""


def in_use() -> str | None:
    """The CPU variant this process runs on, by name (every bench report has it)."""
    choice = ensure_backends()
    return choice.chosen if choice else "built in (one variant)"


def run_measuring(child: PythonChild) -> tuple[dict[str, Any] | None, str]:
    """A measuring child's result (its last line of output, JSON), or None and why: "(STATUS): the
    last line it wrote to stderr"."""
    done = subprocess.run(
        child.argv,
        env=child.env,
        cwd=child.cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return None, f"({done.returncode}): {tail}"
    return json.loads(lines[-1]), ""


def measure_variant(name: str, model: Path, threads: int, env: dict[str, str]) -> dict[str, Any]:
    """One child on the named variant: {"variant", "pp", "tg"} (tokens per second)."""
    child = python_child(
        MEASURE_CODE, str(model.absolute()), str(threads), str(N_PROMPT), str(N_GEN), env=env, **{FORCE_ENV: name}
    )
    result, failure = run_measuring(child)
    if result is None:
        raise BenchError(f"CPU variant {name}: the measuring child failed {failure}")
    if result.get("variant") != name:
        raise BenchError(f"CPU variant {name}: the child ran {result.get('variant')!r} instead")
    return result


def compare_variants(model: Path, threads: int, rounds: int, env: dict[str, str]) -> dict[str, Any]:
    """`cpu_variant` and `default_vs_portable_{tg,pp}_ratio` (None where there is nothing to compare)."""
    choice = ensure_backends()
    files = variant_files(lib_dir())
    out: dict[str, Any] = {
        "cpu_variant": in_use(),
        "cpu_variant_how": choice.how if choice else "chosen when llama.cpp was built",
        "cpu_variants_built": len(files),
        "default_vs_portable_tps_ratio": None,
        "default_vs_portable_pp_ratio": None,
    }
    if choice is None or choice.chosen is None or PORTABLE not in files:
        return out
    sides: dict[str, list[dict[str, Any]]] = {choice.chosen: [], PORTABLE: []}
    for i in range(rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))  # neither side always goes first
        for name in order:
            sides[name].append(measure_variant(name, model, threads, env))
    chosen, portable = sides[choice.chosen], sides[PORTABLE]
    for key, row in (("tg", "default_vs_portable_tps_ratio"), ("pp", "default_vs_portable_pp_ratio")):
        mine, theirs = statistics.median(r[key] for r in chosen), statistics.median(r[key] for r in portable)
        out[row] = round(mine / theirs, 3) if theirs else None
        out[f"cpu_variant_{key}_tps"] = round(mine, 1)
        out[f"portable_{key}_tps"] = round(theirs, 1)
    out["cpu_variant_rounds"] = rounds
    return out


# Each x86-64 variant's nearest lower level (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS): what
# a variant must beat to be worth its build (#53). `x64` is the floor. A build with only some of
# them (pyproject.toml's EMBER_CPU_VARIANTS) compares each with the nearest lower one it has.
LOWER = {
    "sse42": "x64",
    "sandybridge": "sse42",
    "ivybridge": "sandybridge",
    "piledriver": "ivybridge",
    "haswell": "piledriver",
    "alderlake": "haswell",
    "skylakex": "haswell",
    "cannonlake": "skylakex",
    "cascadelake": "skylakex",
    "icelake": "cascadelake",
    "cooperlake": "cascadelake",
    "zen4": "icelake",
    "sapphirerapids": "zen4",
}


def nearest_lower(name: str, measured: Collection[str]) -> str | None:
    """The nearest level below `name` that was measured (`haswell` → `sandybridge` when only x64,
    sandybridge, haswell and skylakex are built)."""
    lower = LOWER.get(name)
    while lower is not None and lower not in measured:
        lower = LOWER.get(lower)
    return lower


def compare_levels(
    model: Path, threads: int, rounds: int, env: dict[str, str], progress: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Every built variant this CPU runs against its nearest lower level: medians over `rounds`
    rounds, each round measuring every variant once (the order turned round each time, so a
    load that drifts does not favour one side). A variant that cannot run here is left out."""
    files = variant_files(lib_dir())
    runs: dict[str, list[dict[str, Any]]] = {}
    names = [n for n in ["x64", *LOWER] if n in files]
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            try:
                runs.setdefault(name, []).append(measure_variant(name, model, threads, env))
            except BenchError:
                runs[name] = []
            if progress and runs[name]:
                progress(f"round {i + 1}: {name} {json.dumps(runs[name][-1])}")
    tg = {n: statistics.median(r["tg"] for r in rs) for n, rs in runs.items() if rs}
    pp = {n: statistics.median(r["pp"] for r in rs) for n, rs in runs.items() if rs}
    rows: list[dict[str, Any]] = []
    for name in names:
        if name not in tg:
            continue
        lower = nearest_lower(name, tg)
        rows.append(
            {
                "variant": name,
                "lower": lower,
                "tg_tps": round(tg[name], 1),
                "pp_tps": round(pp[name], 1),
                "tg_vs_lower": round(tg[name] / tg[lower], 3) if lower in tg else None,
                "pp_vs_lower": round(pp[name] / pp[lower], 3) if lower in pp else None,
            }
        )
    return rows


def main() -> int:
    """`python -m tests.bench.cpu_variant [ROUNDS] [THREADS]`: every variant against its lower level."""
    import sys

    from engine.child_env import child_env
    from models.library.default_model import default_model_path

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rows = compare_levels(default_model_path(), threads, rounds, child_env(), lambda line: print(line, flush=True))
    print(f"{'variant':15} {'lower':12} {'decode t/s':>10} {'prompt t/s':>10} {'decode ×':>9} {'prompt ×':>9}")
    for r in rows:
        print(
            f"{r['variant']:15} {r['lower'] or '-':12} {r['tg_tps']:10.1f} {r['pp_tps']:10.1f} "
            f"{r['tg_vs_lower'] or '-':>9} {r['pp_vs_lower'] or '-':>9}"
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
