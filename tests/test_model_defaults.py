"""Defaults follow the model, not the file: what a model is (name family, size, template) picks them.

The built-in SmolLM2, a copy of it and a downloaded SmolLM2 open with the same safe settings
(a repeat penalty and a reply cap); a model's own recommendations and the user's saved
settings come over them. One place opens a model for every front end (`engine.api.models`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import gguf_factory as gf
import pytest

from engine.api.models import model_defaults, model_settings
from models.library.catalogue import shipped_catalogue
from models.library.recommended import SMALL_MODEL_DEFAULTS
from models.library.settings import ModelSettings, save_model_settings

SMOLLM2 = {"general.basename": "smollm2", "general.size_label": "135M", "general.finetune": "8k-lc100k-mix1-ep2"}
PENALTY, CAP = 1.15, 1024


def _safe(s: ModelSettings) -> tuple[float, int | None]:
    return s.repeat_penalty, s.max_tokens


def test_a_smollm2_file_anywhere_gets_the_small_models_penalty_and_cap(tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    downloaded = gf.write_tiny_llama(tmp_path / "hub" / "SmolLM2-135M-Instruct-Q8_0.gguf", extra=SMOLLM2)
    copy = tmp_path / "elsewhere" / "my model.gguf"
    shutil.copyfile(downloaded, copy)
    assert _safe(model_defaults(downloaded)) == _safe(model_defaults(copy)) == (PENALTY, CAP)
    assert SMALL_MODEL_DEFAULTS == {"repeat_penalty": PENALTY, "max_tokens": CAP}


def test_the_path_of_the_built_in_file_gives_nothing_by_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = gf.write_tiny_llama(tmp_path / "builtin.gguf")  # no family a small-model rule knows
    monkeypatch.setenv("EMBER_DEFAULT_MODEL", str(plain))
    assert model_defaults(plain) == ModelSettings()


@pytest.mark.parametrize(
    ("extra", "small"),
    [
        ({"general.basename": "SmolLM2", "general.size_label": "360M"}, True),
        ({"general.basename": "Qwen2.5", "general.size_label": "0.5B"}, True),
        ({"general.basename": "SmolLM2", "general.size_label": "1.7B"}, False),  # big enough not to loop
        ({"general.basename": "Llama-3.2", "general.size_label": "1B"}, False),
        ({"general.name": "SmolVLM 500M Instruct", "general.size_label": "500M"}, True),  # no basename: the name
        ({"general.size_label": "135M"}, False),  # an unknown family
    ],
)
def test_the_rule_reads_the_family_and_the_size(tmp_path: Path, extra: dict[str, Any], small: bool) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf", name=None, extra=extra)
    assert (_safe(model_defaults(model)) == (PENALTY, CAP)) is small


def test_smollm2s_own_template_names_its_family_when_the_header_does_not(tmp_path: Path) -> None:
    template = "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face' }}"
    model = gf.write_tiny_llama(tmp_path / "renamed.gguf", template=template, name="renamed", extra={})
    assert _safe(model_defaults(model)) == (PENALTY, CAP)  # its tensors hold far under a billion parameters


def test_the_catalogues_small_models_get_them_and_its_larger_ones_do_not(tmp_path: Path) -> None:
    for i, entry in enumerate(shipped_catalogue()):
        family = entry.name.split()[0]  # "SmolLM2 360M Instruct" → "SmolLM2", as its GGUF names it
        extra = {"general.basename": family, "general.size_label": entry.parameters}
        model = gf.write_tiny_llama(tmp_path / f"{i}.gguf", name=None, extra=extra)
        got = _safe(model_defaults(model)) == (PENALTY, CAP)
        assert got is (entry.parameters_b < 1), entry.key


def test_a_models_own_penalty_and_the_users_saved_settings_come_first(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf", extra={**SMOLLM2, "general.sampling.penalty_repeat": 1.05})
    assert _safe(model_defaults(model)) == (pytest.approx(1.05), CAP)  # the file's own, the cap still
    save_model_settings(model, ModelSettings(repeat_penalty=1.0, max_tokens=4096))
    assert _safe(model_settings(model)) == (1.0, 4096)


@pytest.mark.slow
@pytest.mark.timeout(600)  # two loads of the real model and two short replies
def test_a_copy_of_the_built_in_file_gets_the_same_receipt_settings(
    tmp_path: Path, smollm_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli.main import main
    from engine.history.store import HistoryStore
    from models.library.paths import ember_paths

    copy = tmp_path / "copied.gguf"
    shutil.copyfile(smollm_path, copy)
    for model in ("default", str(copy)):
        status = main(["chat", "--model", model, "--temperature", "0", "--ctx", "1024", "Say hi."])
        assert status == 0, capsys.readouterr().err
    with HistoryStore(ember_paths().history_db) as store:
        receipts = [
            next(m for m in store.path(c.id) if m.role == "assistant").stats["receipt"] for c in store.conversations()
        ]
    assert len(receipts) == 2
    assert {(r["sampling"]["repeat_penalty"], r["max_tokens"]) for r in receipts} == {(PENALTY, CAP)}
