"""Which GPU a model runs on: the devices llama.cpp's GPU modules see, and the pick among them.

The build ships GPU backends as loadable modules beside the CPU variants (`libggml-vulkan.so`,
and `libggml-cuda.so` after the README's CUDA rebuild). `gpu_modules` lists their devices in a
child process; this module only decides, so it is tested with fake device lists:

- real GPUs first: discrete over integrated over anything else; more free memory breaks a tie;
- the same card seen by CUDA and by Vulkan is taken through CUDA (the faster path on NVIDIA);
- software devices (lavapipe/llvmpipe, Vulkan's CPU type) are listed but never chosen unless the
  user names one: `EMBER_GPU_DEVICE=NAME|INDEX`, or the model settings' device field;
- a name or index that matches nothing falls back to the automatic pick with one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FORCE_ENV = "EMBER_GPU_DEVICE"
CPU_ONLY = ("cpu", "none", "off")  # EMBER_GPU_DEVICE=cpu: no GPU at all
RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "other": 3}  # "software" is never ranked
BACKEND_RANK = {"CUDA": 0, "Vulkan": 1}
GIB = 1 << 30
# How to add the Vulkan module (one line in `ember doctor`; the README's GPU section has the rest).
ADD_VULKAN = (
    "this build has no Vulkan module: run `bash packaging/vulkan-module.sh` after `uv sync` "
    '(it needs glslc and spirv-headers; README, "Using a GPU")'
)


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One device a GPU module sees: `Vulkan` 0 `AMD Radeon RX 7800 XT` discrete, 8 GiB free."""

    backend: str  # "Vulkan" | "CUDA"
    index: int  # the backend's own index (the Vulkan physical device, the CUDA ordinal)
    name: str
    kind: str  # discrete | integrated | virtual | software | other
    free_bytes: int = 0
    total_bytes: int = 0

    @property
    def software(self) -> bool:
        return self.kind == "software"

    def label(self) -> str:
        """`Vulkan · AMD Radeon RX 7800 XT (8.0 GiB free)`."""
        memory = f" ({self.free_bytes / GIB:.1f} GiB free)" if self.total_bytes else ""
        return f"{self.backend} · {self.name}{memory}"


@dataclass(frozen=True, slots=True)
class GpuPick:
    """The devices seen, the one chosen (None: the CPU), and why, in words."""

    devices: tuple[GpuDevice, ...] = ()
    chosen: GpuDevice | None = None
    why: str = ""  # how it was chosen, or why none was
    note: str = ""  # a forced device that matched nothing, a device that failed: one line

    def line(self) -> str:
        """`GPU: Vulkan · AMD Radeon … (8.0 GiB free) · chosen` or `GPU: none — why`."""
        if self.chosen is not None:
            return f"GPU: {self.chosen.label()} · chosen ({self.why})"
        return f"GPU: none — {self.why}"

    def device_lines(self) -> list[str]:
        return [
            f"  {i}: {d.label()} · {d.kind}{' · chosen' if d == self.chosen else ''}"
            for i, d in enumerate(self.devices)
        ]


def ordered(devices: Sequence[GpuDevice]) -> list[GpuDevice]:
    """Real GPUs best first (CUDA before Vulkan for the same card); software devices left out."""
    real = [d for d in devices if not d.software]
    return sorted(real, key=lambda d: (RANK.get(d.kind, len(RANK)), -d.free_bytes, BACKEND_RANK.get(d.backend, 9)))


def same_card(a: GpuDevice, b: GpuDevice) -> bool:
    return a.backend != b.backend and a.name.casefold() == b.name.casefold()


def without_duplicates(devices: Sequence[GpuDevice]) -> list[GpuDevice]:
    """The same card through CUDA and Vulkan: the CUDA one only."""
    cuda = [d for d in devices if d.backend == "CUDA"]
    return [d for d in devices if d.backend == "CUDA" or not any(same_card(d, c) for c in cuda)]


def find(devices: Sequence[GpuDevice], wanted: str) -> GpuDevice | None:
    """The device `wanted` names: its index in `devices`, `Vulkan1`, a backend (`vulkan`: its best
    device), or (a part of) its name."""
    w = wanted.strip().casefold()
    if w.isdecimal():  # not isdigit(): "²" and "①" are digits that int() refuses
        i = int(w)
        return devices[i] if i < len(devices) else None
    for d in devices:
        if w == f"{d.backend}{d.index}".casefold():
            return d
    of_backend = [d for d in devices if d.backend.casefold() == w]  # `vulkan`: its best device
    if of_backend:
        return (ordered(of_backend) or of_backend)[0]
    exact = [d for d in devices if d.name.casefold() == w]
    partial = [d for d in devices if w in d.name.casefold()]
    return (exact or partial or [None])[0]


def choose(devices: Sequence[GpuDevice], wanted: str = "") -> GpuPick:
    """The device to offload to, from every device seen and what the user asked for (`wanted`)."""
    listed = tuple(devices)
    wanted = wanted.strip()
    note = ""
    if wanted.casefold() in CPU_ONLY:
        return GpuPick(listed, None, f"the CPU was asked for ({FORCE_ENV}={wanted})")
    if wanted:
        hit = find(listed, wanted)
        if hit is not None:
            return GpuPick(listed, hit, f"asked for: {wanted}")
        names = ", ".join(f"{i} {d.name}" for i, d in enumerate(listed)) or "none"
        note = f"GPU device {wanted!r} not found (devices here: {names}); choosing automatically"
    best = ordered(without_duplicates(listed))
    if best:
        return GpuPick(listed, best[0], "the best GPU here", note)
    if listed:
        soft = listed[0]
        return GpuPick(
            listed,
            None,
            f"only a software Vulkan device ({soft.name}); the CPU variants are faster. {FORCE_ENV}=0 uses it anyway",
            note,
        )
    return GpuPick(listed, None, "no GPU device found", note)
