"""Can Qt open a window here? Asked before any QApplication exists, without importing Qt.

On a fresh Linux desktop Qt's xcb platform plugin often lacks a few small system libraries
(`libxcb-cursor0`, `libxcb-icccm4`, `libxcb-keysyms1`, ...). Qt then prints seven lines and
aborts. Instead, `ember` asks `ldd` which of the plugin's libraries do not resolve, and says
in one line which package to install. `ember doctor` shows the same finding.

macOS and Windows need nothing: their platform plugins only use the system's own libraries.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

LDD_TIMEOUT_S = 10
# Platforms that draw to a display server; anything else (offscreen, minimal, vnc, ...) needs none.
DISPLAY_PLATFORMS = ("xcb", "wayland")
PLUGIN_FILES = {"xcb": "libqxcb.so", "wayland": "libqwayland.so"}
DISPLAY_VARS = {"xcb": "DISPLAY", "wayland": "WAYLAND_DISPLAY"}

# Library (soname) -> its package on (Debian/Ubuntu, Fedora, Arch, openSUSE).
PACKAGES: dict[str, tuple[str, str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor", "libxcb-cursor0"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm", "libxcb-icccm4"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms", "libxcb-keysyms1"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image", "libxcb-image0"),
    "libxcb-render-util.so.0": (
        "libxcb-render-util0",
        "xcb-util-renderutil",
        "xcb-util-renderutil",
        "libxcb-render-util0",
    ),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util", "libxcb-util1"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11", "libxkbcommon-x11-0"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon", "libxkbcommon0"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11", "libX11-xcb1"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11", "libX11-6"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd", "libEGL1"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd", "libGL1"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl", "libglvnd", "libOpenGL0"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig", "libfontconfig1"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2", "libfreetype6"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus", "libdbus-1-3"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2", "libglib-2_0-0"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client", "wayland", "libwayland-client0"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor", "wayland", "libwayland-cursor0"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl", "wayland", "libwayland-egl1"),
}
FAMILIES = ("debian", "fedora", "arch", "suse")
INSTALL = {
    "debian": "sudo apt-get install",
    "fedora": "sudo dnf install",
    "arch": "sudo pacman -S",
    "suse": "sudo zypper install",
}
_FAMILY_IDS = {
    "debian": ("debian", "ubuntu", "linuxmint", "pop", "raspbian"),
    "fedora": ("fedora", "rhel", "centos", "rocky", "almalinux"),
    "arch": ("arch", "manjaro", "endeavouros"),
    "suse": ("suse", "opensuse", "opensuse-leap", "opensuse-tumbleweed", "sles"),
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
_XCB_LIB = re.compile(r"^libxcb-([a-z0-9-]+)\.so\.(\d+)$")

Ldd = Callable[[Path], str | None]


@dataclass(frozen=True, slots=True)
class PlatformProblem:
    """Why Qt cannot open a window: no display, or libraries its platform plugin lacks."""

    platform: str
    missing: tuple[str, ...] = ()  # sonames that do not resolve
    packages: tuple[str, ...] = ()  # what provides them on this distribution (empty: unknown)
    install: str = ""  # the install command, when the distribution is known

    @property
    def message(self) -> str:
        """One line for stderr, `ember doctor` and the README's troubleshooting."""
        tail = "`ember chat` works without a display"
        if not self.missing:
            var = DISPLAY_VARS.get(self.platform, "DISPLAY")
            return f"ember: no display to open the window on ({var} is not set); {tail}."
        libs = ", ".join(self.missing)
        if self.install:
            fix = f"install with: {self.install} {' '.join(self.packages)}"
        else:
            fix = "install the packages that provide them (see README, Quick start)"
        return f"ember: the window can't open: Qt's {self.platform} plugin needs {libs}; {fix} ({tail})."


