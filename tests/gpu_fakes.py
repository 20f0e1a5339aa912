"""A GPU listing child (engine/llama/gpu_list_child.py's protocol) whose driver crashes,
run as a real function in a child process: it dies of a real SIGSEGV while "loading"."""

from __future__ import annotations

import os
import signal


def crash_while_loading() -> int:
    print("loading /x/libggml-vulkan.so", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
    return 1  # not reached
