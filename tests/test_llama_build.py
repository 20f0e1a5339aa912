"""The llama-cpp-python build that `uv sync` makes (#53): only the CPU variants pyproject.toml keeps,
no llama-common, and packaging/llama-cmake's module is what trims it (configured for real against
the vendored llama.cpp in uv's cache)."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sysconfig
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.llama import cpu

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "packaging" / "llama-cmake" / "ember_llama_cmake" / "EmberLlamaBuild.cmake"
WHEELS = ROOT / "packaging" / "wheels"
X86 = platform.machine().lower() in {"x86_64", "amd64"}


def uv_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["uv"]


def cmake_args() -> list[str]:
    """llama-cpp-python's `cmake.args` from pyproject.toml."""
    return uv_config()["config-settings-package"]["llama-cpp-python"]["cmake.args"]


def define(name: str) -> str:
    return next(a.split("=", 1)[1] for a in cmake_args() if a.startswith(f"-D{name}="))


def kept() -> set[str]:
    return set(define("EMBER_CPU_VARIANTS").split(";"))


def test_the_kept_variants_are_llama_cpps_names_and_the_module_version_matches() -> None:
    assert kept() == {"x64", "sandybridge", "haswell", "skylakex", "cooperlake"}
    assert f"set(_EMBER_LLAMA_CMAKE_VERSION {define('EMBER_LLAMA_CMAKE')})" in MODULE.read_text(encoding="utf-8")
    assert define("CMAKE_PROJECT_INCLUDE") == MODULE.stem


def test_the_module_reaches_the_build_as_a_pinned_wheel_so_uvs_cache_key_holds_no_path() -> None:
    # uv's key for the built llama-cpp-python holds each extra build requirement's source: a
    # `file://` reference or a [tool.uv.sources] index puts the clone's path in it (#53).
    assert uv_config()["find-links"] == ["packaging/wheels"]
    version = define("EMBER_LLAMA_CMAKE")
    extra = uv_config()["extra-build-dependencies"]["llama-cpp-python"]
    # A local version (`+ember`): PyPI refuses uploads with one, so no package published there
    # under this free name can ever satisfy the pin and run in llama.cpp's build.
    assert extra == ["cmake>=3.29,<5", f"ember-llama-cmake=={version}+ember"]
    assert "ember-llama-cmake" not in uv_config().get("sources", {})
    assert [w.name for w in WHEELS.iterdir()] == [f"ember_llama_cmake-{version}+ember-py3-none-any.whl"]


def test_the_committed_wheel_holds_the_module_as_it_is_in_the_source() -> None:
    version = define("EMBER_LLAMA_CMAKE")
    rebuild = "stale wheel: uv build --wheel packaging/llama-cmake -o packaging/wheels"
    with zipfile.ZipFile(WHEELS / f"ember_llama_cmake-{version}+ember-py3-none-any.whl") as wheel:
        for source in MODULE.parent.iterdir():
            if source.is_file():
                assert wheel.read(f"ember_llama_cmake/{source.name}") == source.read_bytes(), rebuild
        entry_points = wheel.read(f"ember_llama_cmake-{version}+ember.dist-info/entry_points.txt").decode()
    assert "[cmake.module]\nember = ember_llama_cmake" in entry_points


@pytest.mark.skipif(not X86, reason="the variant list applies to x86-64 builds only")
def test_the_installed_build_has_only_the_kept_variants_and_no_llama_common() -> None:
    files = cpu.variant_files(cpu.lib_dir())
    if not files:
        pytest.skip("llama-cpp-python built without run-time CPU variants here")
    assert set(files) == kept()
    site = Path(sysconfig.get_paths()["purelib"])
    assert not list((site / "lib").glob("libllama-common*")), "llama-common was built and installed"


def _vendored_llama_cpp() -> Path | None:
    """llama-cpp-python's sdist source in uv's cache (where packaging/vulkan-module.sh looks too)."""
    uv = shutil.which("uv")
    if uv is None:
        return None
    done = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, timeout=30, check=False)
    found = sorted(Path(done.stdout.strip()).glob("sdists-v*/pypi/llama-cpp-python/*/*/src/CMakeLists.txt"))
    return found[-1].parent if done.returncode == 0 and found else None


def _configure(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    src = _vendored_llama_cpp()
    if src is None or shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake, ninja and llama-cpp-python's sdist in uv's cache")
    # The absolute path: a module name needs CMake >= 3.29 (uv's build has the cmake wheel).
    args = [a for a in cmake_args() if not a.startswith("-DCMAKE_PROJECT_INCLUDE=")]
    argv = ["cmake", "-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja", f"-DCMAKE_PROJECT_INCLUDE={MODULE}"]
    argv += [*args, f"-DSKBUILD_PLATLIB_DIR={tmp_path / 'w'}", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
@pytest.mark.skipif(not X86, reason="the variant list applies to x86-64 builds only")
def test_the_module_configures_only_the_kept_variants_of_the_real_llama_cpp(tmp_path: Path) -> None:
    done = _configure(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ninja = (tmp_path / "b" / "build.ninja").read_text(encoding="utf-8")
    built = {
        n
        for n in ("x64", "sse42", "sandybridge", "haswell", "skylakex", "cooperlake", "zen4")
        if f"ggml-cpu-{n}.so" in ninja
    }
    assert built == kept()
    assert "llama-common" not in ninja and "ggml-cpu-sapphirerapids" not in ninja
    assert "Warning" not in done.stderr.replace("CMake Warning (dev)", "")


@pytest.mark.slow
@pytest.mark.skipif(not X86, reason="the variant list applies to x86-64 builds only")
def test_a_name_llama_cpp_lacks_and_a_version_mismatch_are_said(tmp_path: Path) -> None:
    done = _configure(tmp_path, "-DEMBER_CPU_VARIANTS=x64;haswel")
    assert done.returncode == 0
    assert "EMBER_CPU_VARIANTS names haswel, which llama.cpp does not offer" in done.stderr
    done = _configure(tmp_path, "-DEMBER_LLAMA_CMAKE=0")
    assert done.returncode != 0 and "change both together" in done.stderr


def test_the_bench_compares_each_kept_variant_with_the_nearest_kept_level_below() -> None:
    from tests.bench.cpu_variant import nearest_lower

    assert {n: nearest_lower(n, kept()) for n in kept()} == {
        "x64": None,
        "sandybridge": "x64",
        "haswell": "sandybridge",
        "skylakex": "haswell",
        "cooperlake": "skylakex",
    }
    assert nearest_lower("zen4", {"x64", "haswell", "zen4"}) == "haswell"
