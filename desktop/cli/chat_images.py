"""`ember chat --image FILE`: pictures the message carries (repeatable), read and checked
before a model loads, so a bad file fails fast in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

from desktop.core.pending_images import MAX_PENDING
from engine.api.errors import ConfigError
from engine.api.values import ImageData, read_image_file


def add_image_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image",
        metavar="FILE",
        action="append",
        default=[],
        help=f"send this picture with the message (PNG, JPEG, GIF, BMP; repeatable, at most {MAX_PENDING}); "
        "the model needs its vision projector (mmproj) beside it",
    )


def read_images(args: argparse.Namespace) -> list[ImageData]:
    """The `--image` files; ConfigError (one line) for too many, or one that cannot be read or is no picture."""
    if len(args.image) > MAX_PENDING:  # the window's limit: one message, at most this many pictures
        raise ConfigError(
            f"at most {MAX_PENDING} pictures go with one message; --image was given {len(args.image)} times"
        )
    return [read_image_file(Path(p)) for p in args.image]
