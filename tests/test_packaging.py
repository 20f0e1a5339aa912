"""The desktop build (packaging/): its static files always, the frozen app on request.

The build itself takes minutes, so it runs only with EMBER_PACKAGING_TEST=1:

    EMBER_PACKAGING_TEST=1 uv run pytest tests/test_packaging.py -m packaging
"""

from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
APP_ID = "io.github.ember.Ember"
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)
BUILD_REASON = "set EMBER_PACKAGING_TEST=1 to build the frozen app (takes minutes)"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_icons_are_rendered_at_every_size() -> None:
    assert (PACKAGING / "icons" / "ember.svg").is_file()
    for size in ICON_SIZES:
        png = PACKAGING / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "ember.png"
        assert _png_size(png) == (size, size)
    assert _png_size(ROOT / "desktop" / "resources" / "ember.png") == (256, 256)
    svg = (PACKAGING / "icons" / "ember.svg").read_bytes()
    assert (ROOT / "desktop" / "resources" / "ember.svg").read_bytes() == svg


def test_desktop_entry_and_metainfo_agree() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    entry.read(PACKAGING / "linux" / "ember.desktop", encoding="utf-8")
    group = entry["Desktop Entry"]
    assert group["Type"] == "Application"
    assert group["Icon"] == APP_ID
    assert group["Exec"].split()[0] == "ember"

    component = ET.parse(PACKAGING / "linux" / f"{APP_ID}.metainfo.xml").getroot()
    assert component.get("type") == "desktop-application"
    assert component.findtext("id") == APP_ID
    assert component.findtext("launchable") == f"{APP_ID}.desktop"
    assert component.findtext("provides/binary") == "ember"


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils is not installed")
def test_desktop_entry_validates() -> None:
    result = subprocess.run(
        ["desktop-file-validate", str(PACKAGING / "linux" / "ember.desktop")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstream is not installed")
def test_metainfo_validates() -> None:
    result = subprocess.run(
        ["appstreamcli", "validate", "--no-net", str(PACKAGING / "linux" / f"{APP_ID}.metainfo.xml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", ["build.sh", "smoke.sh", "install-linux.sh"])
def test_shell_scripts_parse(script: str) -> None:
    result = subprocess.run(["bash", "-n", str(PACKAGING / script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_install_linux_puts_entry_metainfo_and_icons_under_prefix(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "ember").write_text("#!/bin/sh\necho ember 0.0.0\n")
    (app / "ember").chmod(0o755)
    prefix = tmp_path / "prefix"
    env = {**os.environ, "HOME": str(tmp_path)}
    run = subprocess.run(
        ["bash", str(PACKAGING / "install-linux.sh"), "--app", str(app), "--prefix", str(prefix)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    desktop = prefix / "share" / "applications" / f"{APP_ID}.desktop"
    assert f'Exec="{app}/ember"' in desktop.read_text()
    assert (prefix / "share" / "metainfo" / f"{APP_ID}.metainfo.xml").is_file()
    assert (prefix / "share" / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").is_file()
    for size in ICON_SIZES:
        assert (prefix / "share" / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png").is_file()

    gone = subprocess.run(
        ["bash", str(PACKAGING / "install-linux.sh"), "--prefix", str(prefix), "--uninstall"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not desktop.exists()


@pytest.mark.packaging
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get("EMBER_PACKAGING_TEST") != "1", reason=BUILD_REASON)
def test_frozen_app_builds_and_passes_the_smoke_check() -> None:
    if shutil.which("uv") is None:
        pytest.fail("packaging/build.sh needs uv on PATH")
    build = subprocess.run(
        ["bash", str(PACKAGING / "build.sh")], cwd=ROOT, capture_output=True, text=True, timeout=1500
    )
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-6000:]
    assert (ROOT / "dist" / "ember" / "ember").is_file()

    smoke = subprocess.run(
        ["bash", str(PACKAGING / "smoke.sh"), "dist/ember"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    print(smoke.stdout)
    assert smoke.returncode == 0, smoke.stdout[-6000:] + smoke.stderr[-3000:]
    for check in ("PASS  --version", "PASS  chat", "PASS  window"):
        assert check in smoke.stdout, smoke.stdout
