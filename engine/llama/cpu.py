"""Will llama.cpp run on this CPU, and with which variant? Answered once per machine, in child processes.

The build (pyproject: `GGML_BACKEND_DL`, `GGML_CPU_ALL_VARIANTS` trimmed to `EMBER_CPU_VARIANTS`)
ships the CPU backend once per x86-64 level Ember keeps, `libggml-cpu-{x64,sandybridge,haswell,
skylakex}.so` in `llama_cpp/lib` (any set works here: the names and scores come from the files),
and registers none at start-up. llama.cpp's own pick (`ggml_backend_load_best`) takes the variant
with the highest feature score, which on a VM that reports AMX but traps on it is the one that
dies of SIGILL. So Ember picks: a child reads every variant's score, then the variants are probed
best-scored first, one child each (loaded, a prompt decoded on the built-in model, which is where
an unsupported instruction traps), and the first that survives is taken: features decide, a child
proves it, no speed race. A forced variant (`EMBER_CPU_VARIANT`) is probed the same way, and one
that traps is one line. `ensure_backends()` then loads the choice, and any GPU backend module
beside it, with `ggml_backend_load` before llama.cpp is used here.

A build with its CPU backend built in (a rebuild with `-DGGML_BACKEND_DL=OFF`, e.g. `-DGGML_NATIVE=ON`)
has nothing to choose: that one build is probed the same way, and one that traps is refused in one
line naming what the CPU lacks and how to rebuild. Verdicts are cached per machine in one file
under one key (the CPU's flags and the library files).

A cached choice can still trap (a cache copied from a host that runs it, a VM moved to another
host): a process leaves a marker around its first decode, so a run that died there leaves the
marker behind, and the next start leaves that variant out and probes again.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from engine.child_env import function_child
from engine.errors import ModelLoadError
from engine.llama.cpu_choice import NOT_PROBED, OUT_OF_TIME, Choice, Probe
from engine.llama.cpu_threads import read_cpuinfo
from engine.llama.machine_cache import cache_dir, read_entry, write_entry
from engine.llama.process_state import PROCESS
from models.library.json_schema import is_bool, is_int, is_text

log = logging.getLogger("engine.llama")

SKIP_ENV = "EMBER_CPU_CHECK"  # "0" skips the probes (a machine known to be fine, or a debugger)
FORCE_ENV = "EMBER_CPU_VARIANT"  # a variant's name: probed like the automatic choice, then used
CACHE_FILE = "cpu-probe.json"
STARTS_DIR = "cpu-variant-starts"  # one marker per process that loaded a variant and has not decoded yet
PROBE_TIMEOUT_S = 180.0  # for all probes of one decision: seconds on a loaded 2-core machine; a hang is "unknown"
TIMED_OUT = 124  # the return code a killed, hung child is given (as timeout(1) does)
SCORE_CHILD = "engine.llama.cpu:score_child"
PROBE_CHILD = "engine.llama.cpu:probe_child"
PROBED = "probed"
CACHED = "probed on this machine earlier (cached)"
UNPROVEN = "the most portable variant, unproven: no probe could tell in time (a busy machine?); probed again next start"
CRASHED = "a run died before its first decode with it"
VARIANT_FILE = re.compile(r"(?:lib)?ggml-cpu-(?P<name>.+)\.(?:so|dll|dylib)")
BACKEND_FILE = re.compile(r"(?:lib)?ggml-(?P<name>[a-z0-9_]+)\.(?:so|dll|dylib)")
NOT_BACKENDS = {"base", "cpu"}
REBUILD = (
    'CMAKE_ARGS="-DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_NATIVE=ON" '
    "uv sync --reinstall-package llama-cpp-python"
)

# ggml's names in `llama_print_system_info()` -> the flag /proc/cpuinfo uses for the same feature.
FEATURE_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}


# --- this CPU and this build, read without loading llama.cpp ----------------------------------


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


def lib_dir() -> Path | None:
    """llama_cpp's `lib` folder, found without loading anything."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def variant_files(folder: Path | None) -> dict[str, Path]:
    """{name: file} of the CPU variant modules in `folder` (a plain `libggml-cpu.so` is no variant:
    without GGML_BACKEND_DL it is linked in and registered by llama.cpp itself)."""
    if folder is None or not folder.is_dir():
        return {}
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        match = VARIANT_FILE.fullmatch(path.name)
        if match and path.is_file():
            found[match["name"]] = path
    return found


