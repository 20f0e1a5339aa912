"""llama.cpp's CPU variants: the best one by CPU features that does not trap, chosen at run time.

The build (pyproject: `GGML_BACKEND_DL`, `GGML_CPU_ALL_VARIANTS` trimmed to `EMBER_CPU_VARIANTS`)
ships the CPU backend once per x86-64 level Ember keeps, `libggml-cpu-{x64,sandybridge,haswell,
skylakex}.so` in `llama_cpp/lib` (any set works here: the names and scores come from the files),
and registers none at start-up. llama.cpp's own pick (`ggml_backend_load_best`)
takes the variant with the highest feature score, which on a VM that reports AMX but traps on it
is the one that dies of SIGILL. So Ember picks: a child process reads every variant's score, then
the variants are probed best-scored first, one child each (loaded, a prompt decoded), and the
first that survives is taken: features decide, a child proves it, no speed race. The choice is
cached per machine (CPU flags and the variant files). A forced variant (`EMBER_CPU_VARIANT`) is
probed the same way, and one that traps is one line. `ensure_backends()` then loads the choice,
and any GPU backend module beside it, with `ggml_backend_load` before llama.cpp is used here.

A cached choice can still trap (a cache copied from a host that runs it, a VM moved to another
host): a process leaves a marker around its first decode, so a run that died there leaves the
marker behind, and the next start leaves that variant out and probes again.

A build without variant files (a rebuild with `-DGGML_BACKEND_DL=OFF`) has its backends built
in: there is nothing to choose, and `cpu_check` probes that one build instead. The children, the
cache and the time limit are `cpu_probe`'s.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import runpy
import stat
import sys
import threading
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.backends import cpu_probe
from engine.backends.cpu_probe import PROBE_CHILD, SCORE_CHILD, ending, ggml_library, lib_dir
from engine.child_env import PythonChild, function_child
from models.library.json_schema import is_bool, is_int, is_text

log = logging.getLogger("engine.llama")

FORCE_ENV = "EMBER_CPU_VARIANT"  # a variant's name: probed like the automatic choice, then used
PROBED = "probed"
NOT_PROBED = "not probed: a better-scored variant runs"
VARIANT_FILE = re.compile(r"(?:lib)?ggml-cpu-(?P<name>.+)\.(?:so|dll|dylib)")
BACKEND_FILE = re.compile(r"(?:lib)?ggml-(?P<name>[a-z0-9_]+)\.(?:so|dll|dylib)")
NOT_BACKENDS = {"base", "cpu"}
STARTS_DIR = "cpu-variant-starts"  # one marker per process that loaded a variant and has not decoded yet


@dataclass(frozen=True, slots=True)
class Probe:
    """What one variant did here."""

    name: str
    score: int  # ggml's feature score; 0: this CPU lacks what it needs; -1: unknown
    runs: bool | None = None  # None: not probed, or the probe could not tell
    features: tuple[str, ...] = ()  # ggml's names, as llama_print_system_info reports them
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Choice:
    """The variant in use (None: none runs) and what each candidate did."""

    chosen: str | None
    how: str  # "probed", "forced by EMBER_CPU_VARIANT", …
    probes: tuple[Probe, ...] = field(default_factory=tuple)
    refused: str = ""  # why `chosen` cannot be used here (one line); "" when it can

    def probe(self, name: str | None) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    @property
    def skipped(self) -> list[Probe]:
        """Variants that were tried and failed (a trap, a probe that could not tell), and why."""
        return [
            p
            for p in self.probes
            if p.name != self.chosen
            and p.detail != NOT_PROBED
            and (p.runs is False or (p.score > 0 and p.runs is None))
        ]


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


def read_scores(
    files: dict[str, Path], python: str = sys.executable, child: str = SCORE_CHILD, timeout: float | None = None
) -> list[Probe]:
    """Each variant's score, read in child processes; a variant that kills its child scores 0."""
    by_path = {str(path): name for name, path in files.items()}
    remaining: list[str] = list(by_path)
    probes: list[Probe] = []
    while remaining:
        done = cpu_probe.run(child, remaining, timeout or cpu_probe.PROBE_TIMEOUT_S, python)
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
        remaining = remaining[remaining.index(tried) + 1 :]
    return probes


