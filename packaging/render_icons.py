"""Render packaging/icons/ember.svg into the PNG sizes (and .ico / .icns) the packages use.

    uv run python packaging/render_icons.py

Uses Qt's own SVG renderer (PySide6 is already a dependency), so no system tools are needed.
Writes packaging/icons/hicolor/<N>x<N>/apps/ember.png, packaging/icons/ember.ico (Windows),
packaging/icons/ember.icns (macOS) and the window icon desktop/resources/ember.{png,svg}.
The outputs are committed; rerun this after editing the SVG.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SVG = HERE / "icons" / "ember.svg"
SIZES = (16, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 32, 48, 256)


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def write_ico(images: dict[int, QImage], path: Path) -> None:
    """A multi-size .ico with PNG-compressed entries (valid since Windows Vista)."""
    entries = [(size, png_bytes(images[size])) for size in ICO_SIZES]
    header = (0).to_bytes(2, "little") + (1).to_bytes(2, "little") + len(entries).to_bytes(2, "little")
    directory = b""
    offset = 6 + 16 * len(entries)
    for size, blob in entries:
        dim = 0 if size >= 256 else size
        directory += bytes([dim, dim, 0, 0]) + (1).to_bytes(2, "little") + (32).to_bytes(2, "little")
        directory += len(blob).to_bytes(4, "little") + offset.to_bytes(4, "little")
        offset += len(blob)
    path.write_bytes(header + directory + b"".join(blob for _, blob in entries))


def write_icns(images: dict[int, QImage], path: Path) -> None:
    """A .icns holding PNG entries (ic07..ic10, ic11..ic14 retina), readable by macOS 10.7+."""
    types = {128: b"ic07", 256: b"ic08", 512: b"ic09", 32: b"ic11", 64: b"ic12"}
    chunks = b""
    for size, kind in types.items():
        blob = png_bytes(images[size])
        chunks += kind + (8 + len(blob)).to_bytes(4, "big") + blob
    path.write_bytes(b"icns" + (8 + len(chunks)).to_bytes(4, "big") + chunks)


def main() -> int:
    _app = QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"cannot read {SVG}", file=sys.stderr)
        return 1
    images = {size: render(renderer, size) for size in SIZES}
    for size, image in images.items():
        out = HERE / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "ember.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png_bytes(image))
        print(out.relative_to(ROOT))
    write_ico(images, HERE / "icons" / "ember.ico")
    write_icns(images, HERE / "icons" / "ember.icns")
    resources = ROOT / "desktop" / "resources"
    resources.mkdir(parents=True, exist_ok=True)
    (resources / "ember.png").write_bytes(png_bytes(images[256]))
    shutil.copyfile(SVG, resources / "ember.svg")
    print("packaging/icons/ember.ico packaging/icons/ember.icns desktop/resources/ember.{png,svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
