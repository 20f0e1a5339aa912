"""Hostile files in a collection's folder, and hostile names: links, pipes, devices, bytes, controls.

Cases from the adversarial review (docs/hardening.md, "Documents: only regular files, names escaped"):
DC-30 links to files outside the folder were indexed (a private key, then sent to every model);
DC-31/32/33 a FIFO named `*.txt`, a FIFO without extension and a link to /dev/zero hung indexing;
DC-35 `--attach` of a FIFO said "not found"; DC-25/26 one file name that is not UTF-8 aborted the
whole folder, and `--attach` of it refused the whole chat; DC-22/23 newlines in file and collection
names forged output lines, and a 100,000-character collection name was accepted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from engine.docs.names import CollectionNameError, shown

ROOT = Path(__file__).resolve().parents[1]
BAD_NAME = os.fsdecode(b"bad\xff\xfeutf8.txt")  # what os.listdir gives for those bytes
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices and byte names are POSIX")


def ember(*args: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        errors="replace",
    )


def _script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": [[r] for r in replies]}))
    return f"script:{path}"


def _index(folder: Path) -> tuple[DocIndex, object]:
    index = DocIndex.memory()
    coll = index.create_collection("C")
    index.add_roots(coll, [folder])
    return index, coll


# -- links (DC-30) ------------------------------------------------------------------------


@posix_only
def test_links_in_a_folder_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("TOPSECRET private key material")
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "stolen.txt").symlink_to(outside / "id_rsa")
    (folder / "id_rsa").symlink_to(outside / "id_rsa")
    (folder / "relative.md").symlink_to("../outside/id_rsa")
    (folder / "normal.txt").write_text("normal words")
    index = DocIndex.memory()
    coll = index.create_collection("L")
    index.add_roots(coll, [folder])
    report = index_collection(index, coll)
    assert report.indexed == [str(folder / "normal.txt")]
    assert not index.search(coll, "TOPSECRET")
    reasons = dict(report.failed)
    assert (
        reasons[str(folder / "stolen.txt")] == "stolen.txt: is a symbolic link; links inside a folder are not followed"
    )
    assert str(folder / "relative.md") in reasons
    assert str(folder / "id_rsa") not in reasons  # not a document by its name: left out quietly


# -- pipes and devices (DC-31…33, DC-35) ---------------------------------------------------


@pytest.mark.slow  # starts a process
@posix_only
def test_pipes_and_a_link_to_dev_zero_are_skipped_and_the_folder_indexed(tmp_path: Path, ember_home: Path) -> None:
    folder = tmp_path / "fifo"
    folder.mkdir()
    (folder / "a.txt").write_text("normal words about harbors")
    os.mkfifo(folder / "pipe.txt")  # DC-31
    os.mkfifo(folder / "noext")  # DC-32
    (folder / "zero.txt").symlink_to("/dev/zero")  # DC-33
    result = ember("docs", "add", "F", str(folder), home=ember_home, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "F: 1 indexed" in result.stdout
    assert "ember: pipe.txt: is a pipe (FIFO), not a regular file; skipped" in result.stderr
    assert "ember: noext: is a pipe (FIFO), not a regular file; skipped" in result.stderr
    assert "ember: zero.txt: is a symbolic link; links inside a folder are not followed" in result.stderr


@pytest.mark.slow  # starts a process
@posix_only
def test_a_fifo_or_a_device_attached_is_named_for_what_it_is(tmp_path: Path, ember_home: Path) -> None:
    """DC-35: refused without being opened, and said as a pipe or a device, not "not found"."""
    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    result = ember(
        "chat",
        "--backend",
        _script(tmp_path, "fine."),
        "--no-history",
        "--attach",
        str(pipe),
        "--attach",
        "/dev/zero",
        "hello",
        home=ember_home,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "ember: pipe.txt: is a pipe (FIFO), not a regular file; skipped" in result.stderr
    assert "ember: zero: is a device, not a regular file; skipped" in result.stderr


# -- names that are not UTF-8 (DC-25, DC-26) -----------------------------------------------


@pytest.mark.slow  # starts a process
@posix_only
def test_a_name_that_is_not_utf8_is_indexed_and_shown_escaped(tmp_path: Path, ember_home: Path) -> None:
    folder = tmp_path / "names"
    folder.mkdir()
    (folder / "new.txt").write_text("new file zeta")
    (folder / BAD_NAME).write_text("delta four")
    result = ember("docs", "add", "N", str(folder), home=ember_home)
    assert result.returncode == 0, result.stderr
    assert "N: 2 indexed" in result.stdout
    listing = ember("docs", "list", "N", home=ember_home)
    assert listing.returncode == 0 and "bad\\xff\\xfeutf8.txt  1 passages" in listing.stdout
    found = ember("docs", "search", "N", "delta", "--json", home=ember_home)
    assert found.returncode == 0 and json.loads(found.stdout)[0]["path"].endswith("bad\\xff\\xfeutf8.txt")
    again = ember("docs", "reindex", "N", home=ember_home)
    assert again.returncode == 0 and "N: 0 indexed, 2 unchanged" in again.stdout


@pytest.mark.slow  # starts a process
@posix_only
def test_attaching_a_name_that_is_not_utf8_answers_and_is_kept(tmp_path: Path, ember_home: Path) -> None:
    bad = tmp_path / BAD_NAME
    bad.write_text("delta four is the answer")
    result = ember(
        "chat",
        "--backend",
        _script(tmp_path, "It says delta four [1]."),
        "--events",
        "--attach",
        str(bad),
        "what does it say?",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["type"] == "sources" and events[0]["sources"][0]["path"].endswith("bad\\xff\\xfeutf8.txt")
    again = ember(
        "chat", "--backend", _script(tmp_path, "Still delta four."), "-c", "--events", "and now?", home=ember_home
    )
    assert again.returncode == 0, again.stderr  # the conversation remembered the file and reads it again
    assert json.loads(again.stdout.splitlines()[0])["type"] == "sources"


# -- control characters in names (DC-22, DC-23) --------------------------------------------


@pytest.mark.slow  # starts a process
@posix_only
def test_a_newline_in_a_file_name_cannot_forge_a_line(tmp_path: Path, ember_home: Path) -> None:
    folder = tmp_path / "nl"
    folder.mkdir()
    (folder / "nl\nember: fake line.txt").write_text("forged lines about copper")
    (folder / "rlo\u202etxt.exe.md").write_text("reversed names about copper")
    (folder / "nl\nbroken.pdf").write_bytes(b"%PDF-1.4 not really")
    added = ember("docs", "add", "X", str(folder), home=ember_home)
    assert added.returncode == 0, added.stderr
    outputs = [added.stdout + added.stderr]
    outputs.append(ember("docs", "list", "X", home=ember_home).stdout)
    outputs.append(ember("docs", "search", "X", "copper", home=ember_home).stdout)
    chat = ember(
        "chat", "--backend", _script(tmp_path, "copper."), "--no-history", "--docs", "X", "copper?", home=ember_home
    )
    outputs.append(chat.stdout + chat.stderr)
    for text in outputs:
        assert not any(line.startswith(("ember: fake", "broken.pdf")) for line in text.splitlines()), text
        assert "\u202e" not in text
    assert "nl\\nember: fake line.txt" in outputs[1] and "rlo\\u202etxt.exe.md" in outputs[1]
    assert "nl\\nbroken.pdf: is not a readable PDF" in outputs[0]


@pytest.mark.slow  # starts a process
def test_a_collection_name_with_controls_or_absurd_length_is_refused_in_one_line(
    tmp_path: Path, ember_home: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("words")
    forged = ember("docs", "add", "a\nember: fake", str(folder), home=ember_home)
    assert forged.returncode == 2 and forged.stderr.count("\n") == 1
    assert forged.stderr.startswith("ember: a collection name cannot hold control characters")
    huge = ember("docs", "add", "n" * 100_000, str(folder), home=ember_home)
    assert (
        huge.returncode == 2
        and huge.stderr == "ember: a collection name is at most 200 characters (this one has 100,000)\n"
    )
    assert ember("docs", "list", home=ember_home).stdout.startswith("no collections yet")
    with DocIndex.memory() as index:
        for name in ("tab\there", "esc\x1b[2J", "bidi\u2067x", "sep\u2028x"):
            with pytest.raises(CollectionNameError):
                index.create_collection(name)
        assert index.create_collection("  Tax 2026 ").name == "Tax 2026"


def test_shown_escapes_every_control_and_undecodable_byte() -> None:
    assert shown("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert shown("x\x1b[2Jy\x7f\x9b") == "x\\u001b[2Jy\\u007f\\u009b"
    assert shown("evil\u202egnp.exe\u2066") == "evil\\u202egnp.exe\\u2066"
    assert shown(os.fsdecode(b"caf\xe9.txt")) == "caf\\xe9.txt"
    assert shown("plain café — 東京.md") == "plain café — 東京.md"
