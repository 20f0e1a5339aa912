"""What llama.cpp can run on: its backends, devices and their free memory.

llama-cpp-python 0.3.36 binds `llama_supports_gpu_offload` and `llama_print_system_info`
but not ggml's backend-device API (`ggml_backend_dev_count`, `…_get`, `…_memory`), so the
few functions needed are declared here with ctypes against the `ggml` library that
`libllama` itself uses (from `LLAMA_CPP_LIB_PATH`, else the `llama_cpp` package's `lib`
folder). If that library cannot be found, device listing is empty and callers fall back
to "no GPU", never an error.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger("engine.llama")

# enum ggml_backend_dev_type (ggml-backend.h)
DEVICE_TYPES = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator", 4: "meta"}
GPU_TYPES = (1, 2)


@dataclass(frozen=True, slots=True)
class Device:
    """One ggml backend device, e.g. `CUDA0` / `NVIDIA H200` / GPU, with its memory in bytes."""

    name: str
    description: str
    kind: str  # CPU | GPU | iGPU | accelerator | meta
    free_bytes: int
    total_bytes: int

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("GPU", "iGPU")


def _library_dirs() -> list[Path]:
    import llama_cpp

    dirs: list[Path] = []
    env = os.environ.get("LLAMA_CPP_LIB_PATH")
    if env:
        dirs.append(Path(env))
    dirs.append(Path(llama_cpp.__file__).resolve().parent / "lib")
    return dirs


def _ready() -> None:
    """A build with run-time CPU variants registers no backend until one is loaded (engine.llama.cpu)."""
    from engine.llama.cpu import ensure_backends

    ensure_backends()


@cache
def _ggml() -> Any:
    """The ggml library with the device functions declared, or None if it cannot be found."""
    _ready()
    from engine.llama.cpu import ggml_library_path

    for folder in _library_dirs():
        path = ggml_library_path(folder)  # the copy libllama uses: its registry is llama.cpp's
        if path is None:
            continue
        try:
            lib = ctypes.CDLL(str(path))
            declare(lib)
        except (OSError, AttributeError) as exc:
            log.debug("ggml device API not usable from %s: %s", path, exc)
            continue
        return lib
    return None


def declare(lib: Any) -> None:
    """Prototypes for the few ggml-backend.h functions used here (AttributeError if absent)."""
    p, size = ctypes.c_void_p, ctypes.c_size_t
    for fn, args, res in (
        ("ggml_backend_dev_count", [], size),
        ("ggml_backend_dev_get", [size], p),
        ("ggml_backend_dev_name", [p], ctypes.c_char_p),
        ("ggml_backend_dev_description", [p], ctypes.c_char_p),
        ("ggml_backend_dev_type", [p], ctypes.c_int),
        ("ggml_backend_dev_memory", [p, ctypes.POINTER(size), ctypes.POINTER(size)], None),
        ("ggml_backend_reg_count", [], size),
        ("ggml_backend_reg_get", [size], p),
        ("ggml_backend_reg_name", [p], ctypes.c_char_p),
    ):
        func = getattr(lib, fn)
        func.argtypes, func.restype = args, res


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", "replace")


def devices() -> list[Device]:
    """Every device llama.cpp's build registered (CPU included), with free/total memory now."""
    lib = _ggml()
    if lib is None:
        return []
    out: list[Device] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = DEVICE_TYPES.get(int(lib.ggml_backend_dev_type(dev)), "unknown")
        out.append(
            Device(
                _text(lib.ggml_backend_dev_name(dev)),
                _text(lib.ggml_backend_dev_description(dev)),
                kind,
                int(free.value),
                int(total.value),
            )
        )
    return out


def backend_names() -> list[str]:
    """The backends compiled into (or loaded by) this llama.cpp build, e.g. ['CUDA', 'CPU']."""
    lib = _ggml()
    if lib is None:
        return []
    return [
        _text(lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i))) for i in range(int(lib.ggml_backend_reg_count()))
    ]


def gpu_devices() -> list[Device]:
    return [d for d in devices() if d.is_gpu]


def gpu_offload_supported() -> bool:
    """llama.cpp's own answer: a GPU backend is built in AND a device is present."""
    import llama_cpp as lc

    _ready()
    return bool(lc.llama_supports_gpu_offload())


def system_info() -> str:
    """llama.cpp's one-line build summary (`CPU : SSE3 = 1 | AVX2 = 1 | …`)."""
    import llama_cpp as lc

    _ready()
    return _text(lc.llama_print_system_info()).strip()
