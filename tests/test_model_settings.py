"""Per-model settings (persisted, forgiving) and the memory estimate they feed."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from pathlib import Path

import gguf_factory as gf
import pytest

from models.gguf.meta import read_metadata
from models.library.memory import available_memory, estimate_memory, format_bytes, kv_cache_bytes
from models.library.settings import (
    DEFAULT_CONTEXT_LENGTH,
    ModelSettings,
    load_model_settings,
    save_model_settings,
    settings_file,
)

CUSTOM = ModelSettings(
    context_length=2048,
    gpu_layers=-1,
    threads=6,
    temperature=0.2,
    top_p=0.8,
    top_k=20,
    min_p=0.1,
    repeat_penalty=1.1,
    seed=42,
    system_prompt="Answer in French.",
    max_tokens=512,
)


def test_defaults() -> None:
    s = ModelSettings()
    assert s.context_length == DEFAULT_CONTEXT_LENGTH == 4096
    assert (s.gpu_layers, s.threads, s.seed, s.max_tokens, s.system_prompt) == (-1, None, None, None, "")


def test_context_is_capped_at_the_training_context(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    assert load_model_settings(model, n_ctx_train=2048).context_length == 2048
    assert load_model_settings(model, n_ctx_train=8192).context_length == 4096
    save_model_settings(model, dataclasses.replace(CUSTOM, context_length=32768))
    assert load_model_settings(model, n_ctx_train=8192).context_length == 8192
    assert load_model_settings(model).context_length == 32768  # unknown training context: as saved


def test_round_trip_per_model(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    save_model_settings(a, CUSTOM)
    save_model_settings(b, ModelSettings(temperature=1.0))
    assert load_model_settings(a) == CUSTOM
    assert load_model_settings(b) == ModelSettings(temperature=1.0)
    assert load_model_settings(tmp_path / "c.gguf") == ModelSettings()


def test_settings_are_keyed_by_the_resolved_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "models" / "m.gguf"
    real.parent.mkdir()
    real.touch()
    (tmp_path / "link.gguf").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    save_model_settings(Path("models/m.gguf"), CUSTOM)
    assert load_model_settings(real) == CUSTOM
    assert load_model_settings(tmp_path / "link.gguf") == CUSTOM
    stored = json.loads(settings_file().read_text())
    assert list(stored["models"]) == [str(real.resolve())]


def test_unknown_keys_are_ignored_and_bad_values_fall_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = tmp_path / "m.gguf"
    path = settings_file()
    path.parent.mkdir(parents=True)
    stored = {
        "temperature": 1,  # an int is a fine float
        "top_k": "many",
        "seed": -5,
        "threads": None,
        "min_p": float("nan"),
        "gpu_layers": True,  # a bool is not an int here
        "mirostat": 2,  # a setting Ember does not know (yet)
    }
    path.write_text(json.dumps({"version": 1, "models": {str(model.resolve()): stored}}))
    with caplog.at_level(logging.WARNING):
        loaded = load_model_settings(model)
    assert loaded == ModelSettings(temperature=1.0)
    assert isinstance(loaded.temperature, float)
    assert "top_k" in caplog.text
    assert "mirostat" not in caplog.text


def test_a_corrupt_file_is_backed_up_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = settings_file()
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "models": {"/m.gguf": {"temperature": 0.1')
    with caplog.at_level(logging.WARNING):
        assert load_model_settings(tmp_path / "m.gguf") == ModelSettings()
    assert "model_settings.json" in caplog.text
    backups = list(path.parent.glob("model_settings.json.corrupt-*"))
    assert len(backups) == 1
    assert json.loads(path.read_text()) == {"version": 1, "models": {}}
    save_model_settings(tmp_path / "m.gguf", CUSTOM)  # and the store works again
    assert load_model_settings(tmp_path / "m.gguf") == CUSTOM


@pytest.mark.parametrize("content", ["[1, 2]", '{"models": [1]}', '{"models": {"/m.gguf": "hot"}}', "\0\0\0"])
def test_wrong_shapes_never_crash(tmp_path: Path, content: str) -> None:
    path = settings_file()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert load_model_settings(Path("/m.gguf")) == ModelSettings()


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -0.1},
        {"top_p": 1.5},
        {"context_length": 16},
        {"gpu_layers": -2},
        {"threads": 0},
        {"seed": 2**32},
        {"max_tokens": 0},
    ],
)
def test_invalid_values_are_refused_when_set_in_code(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid model setting"):
        ModelSettings(**bad)  # type: ignore[arg-type]


# --- memory -----------------------------------------------------------------------------------


def test_kv_cache_formula_on_smollm2(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    # 2 (K and V) * 30 layers * 4096 positions * (64-wide heads * 3 KV heads) * 2 bytes (f16)
    assert kv_cache_bytes(meta, 4096) == 2 * 30 * 4096 * (64 * 3) * 2
    est = estimate_memory(meta, 4096, available=None)
    assert est.total_bytes == meta.size_bytes + est.kv_cache_bytes
    assert est.warning is None  # unknown free memory: no warning


def test_warning_when_the_estimate_exceeds_free_memory(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    est = estimate_memory(meta, 8192, available=50_000_000)
    assert est.warning is not None
    assert "only 50.0 MB is free" in est.warning
    assert estimate_memory(meta, 8192, available=10**12).warning is None


def test_layers_without_kv_heads_cost_nothing(tmp_path: Path) -> None:
    uniform = read_metadata(gf.write_tiny_llama(tmp_path / "u.gguf"))
    hybrid = read_metadata(gf.write_tiny_llama(tmp_path / "h.gguf", extra={"llama.attention.head_count_kv": [2, 0]}))
    assert kv_cache_bytes(hybrid, 1024) * 2 == kv_cache_bytes(uniform, 1024)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/meminfo is Linux only")
def test_available_memory_reads_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    assert available_memory(meminfo) == 8000000 * 1024


def test_available_memory_falls_back_when_meminfo_is_missing(tmp_path: Path) -> None:
    value = available_memory(tmp_path / "nope")
    assert value is None or value > 0


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (512, 1_500, 98_362_432, 4_100_000_000)] == [
        "512 B",
        "1.5 KB",
        "98.4 MB",
        "4.1 GB",
    ]
