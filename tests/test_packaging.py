"""The desktop build (packaging/): its static files always, the frozen app in CI.

`.ci/run` builds the frozen app and sets EMBER_FROZEN_APP, so the frozen-app tests run there
on every change. Locally the build takes minutes; ask for it with

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
BUILD_REASON = "the frozen app is built by .ci/run; locally set EMBER_PACKAGING_TEST=1 to build it (minutes)"


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


@pytest.mark.slow  # starts a process
@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils is not installed")
def test_desktop_entry_validates() -> None:
    result = subprocess.run(
        ["desktop-file-validate", str(PACKAGING / "linux" / "ember.desktop")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # starts a process
@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstream is not installed")
def test_metainfo_validates() -> None:
    result = subprocess.run(
        ["appstreamcli", "validate", "--no-net", str(PACKAGING / "linux" / f"{APP_ID}.metainfo.xml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("script", ["build.sh", "smoke.sh", "install-linux.sh", "prereqs.sh", "vulkan-module.sh"])
def test_shell_scripts_parse(script: str) -> None:
    result = subprocess.run(["bash", "-n", str(PACKAGING / script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow  # starts a process
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


# -- the frozen app ----------------------------------------------------------------------
# `.ci/run` builds it (packaging/build.sh) and points EMBER_FROZEN_APP at it, so in CI these
# tests always run; a missing build prerequisite fails CI in one line (packaging/prereqs.sh).
# Locally, EMBER_PACKAGING_TEST=1 builds it here (minutes); without either they are skipped.

from desktop.cli.main import SUBCOMMANDS  # noqa: E402  (the list the frozen app must serve)

SMOKE_LOG = ROOT / "build" / "smoke.log"


@pytest.fixture(scope="module")
def frozen_app() -> Path:
    given = os.environ.get("EMBER_FROZEN_APP")
    if given:
        app = Path(given).resolve()
        if not (app / "ember").is_file():
            pytest.fail(f"EMBER_FROZEN_APP={given} has no ember executable; build it: bash packaging/build.sh")
        return app
    if os.environ.get("EMBER_PACKAGING_TEST") != "1":
        pytest.skip(BUILD_REASON)
    prereqs = subprocess.run(["bash", str(PACKAGING / "prereqs.sh")], capture_output=True, text=True)
    if prereqs.returncode != 0:
        pytest.fail(prereqs.stderr.strip(), pytrace=False)
    build = subprocess.run(
        ["bash", str(PACKAGING / "build.sh")], cwd=ROOT, capture_output=True, text=True, timeout=1500
    )
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-6000:]
    return ROOT / "dist" / "ember"


IMPORT_EVERY_SUBCOMMAND = """
import argparse, importlib, sys
from desktop.cli.main import SUBCOMMANDS
parser = argparse.ArgumentParser()
sub = parser.add_subparsers()
for name in SUBCOMMANDS:
    module = importlib.import_module(f"desktop.cli.cmd_{name}")
    module.register(sub)
    print(name)
import desktop.qt.app, engine.tools.mcp_client, mcp.client.stdio  # the window and the MCP SDK too
"""


def _frozen(app: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        "HOME": os.environ.get("HOME", "/tmp"),
        "PATH": "/usr/bin:/bin",
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_HOME": str(ROOT / "build" / "frozen-test-home"),
    }
    return subprocess.run([str(app / "ember"), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow  # starts a process
@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_the_frozen_app_imports_every_subcommand(frozen_app: Path) -> None:
    done = _frozen(frozen_app, "-c", IMPORT_EVERY_SUBCOMMAND)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == list(SUBCOMMANDS)
    for name in SUBCOMMANDS:
        helped = _frozen(frozen_app, name, "--help")
        assert helped.returncode == 0 and "usage: ember " + name in helped.stdout, helped.stdout + helped.stderr


@pytest.mark.slow  # starts a process
@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_the_frozen_app_passes_the_smoke_check(frozen_app: Path) -> None:
    SMOKE_LOG.parent.mkdir(parents=True, exist_ok=True)
    smoke = subprocess.run(
        ["bash", str(PACKAGING / "smoke.sh"), str(frozen_app)], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    SMOKE_LOG.write_text(smoke.stdout + smoke.stderr)  # .ci/run prints it
    assert smoke.returncode == 0, smoke.stdout[-6000:] + smoke.stderr[-3000:]
    for check in (
        "PASS  --version",
        "PASS  imports",
        "PASS  chat",
        "PASS  tools",
        "PASS  history list",
        "PASS  doctor --network",
        "PASS  window on X",
    ):
        assert check in smoke.stdout, smoke.stdout


def _licence_files():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("licence_files", PACKAGING / "licence_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_app_carries_every_run_time_dependencys_licence(tmp_path: Path) -> None:
    """What packaging/ember.spec puts in THIRD-PARTY/: each direct dependency is listed with its
    licence, Qt's LGPLv3 text is there (PySide6 ships none), and every text exists."""
    licences = _licence_files()
    datas: list[tuple[str, str]] = licences.spec_datas(tmp_path)
    assert all(Path(source).is_file() for source, _ in datas)
    readme = (tmp_path / "README.txt").read_text(encoding="utf-8")
    listed = {line.split(" ", 1)[0].lower().replace("_", "-") for line in readme.splitlines()[5:]}
    for direct in ("pyside6-essentials", "llama-cpp-python", "qasync", "numpy", "starlette", "pypdfium2", "mcp"):
        assert direct in listed, direct
    folders = {dest for _, dest in datas}
    assert any(d.startswith("THIRD-PARTY/pyside6-essentials-") for d in folders)
    assert (
        (PACKAGING / "licenses" / "LGPL-3.0.txt").read_text().lstrip().startswith("GNU LESSER GENERAL PUBLIC LICENSE")
    )
    assert any(d.startswith("THIRD-PARTY/llama-cpp-python-") for d in folders)
    assert "ember-chat" not in listed  # Ember's own LICENSE sits at the top of the app
