"""packaging/vulkan-module.sh without building anything: what it decides from the headers, glslc
and the environment it finds, each answer one line with exit 0 when a prerequisite is missing.

The real build (about 15 minutes on two cores) is what the `vulkan` tier then tests.
A fake glslc stands in for the real one; the SPIR-V headers and a Vulkan loader must be on the
machine (CI installs them), or the tests that get past those checks skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from glob import glob
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "packaging" / "vulkan-module.sh"
PREFIX = "vulkan-module.sh: "
HAS_TOOLS = bool(
    shutil.which("cmake")
    and shutil.which("c++")
    and glob("/usr/share/cmake*/SPIRV-Headers/SPIRV-HeadersConfig.cmake")
    and glob("/usr/lib/*-linux-gnu/libvulkan.so.1")
)
pytestmark = pytest.mark.slow  # every test runs the script in bash (tests/slow_marks.py)
needs_tools = pytest.mark.skipif(not HAS_TOOLS, reason="needs cmake, c++, spirv-headers and libvulkan1 installed")


def _headers(folder: Path, patch: int, api: str = "VK_MAKE_API_VERSION(0, 1, 4, VK_HEADER_VERSION)") -> Path:
    (folder / "vulkan").mkdir(parents=True)
    (folder / "vulkan" / "vulkan_core.h").write_text(
        f"// Version of this file\n#define VK_HEADER_VERSION {patch}\n\n"
        f"// Complete version of this file\n#define VK_HEADER_VERSION_COMPLETE {api}\n"
    )
    return folder


def _fake_glslc(tmp_path: Path) -> Path:
    glslc = tmp_path / "bin" / "glslc"
    glslc.parent.mkdir(exist_ok=True)
    glslc.write_text("#!/bin/sh\necho 'shaderc v2099.1 v2099.1'\necho 'glslang 15'\n")
    glslc.chmod(0o755)
    return glslc


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "EMBER_GLSLC": str(_fake_glslc(tmp_path))}
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **base, **env},
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), lines
    return lines[0]


def test_without_glslc_it_says_so_in_one_line_and_succeeds(tmp_path: Path) -> None:
    done = _run(tmp_path, "--check", EMBER_GLSLC=str(tmp_path / "no-glslc"))
    assert done.returncode == 0
    assert "no Vulkan module built: glslc is missing" in _one_line(done)


@needs_tools
def test_new_enough_headers_are_used_as_they_are(tmp_path: Path) -> None:
    include = _headers(tmp_path / "include", 309)
    done = _run(tmp_path, "--check", EMBER_VULKAN_INCLUDE=str(include))
    assert done.returncode == 0
    assert f"can build: glslc 2099.1, Vulkan headers 1.4.309 ({include})" in _one_line(done)


@needs_tools
def test_headers_older_than_1_3_272_are_not_enough(tmp_path: Path) -> None:
    include = _headers(tmp_path / "include", 239, "VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION)")
    line = _one_line(_run(tmp_path, "--check", EMBER_VULKAN_INCLUDE=str(include)))
    if shutil.which("dpkg-deb"):  # Debian: Debian 13's headers would be fetched for the compile
        assert "are 1.3.239 (< 1.3.272), so Debian 13's 1.4.309 headers will be downloaded" in line
    else:
        assert "no Vulkan module built: the Vulkan headers in" in line and "are 1.3.239;" in line


@needs_tools
def test_pre_1_2_175_headers_parse_too(tmp_path: Path) -> None:
    include = _headers(tmp_path / "include", 170, "VK_MAKE_VERSION(1, 2, VK_HEADER_VERSION)")
    assert "are 1.2.170 (< 1.3.272)" in _one_line(_run(tmp_path, "--check", EMBER_VULKAN_INCLUDE=str(include)))


def _fake_env(tmp_path: Path) -> tuple[Path, Path]:
    """A "python" that answers the script's question (where llama_cpp/lib is, which version)."""
    lib = tmp_path / "site" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{lib} 0.3.36'\n")
    python.chmod(0o755)
    return python, lib


def test_without_an_environment_it_fails_in_one_line(tmp_path: Path) -> None:
    done = _run(tmp_path, EMBER_PYTHON=str(tmp_path / "nope" / "python"))
    assert done.returncode == 1 and "run `uv sync` first" in _one_line(done)


def test_a_module_already_there_is_left_alone(tmp_path: Path) -> None:
    python, lib = _fake_env(tmp_path)
    (lib / "libggml-vulkan.so").write_bytes(b"from a CMAKE_ARGS rebuild")
    done = _run(tmp_path, EMBER_PYTHON=str(python))
    assert done.returncode == 0 and "left as is; --force replaces it" in _one_line(done)
    assert (lib / "libggml-vulkan.so").read_bytes() == b"from a CMAKE_ARGS rebuild"


@needs_tools
def test_a_cached_module_is_installed_as_a_new_file_without_building(tmp_path: Path) -> None:
    python, lib = _fake_env(tmp_path)
    include = _headers(tmp_path / "include", 309)
    cached = tmp_path / "cache" / "ember" / "vulkan-module" / "0.3.36-vk1.4.309-glslc2099.1" / "libggml-vulkan.so"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"built before")
    done = _run(tmp_path, EMBER_PYTHON=str(python), EMBER_VULKAN_INCLUDE=str(include))
    assert done.returncode == 0, done.stderr
    assert f"installed {lib / 'libggml-vulkan.so'}" in _one_line(done)
    installed = lib / "libggml-vulkan.so"
    assert installed.read_bytes() == b"built before"
    assert installed.stat().st_ino != cached.stat().st_ino  # a copy: never a link into the cache
    assert [p.name for p in lib.iterdir()] == ["libggml-vulkan.so"]  # no temporary file left
    again = _run(tmp_path, EMBER_PYTHON=str(python), EMBER_VULKAN_INCLUDE=str(include))
    assert "already has the Vulkan module built by this script" in _one_line(again)


@needs_tools
def test_a_module_built_for_another_version_is_replaced(tmp_path: Path) -> None:
    python, lib = _fake_env(tmp_path)
    include = _headers(tmp_path / "include", 309)
    modules = tmp_path / "cache" / "ember" / "vulkan-module"
    for key, content in (
        ("0.3.35-vk1.4.309-glslc2099.1", b"for 0.3.35"),
        ("0.3.36-vk1.4.309-glslc2099.1", b"for 0.3.36"),
    ):
        (modules / key).mkdir(parents=True)
        (modules / key / "libggml-vulkan.so").write_bytes(content)
    (lib / "libggml-vulkan.so").write_bytes(b"for 0.3.35")  # uv upgraded llama-cpp-python; the file stayed
    done = _run(tmp_path, EMBER_PYTHON=str(python), EMBER_VULKAN_INCLUDE=str(include))
    assert done.returncode == 0 and "installed" in _one_line(done)
    assert (lib / "libggml-vulkan.so").read_bytes() == b"for 0.3.36"
