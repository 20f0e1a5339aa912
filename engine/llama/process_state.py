"""What this process has loaded into llama.cpp and chosen for it, in one object (#47).

llama.cpp's backends load once per process and cannot be unloaded: the CPU variant and the GPU
module chosen stay for its life, as do the log callbacks it was given. `PROCESS` holds that
state for engine.llama.cpu, gpu_modules and llama_log; `reset` gives tests a new process's.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from engine.llama.cpu_choice import Choice, Probe
    from engine.llama.gpu_pick import GpuPick


@dataclass(slots=True)
class LlamaProcess:
    variant: Choice | None = None  # the CPU variant chosen and loaded (cpu.ensure_backends)
    builtin_probe: Probe | None = None  # the built-in build's verdict (a build without variants)
    builtin_registered: bool = False  # such a build's backend modules registered
    pending_variant: str | None = None  # the variant loaded here that has not decoded yet
    start_marker: Path | None = None  # its marker, left until the first decode is done
    gpu_pick: GpuPick | None = None  # the GPU chosen and its module loaded (gpu_modules.load)
    wanted_device: str = ""  # the model settings' device field, given before the first load
    log_callbacks: list[Any] = field(default_factory=list[Any])  # kept alive: llama.cpp calls them
    recent_log: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=64))  # to explain a failed load
    last_log_level: int = logging.DEBUG  # the level a continued line (ggml's CONT) takes

    lock: ClassVar[threading.Lock] = threading.Lock()  # the choices are made once, by one thread
    # Apart: llama.cpp logs from inside `lock` (a variant's load), on its own threads too.
    log_lock: ClassVar[threading.Lock] = threading.Lock()
    retired: ClassVar[list[Any]] = []  # callbacks replaced by `restore`: llama.cpp may still call them

    def reset(self) -> LlamaProcess:
        """Back to a new process's state (tests that fake llama.cpp); returns the old one for `restore`."""
        old = replace(self)
        self.restore(LlamaProcess())
        return old

    def restore(self, other: LlamaProcess) -> None:
        LlamaProcess.retired += self.log_callbacks
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))


PROCESS = LlamaProcess()
