"""`ember chat --image FILE`: pictures the message carries (repeatable), read and checked
before a model loads, so a bad file fails fast in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.backends.image_input import ImageData, read_image_file


def add_image_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image",
        metavar="FILE",
        action="append",
        default=[],
        help="send this picture with the message (PNG, JPEG, GIF, BMP; repeatable); the model needs "
        "its vision projector (mmproj) beside it",
    )


def read_images(args: argparse.Namespace) -> list[ImageData]:
    """The `--image` files; ConfigError (one line) for one that cannot be read or is no picture."""
    return [read_image_file(Path(p)) for p in args.image]
