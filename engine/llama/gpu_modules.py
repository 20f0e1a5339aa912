"""llama.cpp's GPU modules (`libggml-vulkan.so`, `libggml-cuda.so`): their devices, listed once per
machine in a child process, and the chosen one loaded here.

A Vulkan or CUDA driver can crash while it starts, so the listing runs in a child (as the CPU
variants' probes do) and its outcome is cached per machine: the module files, the Vulkan drivers
installed (ICD files) and the environment that selects them. The child lists Vulkan's physical
devices through the Vulkan loader itself (llama.cpp hides CPU-type devices such as lavapipe, and
reports every other one as a GPU), then llama.cpp's own devices with their free memory.

In this process, only the chosen device is made visible (`GGML_VK_VISIBLE_DEVICES`,
`CUDA_VISIBLE_DEVICES`) before its module is loaded, so llama.cpp offloads to it and to no other;
with none chosen, no GPU module is loaded and a missing `libvulkan.so.1` is never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from engine.llama.gpu_pick import ADD_VULKAN, CPU_ONLY, FORCE_ENV, GpuDevice, GpuPick, choose, find
from engine.llama.machine_cache import read_entry, write_entry
from engine.llama.process_state import PROCESS
from models.library.json_schema import is_int, is_text

log = logging.getLogger("engine.llama")

CACHE_FILE = "gpu-devices.json"
MAX_CACHED = 8  # device lists kept (the newest): a driver or module change lists again
LIST_TIMEOUT_S = 120.0  # a driver that hangs while starting is "failed", not a hung start-up
GPU_MODULES = ("cuda", "vulkan")  # loaded in this order: llama.cpp keeps the first of two for one card
VISIBLE_ENV = {"Vulkan": "GGML_VK_VISIBLE_DEVICES", "CUDA": "CUDA_VISIBLE_DEVICES"}
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
ICD_ENV = ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES", "CUDA_VISIBLE_DEVICES")

LIST_CHILD = "engine.llama.gpu_list_child:run_child"  # Vulkan's devices, then llama.cpp's


def module_files(folder: Path | None) -> list[Path]:
    """The GPU modules beside the CPU variants, CUDA first."""
    if folder is None or not folder.is_dir():
        return []
    found: list[Path] = []
    for name in GPU_MODULES:
        found += [
            p
            for p in sorted(folder.iterdir())
            if p.is_file() and p.name.split(".")[0] in (f"libggml-{name}", f"ggml-{name}")
        ]
    return found


def has_vulkan_module(folder: Path | None) -> bool:
    return any("vulkan" in p.name for p in module_files(folder))


def devices_from(report: dict[str, Any]) -> list[GpuDevice]:
    """The child's report as devices: Vulkan's own list (types) joined with llama.cpp's (free memory)."""
    ggml = [cast(dict[str, Any], g) for g in report.get("ggml", []) if isinstance(g, dict)]
    out: list[GpuDevice] = []
    for v in report.get("vulkan", []):
        v = cast(dict[str, Any], v)
        seen = next((g for g in ggml if g.get("name") == f"Vulkan{v['index']}"), None)
        free = int(seen["free"]) if seen else 0
        out.append(
            GpuDevice(
                "Vulkan",
                int(v["index"]),
                str(v["name"]),
                str(v["kind"]),
                free,
                int(seen["total"]) if seen else int(v.get("total", 0)),
            )
        )
    for g in ggml:
        name = str(g.get("name", ""))
        if name.startswith("CUDA") and name[4:].isdecimal():
            kind = "integrated" if g.get("type") == 2 else "discrete"
            out.append(
                GpuDevice(
                    "CUDA",
                    int(name[4:]),
                    str(g.get("description", name)),
                    kind,
                    int(g.get("free", 0)),
                    int(g.get("total", 0)),
                )
            )
    return out