def probe_variant(
    name: str,
    path: Path,
    score: int,
    model: Path | None,
    python: str = sys.executable,
    child: str = PROBE_CHILD,
    timeout: float | None = None,
) -> Probe:
    """Load the variant in a child process and decode with it: how it ended."""
    got = cpu_probe.probe(str(path), model, timeout or cpu_probe.PROBE_TIMEOUT_S, python, child)
    return Probe(name, score, got.runs, got.features, got.detail)


def choose(
    files: dict[str, Path],
    model: Path | None,
    *,
    python: str = sys.executable,
    score_child: str = SCORE_CHILD,
    probe_child: str = PROBE_CHILD,
) -> Choice:
    """The best-scored variant whose child decodes: probed in score order until one runs."""
    deadline = time.monotonic() + cpu_probe.PROBE_TIMEOUT_S  # all probes together: hung children cannot add up
    scored = sorted(read_scores(files, python, score_child), key=lambda p: -p.score)
    probes: list[Probe] = []
    chosen: str | None = None
    for p in scored:
        left = deadline - time.monotonic()
        if p.score <= 0 or p.runs is False or chosen is not None or left <= 0:
            probes.append(p if p.score <= 0 or p.runs is False else Probe(p.name, p.score, detail=NOT_PROBED))
            continue
        probes.append(probe_variant(p.name, files[p.name], p.score, model, python, probe_child, timeout=left))
        chosen = p.name if probes[-1].runs else None
    return Choice(chosen, PROBED, tuple(probes))


# --- in this process ---------------------------------------------------------------------------

_loaded: Choice | None = None
_builtin_checked = False
_lock = threading.Lock()


def ensure_backends(model: Path | None = None) -> Choice | None:
    """Load the chosen CPU variant and the GPU modules once per process (None: no variants)."""
    global _loaded, _pending
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
            ok = not choice.refused and _register(files, folder, choice)
            if not ok and choice.how == CACHED:
                # A cache copied from a host that runs the variant, a changed VM: probe again
                # rather than fail every load until someone deletes the cache.
                log.warning("llama.cpp refused the cached CPU variant %s; choosing again", choice.chosen)
                choice = _measure(files, model, cpu_probe.machine_key(files.values()))
                ok = _register(files, folder, choice)
            if not ok and not choice.refused:
                choice = _refused(choice, "llama.cpp refused to load it on this CPU")
            _pending = choice.chosen if ok else None
            _loaded = choice
        return _loaded


def _decide(files: dict[str, Path], model: Path | None) -> Choice:
    key = cpu_probe.machine_key(files.values())
    crashed = crashed_starts()
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        if forced in files:
            return _forced(forced, files, model, key, crashed)
        log.warning("%s=%s: no such CPU variant (this build has %s); choosing one", FORCE_ENV, forced, ", ".join(files))
    if os.environ.get(cpu_probe.SKIP_ENV) == "0":
        return Choice(None, f"llama.cpp's own pick by score ({cpu_probe.SKIP_ENV}=0: not probed)")
    cached = read_cached(key, files)
    if cached is not None and cached.chosen in crashed:
        log.warning("the last run on CPU variant %s died before its first decode; choosing another", cached.chosen)
        cached = None
    return cached or _measure(files, model, key, crashed)


def _forced(name: str, files: dict[str, Path], model: Path | None, key: str, crashed: set[str]) -> Choice:
    """A forced variant, probed in a child once per machine like the automatic choice."""
    how = f"forced by {FORCE_ENV}"
    probe = _cached_probes(key).get(name)
    if name in crashed:
        probe = Probe(name, -1, False, detail=CRASHED)
    elif probe is None or probe.runs is None:
        probe = probe_variant(name, files[name], -1, model or cpu_probe.probe_model())
    if probe.runs is not None:
        _remember(key, probe)
    choice = Choice(name, how, (probe,))
    return _refused(choice, probe.detail) if probe.runs is False else choice


def _measure(files: dict[str, Path], model: Path | None, key: str, crashed: Collection[str] = ()) -> Choice:
    """Probe the variants (those that took a run down are not tried again), log and cache the choice."""
    left = {n: p for n, p in files.items() if n not in crashed}
    choice = choose(left, model or cpu_probe.probe_model())
    gone = tuple(Probe(n, -1, False, detail=CRASHED) for n in files if n in crashed)
    if gone:
        choice = Choice(choice.chosen, choice.how, choice.probes + gone)
    for p in choice.probes:
        if p.runs is False:  # the log, not the terminal: nothing is wrong for the user, another runs
            log.info("llama.cpp CPU variant %s skipped: %s", p.name, p.detail)
    if any(p.runs is not None for p in choice.probes):  # a probe that could not tell is retried
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
    from engine.backends import gpu_modules

    gpu = set(gpu_modules.module_files(folder))
    for path in other_backend_files(folder):
        if path not in gpu and not lib.ggml_backend_load(str(path).encode()):
            log.warning("llama.cpp could not load the backend %s", path.name)
    gpu_modules.load(lib, folder)  # the GPU chosen here, alone (a software device only when asked for)
    return True


