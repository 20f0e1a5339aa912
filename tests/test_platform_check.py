"""The Qt platform check: which library the window lacks, and which package provides it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from desktop.core.platform_check import doctor_line, packages_for, platform_problem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the check is Linux-only")

LDD_MISSING = """\
\tlinux-vdso.so.1 (0x00007ffc)
\tlibQt6XcbQpa.so.6 => /x/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x7f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x7f)
"""
LDD_OK = "\tlibxcb-icccm.so.4 => /lib/libxcb-icccm.so.4 (0x7f)\n"
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12"\nID=debian\n'
UBUNTU = "ID=ubuntu\nID_LIKE=debian\n"
FEDORA = "ID=fedora\n"
ARCH = "ID=arch\n"


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    for name in ("libqxcb.so", "libqwayland.so"):
        (tmp_path / name).write_bytes(b"")
    return tmp_path


def fake_ldd(output: str, seen: list[Path] | None = None):
    def ldd(path: Path) -> str:
        if seen is not None:
            seen.append(path)
        return output

    return ldd


def test_missing_xcb_libraries_are_named_once_with_the_debian_packages(plugins: Path) -> None:
    problem = platform_problem({"DISPLAY": ":0"}, ldd=fake_ldd(LDD_MISSING), os_release=UBUNTU, plugin_dir=plugins)
    assert problem is not None
    assert problem.missing == ("libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    assert problem.packages == ("libxcb-icccm4", "libxcb-keysyms1")
    assert "\n" not in problem.message
    assert "sudo apt-get install libxcb-icccm4 libxcb-keysyms1" in problem.message
    assert "`ember chat` works without a display" in problem.message


@pytest.mark.parametrize(
    ("release", "command"),
    [
        (FEDORA, "sudo dnf install xcb-util-wm xcb-util-keysyms"),
        (ARCH, "sudo pacman -S xcb-util-wm xcb-util-keysyms"),
    ],
)
def test_other_distributions_get_their_own_package_names(plugins: Path, release: str, command: str) -> None:
    problem = platform_problem({"DISPLAY": ":0"}, ldd=fake_ldd(LDD_MISSING), os_release=release, plugin_dir=plugins)
    assert problem is not None
    assert command in problem.message


def test_an_unknown_distribution_still_names_the_libraries(plugins: Path) -> None:
    problem = platform_problem(
        {"DISPLAY": ":0"}, ldd=fake_ldd(LDD_MISSING), os_release="ID=gentoo\n", plugin_dir=plugins
    )
    assert problem is not None
    assert problem.install == ""
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in problem.message


def test_core_xcb_extensions_map_to_debian_names_or_the_one_libxcb() -> None:
    assert packages_for(("libxcb-shape.so.0", "libxcb-randr.so.0"), "debian") == ("libxcb-shape0", "libxcb-randr0")
    assert packages_for(("libxcb-shape.so.0", "libxcb-randr.so.0"), "fedora") == ("libxcb",)


def test_a_complete_plugin_and_offscreen_are_fine(plugins: Path) -> None:
    assert platform_problem({"DISPLAY": ":0"}, ldd=fake_ldd(LDD_OK), os_release=DEBIAN, plugin_dir=plugins) is None
    seen: list[Path] = []
    env = {"QT_QPA_PLATFORM": "offscreen"}
    assert platform_problem(env, ldd=fake_ldd(LDD_MISSING, seen), plugin_dir=plugins) is None
    assert seen == []  # nothing to check, nothing run


def test_no_display_says_so_and_points_at_ember_chat(plugins: Path) -> None:
    problem = platform_problem({}, ldd=fake_ldd(LDD_OK), os_release=DEBIAN, plugin_dir=plugins)
    assert problem is not None
    assert problem.message == (
        "ember: no display to open the window on (DISPLAY is not set); `ember chat` works without a display."
    )


def test_wayland_session_falls_back_to_a_working_xcb(plugins: Path) -> None:
    def ldd(path: Path) -> str:
        return LDD_MISSING if path.name == "libqwayland.so" else LDD_OK

    env = {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}
    assert platform_problem(env, ldd=ldd, os_release=DEBIAN, plugin_dir=plugins) is None


def test_doctor_line_reports_ok_on_offscreen() -> None:
    ok, line = doctor_line({"QT_QPA_PLATFORM": "offscreen"})
    assert ok
    assert "offscreen" in line


@pytest.mark.slow
def test_ember_without_a_display_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "EMBER_HOME": str(tmp_path / "ember")}
    done = subprocess.run(
        [sys.executable, "-m", "desktop"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "no display" in lines[0]
    assert "ember chat" in lines[0]
