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
in: there is nothing to choose, and `cpu_check` probes that one build instead. The children, the
cache and the time limit are `cpu_probe`'s.
"""

from __future__ import annotations

import logging
import os
import re
import runpy
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.backends import cpu_probe
from engine.backends.cpu_probe import PROBE_CHILD, SCORE_CHILD, ending, ggml_library, lib_dir
from engine.child_env import PythonChild, function_child
from models.library.json_schema import is_bool, is_int, is_number, is_text

log = logging.getLogger("engine.llama")

FORCE_ENV = "EMBER_CPU_VARIANT"  # a variant's name: used as is, unprobed (the bench's AVX2-only side)
NOT_PROBED = "not probed: better-scored variants run"
MEASURED = 2  # variants that must survive their probe before the fastest of them is taken
CLEARLY_FASTER = 1.10  # a lower-scored variant is taken only when it decodes this much faster
TIMED_TOKENS = 16
VARIANT_FILE = re.compile(r"(?:lib)?ggml-cpu-(?P<name>.+)\.(?:so|dll|dylib)")
BACKEND_FILE = re.compile(r"(?:lib)?ggml-(?P<name>[a-z0-9_]+)\.(?:so|dll|dylib)")
NOT_BACKENDS = {"base", "cpu"}


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
    """Load the variant in a child process and decode with it; how it ended, and how fast."""
    got = cpu_probe.probe(str(path), TIMED_TOKENS, model, timeout or cpu_probe.PROBE_TIMEOUT_S, python, child)
    return Probe(name, score, got.runs, got.tps, got.features, got.detail)


def choose(
    files: dict[str, Path],
    model: Path | None,
    *,
    python: str = sys.executable,
    score_child: str = SCORE_CHILD,
    probe_child: str = PROBE_CHILD,
) -> Choice:
    """Probe the best-scored variants until MEASURED of them run; take the best of those."""
    deadline = time.monotonic() + cpu_probe.PROBE_TIMEOUT_S  # all probes together: hung children cannot add up
    scored = sorted(read_scores(files, python, score_child), key=lambda p: -p.score)
    probes: list[Probe] = []
    for p in scored:
        left = deadline - time.monotonic()
        if p.score <= 0 or p.runs is False or sum(q.runs is True for q in probes) >= MEASURED or left <= 0:
            probes.append(p if p.score <= 0 or p.runs is False else Probe(p.name, p.score, detail=NOT_PROBED))
            continue
        probes.append(probe_variant(p.name, files[p.name], p.score, model, python, probe_child, timeout=left))
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
                choice = _measure(files, model, cpu_probe.machine_key(files.values()))
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
        log.warning("%s=%s: no such CPU variant (this build has %s); choosing one", FORCE_ENV, forced, ", ".join(files))
    if os.environ.get(cpu_probe.SKIP_ENV) == "0":
        return Choice(None, f"llama.cpp's own pick by score ({cpu_probe.SKIP_ENV}=0: not probed)")
    key = cpu_probe.machine_key(files.values())
    return read_cached(key, files) or _measure(files, model, key)


def _measure(files: dict[str, Path], model: Path | None, key: str) -> Choice:
    choice = choose(files, model or cpu_probe.probe_model())
    for p in choice.probes:
        if p.runs is False:  # the log, not the terminal: nothing is wrong for the user, another runs
            log.info("llama.cpp CPU variant %s skipped: %s", p.name, p.detail)
    if any(p.runs is not None for p in choice.probes):  # a probe that could not tell is retried
        write_cached(key, choice)
    return choice


def _refused(choice: Choice) -> Choice:
    why = f"CPU variant {choice.chosen} cannot run here (llama.cpp refused to load it on this CPU)" + (
        f"; unset {FORCE_ENV} or name another" if choice.how.startswith("forced") else ""
    )
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
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced in files:
        return f"CPU variant {forced} (forced by {FORCE_ENV})"
    cached = read_cached(cpu_probe.machine_key(files.values()), files)
    if cached is None or cached.chosen is None:
        return f"CPU variant: chosen from {len(files)} at the first model load"
    return f"CPU variant {cached.chosen} (of {len(files)}, measured on this machine)"


# --- the per-machine cache ---------------------------------------------------------------------

CACHED = "measured on this machine earlier (cached)"


def read_cached(key: str, files: dict[str, Path]) -> Choice | None:
    """The cached choice for `key`; None (measure again) unless every field has its type and
    the chosen variant is one of this build's `files` (a hand edit could name `../../x`)."""
    entry = cpu_probe.read_cache(key)
    if entry is None:
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
    name, score, runs, tps = p.get("name"), p.get("score"), p.get("runs"), p.get("tps")
    features, detail = p.get("features", []), p.get("detail", "")
    if not (
        is_text(name)
        and is_int(score)
        and (runs is None or is_bool(runs))
        and (tps is None or is_number(tps))
        and isinstance(features, list)
        and is_text(detail)
    ):
        return None
    return Probe(name, score, runs, tps, tuple(str(f) for f in cast(list[object], features)), detail)


def write_cached(key: str, choice: Choice) -> None:
    cpu_probe.write_cache(key, {"chosen": choice.chosen, "probes": [asdict(p) for p in choice.probes]})


# --- small helpers -----------------------------------------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