def module_command(module: str, *args: str) -> PythonChild:
    """`python -m MODULE ARGS` for a child that uses llama.cpp itself (llama-cpp-python's server):
    with run-time variants, nothing would register a CPU backend there, or llama.cpp's own pick would."""
    return function_child("engine.backends.cpu_variants:run_module", module, *args)


def run_module() -> int:
    """In the child: argv MODULE ARGS. The chosen variant registered, then MODULE run as __main__."""
    module = sys.argv[1]
    ensure_backends()
    sys.argv[:2] = [module]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


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


def in_use_line() -> str:
    """The variant this machine uses, from the cache, without loading or probing anything."""
    files = variant_files(lib_dir())
    if not files:
        return "CPU backend built into llama.cpp (no run-time variants)"
    key = cpu_probe.machine_key(files.values())
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced in files:
        probe = _cached_probes(key).get(forced)
        trapped = f"; cannot run here: {probe.detail}" if probe and probe.runs is False else ""
        return f"CPU variant {forced} (forced by {FORCE_ENV}{trapped})"
    cached = read_cached(key, files)
    if cached is None or cached.chosen is None:
        return f"CPU variant: chosen from {len(files)} at the first model load"
    return f"CPU variant {cached.chosen} (of {len(files)}, probed on this machine)"


# --- markers: a run that dies before its first decode ------------------------------------------

CRASHED = "a run died before its first decode with it"
_pending: str | None = None  # the variant loaded here that has not decoded yet
_marker: Path | None = None


def _starts_dir() -> Path:
    return cpu_probe.cache_dir() / STARTS_DIR


def decoding() -> None:
    """Before this process's first decode: leave a marker naming its variant, which a trap there
    (SIGILL) leaves behind. Only around that decode, so a process stopped at another time (a
    SIGTERM, a doctor that never decodes) is never taken for a crash."""
    global _marker
    if _pending is None or _marker is not None:
        return
    path = _starts_dir() / str(os.getpid())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_pending, encoding="utf-8")
    except OSError as exc:
        log.info("could not leave the CPU variant's start marker in %s: %s", path, exc)
        return
    _marker = path
    atexit.register(decoded)


def decoded() -> None:
    """This process decoded with its variant (or exits normally): its marker goes, for good."""
    global _marker, _pending
    _pending = None
    if _marker is None:
        return
    with contextlib.suppress(OSError):
        _marker.unlink()
    _marker = None


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


# --- the per-machine cache ---------------------------------------------------------------------

CACHED = "probed on this machine earlier (cached)"


def read_cached(key: str, files: dict[str, Path]) -> Choice | None:
    """The cached choice for `key`; None (measure again) unless every field has its type and
    the chosen variant is one of this build's `files` (a hand edit could name `../../x`)."""
    entry = cpu_probe.read_cache(key)
    if entry is None:
        return None
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
    cpu_probe.write_cache(key, {"chosen": choice.chosen, "probes": [asdict(p) for p in choice.probes]})


def _cached_probes(key: str) -> dict[str, Probe]:
    """Every probe cached for this machine by name (a forced variant's among them)."""
    raw = (cpu_probe.read_cache(key) or {}).get("probes")
    probes = [_cached_probe(p) for p in cast(list[object], raw)] if isinstance(raw, list) else []
    return {p.name: p for p in probes if p is not None}


def _remember(key: str, probe: Probe) -> None:
    """Add a forced variant's probe to this machine's entry, keeping the automatic choice."""
    entry = cpu_probe.read_cache(key) or {}
    probes = [asdict(p) for p in _cached_probes(key).values() if p.name != probe.name] + [asdict(probe)]
    cpu_probe.write_cache(key, ({"chosen": entry["chosen"]} if "chosen" in entry else {}) | {"probes": probes})


# --- small helpers -----------------------------------------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
