"""Will llama.cpp run on this CPU? Answered once per machine, in child processes, before a model loads.

The project's build has every x86-64 CPU variant as a module, and `cpu_variants` chooses and loads
the fastest one that runs here; `ensure_cpu_runs` is the one call the loaders make, and refuses in
one line when no variant runs. A build with its CPU backend built in (a rebuild with
`-DGGML_BACKEND_DL=OFF`, e.g. `-DGGML_NATIVE=ON`) has one variant only: on an x86-64 CPU without
what it was built for, or one that reports a feature it traps on (AMX on the VM this was written
on), its first decode dies of SIGILL with no word. So that one build is probed in a child process
(llama.cpp loaded, two tokens decoded on the built-in model), the verdict cached per machine (CPU
flags, library file), and a build that traps refused in one line naming what the CPU lacks and
how to rebuild. `ember doctor` names the variant in use and the CPU features it leaves unused.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engine.backends import cpu_variants
from engine.backends.cpu_threads import read_cpuinfo
from engine.child_env import python_child
from engine.errors import ModelLoadError
from models.library.jsonstore import load_json_object, write_json_atomic

log = logging.getLogger("engine.llama")

CACHE_ENV = "EMBER_CACHE_DIR"  # where machine-level verdicts live (tests point it at a temp folder)
SKIP_ENV = "EMBER_CPU_CHECK"  # "0" skips the probe (a machine known to be fine, or a debugger)
CACHE_FILE = "cpu-check.json"
PROBE_TIMEOUT_S = 180.0  # a loaded 2-core machine takes seconds; a hung probe is "unknown", not a refusal
REBUILD = ("CMAKE_ARGS=\"-DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_NATIVE=ON\" "
           "uv sync --reinstall-package llama-cpp-python")

# ggml's names in `llama_print_system_info()` -> the flag /proc/cpuinfo uses for the same feature.
FEATURE_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma",
    "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
}

# The child: the build's features first (so a trap still tells the parent what it needed),
# then a real decode, which is where an unsupported instruction traps.
PROBE_CODE = """
import sys
import llama_cpp
print("features:", llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(), flush=True)
if len(sys.argv) > 1:
    from engine.backends.llama_plain import new_llama
    llm = new_llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, n_gpu_layers=0, verbose=False)
    llm.eval(llm.tokenize(b"Hello there"))
print("decoded", flush=True)
"""


@dataclass(frozen=True, slots=True)
class Verdict:
    runs: bool | None  # None: the probe could not tell (timed out, skipped)
    features: tuple[str, ...]  # the build's CPU features (ggml's names)
    detail: str  # one line: how the probe ended


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none: not Linux)."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def build_features(system_info: str) -> tuple[str, ...]:
    """The CPU features a build uses, from `CPU : SSE3 = 1 | AVX2 = 1 | … |` (ggml's names)."""
    _, _, cpu_part = system_info.partition("CPU :")
    found: list[str] = []
    for item in cpu_part.split("|"):
        name, eq, value = item.partition("=")
        name = name.strip()
        if eq and value.strip() == "1" and name in FEATURE_FLAGS:
            found.append(name)
    return tuple(found)


def missing(features: Sequence[str], flags: frozenset[str]) -> list[str]:
    """The build's features this CPU does not report (nothing to compare without flags)."""
    return [f for f in features if flags and FEATURE_FLAGS[f] not in flags]


def unused(features: Sequence[str], flags: frozenset[str]) -> list[str]:
    """Features this CPU reports that the build does not use (what a native build could add)."""
    return [name for name, flag in FEATURE_FLAGS.items() if flag in flags and name not in features]


def variant_line(features: Sequence[str], flags: frozenset[str]) -> str:
    """`x86-64 AVX AVX2 FMA F16C (one portable variant); this CPU also has AVX512 …, unused`."""
    if not features:
        return "CPU variant: no x86 features reported (another architecture, or an unknown build)"
    line = f"CPU variant: x86-64 {' '.join(features)} (one variant, chosen when llama.cpp was built)"
    return line + _unused_tail(features, flags)


def _unused_tail(features: Sequence[str], flags: frozenset[str]) -> str:
    extra = unused(features, flags)
    return f"; this CPU also has {' '.join(extra)}, unused" if extra else ""


def chosen_line(choice: cpu_variants.Choice, flags: frozenset[str]) -> str:
    """`CPU variant: icelake (x86-64 …), chosen at run time from 14; skipped: sapphirerapids (…)`."""
    chosen = choice.probe(choice.chosen)
    if chosen is None:
        return f"CPU variant: none chosen ({choice.how})"
    features = " ".join(chosen.features) or "features not reported"
    speed = f", {chosen.tps:g} tok/s in its probe" if chosen.tps else ""
    line = (f"CPU variant: {chosen.name} (x86-64 {features}), chosen at run time from "
            f"{len(choice.probes)} ({choice.how}{speed})")
    skipped = [f"{p.name} ({p.detail})" for p in choice.skipped if p.detail]
    line += f"; skipped: {', '.join(skipped)}" if skipped else ""
    return line + (_unused_tail(chosen.features, flags) if chosen.features else "")


def probe(command: Sequence[str] | None = None, model: Path | None = None,
          timeout: float = PROBE_TIMEOUT_S) -> Verdict:
    """Run the build in a child process; `command` replaces the default child (tests)."""
    child = python_child(PROBE_CODE, *([str(model.absolute())] if model else []))
    argv = list(command) if command else child.argv
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL, env=child.env, cwd=child.cwd)
    except subprocess.TimeoutExpired:
        return Verdict(None, (), f"the probe did not finish in {timeout:.0f} s")
    except OSError as exc:
        return Verdict(None, (), f"the probe could not start: {exc}")
    features = next((build_features(line) for line in done.stdout.splitlines() if line.startswith("features:")), ())
    if done.returncode == 0 and "decoded" in done.stdout:
        return Verdict(True, features, "passed")
    if done.returncode < 0:
        return Verdict(False, features, f"the probe {cpu_variants.ending(done)} while decoding")
    last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return Verdict(None, features, f"the probe failed (exit {done.returncode}): {last}")


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("ember", appauthor=False))


