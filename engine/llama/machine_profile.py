"""The machine profile: how fast this machine decodes and reads prompts, measured once and cached.

A short run of the built-in model (a warm-up, then three rounds of a 64-token prompt and 16
decoded tokens: a few seconds, the fastest round and tokens kept, so another process busy on
the same cores for a moment does not make this machine look slow) gives the effective memory
bandwidth of decoding and the compute of prompt reading, with their per-layer costs
(`MachineProfile.from_run`); `models.library.speed` turns them into a prediction for any file.
The profile is cached in Ember's cache folder under a key of the CPU, the CPU variant in use,
the GPUs and the llama.cpp version, so a change of any of them measures again. Callers decide
when: `ember models catalogue` and `ember bench`, and the window once it has been idle a while
(`child`, a low-priority process it ends when the user sends a message or closes it), never
while a user waits for a reply.

The same file keeps what real use measured per model file (`remember`): that figure replaces the
prediction for the file, and its ratio to the prediction calibrates the next ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import statistics
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, cast

from engine.child_env import PythonChild, function_child
from engine.errors import BenchError
from engine.llama.machine_cache import read_entry, write_entry
from models.errors import EmberError
from models.library import speed
from models.library.speed import MachineProfile

log = logging.getLogger(__name__)

PROFILE_FILE = "machine-profile.json"
N_PROMPT, N_GEN, ROUNDS = 64, 16, 3  # three short rounds: the fastest round and tokens count
MIN_TOKENS = 16  # a real turn shorter than this says little about decoding speed
MAX_REMEMBERED = 200  # files with a measured speed kept per machine


def machine_key() -> str:
    """Changes with the CPU, the CPU variant, the GPUs and llama.cpp's version."""
    from engine.llama.cpu import in_use_line
    from engine.llama.cpu_threads import read_cpuinfo

    cpu = next((line for line in read_cpuinfo().splitlines() if line.startswith("model name")), "")
    try:
        version = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        version = "?"
    parts = [cpu, str(os.cpu_count()), version, in_use_line(), os.environ.get("EMBER_GPU_DEVICE", ""), *_gpus()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _gpus() -> list[str]:
    """The GPUs the system lists (NVIDIA's driver entries and DRI render nodes), without loading llama.cpp."""
    found: list[str] = []
    for folder in (Path("/proc/driver/nvidia/gpus"), Path("/dev/dri")):
        with contextlib.suppress(OSError):
            found += sorted(p.name for p in folder.iterdir())
    return found


def _store() -> dict[str, Any]:
    entry = read_entry(PROFILE_FILE, machine_key())
    return cast(dict[str, Any], entry) if isinstance(entry, dict) else {}


def _save(entry: dict[str, Any]) -> None:
    write_entry(PROFILE_FILE, machine_key(), entry)  # a new CPU variant, GPU or llama.cpp replaces the old one


def cached() -> MachineProfile | None:
    """This machine's profile, calibrated by the speeds measured since (the GPU's by those
    measured on it); None when never measured."""
    entry = _store()
    raw = entry.get("profile")
    profile = MachineProfile.from_json(cast(dict[str, object], raw)) if isinstance(raw, dict) else None
    if profile is None:
        return None
    measured = _measured(entry).values()

    def calibrated(p: MachineProfile, device: str) -> MachineProfile:
        ratios = [float(m["ratio"]) for m in measured if m.get("device", "CPU") == device and _number(m.get("ratio"))]
        return dataclasses.replace(p, calibration=speed.calibration(ratios))

    gpu = calibrated(profile.gpu, "GPU") if profile.gpu is not None else None
    return dataclasses.replace(calibrated(profile, "CPU"), gpu=gpu)


def _number(value: object) -> bool:
    return isinstance(value, int | float)


def _measured(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    raw = entry.get("measured")
    if not isinstance(raw, dict):
        return {}
    return {k: cast(dict[str, Any], v) for k, v in cast(dict[str, Any], raw).items() if isinstance(v, dict)}


def file_key(path: Path, size: int) -> str:
    return f"{path.name}:{size}"


def measured_decode(path: Path, size: int) -> float | None:
    """The decode tokens/s real use measured for this file here, or None."""
    value = _measured(_store()).get(file_key(path, size), {}).get("decode_tps")
    return float(value) if isinstance(value, int | float) and value > 0 else None


_remembered: set[Path] = set()  # files this process has offered already (one look at the file each)


def remember_once(path: Path, decode_tps: float, tokens: int, *, on_gpu: bool = False) -> None:
    """`remember`, at most once per file and process, never raising (called after every turn)."""
    if path in _remembered or tokens < MIN_TOKENS or decode_tps <= 0:
        return
    _remembered.add(path)
    try:
        remember(path, decode_tps, tokens, on_gpu=on_gpu)
    except (OSError, ValueError) as exc:
        log.debug("speed of %s not remembered: %s", path.name, exc)


def remember(path: Path, decode_tps: float, tokens: int, *, on_gpu: bool = False) -> None:
    """Keep the fastest real measurement of `path`'s decoding here, and its error against the
    prediction of the device it ran on (`on_gpu`: every layer on the GPU). The fastest, as the
    profile keeps its fastest rounds: a first use while the machine was busy would otherwise
    show that slow figure for good."""
    if tokens < MIN_TOKENS or decode_tps <= 0:
        return
    try:
        size = path.stat().st_size
    except OSError:
        return
    entry = _store()
    raw = entry.get("profile")
    measured = _measured(entry)
    key = file_key(path, size)
    known = measured.get(key)
    before = known.get("decode_tps") if known is not None else None
    if isinstance(before, int | float) and before >= decode_tps:
        return
    if not isinstance(raw, dict) or (known is None and len(measured) >= MAX_REMEMBERED):
        return
    profile = MachineProfile.from_json(cast(dict[str, object], raw))
    if profile is not None and on_gpu:
        profile = profile.gpu
    if profile is None:
        return
    from models.gguf.meta import read_metadata

    try:  # uncalibrated (`from_json` keeps the stored 1.0): the ratio is the estimate's own error
        predicted = speed.predict_meta(profile, read_metadata(path)).decode_tps
    except EmberError:  # not a GGUF Ember can read: nothing to calibrate with
        return
    measured[key] = {
        "decode_tps": round(decode_tps, 2),
        "ratio": round(decode_tps / predicted, 3),
        "device": "GPU" if on_gpu else "CPU",
    }
    _save({**entry, "measured": measured})


Save = Literal["always", "if_none", "never"]


def measure(threads: int, model: Path | None = None, *, save: Save = "always", typical: bool = False) -> MachineProfile:
    """Measure (a few seconds) on the built-in model and return the profile; BenchError if it cannot.

    Where llama.cpp has a GPU, the same run with every layer on it gives the GPU's profile too
    (`MachineProfile.gpu`). `typical`: from the median round and token instead of the fastest
    (what `ember bench` compares with its own medians taken under the same load: a check of the
    prediction, not of the load). What is cached is always the fastest figures' profile:
    `save` "always" replaces the cached one, "if_none" caches it only where none is (`ember
    bench`: `ember models PATH` can predict after it, and a profile already calibrated by real
    use is kept), "never" leaves the cache alone."""
    from models.gguf.meta import read_metadata

    path = model or shipped_model_path()
    meta = read_metadata(path)
    started = time.perf_counter()
    cpu = _run(path, threads)
    gpu = _gpu_run(path, threads)
    seconds = time.perf_counter() - started

    def from_timings(timings: Timings, fast: bool, device: str = "CPU") -> MachineProfile:
        pp_tps, tg_tps, output_s = timings.figures(fast)
        run = speed.model_run(meta, pp_tps, tg_tps, N_PROMPT, output_s, cpu=device == "CPU")
        return MachineProfile.from_run(run, seconds, device)

    def profile(fast: bool) -> MachineProfile:
        mine = from_timings(cpu, fast)
        return mine if gpu is None else dataclasses.replace(mine, gpu=from_timings(gpu[0], fast, gpu[1]))

    fastest = profile(True)
    if save == "always" or (save == "if_none" and cached() is None):
        # a new profile: the speeds measured against the old one no longer calibrate it
        _save({"profile": fastest.to_json(), "measured": {}, "model": path.name})
    log.info("machine profile: %s on %s (%.1f s)", fastest.to_json(), path.name, seconds)
    return profile(False) if typical else fastest


def shipped_model_path() -> Path:
    from models.library.default_model import shipped_model_path as shipped

    return shipped()


@dataclasses.dataclass(frozen=True, slots=True)
class Timings:
    """Seconds of each round's prompt, each decoded token, and each token decoded without logits."""

    prompt_s: list[float]
    token_s: list[float]
    bare_s: list[float]

    def figures(self, fast: bool) -> tuple[float, float, float]:
        """(prompt tokens/s, decode tokens/s, the output projection's seconds a decoded token):
        from the fastest round and tokens (`fast`), or the medians."""
        pick = _fast_quarter if fast else statistics.median
        prompt = N_PROMPT / (min(self.prompt_s) if fast else statistics.median(self.prompt_s))
        return prompt, 1.0 / pick(self.token_s), max(0.0, pick(self.token_s) - pick(self.bare_s))


def _gpu_run(path: Path, threads: int) -> tuple[Timings, str] | None:
    """The run with every layer on the GPU and the GPU's name, where llama.cpp has a GPU; None
    where it has none or the run fails there (the CPU's profile still stands)."""
    name = _gpu_name()
    if name is None:
        return None
    try:
        return _run(path, threads, gpu_layers=-1), name
    except BenchError as exc:
        log.info("no GPU profile: %s", exc)
        return None


def _gpu_name() -> str | None:
    """The GPU llama.cpp offloads to by default (its first), or None without one."""
    from engine.llama import llama_devices

    try:
        if not llama_devices.gpu_offload_supported():
            return None
        gpus = llama_devices.gpu_devices()
    except (OSError, RuntimeError, ValueError) as exc:
        log.info("no GPU for the machine profile: %s", exc)
        return None
    return (gpus[0].description or gpus[0].name or "GPU") if gpus else None


def _run(path: Path, threads: int, gpu_layers: int = 0) -> Timings:
    """The timings of `path` on the CPU (or with `gpu_layers` on the GPU), loaded as the
    window's backend loads a model (flash attention on)."""
    from llama_cpp import Llama

    import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
    from engine.llama import llama_log
    from engine.llama.cpu import ensure_backends

    llama_log.install()
    ensure_backends()
    try:
        model = Llama(  # the batch's threads too: llama-cpp-python's default is every CPU (the backend's is not)
            str(path), n_ctx=256, n_batch=N_PROMPT, n_threads=threads, n_threads_batch=threads,
            n_gpu_layers=gpu_layers, flash_attn=True, verbose=False,
        )  # fmt: skip
    except ValueError as exc:
        raise BenchError(f"the machine profile could not load {path.name} ({exc})") from exc
    try:
        text = "The quick brown fox jumps over the lazy dog, and then it runs far away. " * 40
        tokens = list(model.tokenize(text.encode(), add_bos=False))[: N_PROMPT + N_GEN]
        model.eval(tokens[:8])  # pages the weights in
        timings = Timings([], [], [])
        for _ in range(ROUNDS):
            model.reset()
            start = time.perf_counter()
            model.eval(tokens[:N_PROMPT])
            timings.prompt_s.append(time.perf_counter() - start)
            for token in tokens[N_PROMPT:]:
                start = time.perf_counter()
                model.eval([token])
                timings.token_s.append(time.perf_counter() - start)
            timings.bare_s.extend(_decode_without_logits(model, token) for token in tokens[N_PROMPT:])
    finally:
        model.close()
    return timings


def _decode_without_logits(model: Any, token: int) -> float:
    """Seconds to decode `token` asking for no logits: llama.cpp then skips the output projection,
    so the difference from a normal token is that projection's own time (`MachineProfile.from_run`)."""
    batch = model._batch  # llama-cpp-python's own batch, as `Llama.eval` fills it
    batch.set_batch(batch=[token], n_past=model.n_tokens, logits_all=False)
    batch.batch.logits[0] = 0
    start = time.perf_counter()
    model._ctx.decode(batch)
    seconds = time.perf_counter() - start
    model.n_tokens += 1
    return seconds


def _fast_quarter(seconds: list[float]) -> float:
    """The median of the fastest quarter: the machine's own speed when others share its CPUs
    (the slow tokens are the ones another process took the cores from)."""
    fast = sorted(seconds)[: max(1, len(seconds) // 4)]
    return fast[len(fast) // 2]


def run_child() -> int:
    """The window's idle-time measurement (`child`): at the lowest priority, cached; 1 when it cannot."""
    with contextlib.suppress(OSError, AttributeError):  # os.nice: POSIX only
        os.nice(19)  # the user's own work, and the window, come first
    return measure_and_cache()


def measure_and_cache() -> int:
    """`run_child` at the caller's priority (a test's bound on its memory must not wait for an idle CPU)."""
    from engine.llama.cpu_threads import default_threads

    try:
        measure(default_threads())
    except BenchError as exc:
        log.info("no machine profile: %s", exc)
        return 1
    return 0


def child() -> PythonChild:
    """The command of `run_child`: a process of its own, so that closing the window can end it at once."""
    return function_child("engine.llama.machine_profile:run_child")
