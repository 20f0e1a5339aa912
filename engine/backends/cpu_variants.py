"""llama.cpp's CPU variants: the fastest one this CPU runs without a trap, chosen at run time.

The build (pyproject: `GGML_BACKEND_DL`, `GGML_CPU_ALL_VARIANTS`) ships the CPU backend once per
x86-64 instruction-set level, `libggml-cpu-{x64,sse42,…,haswell,…,icelake,…,sapphirerapids}.so`
in `llama_cpp/lib`, and registers none at start-up. llama.cpp's own pick (`ggml_backend_load_best`)
takes the variant with the highest feature score, which on a VM that reports AMX but traps on it
is the one that dies of SIGILL. So Ember picks: a child process reads every variant's score; the
best-scored ones are probed one per child process (loaded, a prompt decoded, single-token decodes
timed); the best-scored one that survives is taken unless another measured clearly faster; the
choice is cached per machine (CPU flags and the variant files). `ensure_backends()` then loads it,
and any GPU backend module beside it, with `ggml_backend_load` before llama.cpp is used here.

A build without variant files (a rebuild with `-DGGML_BACKEND_DL=OFF`) has its backends built
in: there is nothing to choose, and `cpu_check` probes that one build instead.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.child_env import PythonChild, python_child
from models.library.json_schema import is_bool, is_int, is_number, is_text
from models.library.jsonstore import load_json_object, write_json_atomic

log = logging.getLogger("engine.llama")

FORCE_ENV = "EMBER_CPU_VARIANT"  # a variant's name: used as is, unprobed (the bench's AVX2-only side)
CACHE_FILE = "cpu-variants.json"
PROBE_TIMEOUT_S = 180.0  # for all probes together: seconds on a loaded 2-core machine; a hang is "unknown"
NOT_PROBED = "not probed: better-scored variants run"
TIMED_OUT = 124  # the return code a killed, hung child is given (as timeout(1) does)
MEASURED = 2  # variants that must survive their probe before the fastest of them is taken
CLEARLY_FASTER = 1.10  # a lower-scored variant is taken only when it decodes this much faster
TIMED_TOKENS = 16
VARIANT_FILE = re.compile(r"(?:lib)?ggml-cpu-(?P<name>.+)\.(?:so|dll|dylib)")
BACKEND_FILE = re.compile(r"(?:lib)?ggml-(?P<name>[a-z0-9_]+)\.(?:so|dll|dylib)")
NOT_BACKENDS = {"base", "cpu"}

# A child per call: the variants' scores (ggml's own feature check), one `score` line each. A
# variant that traps while merely loading kills the child after its `trying` line.
SCORE_CODE = """
import ctypes, sys
import llama_cpp  # loads libggml-base, which every variant links against
for path in sys.argv[1:]:
    print("trying", path, flush=True)
    fn = getattr(ctypes.CDLL(path), "ggml_backend_score", None)
    print("score", fn() if fn else -1, path, flush=True)
"""

# A child per variant: registered as llama.cpp's CPU backend, then a real decode (where an
# unsupported instruction traps), then single-token decodes timed (the pick "by measured speed").
PROBE_CODE = """
import sys, time
import llama_cpp
from engine.backends.cpu_variants import ggml_library
if not ggml_library().ggml_backend_load(sys.argv[1].encode()):
    sys.exit("llama.cpp did not load the variant")
print("features:", llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(), flush=True)
if len(sys.argv) > 3:
    from engine.backends.llama_plain import new_llama
    llm = new_llama(model_path=sys.argv[3], n_ctx=128, n_threads=1, n_gpu_layers=0, verbose=False)
    llm.eval(llm.tokenize(b"Hello there, how are you today?"))
    token = llm.tokenize(b" the", add_bos=False)[0]
    start = time.perf_counter()
    for _ in range(int(sys.argv[2])):
        llm.eval([token])
    print("tps:", int(sys.argv[2]) / (time.perf_counter() - start), flush=True)
