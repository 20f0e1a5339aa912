"""The CPU-variant cache is an input like any other (adversarial review 2: CV-02, CV-06, CV-07).

It is checked against the build's variants and its own schema; a cached variant llama.cpp
refuses to load is measured again instead of failing every model load; a forced one that
cannot run says so in one line instead of blaming the model file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.backends import cpu_check, cpu_probe, cpu_variants, llama_log
from engine.backends.cpu_probe import CACHE_FILE
from engine.backends.cpu_variants import Choice, Probe
from engine.errors import ModelLoadError

MEASURED = Choice("zen4", "measured", (Probe("zen4", 90, True, 50.0), Probe("sapphirerapids", 99, False)))


class _FakeGgml:
    """llama.cpp's loader: refuses the variants this CPU cannot run, as ggml_backend_load does."""

    def __init__(self, refuses: set[str]) -> None:
        self.refuses = refuses
        self.loaded: list[str] = []

    def ggml_backend_reg_count(self) -> int:
        return 0

    def ggml_backend_load(self, path: bytes) -> int:
        name = Path(path.decode()).name.removeprefix("libggml-cpu-").removesuffix(".so")
        if name in self.refuses:
            return 0
        self.loaded.append(name)
        return 1


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    folder = tmp_path / "lib"
    folder.mkdir()
    for name in ("x64", "zen4", "sapphirerapids"):
        (folder / f"libggml-cpu-{name}.so").write_bytes(b"\x7fELF")
    monkeypatch.setenv(cpu_probe.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cpu_variants.FORCE_ENV, raising=False)
    monkeypatch.setattr(cpu_variants, "lib_dir", lambda: folder)
    monkeypatch.setattr(cpu_variants, "_loaded", None)
    monkeypatch.setattr(llama_log, "install", lambda: None)
    return cpu_variants.variant_files(folder)


def _cache(files: dict[str, Path], entry: object) -> Path:
    path = cpu_probe.cache_dir() / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({cpu_probe.machine_key(files.values()): entry}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "entry",
    [
        {"chosen": "../../x", "probes": []},  # CV-07: a name this build lacks
        {"chosen": ["zen4"], "probes": []},
        {"chosen": "zen4", "probes": "all"},
        {"chosen": "zen4", "probes": [{"name": "zen4", "score": "high"}]},
        {"chosen": "zen4", "probes": [{"name": "zen4", "score": 9, "runs": "yes"}]},
    ],
)
def test_a_cache_that_does_not_fit_the_build_is_measured_again(
    build: dict[str, Path], entry: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cache(build, entry)
    monkeypatch.setattr(cpu_variants, "choose", lambda files, model: MEASURED)
    assert cpu_variants._decide(build, None) is MEASURED  # pyright: ignore[reportPrivateUsage]


def test_a_cached_variant_llama_cpp_refuses_is_measured_again(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cache(
        build,
        {"chosen": "sapphirerapids", "probes": [{"name": "sapphirerapids", "score": 99, "runs": True, "tps": 60.0}]},
    )
    ggml = _FakeGgml({"sapphirerapids"})
    monkeypatch.setattr(cpu_variants, "ggml_library", lambda: ggml)
    monkeypatch.setattr(cpu_variants, "choose", lambda files, model: MEASURED)
    choice = cpu_variants.ensure_backends()
    assert choice is not None and choice.chosen == "zen4" and not choice.refused
    assert ggml.loaded == ["zen4"]
    assert next(iter(json.loads(path.read_text()).values()))["chosen"] == "zen4"  # the cache is mended
    assert cpu_check.variant_verdict(choice).runs is True


def test_a_forced_variant_that_cannot_run_says_so_in_one_line(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cpu_variants.FORCE_ENV, "sapphirerapids")
    monkeypatch.setattr(cpu_variants, "ggml_library", lambda: _FakeGgml({"sapphirerapids"}))
    monkeypatch.setattr(cpu_variants, "choose", lambda files, model: pytest.fail("a forced variant is not probed"))
    with pytest.raises(ModelLoadError) as caught:
        cpu_check.ensure_cpu_runs()
    message = str(caught.value)
    assert message.startswith("CPU variant sapphirerapids cannot run here") and "\n" not in message
    assert f"unset {cpu_variants.FORCE_ENV}" in message


def _host_lacks_amx() -> bool:
    try:
        return "amx_tile" not in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _ember(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desktop", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | env,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.skipif(not _host_lacks_amx(), reason="needs a CPU without AMX (sapphirerapids must be refused)")
def test_the_real_build_refuses_a_forced_or_cached_variant_that_cannot_run(tmp_path: Path) -> None:
    if "sapphirerapids" not in cpu_variants.variant_files(cpu_probe.lib_dir()):
        pytest.skip("this build has no sapphirerapids variant")
    chat = ("chat", "--max-tokens", "3", "--no-history", "--threads", "1", "hi")
    env: dict[str, Any] = {"EMBER_CACHE_DIR": str(tmp_path / "cache")}
    forced = _ember(env | {cpu_variants.FORCE_ENV: "sapphirerapids"}, *chat)
    assert forced.returncode != 0
    assert "CPU variant sapphirerapids cannot run here" in forced.stderr and "Traceback" not in forced.stderr
    assert "could not load it" not in forced.stderr  # the model file is not blamed
    assert _ember(env, *chat).returncode == 0  # fills the cache
    path = tmp_path / "cache" / CACHE_FILE
    data = json.loads(path.read_text())
    key = next(iter(data))
    data[key]["chosen"] = "sapphirerapids"  # CV-06: as a cache copied from a host with AMX
    path.write_text(json.dumps(data))
    healed = _ember(env, *chat)
    assert healed.returncode == 0, healed.stderr
    assert json.loads(path.read_text())[key]["chosen"] != "sapphirerapids"
