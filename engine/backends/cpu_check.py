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
The child, the cache and the time limit are `cpu_probe`'s.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engine.backends import cpu_probe, cpu_variants
from engine.backends.cpu_probe import FEATURE_FLAGS, SKIP_ENV, cpu_flags
from engine.errors import ModelLoadError

log = logging.getLogger("engine.llama")

REBUILD = (
    'CMAKE_ARGS="-DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_NATIVE=ON" '
    "uv sync --reinstall-package llama-cpp-python"
)


@dataclass(frozen=True, slots=True)
class Verdict:
    runs: bool | None  # None: the probe could not tell (timed out, skipped)
    features: tuple[str, ...]  # the build's CPU features (ggml's names)
    detail: str  # one line: how the probe ended


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


def probe(command: Sequence[str] | None = None, model: Path | None = None, timeout: float | None = None) -> Verdict:
    """Run the build in a child process; `command` replaces the default child (tests)."""
    got = cpu_probe.probe("", model, timeout or cpu_probe.PROBE_TIMEOUT_S, argv=command)  # its own backend
    detail = got.detail if got.runs or got.detail.startswith("the probe") else f"the probe {got.detail}"
    return Verdict(got.runs, got.features, detail)


def _library() -> Path | None:
    """llama.cpp's CPU library, found without loading it (the key must not need the probe)."""
    lib = cpu_probe.lib_dir()
    if lib is None:
        return None
    found = sorted(lib.glob("libggml-cpu*")) or sorted(lib.glob("*ggml-cpu*")) or sorted(lib.glob("*llama*"))
    return found[0] if found else None


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
    library = _library()
    key = cpu_probe.machine_key([library] if library else [])
    with _lock:
        verdict = _checked.get(key) or _read_cache(key)
        if verdict is None:
            verdict = probe(command, model or cpu_probe.probe_model())
            log.info("llama.cpp CPU probe: %s", verdict.detail)
            if verdict.runs is not None:
                _write_cache(key, verdict)
        _checked[key] = verdict
    if verdict.runs is False:
        raise ModelLoadError(refusal(verdict, flags))
    return verdict


def variant_verdict(choice: cpu_variants.Choice) -> Verdict:
    """The chosen variant as a verdict; no variant that runs is refused in one line."""
    if choice.refused:  # a forced variant that traps, or one llama.cpp would not load here
        raise ModelLoadError(choice.refused)
    chosen = choice.probe(choice.chosen)
    if choice.chosen is None and choice.how in (cpu_variants.PROBED, cpu_variants.CACHED):
        tried = _tried(choice)
        raise ModelLoadError(
            f"no llama.cpp CPU variant runs on this CPU ({tried}); rebuild it for this machine: {REBUILD}"
        )
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
    return f"this llama.cpp build {why} ({verdict.detail}); rebuild it for this machine: {REBUILD}"


def _read_cache(key: str) -> Verdict | None:
    entry = cpu_probe.read_cache(key)
    if entry is None:
        return None
    features, detail = entry.get("features"), entry.get("detail")
    if not isinstance(features, list) or not isinstance(detail, str):
        return None
    return Verdict(bool(entry.get("runs")), tuple(str(f) for f in cast(list[Any], features)), detail)


def _write_cache(key: str, verdict: Verdict) -> None:
    cpu_probe.write_cache(key, {"runs": verdict.runs, "features": list(verdict.features), "detail": verdict.detail})