print("decoded", flush=True)
"""


@dataclass(frozen=True, slots=True)
class Probe:
    """What one variant did here."""

    name: str
    score: int  # ggml's feature score; 0: this CPU lacks what it needs; -1: unknown
    runs: bool | None = None  # None: not probed, or the probe could not tell
    tps: float | None = None  # single-token decodes per second in the probe (1 thread)
    features: tuple[str, ...] = ()  # ggml's names, as llama_print_system_info reports them
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Choice:
    """The variant in use (None: none runs) and what each candidate did."""

    chosen: str | None
    how: str  # "measured", "forced by EMBER_CPU_VARIANT", …
    probes: tuple[Probe, ...] = field(default_factory=tuple)
    refused: str = ""  # why llama.cpp would not load `chosen` here (one line); "" when it did

    def probe(self, name: str | None) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    @property
    def skipped(self) -> list[Probe]:
        """Variants that were tried and failed (a trap, a probe that could not tell), and why."""
        return [p for p in self.probes if p.name != self.chosen and p.detail != NOT_PROBED
                and (p.runs is False or (p.score > 0 and p.runs is None))]


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
    return [p for p in sorted(folder.iterdir())
            if (m := BACKEND_FILE.fullmatch(p.name)) and m["name"] not in NOT_BACKENDS and p.is_file()]


def read_scores(files: dict[str, Path], python: str = sys.executable, code: str = SCORE_CODE,
                timeout: float = PROBE_TIMEOUT_S) -> list[Probe]:
    """Each variant's score, read in child processes; a variant that kills its child scores 0."""
    by_path = {str(path): name for name, path in files.items()}
    remaining: list[str] = list(by_path)
    probes: list[Probe] = []
    while remaining:
        done = _run(python, code, remaining, timeout)
        lines = done.stdout.splitlines() if done else []
        for line in lines:
            parts = line.split(" ", 2)
            if parts[0] == "score" and len(parts) == 3 and parts[2] in by_path:
                probes.append(Probe(by_path[parts[2]], _int(parts[1])))
        tried = next((ln.split(" ", 1)[1] for ln in reversed(lines) if ln.startswith("trying ")), None)
        if (done is not None and done.returncode == 0) or tried not in remaining:
            break
        scored = {p.name for p in probes}
        if by_path[tried] not in scored:  # it died (or hung) loading this one: skip it, go on after it
            trapped = done is not None and done.returncode < 0
            probes.append(Probe(by_path[tried], 0, False if trapped else None, detail=f"{ending(done)} while loading"))
        remaining = remaining[remaining.index(tried) + 1:]
    return probes


