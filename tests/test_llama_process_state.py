"""llama.cpp's process-wide state is one object (#47), and `reset` makes it a new process's."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path

import pytest

from engine.llama import cpu, gpu_modules, llama_log, machine_cache
from engine.llama.cpu import Choice, Probe
from engine.llama.process_state import LlamaProcess


class _Ggml:
    """llama.cpp's loader, loading every module it is given."""

    def __init__(self) -> None:
        self.loaded: list[str] = []

    def ggml_backend_reg_count(self) -> int:
        return 0

    def ggml_backend_load(self, path: bytes) -> int:
        self.loaded.append(Path(path.decode()).name)
        return 1

    def ggml_backend_load_all_from_path(self, path: bytes) -> None:
        self.loaded.append("all")


def _use_everything(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Drive each part of the state away from a new process's, through the calls that set it."""
    built_in = folder / "built-in"  # first a build with its CPU backend built in: probed, registered
    built_in.mkdir()
    (built_in / "libggml-cpu.so").write_bytes(b"\x7fELF")
    verdict = {"name": "", "score": -1, "runs": True, "detail": "passed"}
    cache = machine_cache.cache_dir() / cpu.CACHE_FILE
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({cpu.machine_key([built_in / "libggml-cpu.so"]): {"probes": [verdict]}}))
    monkeypatch.setattr(cpu, "lib_dir", lambda: built_in)
    assert cpu.ensure_backends() is None
    assert cpu.ensure_cpu_runs().detail == "passed"
    variants = folder / "variants"  # then one with variants: chosen, loaded, its first decode marked
    variants.mkdir()
    (variants / "libggml-cpu-zen4.so").write_bytes(b"\x7fELF")
    monkeypatch.setattr(cpu, "lib_dir", lambda: variants)
    monkeypatch.setattr(cpu, "choose", lambda files, model: Choice("zen4", cpu.PROBED, (Probe("zen4", 90, True),)))
    assert gpu_modules.want("Vulkan0") == ""  # before the first load: noted for the pick
    choice = cpu.ensure_backends()  # installs llama.cpp's log callback too
    assert choice is not None and choice.chosen == "zen4"
    cpu.decoding()
    llama_log.on_log(3, b"a warning\n", None)


def test_reset_makes_every_part_of_the_state_a_new_process_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess
) -> None:
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cpu.FORCE_ENV, raising=False)
    monkeypatch.delenv(cpu.SKIP_ENV, raising=False)
    monkeypatch.delenv(gpu_modules.FORCE_ENV, raising=False)
    ggml = _Ggml()
    monkeypatch.setattr(cpu, "ggml_library", lambda: ggml)
    new = LlamaProcess()
    _use_everything(tmp_path, monkeypatch)
    untouched = [f.name for f in fields(LlamaProcess) if getattr(fresh_llama, f.name) == getattr(new, f.name)]
    assert untouched == []  # the test sets each field, so that a reset that forgets one fails below
    assert fresh_llama.last_log_level == logging.WARNING and llama_log.recent_messages() == ["a warning"]
    marker = fresh_llama.start_marker
    assert marker is not None and marker.read_text() == "zen4"

    fresh_llama.reset()
    assert fresh_llama == new
    assert cpu.loaded() is None and gpu_modules.loaded() is None and llama_log.recent_messages() == []
    assert gpu_modules.wanted_device() == ""
    # And it acts as a new process: the variant is chosen again (from this machine's cache) and
    # loaded, its first decode marked again.
    marker.unlink()
    again = cpu.ensure_backends()
    assert again is not None and again.how == cpu.CACHED
    assert ggml.loaded == ["all", "libggml-cpu-zen4.so", "libggml-cpu-zen4.so"]
    cpu.decoding()
    assert marker.read_text() == "zen4"
    cpu.decoded()
    assert not marker.exists()
