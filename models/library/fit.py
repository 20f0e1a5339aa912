"""Does a model fit this machine? Ember's memory estimate against the free memory it is given.

The need is the estimate of `models.library.memory`: the weights (the file's size), the KV
cache at the chosen context and cache type, and the compute-buffer allowance. It is compared
with free RAM and, where llama.cpp has a GPU, the GPU's free memory, giving one of four
marks, each with its reason: runs on the GPU, runs on the CPU, partly offloaded, too big.

The free-memory figures are an input (`FreeMemory`): the caller measures them (desktop.core
does, off the GUI thread) and tests pass their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from models.library.catalogue import Architecture, CatalogueEntry, CatalogueFile
from models.library.memory import KV_CACHE_TYPES, compute_buffer_bytes, format_bytes
from models.library.settings import DEFAULT_CONTEXT_LENGTH
from models.library.speed import USEFUL_TPS, MachineProfile, Prediction, predict

MIB = 1 << 20
# What a GPU keeps back besides the model: the CUDA context and fragmentation (the same
# margin as engine/llama/offload.py's automatic layer count).
GPU_HEADROOM_BYTES = 768 * MIB
GPU_HEADROOM_SHARE = 0.03
# What RAM keeps back for the system and the window (free memory is what a new process may take).
RAM_HEADROOM_BYTES = 512 * MIB
RAM_HEADROOM_SHARE = 0.10
# A model whose architecture was not checked: its KV cache per position is guessed from its
# size, high (most 1-14B models with grouped-query attention need 14-35 KiB per billion).
UNKNOWN_KV_BYTES_PER_B = 48 * 1024
# Above this, a model on the CPU answers at a few words a second: the mark says so.
SLOW_ON_CPU_BYTES = 6_000_000_000


class Fit(StrEnum):
    GPU = "runs on the GPU"
    CPU = "runs on the CPU"
    PARTIAL = "partly offloaded"
    TOO_BIG = "too big"

    @property
    def rank(self) -> int:
        """0 is best: where a model runs fastest comes first."""
        return list(Fit).index(self)

    @property
    def label(self) -> str:
        return self.value[:1].upper() + self.value[1:]


@dataclass(frozen=True, slots=True)
class FreeMemory:
    """What this machine has free now; `gpu_bytes` None when llama.cpp has no GPU."""

    ram_bytes: int | None
    gpu_bytes: int | None = None
    gpu_name: str = ""

    def describe(self) -> str:
        """'12.3 GB free memory · NVIDIA H200: 139.0 GB free' (or '· no GPU')."""
        ram = f"{format_bytes(self.ram_bytes)} free memory" if self.ram_bytes is not None else "free memory unknown"
        if self.gpu_bytes is None:
            return f"{ram} · no GPU"
        return f"{ram} · {self.gpu_name or 'GPU'}: {format_bytes(self.gpu_bytes)} free"


@dataclass(frozen=True, slots=True)
class Need:
    weights: int
    kv_cache: int
    compute: int
    context: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute

    def parts(self) -> str:
        """'model 2.5 GB + context 604.0 MB + work space 536.9 MB'."""
        return (
            f"model {format_bytes(self.weights)} + context {format_bytes(self.kv_cache)} + work space "
            f"{format_bytes(self.compute)}"
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    fit: Fit
    reason: str
    need: Need

    @property
    def fits(self) -> bool:
        return self.fit is not Fit.TOO_BIG


def estimate_need(
    weights: int,
    n_ctx: int,
    *,
    architecture: Architecture | None = None,
    parameters_b: float | None = None,
    kv_cache: str = "f16",
) -> Need:
    """Weights + KV cache + compute buffers for a file of `weights` bytes at `n_ctx` positions."""
    if architecture is not None:
        per_position = architecture.kv_bytes_per_token(kv_cache)
    else:  # guessed from the parameter count, else from the file (about 0.6 bytes a parameter at 4-5 bits)
        billions = parameters_b if parameters_b else weights / 0.6e9
        per_position = UNKNOWN_KV_BYTES_PER_B * billions * KV_CACHE_TYPES[kv_cache] / KV_CACHE_TYPES["f16"]
    return Need(weights, int(per_position * n_ctx), compute_buffer_bytes(n_ctx), n_ctx)


def gpu_budget(gpu_free: int) -> int:
    return gpu_free - GPU_HEADROOM_BYTES - int(gpu_free * GPU_HEADROOM_SHARE)


def ram_budget(ram_free: int) -> int:
    return ram_free - max(RAM_HEADROOM_BYTES, int(ram_free * RAM_HEADROOM_SHARE))


def judge(need: Need, free: FreeMemory) -> Verdict:
    """The mark for `need` on a machine with `free` memory, with its reason in words."""
    total, parts = format_bytes(need.total), need.parts()
    if free.gpu_bytes is not None:
        budget = gpu_budget(free.gpu_bytes)
        gpu = free.gpu_name or "the GPU"
        if need.total <= budget:
            return Verdict(
                Fit.GPU, f"Needs about {total} of the {format_bytes(free.gpu_bytes)} free on {gpu} ({parts}).", need
            )
        spill = need.total - max(budget, 0)
        if budget > need.compute and (free.ram_bytes is None or spill <= ram_budget(free.ram_bytes)):
            share = round(100 * (budget - need.compute) / max(1, need.weights + need.kv_cache))
            return Verdict(
                Fit.PARTIAL,
                f"Needs about {total}; about {share}% of it fits on {gpu} "
                f"({format_bytes(free.gpu_bytes)} free), the rest runs from memory, slower ({parts}).",
                need,
            )
    return _on_cpu(need, free)


def _on_cpu(need: Need, free: FreeMemory) -> Verdict:
    total, parts = format_bytes(need.total), need.parts()
    why_cpu = "" if free.gpu_bytes is None else ", too big for the GPU"
    if free.ram_bytes is None:
        return Verdict(Fit.CPU, f"Needs about {total} ({parts}); how much memory is free is unknown here.", need)
    if need.total > ram_budget(free.ram_bytes):
        return Verdict(
            Fit.TOO_BIG,
            f"Needs about {total} but only {format_bytes(free.ram_bytes)} is free "
            f"({parts}); choose a smaller model or file.",
            need,
        )
    slow = " Expect a few words a second." if need.weights > SLOW_ON_CPU_BYTES else ""
    return Verdict(
        Fit.CPU,
        f"Needs about {total} of the {format_bytes(free.ram_bytes)} free memory ({parts}{why_cpu}).{slow}",
        need,
    )


def context_for(entry: CatalogueEntry, n_ctx: int) -> int:
    """The context the model would load with: the chosen one, capped at the model's own."""
    return min(n_ctx, entry.context_length) if entry.context_length > 0 else n_ctx