def probe_variant(name: str, path: Path, score: int, model: Path | None, python: str = sys.executable,
                  code: str = PROBE_CODE, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Load the variant in a child process and decode with it; how it ended, and how fast."""
    from engine.backends.cpu_check import build_features

    done = _run(python, code, [str(path), str(TIMED_TOKENS), *([str(model.absolute())] if model else [])], timeout)
    if done is None or done.returncode == TIMED_OUT:
        return Probe(name, score, None, detail=f"{ending(done)} (the probe's limit is {timeout:.0f} s)")
    out = done.stdout.splitlines()
    features = next((build_features(ln) for ln in out if ln.startswith("features:")), ())
    tps = next((_float(ln.split(":", 1)[1]) for ln in out if ln.startswith("tps:")), None)
    if done.returncode == 0 and "decoded" in out:
        return Probe(name, score, True, tps, features, "passed")
    if done.returncode < 0:
        return Probe(name, score, False, None, features, f"{ending(done)} while decoding")
    last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return Probe(name, score, None, None, features, f"the probe failed (exit {done.returncode}): {last}")


def choose(files: dict[str, Path], model: Path | None, *, python: str = sys.executable,
           score_code: str = SCORE_CODE, probe_code: str = PROBE_CODE) -> Choice:
    """Probe the best-scored variants until MEASURED of them run; take the best of those."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S  # all probes together: hung children cannot add up
    scored = sorted(read_scores(files, python, score_code), key=lambda p: -p.score)
    probes: list[Probe] = []
    for p in scored:
        left = deadline - time.monotonic()
        if p.score <= 0 or p.runs is False or sum(q.runs is True for q in probes) >= MEASURED or left <= 0:
            probes.append(p if p.score <= 0 or p.runs is False else
                          Probe(p.name, p.score, detail=NOT_PROBED))
            continue
        probes.append(probe_variant(p.name, files[p.name], p.score, model, python, probe_code, timeout=left))
    return Choice(pick(probes), "measured", tuple(probes))


def pick(probes: Sequence[Probe]) -> str | None:
    """The best-scored variant that runs, unless one that runs decoded CLEARLY_FASTER."""
    running = sorted((p for p in probes if p.runs), key=lambda p: -p.score)
    if not running:
        return None
    best = running[0]
    for other in running[1:]:
        if other.tps and best.tps and other.tps > best.tps * CLEARLY_FASTER:
            best = other
    return best.name


# --- in this process ---------------------------------------------------------------------------

_loaded: Choice | None = None
_builtin_checked = False
_lock = threading.Lock()


def ensure_backends(model: Path | None = None) -> Choice | None:
    """Load the chosen CPU variant and the GPU modules once per process (None: no variants)."""
    global _loaded
    if _loaded is not None:  # chosen and loaded in this process already: no listing, no lock
        return _loaded
    folder = lib_dir()
    files = variant_files(folder)
    if not files or folder is None:
        _load_modules_without_variants(folder)
        return None
    from engine.backends import llama_log

    llama_log.install()  # llama.cpp's "loaded CPU backend from …" goes to the log, not the terminal
    with _lock:
        if _loaded is None:
            choice = _decide(files, model)
            ok = _register(files, folder, choice)
            if not ok and choice.how == CACHED:
                # A cache copied from a host that runs the variant, a changed VM: measure again
                # rather than fail every load until someone deletes the cache.
                log.warning("llama.cpp refused the cached CPU variant %s; choosing again", choice.chosen)
                choice = _measure(files, model, machine_key(files))
                ok = _register(files, folder, choice)
            if not ok:
                choice = _refused(choice)
            _loaded = choice
        return _loaded


def _decide(files: dict[str, Path], model: Path | None) -> Choice:
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        if forced in files:
            return Choice(forced, f"forced by {FORCE_ENV}", (Probe(forced, -1),))
        log.warning("%s=%s: no such CPU variant (this build has %s); choosing one", FORCE_ENV, forced,
                    ", ".join(files))
    from engine.backends.cpu_check import SKIP_ENV, cache_dir

    if os.environ.get(SKIP_ENV) == "0":
        return Choice(None, f"llama.cpp's own pick by score ({SKIP_ENV}=0: not probed)")
    key = machine_key(files)
    return read_cached(cache_dir() / CACHE_FILE, key, files) or _measure(files, model, key)


def _measure(files: dict[str, Path], model: Path | None, key: str) -> Choice:
    from engine.backends.cpu_check import cache_dir

    choice = choose(files, model or _probe_model())
    for p in choice.probes:
        if p.runs is False:  # the log, not the terminal: nothing is wrong for the user, another runs
            log.info("llama.cpp CPU variant %s skipped: %s", p.name, p.detail)
    if any(p.runs is not None for p in choice.probes):  # a probe that could not tell is retried
        write_cached(cache_dir() / CACHE_FILE, key, choice)
    return choice


def _refused(choice: Choice) -> Choice:
    why = (f"CPU variant {choice.chosen} cannot run here (llama.cpp refused to load it on this CPU)"
           + (f"; unset {FORCE_ENV} or name another" if choice.how.startswith("forced") else ""))
    return Choice(choice.chosen, choice.how, choice.probes, refused=why)


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
    for path in other_backend_files(folder):
        if not lib.ggml_backend_load(str(path).encode()):
            log.warning("llama.cpp could not load the backend %s", path.name)
    return True


def module_command(module: str, *args: str) -> PythonChild:
    """`python -m MODULE ARGS` for a child that uses llama.cpp itself (llama-cpp-python's server):
    with run-time variants, nothing would register a CPU backend there, or llama.cpp's own pick would."""
    code = ("import runpy, sys\nfrom engine.backends.cpu_variants import ensure_backends\nensure_backends()\n"
            f"sys.argv[0] = {module!r}\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")
    return python_child(code, *args)


def _load_modules_without_variants(folder: Path | None) -> None:
    """A GGML_BACKEND_DL build without CPU variants (`libggml-cpu.so` as a module): nothing registers
    its backends either; with them built in (the usual case) llama.cpp has registered them already."""
    global _builtin_checked
    with _lock:
        if _builtin_checked or folder is None or not folder.is_dir():
            return
        _builtin_checked = True
        lib = ggml_library()
        if int(lib.ggml_backend_reg_count()) == 0:
            lib.ggml_backend_load_all_from_path(str(folder).encode())


def loaded() -> Choice | None:
    """The choice this process made, if it made one."""
    return _loaded


# --- the per-machine cache ---------------------------------------------------------------------

def machine_key(files: dict[str, Path]) -> str:
    """Changes when the CPU's flags or any variant file changes (a rebuild, an upgrade)."""
    from engine.backends.cpu_check import cpu_flags

    parts = [" ".join(sorted(cpu_flags()))]
    for name, path in sorted(files.items()):
        st = path.stat()
        parts.append(f"{name} {path.resolve()} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


CACHED = "measured on this machine earlier (cached)"


def read_cached(path: Path, key: str, files: dict[str, Path]) -> Choice | None:
    """The cached choice for `key`; None (measure again) unless every field has its type and
    the chosen variant is one of this build's `files` (a hand edit could name `../../x`)."""
    entry = load_json_object(path, {}).get(key)
    if not isinstance(entry, dict):
        return None
    entry = cast(dict[str, Any], entry)
    chosen, raw = entry.get("chosen"), entry.get("probes")
    if not (chosen is None or (isinstance(chosen, str) and chosen in files)) or not isinstance(raw, list):
        log.info("the CPU variant cache %s names %r, which this build lacks; measuring again", path, chosen)
        return None
    probes = [_cached_probe(p) for p in cast(list[object], raw)]
    if any(p is None for p in probes):
        return None
    return Choice(chosen, CACHED, tuple(p for p in probes if p is not None))


def _cached_probe(data: object) -> Probe | None:
    if not isinstance(data, dict):
        return None
    p = cast(dict[str, Any], data)
    name, score, runs, tps = p.get("name"), p.get("score"), p.get("runs"), p.get("tps")
    features, detail = p.get("features", []), p.get("detail", "")
    if not (is_text(name) and is_int(score) and (runs is None or is_bool(runs)) and (tps is None or is_number(tps))
            and isinstance(features, list) and is_text(detail)):
        return None
    return Probe(name, score, runs, tps, tuple(str(f) for f in cast(list[object], features)), detail)


def write_cached(path: Path, key: str, choice: Choice) -> None:
    entry = {"chosen": choice.chosen, "probes": [asdict(p) for p in choice.probes]}
    try:  # one machine, one entry: a newer build or CPU replaces the old choice
        write_json_atomic(path, {key: entry})
    except OSError as exc:
        log.info("could not cache the CPU variant choice in %s: %s", path, exc)


# --- small helpers -----------------------------------------------------------------------------

def _run(python: str, code: str, args: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """The child's ending; a hung one is killed and reported as TIMED_OUT with what it printed."""
    child = python_child(code, *args, python=python)
    argv = child.argv
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL, env=child.env, cwd=child.cwd)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(argv, TIMED_OUT, out, "")
    except OSError as exc:
        log.info("llama.cpp CPU variant child could not start: %s", exc)
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


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def _float(text: str) -> float | None:
    try:
        return round(float(text), 1)
    except ValueError:
        return None


def _probe_model() -> Path | None:
    from engine.backends.cpu_check import _probe_model as default  # pyright: ignore[reportPrivateUsage]

    return default()