def list_devices(
    files: Sequence[Path], python: str = sys.executable, child: str = LIST_CHILD, timeout: float = LIST_TIMEOUT_S
) -> tuple[list[GpuDevice], str]:
    """Every device the modules see (`child`, module:function, lists them), and a note (one line)
    when listing failed part-way."""
    from engine.child_env import function_child

    run = function_child(child, *(str(f) for f in files), python=python)
    try:
        done = subprocess.run(
            run.argv, env=run.env, cwd=run.cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return [], f"the GPU driver hung while starting (over {timeout:.0f} s); running on the CPU"
    reports = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    report = cast(dict[str, Any], reports[-1]) if reports else {}
    notes = [str(n) for n in report.get("notes", [])]
    if done.returncode != 0:
        loading = [ln.split(" ", 1)[1] for ln in done.stdout.splitlines() if ln.startswith("loading ")]
        module = Path(loading[-1]).name if loading else "the GPU module"
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        notes.append(f"{module} failed while starting its driver ({how}); running on the CPU")
        return [], "; ".join(notes)
    return devices_from(report), "; ".join(notes)


# --- the per-machine cache ---------------------------------------------------------------------


def machine_key(files: Sequence[Path]) -> str:
    """Changes with the modules, the Vulkan drivers installed and the variables that select them."""
    parts = [f"{f.resolve()} {f.stat().st_size} {f.stat().st_mtime_ns}" for f in files]
    for folder in ICD_DIRS:
        d = Path(folder)
        if d.is_dir():
            parts += [f"{p} {p.stat().st_mtime_ns}" for p in sorted(d.glob("*.json"))]
    parts += [f"{k}={os.environ.get(k, '')}" for k in ICD_ENV]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def read_cached(key: str) -> tuple[list[GpuDevice], str] | None:
    entry = read_entry(CACHE_FILE, key)
    if not isinstance(entry, dict):
        return None
    entry = cast(dict[str, Any], entry)
    raw, note = entry.get("devices"), entry.get("note")
    if not isinstance(raw, list) or not is_text(note):
        return None
    devices: list[GpuDevice] = []
    for item in cast(list[object], raw):
        if not isinstance(item, dict):
            return None
        d = cast(dict[str, Any], item)
        fields = (d.get("backend"), d.get("name"), d.get("kind"))
        numbers = (d.get("index"), d.get("free_bytes"), d.get("total_bytes"))
        if not all(is_text(f) for f in fields) or not all(is_int(n) for n in numbers):
            return None
        devices.append(
            GpuDevice(
                *cast(
                    tuple[str, int, str, str, int, int],
                    (d["backend"], d["index"], d["name"], d["kind"], d["free_bytes"], d["total_bytes"]),
                )
            )
        )
    return devices, note


def write_cached(key: str, devices: Sequence[GpuDevice], note: str) -> None:
    from dataclasses import asdict

    write_entry(CACHE_FILE, key, {"devices": [asdict(d) for d in devices], "note": note}, keep=MAX_CACHED)


# --- in this process ---------------------------------------------------------------------------


def want(device: str) -> str:
    """Note the model settings' device field for the pick; "" or, once the pick is made (it is made
    once per process: a module sees only the devices made visible before it loads), one line on why
    the field takes effect at the next start."""
    device = device.strip()
    pick = PROCESS.gpu_pick
    if pick is None:
        PROCESS.wanted_device = device
        return ""
    if not device or os.environ.get(FORCE_ENV, "").strip():
        return ""
    hit = find(pick.devices, device) if device.casefold() not in CPU_ONLY else None
    if hit == pick.chosen:
        return ""
    return f"GPU device {device!r} takes effect when Ember next starts (this run uses {_where(pick)})"


def _where(pick: GpuPick) -> str:
    return pick.chosen.label() if pick.chosen is not None else "the CPU"


def wanted_device() -> str:
    """What the user asked for: EMBER_GPU_DEVICE, else the model settings' device field."""
    return os.environ.get(FORCE_ENV, "").strip() or PROCESS.wanted_device


def decide(folder: Path | None) -> GpuPick:
    """The devices here (cached per machine) and the pick among them."""
    files = module_files(folder)
    if not files:
        return GpuPick(why=ADD_VULKAN)
    key = machine_key(files)
    cached = read_cached(key)
    if cached is None:
        cached = list_devices(files)
        write_cached(key, *cached)
    devices, failed = cached
    pick = choose(devices, wanted_device())
    note = "; ".join(n for n in (failed, pick.note) if n)
    if not devices and failed:
        return GpuPick((), None, failed, note)
    return GpuPick(pick.devices, pick.chosen, pick.why, note)


def load(lib: Any, folder: Path | None) -> GpuPick:
    """Decide, then load the chosen device's module with only that device visible (once per process)."""
    if PROCESS.gpu_pick is not None:
        return PROCESS.gpu_pick
    pick = decide(folder)
    if pick.note:
        log.warning("%s", pick.note)
    chosen = pick.chosen
    if chosen is not None:
        module = next(f for f in module_files(folder) if chosen.backend.lower() in f.name)
        os.environ[VISIBLE_ENV[chosen.backend]] = str(chosen.index)
        if not lib.ggml_backend_load(str(module).encode()):
            line = f"llama.cpp could not start {chosen.label()}; running on the CPU"
            log.warning("%s", line)
            pick = GpuPick(pick.devices, None, line, pick.note)
        else:
            log.info("GPU: %s (%s)", chosen.label(), pick.why)
    PROCESS.gpu_pick = pick
    return pick


def loaded() -> GpuPick | None:
    """The pick this process made, if it loaded llama.cpp's backends."""
    return PROCESS.gpu_pick