def fit_file(
    entry: CatalogueEntry,
    file: CatalogueFile,
    free: FreeMemory,
    *,
    n_ctx: int = DEFAULT_CONTEXT_LENGTH,
    kv_cache: str = "f16",
    size: int | None = None,
) -> Verdict:
    """The mark for one file of a catalogue entry (`size`: the exact size once the Hub said it)."""
    need = estimate_need(
        size or file.size,
        context_for(entry, n_ctx),
        architecture=entry.architecture,
        parameters_b=entry.parameters_b,
        kv_cache=kv_cache,
    )
    return judge(need, free)


def predict_file(
    entry: CatalogueEntry, file: CatalogueFile, verdict: Verdict, profile: MachineProfile | None
) -> Prediction | None:
    """The file's predicted speed here: on the GPU's profile where it fits the GPU, else the CPU's
    (split across both, the CPU's: its layers set the pace); None without the profile it needs."""
    if profile is not None and verdict.fit is Fit.GPU:
        profile = profile.gpu
    if profile is None:
        return None
    layers = entry.architecture.layers if entry.architecture is not None else None
    return predict(
        profile,
        size_bytes=file.size,
        parameters=entry.parameters_b * 1e9,
        quant=file.quant,
        layers=layers,
        thinks=entry.thinks,
    )


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A catalogue entry with the file to offer on this machine, that file's mark and predicted speed."""

    entry: CatalogueEntry
    file: CatalogueFile
    verdict: Verdict
    prediction: Prediction | None = None
    useful_tps: float = USEFUL_TPS

    @property
    def slow(self) -> bool:
        """Below the useful speed here (predicted), or, with no profile, big enough on the CPU to be."""
        if self.prediction is not None:
            return not self.prediction.useful(self.useful_tps)
        return self.verdict.fit is not Fit.GPU and self.file.size > SLOW_ON_CPU_BYTES

    @property
    def sort_key(self) -> tuple[int, bool, float, int]:
        """Where it runs, then the useful ones by quality; the slow ones fastest first (when none is
        useful here, the first suggestion is still the one that answers soonest)."""
        if self.slow and self.prediction is not None:
            return (self.verdict.fit.rank, True, -self.prediction.decode_tps, self.file.size)
        return (self.verdict.fit.rank, self.slow, -self.entry.quality, self.file.size)


def suggest(
    entry: CatalogueEntry,
    free: FreeMemory,
    *,
    n_ctx: int = DEFAULT_CONTEXT_LENGTH,
    kv_cache: str = "f16",
    profile: MachineProfile | None = None,
    useful_tps: float = USEFUL_TPS,
) -> Suggestion:
    """The entry's best file here: among those that run best, the first (the reviewers' default)
    predicted at a useful speed, else the first."""
    judged = [(f, fit_file(entry, f, free, n_ctx=n_ctx, kv_cache=kv_cache)) for f in entry.files]
    best = min(v.fit.rank for _, v in judged)
    options = [
        Suggestion(entry, f, v, predict_file(entry, f, v, profile), useful_tps) for f, v in judged if v.fit.rank == best
    ]
    return next((s for s in options if not s.slow), options[0])


def ranked(
    entries: Sequence[CatalogueEntry],
    free: FreeMemory,
    *,
    n_ctx: int = DEFAULT_CONTEXT_LENGTH,
    kv_cache: str = "f16",
    profile: MachineProfile | None = None,
    useful_tps: float = USEFUL_TPS,
) -> list[Suggestion]:
    """Every entry with its best file here, best first: where it runs, then the ones predicted
    to answer at a useful speed (`useful_tps` decode tokens/s), then quality, then size."""
    found = (suggest(e, free, n_ctx=n_ctx, kv_cache=kv_cache, profile=profile, useful_tps=useful_tps) for e in entries)
    return sorted(found, key=lambda s: s.sort_key)


def short_list(suggestions: Sequence[Suggestion], limit: int = 5) -> list[Suggestion]:
    """The default list: the best `limit` that fit this machine."""
    return [s for s in suggestions if s.verdict.fits][:limit]
