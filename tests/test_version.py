"""One version everywhere, and `ember --version` names llama.cpp's build and the CPU variant in use."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from desktop.cli.main import parse_args
from engine import __version__
from engine.llama import cpu, machine_cache
from engine.llama.cpu import Choice, Probe

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_one_and_has_a_changelog_entry() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == __version__
    assert f"## [{__version__}]" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_version_names_the_llama_build_and_the_cpu_variant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"ember {__version__}; llama-cpp-python ")
    assert "CPU" in out.rsplit(";", 1)[1] and "\n" not in out


def test_a_bare_soname_is_not_shown_as_a_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("libllama.so.0", "libggml.so.0"):  # what the frozen app keeps
        (tmp_path / name).write_bytes(b"\x7fELF")
    monkeypatch.setattr(cpu, "lib_dir", lambda: tmp_path)
    assert "(" not in cpu.llama_build()  # not "(libllama 0, libggml 0)"
    (tmp_path / "libllama.so.0.5.0").write_bytes(b"\x7fELF")
    assert cpu.llama_build().endswith("(libllama 0.5.0)")


def test_the_variant_in_use_comes_from_the_cache_without_probing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    for name in ("x64", "haswell", "zen4"):
        (folder / f"libggml-cpu-{name}.so").write_bytes(b"\x7fELF")
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cpu.FORCE_ENV, raising=False)
    monkeypatch.setattr(cpu, "lib_dir", lambda: folder)
    monkeypatch.setattr(cpu, "choose", lambda files, model: pytest.fail("probed"))
    assert cpu.in_use_line() == "CPU variant: chosen from 3 at the first model load"
    files = cpu.variant_files(folder)
    cpu.write_cached(cpu.machine_key(files.values()), Choice("haswell", "probed", (Probe("haswell", 64, True),)))
    assert cpu.in_use_line() == "CPU variant haswell (of 3, probed on this machine)"
    monkeypatch.setenv(cpu.FORCE_ENV, "x64")
    assert cpu.in_use_line() == "CPU variant x64 (forced by EMBER_CPU_VARIANT)"
