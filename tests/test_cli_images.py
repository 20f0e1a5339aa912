"""`ember chat --image FILE`: on a script, refused files, and end to end through a paired projector."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.history.images import image_folder
from engine.history.store import HistoryStore
from models.library.paths import ember_paths
from tests.projector_fixture import png, write_projector_fixture
from tests.test_cli_chat import _script, ember


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_images_go_with_the_message_and_are_stored(tmp_path: Path, ember_home: Path) -> None:
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    one.write_bytes(png(8, 6, seed=1))
    two.write_bytes(png(8, 6, seed=2))
    result = ember(
        "chat",
        "--backend",
        _script(tmp_path, [["A cat."]]),
        "--image",
        str(one),
        "--image",
        str(two),
        "What is this?",
        home=ember_home,
    )
    assert (result.returncode, result.stdout) == (0, "A cat.\n"), result.stderr
    store = HistoryStore(ember_paths().history_db)
    assert len(list(image_folder(store).glob("*/*"))) == 2
    rows = store.execute("SELECT name FROM message_images ORDER BY position")
    assert [r[0] for r in rows] == ["one.png", "two.png"]
    store.close()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"%PDF-1.4 a document", "is not a PNG, JPEG, GIF or BMP picture"),
        (None, "cannot read"),
    ],
)
@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_bad_image_fails_in_one_line_before_anything_runs(
    tmp_path: Path, ember_home: Path, content: bytes | None, expected: str
) -> None:
    path = tmp_path / "shot.png"
    if content is not None:
        path.write_bytes(content)
    result = ember("chat", "--backend", _script(tmp_path, [["never"]]), "--image", str(path), "hi", home=ember_home)
    assert result.returncode == 2
    assert expected in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_more_pictures_than_one_message_takes_fail_in_one_line(tmp_path: Path, ember_home: Path) -> None:
    from desktop.core.pending_images import MAX_PENDING

    files: list[str] = []
    for n in range(MAX_PENDING + 1):
        path = tmp_path / f"shot{n}.png"
        path.write_bytes(png(4, 4, seed=n))
        files += ["--image", str(path)]
    result = ember("chat", "--backend", _script(tmp_path, [["never"]]), *files, "hi", home=ember_home)
    assert result.returncode == 2
    assert f"at most {MAX_PENDING} pictures" in result.stderr and result.stderr.count("\n") == 1
    assert "never" not in result.stdout  # nothing ran


@pytest.mark.slow
def test_the_built_in_model_without_projector_refuses_an_image(tmp_path: Path, ember_home: Path) -> None:
    path = tmp_path / "shot.png"
    path.write_bytes(png(8, 6))
    result = ember("chat", "--image", str(path), "--max-tokens", "4", "hi", home=ember_home)
    assert result.returncode == 3
    assert "no vision projector" in result.stderr and result.stderr.count("\n") == 1
    assert not ember_paths().history_db.exists() or HistoryStore(ember_paths().history_db).conversations() == []


@pytest.mark.slow
def test_a_model_with_its_projector_beside_it_sees_the_image(
    tmp_path: Path, ember_home: Path, smollm_path: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    os.symlink(smollm_path, folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    write_projector_fixture(folder / "mmproj-SmolLM2-135M-Instruct-f16.gguf")
    path = tmp_path / "shot.png"
    path.write_bytes(png(40, 30))
    result = ember(
        "chat",
        "--model",
        str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--image",
        str(path),
        "--max-tokens",
        "4",
        "--temperature",
        "0",
        "--events",
        "Describe it.",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    assert '"type": "done"' in result.stdout
