"""The child that lists the GPU devices (run by `gpu_modules.list_devices`, one per machine).

A Vulkan or CUDA driver can crash while it starts, so this runs in its own process. It prints a
JSON line with what the Vulkan loader itself sees (type, name, device-local memory of each
physical device: llama.cpp hides CPU-type devices such as lavapipe), then, after loading each
GPU module given in `sys.argv[1:]` with every Vulkan device made visible, a second line with
llama.cpp's devices and their free memory. A module that crashes leaves the first line and its
"loading PATH" line behind, which is how the parent names it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

KINDS = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "software"}  # VkPhysicalDeviceType
LOADERS = {"win32": "vulkan-1.dll", "darwin": "libvulkan.1.dylib"}
MEMORY_HEAP_DEVICE_LOCAL = 1


class _InstanceCreateInfo(ctypes.Structure):
    """VkInstanceCreateInfo with no application info, layers or extensions."""

    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("app", ctypes.c_void_p),
        ("nlayers", ctypes.c_uint32),
        ("layers", ctypes.c_void_p),
        ("nexts", ctypes.c_uint32),
        ("exts", ctypes.c_void_p),
    ]


def run_child() -> int:
    """List the devices; the GPU module paths are the arguments."""
    out: dict[str, list[Any]] = {"vulkan": [], "ggml": [], "notes": []}
    out["vulkan"] = vulkan_devices(out["notes"])
    if out["vulkan"]:
        os.environ["GGML_VK_VISIBLE_DEVICES"] = ",".join(str(d["index"]) for d in out["vulkan"])
    print(json.dumps(out), flush=True)  # what the loader saw, even if a module crashes below
    out["ggml"] = ggml_devices(sys.argv[1:], bool(out["vulkan"]), out["notes"])
    print(json.dumps(out), flush=True)
    return 0


def vulkan_devices(notes: list[str]) -> list[dict[str, Any]]:
    """Every physical device the Vulkan loader finds; a note when there is no loader or driver."""
    try:
        vk = ctypes.CDLL(LOADERS.get(sys.platform, "libvulkan.so.1"))
    except OSError:
        notes.append("no Vulkan loader (libvulkan.so.1)")
        return []
    info, instance = _InstanceCreateInfo(1), ctypes.c_void_p()  # 1: VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
    if vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        notes.append("the Vulkan loader found no driver")
        return []
    count = ctypes.c_uint32(0)
    vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
    handles = (ctypes.c_void_p * count.value)()
    vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
    found = [_describe(vk, i, ctypes.c_void_p(handles[i])) for i in range(count.value)]
    vk.vkDestroyInstance(instance, None)
    return found


def _describe(vk: ctypes.CDLL, index: int, device: ctypes.c_void_p) -> dict[str, Any]:
    # Read from the raw structs (VkPhysicalDeviceProperties, VkPhysicalDeviceMemoryProperties):
    # the offsets are fixed by the Vulkan ABI, and declaring both structs whole would be longer.
    props, memory = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(1024)
    vk.vkGetPhysicalDeviceProperties(device, props)
    vk.vkGetPhysicalDeviceMemoryProperties(device, memory)
    kind = _u32(props.raw, 16)
    name = props.raw[20:276].split(b"\0", 1)[0].decode("utf-8", "replace")
    heaps = min(_u32(memory.raw, 260), 16)
    local = sum(
        int.from_bytes(memory.raw[264 + 16 * h : 272 + 16 * h], "little")
        for h in range(heaps)
        if _u32(memory.raw, 272 + 16 * h) & MEMORY_HEAP_DEVICE_LOCAL
    )
    return {"index": index, "name": name, "kind": KINDS.get(kind, "other"), "total": local}


def _u32(raw: bytes, offset: int) -> int:
    return int.from_bytes(raw[offset : offset + 4], "little")


def ggml_devices(paths: list[str], any_vulkan: bool, notes: list[str]) -> list[dict[str, Any]]:
    """llama.cpp's devices once each module is loaded (a Vulkan module only where Vulkan saw a device)."""
    from engine.llama.cpu import ggml_library
    from engine.llama.llama_devices import declare

    lib = ggml_library()
    declare(lib)
    for path in paths:
        if "vulkan" in os.path.basename(path) and not any_vulkan:
            continue
        print("loading", path, flush=True)
        if not lib.ggml_backend_load(path.encode()):
            notes.append("llama.cpp could not load " + os.path.basename(path))
    found: list[dict[str, Any]] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(
            {
                "name": (lib.ggml_backend_dev_name(dev) or b"").decode(),
                "type": lib.ggml_backend_dev_type(dev),
                "description": (lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", "replace"),
                "free": free.value,
                "total": total.value,
            }
        )
    return found
