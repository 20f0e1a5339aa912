"""Probing llama.cpp on this CPU in child processes: the one probe, its cache and its time limit.

Ember makes sure llama.cpp runs here before a model loads, in one of two ways: `cpu_variants`
(a build with run-time CPU variants: score each, probe the best-scored first, keep the first that survives)
or `cpu_check` (a build with its one CPU backend built in: probe that one). Both use this module.
A probe is a child process running `probe_child`: it loads llama.cpp (and a variant, when one is
named), prints the build's CPU features, then decodes on the built-in model, which is where an
unsupported instruction traps (SIGILL). Verdicts are cached per
machine in one file under one key (the CPU's flags and the library files).

A leaf: it imports neither `cpu_check` nor `cpu_variants`.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engine.backends.cpu_threads import read_cpuinfo
from engine.child_env import function_child
from models.library.jsonstore import load_json_object, write_json_atomic

log = logging.getLogger("engine.llama")

CACHE_ENV = "EMBER_CACHE_DIR"  # where machine-level verdicts live (tests point it at a temp folder)
SKIP_ENV = "EMBER_CPU_CHECK"  # "0" skips the probes (a machine known to be fine, or a debugger)
CACHE_FILE = "cpu-probe.json"
PROBE_TIMEOUT_S = 180.0  # for all probes of one decision: seconds on a loaded 2-core machine; a hang is "unknown"
TIMED_OUT = 124  # the return code a killed, hung child is given (as timeout(1) does)
SCORE_CHILD = "engine.backends.cpu_probe:score_child"
PROBE_CHILD = "engine.backends.cpu_probe:probe_child"

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


def lib_dir() -> Path | None:
    """llama_cpp's `lib` folder, found without loading anything."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


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


# --- the per-machine cache ---------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("ember", appauthor=False))


def machine_key(files: Iterable[Path]) -> str:
    """Changes when the CPU's flags or any of llama.cpp's library `files` change (a rebuild, an upgrade)."""
    parts = [" ".join(sorted(cpu_flags()))]
    for path in sorted(files):
        if path.exists():
            st = path.stat()
            parts.append(f"{path.resolve()} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def read_cache(key: str) -> dict[str, Any] | None:
    """The cached entry for this machine; None when there is none (or it is not an object)."""
    entry = load_json_object(cache_dir() / CACHE_FILE, {}).get(key)
    return cast(dict[str, Any], entry) if isinstance(entry, dict) else None


def write_cache(key: str, entry: dict[str, Any]) -> None:
    path = cache_dir() / CACHE_FILE
    try:  # one machine, one entry: a newer build or CPU replaces the old verdict
        write_json_atomic(path, {key: entry})
    except OSError as exc:
        log.info("could not cache the CPU probe's verdict in %s: %s", path, exc)


# --- running a child ---------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one probe child ended."""

    runs: bool | None  # None: the probe could not tell (timed out, failed, could not start)
    features: tuple[str, ...]  # the build's CPU features (ggml's names)
    detail: str  # one line: "passed", "died of SIGILL while decoding", …


def probe(
    variant: str,
    model: Path | None,
    timeout: float,
    python: str | None = None,
    child: str = PROBE_CHILD,
    argv: Sequence[str] | None = None,
) -> Outcome:
    """Decode in a child with `variant` loaded ("" for the build's own backend)."""
    done = run(child, [variant, *([str(model.absolute())] if model else [])], timeout, python, argv)
    if done is None or done.returncode == TIMED_OUT:
        return Outcome(None, (), f"{ending(done)} (the probe's limit is {timeout:.0f} s)")
    out = done.stdout.splitlines()
    features = next((build_features(line) for line in out if line.startswith("features:")), ())
    if done.returncode == 0 and "decoded" in out:
        return Outcome(True, features, "passed")
    if done.returncode < 0:
        return Outcome(False, features, f"{ending(done)} while decoding")
    last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return Outcome(None, features, f"the probe failed (exit {done.returncode}): {last}")


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


# --- in the child ------------------------------------------------------------------------------


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
        from engine.backends.llama_plain import new_llama

        llm = new_llama(model_path=model[0], n_ctx=128, n_threads=1, n_gpu_layers=0, verbose=False)
        llm.eval(llm.tokenize(b"Hello there, how are you today?"))
        llm.eval(llm.tokenize(b" the", add_bos=False)[:1])  # a single-token decode: another kernel path
    print("decoded", flush=True)
    return 0