def machine_key(library: Path | None, flags: frozenset[str]) -> str:
    """Changes when the CPU's flags or the llama.cpp library file change."""
    parts = [" ".join(sorted(flags))]
    if library is not None and library.exists():
        st = library.stat()
        parts += [str(library.resolve()), str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _library() -> Path | None:
    """llama.cpp's CPU library, found without loading it (the key must not need the probe)."""
    lib = cpu_variants.lib_dir()
    if lib is None:
        return None
    found = sorted(lib.glob("libggml-cpu*")) or sorted(lib.glob("*ggml-cpu*")) or sorted(lib.glob("*llama*"))
    return found[0] if found else None


def _probe_model() -> Path | None:
    """The built-in model: small enough that the probe's decode takes a moment."""
    from models.library.default_model import DefaultModelMissing, default_model_path

    try:
        return default_model_path()
    except DefaultModelMissing:  # the probe then checks the library's load and features only
        return None


_checked: dict[str, Verdict] = {}
_lock = threading.Lock()


def ensure_cpu_runs(model: Path | None = None, command: Sequence[str] | None = None) -> Verdict:
    """The cached verdict for this machine, probing first if there is none; a build that
    traps raises ModelLoadError (one line) instead of letting the process die."""
    choice = cpu_variants.ensure_backends(model)
    if choice is not None:  # a build with run-time CPU variants: one was chosen (and loaded)
        return variant_verdict(choice)
    if os.environ.get(SKIP_ENV) == "0":
        return Verdict(None, (), f"skipped ({SKIP_ENV}=0)")
    flags = cpu_flags()
    key = machine_key(_library(), flags)
    with _lock:
        verdict = _checked.get(key) or _read_cache(key)
        if verdict is None:
            verdict = probe(command, model or _probe_model())
            log.info("llama.cpp CPU probe: %s", verdict.detail)
            if verdict.runs is not None:
                _write_cache(key, verdict)
        _checked[key] = verdict
    if verdict.runs is False:
        raise ModelLoadError(refusal(verdict, flags))
    return verdict


def variant_verdict(choice: cpu_variants.Choice) -> Verdict:
    """The chosen variant as a verdict; no variant that runs is refused in one line."""
    if choice.refused:  # a forced variant (or a re-measured one) llama.cpp would not load here
        raise ModelLoadError(choice.refused)
    chosen = choice.probe(choice.chosen)
    if choice.chosen is None and choice.how == "measured":
        tried = _tried(choice)
        raise ModelLoadError(f"no llama.cpp CPU variant runs on this CPU ({tried}); "
                             f"rebuild it for this machine: {REBUILD}")
    if chosen is None or chosen.runs is None:  # forced, or llama.cpp's own pick: not probed
        return Verdict(None, chosen.features if chosen else (), choice.how)
    return Verdict(True, chosen.features, chosen.detail)


def _tried(choice: cpu_variants.Choice) -> str:
    """What the variants did, short: one line however many were tried."""
    tried = [p for p in choice.probes if p.score > 0 or p.runs is False]
    details = {p.detail for p in tried}
    if not tried:
        return "none loads"
    if len(details) == 1:
        return f"{len(tried)} tried, each: {details.pop()}"
    return "; ".join(f"{p.name}: {p.detail}" for p in tried[:4]) + ("; …" if len(tried) > 4 else "")


def refusal(verdict: Verdict, flags: frozenset[str]) -> str:
    lacks = missing(verdict.features, flags)
    why = f"uses {', '.join(lacks)}, which this CPU lacks" if lacks else "traps on this CPU"
    return (f"this llama.cpp build {why} ({verdict.detail}); rebuild it for this machine: {REBUILD}")


def _read_cache(key: str) -> Verdict | None:
    entry = load_json_object(cache_dir() / CACHE_FILE, {}).get(key)
    if not isinstance(entry, dict):
        return None
    entry = cast(dict[str, Any], entry)
    features, detail = entry.get("features"), entry.get("detail")
    if not isinstance(features, list) or not isinstance(detail, str):
        return None
    return Verdict(bool(entry.get("runs")), tuple(str(f) for f in cast(list[Any], features)), detail)


def _write_cache(key: str, verdict: Verdict) -> None:
    path = cache_dir() / CACHE_FILE
    entry = {"runs": verdict.runs, "features": list(verdict.features), "detail": verdict.detail}
    try:  # one machine, one entry: a newer library or CPU replaces the old verdict
        write_json_atomic(path, {key: entry})
    except OSError as exc:
        log.info("could not cache the CPU probe's verdict in %s: %s", path, exc)
