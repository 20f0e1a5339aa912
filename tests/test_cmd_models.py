"""`ember models`: the library table, describing files, and one-line errors for bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf_factory as gf
import pytest

from desktop.cli.main import main
from desktop.cli.table import format_table
from models.library.paths import ember_paths
from models.library.scan import LibraryState, save_library_state

ROOT = Path(__file__).resolve().parents[1]


def ember(*args: str) -> subprocess.CompletedProcess[str]:
    # EMBER_HOME comes from the autouse fixture, through the inherited environment.
    return subprocess.run(
        [sys.executable, "-m", "desktop", "models", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


@pytest.mark.slow
def test_json_on_smollm2(smollm_path: Path) -> None:
    result = ember("--json", str(smollm_path))
    assert result.returncode == 0, result.stderr
    [info] = json.loads(result.stdout)
    assert info["path"] == str(smollm_path)
    assert info["architecture"] == "llama"
    assert info["size_label"] == "135M"
    assert info["parameters"] > 100_000_000
    assert info["quantization"] == "Q4_1"
    assert info["context_length"] == 8192
    assert info["size_bytes"] == smollm_path.stat().st_size
    assert info["template_family"] == "chatml"
    assert info["name"]
    assert info["problem"] is None
    assert info["memory"]["context_length"] == 4096
    assert info["memory"]["kv_cache_bytes"] == 2 * 30 * 4096 * 192 * 2


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True])
def test_a_bad_file_exits_2_with_one_line(tmp_path: Path, as_json: bool) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"PK\x03\x04 definitely a zip")
    result = ember(*(["--json"] if as_json else []), str(bad))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"ember: {bad}: not a GGUF file (wrong magic")
    assert "Traceback" not in result.stderr
    if as_json:
        assert json.loads(result.stdout) == []


def test_good_and_bad_files_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = gf.write_tiny_llama(tmp_path / "good.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS)
    assert main(["models", "--json", str(good), str(tmp_path / "missing.gguf"), str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert [m["path"] for m in json.loads(out)] == [str(good)]
    assert err.splitlines() == [
        f"ember: {tmp_path / 'missing.gguf'}: no such file",
        f"ember: {tmp_path}: is a directory, not a GGUF file",
    ]


def test_human_description(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = gf.write_tiny_llama(tmp_path / "q.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS, eos="<|im_end|>")
    assert main(["models", str(model)]) == 0
    out = capsys.readouterr().out
    lines = dict(line.split(None, 1) for line in out.splitlines() if line and not line.startswith(" "))
    assert "qwen3-thinking, pre-fills <think>" in out
    assert "<think> (user_defined)" in out
    assert "F32" in out
    assert "2048" in out
    assert lines["name"].strip() == "Tiny Llama (test)"


def test_a_projector_is_described_with_its_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    projector = gf.write_projector(tmp_path / "p.gguf")
    assert main(["models", "--json", str(projector)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert "vision projector" in info["problem"]


def test_library_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    gf.write_tiny_llama(models_dir / "tiny.gguf", gf.GEMMA, gf.GEMMA_TOKENS, name="Tiny Gemma-ish")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(gf.raw_gguf(version=7))
    save_library_state(LibraryState().with_opened(broken))

    assert main(["models"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "PARAMS", "QUANT", "CTX", "SIZE", "TEMPLATE", "SOURCE", "PATH"]
    assert any("Tiny Gemma-ish" in row and "gemma" in row and "models_dir" in row for row in table)
    assert any("Q4_1" in row and "builtin" in row for row in table)
    assert any("unsupported GGUF version 7" in row for row in table)

    assert main(["models", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["source"] for e in entries] == ["builtin", "models_dir", "recent"]
    assert entries[1]["template_family"] == "gemma"
    assert entries[2]["error"] == "unsupported GGUF version 7 (llama.cpp reads 2 and 3)"
    assert entries[2]["path"] == str(broken)


def test_format_table_aligns_columns() -> None:
    text = format_table([("a", "bb", "c"), ("ccc", "d", "e")], header=("X", "Y", "Z"))
    assert text.splitlines() == ["X    Y   Z", "a    bb  c", "ccc  d   e"]


@pytest.mark.slow  # starts a process
def test_cmd_models_does_not_import_qt() -> None:
    code = (
        "import sys, desktop.cli.cmd_models, desktop.cli.main\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6')]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