def other_backend_files(folder: Path) -> list[Path]:
    """GPU and other backend modules (libggml-cuda.so, libggml-vulkan.so, …) beside the variants."""
    return [
        p
        for p in sorted(folder.iterdir())
        if (m := BACKEND_FILE.fullmatch(p.name)) and m["name"] not in NOT_BACKENDS and p.is_file()
    ]


def ggml_library_path(folder: Path) -> Path | None:
    """The ggml library libllama itself uses: the file named by its soname (`libggml.so.0`).

    A wheel has no symlinks, so `libggml.so` is a second copy of the same library; opened by
    that name it is a second library in the process, with a second backend registry that
    libllama never sees (a variant registered there is not llama.cpp's CPU backend)."""
    if sys.platform == "win32":
        names = ["ggml.dll"]
    elif sys.platform == "darwin":
        names = [p.name for p in sorted(folder.glob("libggml.*.dylib"), key=lambda p: len(p.name))]
        names.append("libggml.dylib")
    else:
        names = [p.name for p in sorted(folder.glob("libggml.so.*"), key=lambda p: len(p.name))]
        names.append("libggml.so")
    return next((folder / n for n in names if (folder / n).is_file()), None)


def ggml_library() -> Any:
    """libllama's own ggml library, through ctypes (llama_cpp is imported first: it loads it)."""
    import llama_cpp  # noqa: F401  # pyright: ignore[reportUnusedImport]  (libllama, hence its ggml)

    folder = lib_dir()
    path = ggml_library_path(folder) if folder else None
    if path is None:
        raise OSError(f"llama.cpp's ggml library is not in {folder}")
    lib = ctypes.CDLL(str(path))
    lib.ggml_backend_reg_count.restype = ctypes.c_size_t
    lib.ggml_backend_load.argtypes, lib.ggml_backend_load.restype = [ctypes.c_char_p], ctypes.c_void_p
    lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    return lib


def llama_build() -> str:
    """`llama-cpp-python 0.3.36 (libllama 0.5.0, ggml 0.25.3)`, read without loading llama.cpp."""
    import importlib.metadata

    try:
        line = f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"
    except importlib.metadata.PackageNotFoundError:
        return "llama-cpp-python not installed"
    folder = lib_dir()
    found = [f"{name} {_soname_version(folder, name)}" for name in ("libllama", "libggml")] if folder else []
    found = [f for f in found if not f.endswith(" ")]
    return f"{line} ({', '.join(found)})" if found else line


def _soname_version(folder: Path, name: str) -> str:
    """`0.5.0` from `libllama.so.0.5.0` (the longest versioned name); "" when there is none.

    The frozen app keeps only the soname's file (`libllama.so.0`): its bare major says nothing
    ("libllama 0"), so it counts as none."""
    names = sorted((p.name for p in folder.glob(f"{name}.so.*")), key=len)
    version = names[-1].removeprefix(f"{name}.so.") if names else ""
    return version if "." in version else ""


def probe_model() -> Path | None:
    """The built-in model: small enough that a probe's decode takes a moment."""
    from models.library.default_model import DefaultModelMissing, default_model_path

    try:
        return default_model_path()
    except DefaultModelMissing:  # the probe then checks the library's load and features only
        return None


# --- the children --------------------------------------------------------------------------------


