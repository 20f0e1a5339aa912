"""Pictures that are not files (adversarial review 3, F3: IC-07, IC-08, IW-01): refused at once.

A FIFO named `photo.png` blocked `open()` until someone wrote to it: `ember chat --image` hung
for ever (IC-08), and a drop on the window blocked its GUI thread (IW-01). Pictures are opened
only when they are regular files, without blocking, and the window reads drops on a worker.

A test whose code could block holds a release: if the reader has not come back by the time the
release gives up waiting, it opens the FIFO's other end, so a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from desktop.core.pending_images import sort_dropped
from engine.backends.image_input import read_image_file, sniff_file
from engine.errors import ConfigError
from tests.projector_fixture import png

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
BOUND_S = 10.0  # the release's patience: far longer than a non-blocking open takes


class Release:
    """Opens the FIFO's writing end if the reader is still blocked after BOUND_S (a regression)."""

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo
        self.done = threading.Event()
        self.had_to_release = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        if self.done.wait(BOUND_S):
            return
        self.had_to_release = True
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)  # a blocked reader's open returns
            os.write(fd, b"not a picture")
            os.close(fd)
        except OSError:
            pass


@contextmanager
def released(fifo: Path) -> Iterator[Release]:
    release = Release(fifo)
    try:
        yield release
    finally:
        release.done.set()
        release.thread.join()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "photo.png"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "read",
    [read_image_file, sniff_file, lambda p: sort_dropped([p])],
    ids=["read", "sniff", "sort_dropped"],
)
def test_a_fifo_named_like_a_picture_never_blocks(fifo: Path, read: Callable[[Path], object]) -> None:
    with released(fifo) as release:
        try:
            result = read(fifo)
        except (ConfigError, OSError) as exc:
            result = exc
    assert not release.had_to_release, "the reader blocked on the FIFO"
    if isinstance(result, ConfigError):
        assert str(result) == "photo.png is a pipe (FIFO), not a picture file; refused"
    if isinstance(result, list):  # the window's drop: refused in one line, not handed to the documents
        assert [(d.image, d.problem) for d in result] == [
            (None, "photo.png is a pipe (FIFO), not a picture file; refused")
        ]


def test_a_link_to_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    link = tmp_path / "zero.png"
    link.symlink_to("/dev/zero")  # IC-07: read 64 MB, then said "zero.png is 64 MB"
    with pytest.raises(ConfigError, match=r"^zero.png is a device, not a picture file; refused$"):
        read_image_file(link)


def test_a_link_the_user_chose_to_a_real_picture_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.png"
    real.write_bytes(png(8, 6))
    link = tmp_path / "shortcut.png"
    link.symlink_to(real)
    assert read_image_file(link).data == real.read_bytes()


@pytest.mark.slow  # starts a process
def test_ember_chat_with_a_fifo_as_its_picture_ends_in_one_line(fifo: Path, tmp_path: Path, ember_home: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"replies": [["never"]]}')
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    command = [sys.executable, "-m", "desktop", "chat", "--backend", f"script:{script}", "--image", str(fifo), "hi"]
    with released(fifo) as release:
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert not release.had_to_release, "ember chat blocked on the FIFO"
    assert result.returncode == 2
    assert result.stderr.strip().endswith("photo.png is a pipe (FIFO), not a picture file; refused")
    assert result.stderr.count("\n") == 1 and "never" not in result.stdout