def platform_problem(
    env: Mapping[str, str] | None = None,
    *,
    ldd: Ldd | None = None,
    os_release: str | None = None,
    plugin_dir: Path | None = None,
) -> PlatformProblem | None:
    """None when Qt can (as far as can be told) open a window; else what stops it.

    Qt tries the platforms in QT_QPA_PLATFORM (or its own default) in order; the first one
    that works wins, so this only reports a problem when every candidate has one.
    """
    if not sys.platform.startswith("linux"):
        return None
    env = os.environ if env is None else env
    candidates = _candidates(env)
    if not any(name in DISPLAY_PLATFORMS for name in candidates):
        return None  # offscreen, minimal, ...: nothing to check
    plugins = plugin_dir if plugin_dir is not None else _plugin_dir(env)
    problems: list[PlatformProblem] = []
    for name in candidates:
        problem = _check(name, env, plugins, ldd or run_ldd, os_release)
        if problem is None:
            return None
        problems.append(problem)
    with_libs = [p for p in problems if p.missing]
    return (with_libs or problems)[0]


def _candidates(env: Mapping[str, str]) -> list[str]:
    wanted = env.get("QT_QPA_PLATFORM", "").strip()
    if wanted:
        return [part.split(":", 1)[0].strip() for part in wanted.split(";") if part.strip()]
    if env.get("XDG_SESSION_TYPE") == "wayland" and env.get("WAYLAND_DISPLAY"):
        return ["wayland", "xcb"]  # Qt 6 prefers Wayland in a Wayland session, falls back to xcb
    return ["xcb"]


def _check(
    name: str, env: Mapping[str, str], plugins: Path | None, ldd: Ldd, os_release: str | None
) -> PlatformProblem | None:
    if name not in DISPLAY_PLATFORMS:
        return None
    if not env.get(DISPLAY_VARS[name]):
        return PlatformProblem(name)
    plugin = plugins / PLUGIN_FILES[name] if plugins is not None else None
    if plugin is None or not plugin.is_file():
        return None  # not where we expect it: let Qt speak for itself
    output = ldd(plugin)
    missing = tuple(dict.fromkeys(_NOT_FOUND.findall(output or "")))
    if not missing:
        return None
    family = distro_family(os_release)
    packages = packages_for(missing, family) if family else ()
    return PlatformProblem(name, missing, packages, INSTALL[family] if family else "")


def _plugin_dir(env: Mapping[str, str]) -> Path | None:
    explicit = env.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    if explicit:
        return Path(explicit)
    try:
        spec = importlib.util.find_spec("PySide6")  # finds the package without importing Qt
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms"


def run_ldd(path: Path) -> str | None:
    """`ldd path`'s output; None when ldd is not there or fails to run."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return None
    try:
        done = subprocess.run([ldd, str(path)], capture_output=True, text=True, timeout=LDD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout


def distro_family(os_release: str | None = None) -> str | None:
    """ "debian", "fedora", "arch" or "suse" from /etc/os-release's ID and ID_LIKE; None otherwise."""
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    ids: list[str] = []
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids += value.strip().strip("\"'").lower().split()
    for family in FAMILIES:
        if any(i in _FAMILY_IDS[family] for i in ids):
            return family
    return None


def packages_for(sonames: tuple[str, ...], family: str) -> tuple[str, ...]:
    """The packages that provide `sonames` on `family`, in order, without repeats."""
    column = FAMILIES.index(family)
    out: list[str] = []
    for soname in sonames:
        known = PACKAGES.get(soname)
        package = known[column] if known else _guess_package(soname, family)
        if package and package not in out:
            out.append(package)
    return tuple(out)


def _guess_package(soname: str, family: str) -> str:
    # The core xcb extension libraries: libxcb-NAME.so.N is libxcb-NAMEN on Debian and
    # openSUSE, and part of the one libxcb package on Fedora and Arch.
    match = _XCB_LIB.match(soname)
    if match is None:
        return ""
    if family in ("fedora", "arch"):
        return "libxcb"
    return f"libxcb-{match.group(1)}{match.group(2)}"


def doctor_line(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """For `ember doctor`: (ok, one line) about opening a window here."""
    problem = platform_problem(env)
    if problem is not None:
        return False, problem.message.removeprefix("ember: ")
    if not sys.platform.startswith("linux"):
        return True, "window: the system's own platform plugin (nothing to install)"
    names = [n for n in _candidates(os.environ if env is None else env)]
    return True, f"window: Qt platform {' / '.join(names)} has the libraries it needs"