def run(
    target: str, args: Sequence[str], timeout: float, python: str | None = None, argv: Sequence[str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run `target` (module:function) in a child; a hung one is killed and reported as TIMED_OUT
    with what it printed; None when it could not start. `argv` replaces the child (tests)."""
    child = function_child(target, *args, python=python)
    command = list(argv) if argv else child.argv
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=child.env,
            cwd=child.cwd,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(command, TIMED_OUT, out, "")
    except OSError as exc:
        log.info("llama.cpp CPU probe could not start: %s", exc)
        return None


def ending(done: subprocess.CompletedProcess[str] | None) -> str:
    """How a child ended, for a one-line detail: `died of SIGILL`, `exited with 1`, …"""
    if done is None:
        return "the child could not start"
    if done.returncode == TIMED_OUT:
        return "the child did not finish in time"
    if done.returncode < 0:
        try:
            return f"died of {signal.Signals(-done.returncode).name}"
        except ValueError:
            return f"died of signal {-done.returncode}"
    return f"exited with {done.returncode}"


def read_scores(
    files: dict[str, Path], python: str = sys.executable, child: str = SCORE_CHILD, timeout: float | None = None
) -> list[Probe]:
    """Each variant's score, read in child processes; a variant that kills its child scores 0."""
    by_path = {str(path): name for name, path in files.items()}
    remaining: list[str] = list(by_path)
    probes: list[Probe] = []
    while remaining:
        done = run(child, remaining, timeout or PROBE_TIMEOUT_S, python)
        lines = done.stdout.splitlines() if done else []
        for line in lines:
            parts = line.split(" ", 2)
            if parts[0] == "score" and len(parts) == 3 and parts[2] in by_path:
                probes.append(Probe(by_path[parts[2]], int(parts[1]) if parts[1].lstrip("-").isdigit() else -1))
        tried = next((ln.split(" ", 1)[1] for ln in reversed(lines) if ln.startswith("trying ")), None)
        if (done is not None and done.returncode == 0) or tried not in remaining:
            break
        if by_path[tried] not in {p.name for p in probes}:  # it died (or hung) loading this one: go on after it
            trapped = done is not None and done.returncode < 0
            probes.append(Probe(by_path[tried], 0, False if trapped else None, detail=f"{ending(done)} while loading"))
        remaining = remaining[remaining.index(tried) + 1 :]
    return probes


def probe_variant(
    name: str,
    path: Path | None,
    score: int,
    model: Path | None,
    python: str | None = sys.executable,
    child: str = PROBE_CHILD,
    timeout: float | None = None,
    argv: Sequence[str] | None = None,
) -> Probe:
    """Decode in a child with the variant at `path` loaded (None: the build's own backend)."""
    timeout = timeout or PROBE_TIMEOUT_S
    done = run(child, [str(path or ""), *([str(model.absolute())] if model else [])], timeout, python, argv)
    if done is None or done.returncode == TIMED_OUT:
        return Probe(name, score, None, (), f"{ending(done)} (the probe's limit is {timeout:.0f} s)")
    out = done.stdout.splitlines()
    features = next((build_features(line) for line in out if line.startswith("features:")), ())
    if done.returncode == 0 and "decoded" in out:
        return Probe(name, score, True, features, "passed")
    if done.returncode < 0:
        return Probe(name, score, False, features, f"{ending(done)} while decoding")
    last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return Probe(name, score, None, features, f"the probe failed (exit {done.returncode}): {last}")


def score_child() -> int:
    """argv: variant files. One `score N PATH` line each (ggml's own feature check); a variant
    that traps while merely loading kills the child after its `trying` line."""
    import llama_cpp  # noqa: F401  # pyright: ignore[reportUnusedImport]  (loads libggml-base, which every variant links against)

    for path in sys.argv[1:]:
        print("trying", path, flush=True)
        fn = getattr(ctypes.CDLL(path), "ggml_backend_score", None)
        print("score", fn() if fn else -1, path, flush=True)
    return 0


def probe_child() -> int:
    """argv: VARIANT ("" for the build's own backend) [MODEL]. The build's features first (so a
    trap still tells the parent what it needed), then a real decode, where a trap happens."""
    import llama_cpp

    variant, model = sys.argv[1], sys.argv[2:]
    if variant and not ggml_library().ggml_backend_load(variant.encode()):
        print("llama.cpp did not load the variant", file=sys.stderr)
        return 1
    print("features:", llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(), flush=True)
    if model:
        from engine.llama.llama_plain import new_llama

        llm = new_llama(model_path=model[0], n_ctx=128, n_threads=1, n_gpu_layers=0, verbose=False)
        llm.eval(llm.tokenize(b"Hello there, how are you today?"))
        llm.eval(llm.tokenize(b" the", add_bos=False)[:1])  # a single-token decode: another kernel path
    print("decoded", flush=True)
    return 0


def choose(
    files: dict[str, Path],
    model: Path | None,
    *,
    python: str = sys.executable,
    score_child: str = SCORE_CHILD,
    probe_child: str = PROBE_CHILD,
) -> Choice:
    """The best-scored variant whose child decodes: probed in score order until one runs. Where
    none was proven and some could not be told (the probes' time ran out), the most portable of
    those: the model still loads on a machine too busy to probe, where a trap is least likely."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S  # all probes together: hung children cannot add up
    probes: list[Probe] = []
    chosen: str | None = None
    for p in sorted(read_scores(files, python, score_child), key=lambda p: -p.score):
        left = deadline - time.monotonic()
        if p.score <= 0 or p.runs is False or chosen is not None or left <= 0:
            why = NOT_PROBED if chosen is not None else OUT_OF_TIME
            probes.append(p if p.score <= 0 or p.runs is False else Probe(p.name, p.score, detail=why))
            continue
        probes.append(probe_variant(p.name, files[p.name], p.score, model, python, probe_child, timeout=left))
        chosen = p.name if probes[-1].runs else None
    untold = [p for p in probes if p.score > 0 and p.runs is None]
    if chosen is None and untold:
        return Choice(min(untold, key=lambda p: p.score).name, UNPROVEN, tuple(probes))
    return Choice(chosen, PROBED, tuple(probes))


# --- the per-machine cache ---------------------------------------------------------------------


def machine_key(files: Iterable[Path]) -> str:
    """Changes when the CPU's flags or any of llama.cpp's library `files` change (a rebuild, an upgrade)."""
    parts = [" ".join(sorted(cpu_flags()))]
    for path in sorted(files):
        if path.exists():
            st = path.stat()
            parts.append(f"{path.resolve()} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _read_entry(key: str) -> dict[str, Any]:
    entry = read_entry(CACHE_FILE, key)
    return cast(dict[str, Any], entry) if isinstance(entry, dict) else {}


def read_cached(key: str, files: dict[str, Path]) -> Choice | None:
    """The cached automatic choice for `key`; None (measure again) unless every field has its type
    and the chosen variant is one of this build's `files` (a hand edit could name `../../x`)."""
    entry = _read_entry(key)
    if "chosen" not in entry:  # only forced variants were probed here so far
        return None
    chosen, raw = entry.get("chosen"), entry.get("probes")
    if not (chosen is None or (isinstance(chosen, str) and chosen in files)) or not isinstance(raw, list):
        log.info("the CPU probe cache names the variant %r, which this build lacks; measuring again", chosen)
        return None
    probes = [_cached_probe(p) for p in cast(list[object], raw)]
    if any(p is None for p in probes):
        return None
    return Choice(chosen, CACHED, tuple(p for p in probes if p is not None))


def _cached_probe(data: object) -> Probe | None:
    if not isinstance(data, dict):
        return None
    p = cast(dict[str, Any], data)
    name, score, runs = p.get("name"), p.get("score"), p.get("runs")
    features, detail = p.get("features", []), p.get("detail", "")
    if not (
        is_text(name)
        and is_int(score)
        and (runs is None or is_bool(runs))
        and isinstance(features, list)
        and is_text(detail)
    ):
        return None
    return Probe(name, score, runs, tuple(str(f) for f in cast(list[object], features)), detail)


def write_cached(key: str, choice: Choice) -> None:
    write_entry(CACHE_FILE, key, {"chosen": choice.chosen, "probes": [asdict(p) for p in choice.probes]})


def _cached_probes(key: str) -> dict[str, Probe]:
    """Every probe cached for this machine by name (a forced variant's, the built-in build's among them)."""
    raw = _read_entry(key).get("probes")
    probes = [_cached_probe(p) for p in cast(list[object], raw)] if isinstance(raw, list) else []
    return {p.name: p for p in probes if p is not None}


def _remember(key: str, probe: Probe) -> None:
    """Add one probe to this machine's entry, keeping the automatic choice."""
    entry = _read_entry(key)
    probes = [asdict(p) for p in _cached_probes(key).values() if p.name != probe.name] + [asdict(probe)]
    write_entry(CACHE_FILE, key, ({"chosen": entry["chosen"]} if "chosen" in entry else {}) | {"probes": probes})


# --- in this process ---------------------------------------------------------------------------


def ensure_cpu_runs(model: Path | None = None, command: Sequence[str] | None = None) -> Probe:
    """The loaders' one call: the variant in use (chosen and loaded first if need be), or the
    built-in build's cached verdict; no variant or build that runs here raises ModelLoadError
    (one line) instead of letting the process die. `command` replaces the probe child (tests)."""
    choice = ensure_backends(model)
    if choice is not None:
        return variant_verdict(choice)
    if os.environ.get(SKIP_ENV) == "0":
        return Probe("", -1, None, (), f"skipped ({SKIP_ENV}=0)")
    verdict = _probe_builtin(model, command)
    if verdict.runs is False:
        raise ModelLoadError(refusal(verdict, cpu_flags()))
    return verdict


def _probe_builtin(model: Path | None, command: Sequence[str] | None) -> Probe:
    """The build with its CPU backend built in, probed once per machine (the verdict is cached)."""
    folder = lib_dir()
    found = (sorted(folder.glob("*ggml-cpu*")) or sorted(folder.glob("*llama*"))) if folder else []
    key = machine_key(found[:1])  # llama.cpp's CPU library, found without loading it
    with PROCESS.lock:
        verdict = PROCESS.builtin_probe or _cached_probes(key).get("")
        if verdict is None:
            verdict = probe(command, model or probe_model())
            log.info("llama.cpp CPU probe: %s", verdict.detail)
            if verdict.runs is not None:
                _remember(key, verdict)
        PROCESS.builtin_probe = verdict
        return verdict


def probe(command: Sequence[str] | None = None, model: Path | None = None, timeout: float | None = None) -> Probe:
    """Run the build with its own backend in a child process; `command` replaces the child (tests)."""
    got = probe_variant("", None, -1, model, None, timeout=timeout, argv=command)
    detail = got.detail if got.runs or got.detail.startswith("the probe") else f"the probe {got.detail}"
    return Probe("", -1, got.runs, got.features, detail)


def variant_verdict(choice: Choice) -> Probe:
    """The chosen variant's probe; no variant that runs is refused in one line."""
    if choice.refused:  # a forced variant that traps, or one llama.cpp would not load here
        raise ModelLoadError(choice.refused)
    chosen = choice.probe(choice.chosen)
    if choice.chosen is None and choice.how in (PROBED, CACHED):
        raise ModelLoadError(
            f"no llama.cpp CPU variant runs on this CPU ({_tried(choice)}); rebuild it for this machine: {REBUILD}"
        )
    if chosen is None or chosen.runs is None:  # forced, or llama.cpp's own pick: not probed
        return Probe(choice.chosen or "", -1, None, chosen.features if chosen else (), choice.how)
    return chosen


def _tried(choice: Choice) -> str:
    """What the variants did, short: one line however many were tried."""
    tried = [p for p in choice.probes if p.score > 0 or p.runs is False]
    details = {p.detail for p in tried}
    if not tried:
        return "none loads"
    if len(details) == 1:
        return f"{len(tried)} tried, each: {details.pop()}"
    return "; ".join(f"{p.name}: {p.detail}" for p in tried[:4]) + ("; …" if len(tried) > 4 else "")


def refusal(verdict: Probe, flags: frozenset[str]) -> str:
    lacks = missing(verdict.features, flags)
    why = f"uses {', '.join(lacks)}, which this CPU lacks" if lacks else "traps on this CPU"
    return f"this llama.cpp build {why} ({verdict.detail}); rebuild it for this machine: {REBUILD}"


def ensure_backends(model: Path | None = None) -> Choice | None:
    """Load the chosen CPU variant and the GPU modules once per process (None: no variants)."""
    if PROCESS.variant is not None:  # chosen and loaded in this process already: no listing, no lock
        return PROCESS.variant
    folder = lib_dir()
    files = variant_files(folder)
    if not files or folder is None:
        _load_modules_without_variants(folder)
        return None
    from engine.llama import llama_log

    llama_log.install()  # llama.cpp's "loaded CPU backend from …" goes to the log, not the terminal
    with PROCESS.lock:
        if PROCESS.variant is None:
            choice = _decide(files, model)
            ok = not choice.refused and _register(files, folder, choice)
            if not ok and choice.how == CACHED:
                # A cache copied from a host that runs the variant, a changed VM: probe again
                # rather than fail every load until someone deletes the cache.
                log.warning("llama.cpp refused the cached CPU variant %s; choosing again", choice.chosen)
                choice = _measure(files, model, machine_key(files.values()))
                ok = _register(files, folder, choice)
            if not ok and not choice.refused:
                choice = _refused(choice, "llama.cpp refused to load it on this CPU")
            PROCESS.pending_variant = choice.chosen if ok else None
            PROCESS.variant = choice
        return PROCESS.variant


def _decide(files: dict[str, Path], model: Path | None) -> Choice:
    key = machine_key(files.values())
    crashed = crashed_starts()
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        if forced in files:
            return _forced(forced, files, model, key, crashed)
        log.warning("%s=%s: no such CPU variant (this build has %s); choosing one", FORCE_ENV, forced, ", ".join(files))
    if os.environ.get(SKIP_ENV) == "0":
        return Choice(None, f"llama.cpp's own pick by score ({SKIP_ENV}=0: not probed)")
    cached = read_cached(key, files)
    if cached is not None and cached.chosen in crashed:
        log.warning("the last run on CPU variant %s died before its first decode; choosing another", cached.chosen)
        cached = None
    return cached or _measure(files, model, key, crashed)


def _forced(name: str, files: dict[str, Path], model: Path | None, key: str, crashed: set[str]) -> Choice:
    """A forced variant, probed in a child once per machine like the automatic choice."""
    probe = _cached_probes(key).get(name)
    if name in crashed:
        probe = Probe(name, -1, False, detail=CRASHED)
    elif probe is None or probe.runs is None:
        probe = probe_variant(name, files[name], -1, model or probe_model())
    if probe.runs is not None:
        _remember(key, probe)
    choice = Choice(name, f"forced by {FORCE_ENV}", (probe,))
    return _refused(choice, probe.detail) if probe.runs is False else choice


def _measure(files: dict[str, Path], model: Path | None, key: str, crashed: Collection[str] = ()) -> Choice:
    """Probe the variants (those that took a run down are not tried again), log and cache the choice."""
    choice = choose({n: p for n, p in files.items() if n not in crashed}, model or probe_model())
    gone = tuple(Probe(n, -1, False, detail=CRASHED) for n in files if n in crashed)
    if gone:
        choice = Choice(choice.chosen, choice.how, choice.probes + gone)
    for p in choice.probes:
        if p.runs is False:  # the log, not the terminal: nothing is wrong for the user, another runs
            log.info("llama.cpp CPU variant %s skipped: %s", p.name, p.detail)
    if choice.how == UNPROVEN:  # not cached: the next start probes again
        log.warning("llama.cpp CPU variant %s: %s", choice.chosen, UNPROVEN)
    elif any(p.runs is not None for p in choice.probes):  # a probe that could not tell is retried
        write_cached(key, choice)
    return choice


def _refused(choice: Choice, why: str) -> Choice:
    line = f"CPU variant {choice.chosen} cannot run here ({why})" + (
        f"; unset {FORCE_ENV} or name another" if choice.how.startswith("forced") else ""
    )
    return Choice(choice.chosen, choice.how, choice.probes, refused=line)


def _register(files: dict[str, Path], folder: Path, choice: Choice) -> bool:
    """Load `choice`'s variant and the GPU modules; False when llama.cpp refused the variant."""
    lib = ggml_library()
    if int(lib.ggml_backend_reg_count()) > 0:  # loaded already (llama.cpp's own load_all found them)
        log.info("llama.cpp backends were loaded before Ember chose a CPU variant")
        return True
    if choice.chosen is None and choice.how.startswith("llama.cpp's own"):
        lib.ggml_backend_load_all_from_path(str(folder).encode())
        return True
    if choice.chosen is not None:
        if not lib.ggml_backend_load(str(files[choice.chosen]).encode()):
            log.error("llama.cpp could not load its CPU variant %s", files[choice.chosen])
            return False
        log.info("llama.cpp CPU variant: %s (%s)", choice.chosen, choice.how)
    from engine.llama import gpu_modules

    gpu = set(gpu_modules.module_files(folder))
    for path in other_backend_files(folder):
        if path not in gpu and not lib.ggml_backend_load(str(path).encode()):
            log.warning("llama.cpp could not load the backend %s", path.name)
    gpu_modules.load(lib, folder)  # the GPU chosen here, alone (a software device only when asked for)
    return True


def _load_modules_without_variants(folder: Path | None) -> None:
    """A GGML_BACKEND_DL build without CPU variants (`libggml-cpu.so` as a module): nothing registers
    its backends either; with them built in (the usual case) llama.cpp has registered them already."""
    with PROCESS.lock:
        if PROCESS.builtin_registered or folder is None or not folder.is_dir():
            return
        PROCESS.builtin_registered = True
        lib = ggml_library()
        if int(lib.ggml_backend_reg_count()) == 0:
            lib.ggml_backend_load_all_from_path(str(folder).encode())


def loaded() -> Choice | None:
    """The choice this process made, if it made one."""
    return PROCESS.variant


# --- what `ember doctor` and `--version` say -----------------------------------------------------


def in_use_line() -> str:
    """The variant this machine uses, from the cache, without loading or probing anything."""
    files = variant_files(lib_dir())
    if not files:
        return "CPU backend built into llama.cpp (no run-time variants)"
    key = machine_key(files.values())
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced in files:
        probe = _cached_probes(key).get(forced)
        trapped = f"; cannot run here: {probe.detail}" if probe and probe.runs is False else ""
        return f"CPU variant {forced} (forced by {FORCE_ENV}{trapped})"
    cached = read_cached(key, files)
    if cached is None or cached.chosen is None:
        return f"CPU variant: chosen from {len(files)} at the first model load"
    return f"CPU variant {cached.chosen} (of {len(files)}, probed on this machine)"


def variant_line(features: Sequence[str], flags: frozenset[str]) -> str:
    """`x86-64 AVX AVX2 FMA F16C (one portable variant); this CPU also has AVX512 …, unused`."""
    if not features:
        return "CPU variant: no x86 features reported (another architecture, or an unknown build)"
    line = f"CPU variant: x86-64 {' '.join(features)} (one variant, chosen when llama.cpp was built)"
    return line + _unused_tail(features, flags)


def _unused_tail(features: Sequence[str], flags: frozenset[str]) -> str:
    extra = unused(features, flags)
    return f"; this CPU also has {' '.join(extra)}, unused" if extra else ""


def chosen_line(choice: Choice, flags: frozenset[str]) -> str:
    """`CPU variant: skylakex (x86-64 …), chosen at run time from 4; skipped: … (…)`."""
    chosen = choice.probe(choice.chosen)
    if choice.refused:
        return f"CPU variant: {choice.refused}"
    if chosen is None:
        return f"CPU variant: none chosen ({choice.how})"
    features = " ".join(chosen.features) or "features not reported"
    line = (
        f"CPU variant: {chosen.name} (x86-64 {features}), chosen at run time from {len(choice.probes)} ({choice.how})"
    )
    skipped = [f"{p.name} ({p.detail})" for p in choice.skipped if p.detail]
    line += f"; skipped: {', '.join(skipped)}" if skipped else ""
    return line + (_unused_tail(chosen.features, flags) if chosen.features else "")


# --- markers: a run that dies before its first decode ------------------------------------------


def _starts_dir() -> Path:
    return cache_dir() / STARTS_DIR


def decoding() -> None:
    """Before this process's first decode: leave a marker naming its variant, which a trap there
    (SIGILL) leaves behind. Only around that decode, so a process stopped at another time (a
    SIGTERM, a doctor that never decodes) is never taken for a crash."""
    pending = PROCESS.pending_variant
    if pending is None or PROCESS.start_marker is not None:
        return
    path = _starts_dir() / str(os.getpid())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pending, encoding="utf-8")
    except OSError as exc:
        log.info("could not leave the CPU variant's start marker in %s: %s", path, exc)
        return
    PROCESS.start_marker = path
    atexit.register(decoded)


def decoded() -> None:
    """This process decoded with its variant (or exits normally): its marker goes, for good."""
    PROCESS.pending_variant = None
    marker, PROCESS.start_marker = PROCESS.start_marker, None
    if marker is not None:
        with contextlib.suppress(OSError):
            marker.unlink()


def crashed_starts() -> set[str]:
    """Variants named by the markers of processes that are gone (each marker is then removed)."""
    folder = _starts_dir()
    try:
        entries = [p for p in folder.iterdir() if p.name.isascii() and p.name.isdigit()]
    except OSError:
        return set()
    found: set[str] = set()
    for path in entries[:1000]:  # a folder filled by hand cannot stall a start
        if int(path.name) == os.getpid() or _alive(int(path.name)):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(path.lstat().st_mode):
                with path.open("rb") as f:
                    found.add(f.read(200).decode("utf-8", "replace").strip())
            path.unlink()
    return found


def _alive(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill(pid, 0) would end the process there: assume it runs
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
