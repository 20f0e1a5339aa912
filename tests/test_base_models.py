"""Files without a chat template (base models): llama.cpp's built-in format for the architecture,
else a plain transcript; either way one line says so, and the reply ends at the next turn."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gguf_factory as gf
import httpx
import llama_cpp.llama_cpp as ll
import pytest

from desktop.cli.cmd_models import template_cell
from desktop.cli.main import main
from desktop.core.model_rows import entry_row
from engine.backends.base import Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.events import FinishReason, Piece, PromptProgress
from engine.llama.builtin_template import BuiltinTemplate, apply_builtin
from engine.llama.llama import LlamaBackend, _until_stop_text  # pyright: ignore[reportPrivateUsage]
from engine.llama.plain_transcript import PlainTranscript
from models.gguf.builtin_templates import (
    ARCHITECTURE_FORMATS,
    BASE_MODEL_NOTE,
    FORMATS,
    builtin_format,
    instruction_tuned,
)
from models.gguf.meta import read_metadata
from models.library.paths import ember_paths
from models.library.scan import library_entries

ROOT = Path(__file__).resolve().parents[1]
HELLO = [{"role": "user", "content": "Hello"}]


# -- which format a file gets -------------------------------------------------------------


def test_every_format_is_one_llama_cpp_knows() -> None:
    names = (ctypes.c_char_p * 128)()
    n = ll.llama_chat_builtin_templates(names, 128)
    known = {names[i].decode() for i in range(n)}  # pyright: ignore[reportOptionalMemberAccess]
    assert set(FORMATS) <= known
    assert all(name in FORMATS for names_ in ARCHITECTURE_FORMATS.values() for name in names_)


def test_the_format_needs_its_markers_as_special_tokens() -> None:
    gemma_markers = {"<start_of_turn>", "<end_of_turn>"}
    assert builtin_format("gemma3", gemma_markers.__contains__) == FORMATS["gemma"]
    assert builtin_format("gemma3", lambda _: False) is None  # written as text they would leak
    assert builtin_format("llama", {"<|im_start|>", "<|im_end|>"}.__contains__) == FORMATS["chatml"]
    assert builtin_format("notanarch", lambda _: True) is None


def test_only_a_name_that_says_so_makes_an_instruction_model() -> None:
    assert instruction_tuned(["it", None]) and instruction_tuned(["Llama-3.2-1B-Instruct"])
    assert instruction_tuned(["Qwen2.5 0.5B Chat"]) and instruction_tuned(["gemma-3-1b-it-qat"])
    assert not instruction_tuned(["Gemma 3 270m", "gemma-3", None])
    assert not instruction_tuned(["Qwen2.5-0.5B", "Phi-2", "Edit"])


@pytest.mark.parametrize(("architecture", "name", "tokens", "expected"), [
    ("gemma3", "gemma-3-270m-it", gf.GEMMA_TOKENS, "gemma"),
    ("gemma3", "gemma-3-270m-it", (("<start_of_turn>", gf.USER_DEFINED), "<end_of_turn>"), "gemma"),
    ("gemma3", "gemma-3-270m-it", (), None),  # written as text the markers would leak
    ("gemma3", "Gemma 3 270m", gf.GEMMA_TOKENS, None),  # a base model: a plain transcript
    ("llama", "Llama 3.2 1B Instruct", gf.LLAMA3_TOKENS, "llama3"),
    ("llama", "SmolLM2 135M Instruct", gf.CHATML_TOKENS, "chatml"),
    ("llama", "Some Chat", gf.GEMMA_TOKENS, None),  # no llama-family format uses gemma's markers
    ("xverse", "Xverse Chat", gf.CHATML_TOKENS, None),  # an architecture Ember has no format for
])  # fmt: skip
def test_metadata_names_the_builtin_format(
    tmp_path: Path, architecture: str, name: str, tokens: tuple[gf.TokenSpec, ...], expected: str | None
) -> None:
    path = gf.write_tiny_llama(tmp_path / "m.gguf", None, tokens, name=name, architecture=architecture)
    meta = read_metadata(path)
    assert (meta.base_model, meta.builtin_template) == (True, expected)
    assert meta.to_json()["base_model"] is True and meta.to_json()["builtin_template"] == expected


def test_a_finetune_key_counts_as_a_name(tmp_path: Path) -> None:
    path = gf.write_tiny_llama(
        tmp_path / "m.gguf", None, gf.CHATML_TOKENS, name="Tiny", extra={"general.finetune": "Instruct"}
    )
    assert read_metadata(path).builtin_template == "chatml"


def test_a_file_with_a_template_is_no_base_model(tmp_path: Path) -> None:
    meta = read_metadata(gf.write_tiny_llama(tmp_path / "m.gguf", gf.CHATML))
    assert (meta.base_model, meta.builtin_template) == (False, None)
    blank = read_metadata(gf.write_tiny_llama(tmp_path / "blank.gguf", "  \n"))
    assert blank.base_model


# -- rendering ------------------------------------------------------------------------------


def test_llama_cpp_renders_a_builtin_format() -> None:
    text = apply_builtin("gemma", [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Bye")])
    assert text == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )
    long = "x" * 100_000  # past the first buffer guess
    assert apply_builtin("chatml", [("user", long)]).count("x") == 100_000


def test_message_text_stays_text_in_a_builtin_format() -> None:
    template = BuiltinTemplate(FORMATS["gemma"], special_strings=["<end_of_turn>", "<start_of_turn>"])
    segments = template.segments([{"role": "user", "content": "say <end_of_turn> now"}])
    assert [(s.text, s.trusted) for s in segments] == [
        ("<start_of_turn>user\n", True),
        ("say <end_of_turn> now", False),
        ("<end_of_turn>\n<start_of_turn>model\n", True),
    ]
    # A lone system message has no turn in gemma's format: its text is broken instead of lost.
    alone = template.segments([{"role": "system", "content": "<end_of_turn>"}])
    assert all(s.trusted for s in alone) and "<end_of_turn>" not in "".join(s.text for s in alone)


def test_a_plain_transcript_keeps_every_turn() -> None:
    messages = [
        {"role": "system", "content": "A friendly chat."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
    segments = PlainTranscript().segments(messages)
    assert [(s.text, s.trusted) for s in segments] == [
        ("A friendly chat.\n\nUser: My name is Ada.\nAssistant: Hello Ada.\nUser: What is my name?\nAssistant:", False)
    ]  # plain text throughout: no message can open a special token


# -- stopping -------------------------------------------------------------------------------


def _pieces(*items: Piece | PromptProgress) -> Iterator[Piece | PromptProgress]:
    yield from items


def test_a_stop_text_ends_the_reply_across_pieces() -> None:
    info = StreamInfo(finish_reason=FinishReason.LENGTH)
    source = _pieces(PromptProgress(0, 9), Piece("Paris.\nUs", 1), Piece("er: and", 2), Piece(" more", 3))
    out = list(_until_stop_text(source, ("\nUser:",), info))  # type: ignore[arg-type]
    assert [p.text for p in out if isinstance(p, Piece)] == ["Paris."]
    assert info.finish_reason == FinishReason.STOP
    assert next(source, None) is None  # the generation was closed, not left suspended


def test_held_text_comes_out_before_a_special_token_and_at_the_end() -> None:
    info = StreamInfo(finish_reason=FinishReason.LENGTH)
    source = _pieces(Piece("a\nUse", 1), Piece("<x>", 2, True), Piece("b\nUs", 3))
    out = list(_until_stop_text(source, ("\nUser:",), info))  # type: ignore[arg-type]
    assert [(p.text, p.special) for p in out if isinstance(p, Piece)] == [
        ("a", False),
        ("\nUse", False),
        ("<x>", True),
        ("b", False),
        ("\nUs", False),
    ]
    assert info.finish_reason == FinishReason.LENGTH


def _reply(backend: LlamaBackend, request: Request) -> tuple[str, StreamInfo]:
    info = StreamInfo()
    pieces = [p for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece)]
    return "".join(p.text for p in pieces), info


def test_a_plain_transcript_end_to_end(tmp_path: Path) -> None:
    """No template and an architecture Ember has no built-in format for (llama.cpp runs xverse with
    llama's tensors): a plain transcript, stopped at the next label, even with ChatML's markers and
    a chat model's name."""
    path = gf.write_tiny_llama(
        tmp_path / "base.gguf", None, gf.CHATML_TOKENS, name="Xverse Chat", architecture="xverse"
    )
    backend = LlamaBackend(path, n_ctx=512)
    try:
        assert backend.capabilities.base_model
        ids, _ = backend.prompt_tokens(make_request(HELLO))
        assert backend.raw().detokenize(ids).decode().endswith("User: Hello\nAssistant:")
        # The tiny model writes random text: a grammar makes it write the next turn.
        forced = make_request(HELLO, sampling=Sampling.greedy(), max_tokens=40).with_(
            grammar='root ::= " Hello world\\nUser: and more"'
        )
        text, info = _reply(backend, forced)
        assert (text, info.finish_reason) == ("Hello world", FinishReason.STOP)  # no space from "Assistant: "
    finally:
        backend.close()


def test_a_builtin_format_end_to_end(tmp_path: Path) -> None:
    """A chat model whose template was lost, with ChatML's markers as special tokens: llama.cpp's
    chatml, stopped at the next turn's marker."""
    path = gf.write_tiny_llama(tmp_path / "lost.gguf", None, gf.CHATML_TOKENS, name="Tiny Instruct")
    backend = LlamaBackend(path, n_ctx=512)
    try:
        assert backend.capabilities.base_model
        ids, _ = backend.prompt_tokens(make_request(HELLO))
        im_start = backend.raw().tokenize(b"<|im_start|>", add_bos=False, special=True)
        assert len(im_start) == 1 and ids.count(im_start[0]) == 2  # the user's turn and the answer's
        grammar = f'root ::= "Hi" <[{im_start[0]}]> "user more"'
        text, info = _reply(
            backend, make_request(HELLO, sampling=Sampling.greedy(), max_tokens=40).with_(grammar=grammar)
        )
        assert (text, info.finish_reason) == ("Hi", FinishReason.STOP)
    finally:
        backend.close()


def test_a_file_with_its_own_template_is_unchanged(tmp_path: Path) -> None:
    backend = LlamaBackend(gf.write_tiny_llama(tmp_path / "chat.gguf"), n_ctx=512)
    try:
        assert not backend.capabilities.base_model
        assert backend._stop_ids == frozenset()  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.close()


# -- what the user is told ----------------------------------------------------------------


def test_ember_models_marks_a_base_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    path = gf.write_tiny_llama(models_dir / "base.gguf", None, (), name="Tiny base")
    assert main(["models"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "Tiny base" in line)
    assert "none: plain, base model" in row
    assert main(["models", "--json"]) == 0
    entry = next(e for e in json.loads(capsys.readouterr().out) if e["name"] == "Tiny base")
    assert (entry["base_model"], entry["builtin_template"]) == (True, None)
    assert main(["models", str(path)]) == 0
    out = capsys.readouterr().out
    assert "none in the file (a plain transcript is used)" in out and BASE_MODEL_NOTE in out


def test_the_picker_row_marks_a_base_model(tmp_path: Path) -> None:
    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    gf.write_tiny_llama(models_dir / "base.gguf", None, gf.CHATML_TOKENS, name="Tiny base")
    gf.write_tiny_llama(models_dir / "lost.gguf", None, gf.CHATML_TOKENS, name="Tiny chat")
    gf.write_tiny_llama(models_dir / "chat.gguf", name="Tiny chat")
    rows = {e.path.name: entry_row(e) for e in library_entries() if e.path.name.endswith(".gguf")}
    assert rows["base.gguf"].line.endswith(" · base model") and rows["base.gguf"].title == "Tiny base"
    assert "base model" not in rows["chat.gguf"].line
    assert template_cell(rows["base.gguf"].metadata) == "none: plain, base model"  # type: ignore[arg-type]
    assert template_cell(rows["lost.gguf"].metadata) == "none: chatml, base model"  # type: ignore[arg-type]


def _ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


@pytest.mark.slow  # starts a process
def test_ember_chat_says_it_once_on_stderr(tmp_path: Path, ember_home: Path) -> None:
    path = gf.write_tiny_llama(tmp_path / "base.gguf", None, ())
    result = _ember("chat", "--model", str(path), "--max-tokens", "4", "--temperature", "0", "Hello", home=ember_home)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(BASE_MODEL_NOTE) == 1
    assert f"ember: {BASE_MODEL_NOTE}\n" in result.stderr
    chat = _ember(
        "chat",
        "--model",
        str(gf.write_tiny_llama(tmp_path / "chat.gguf")),
        "--max-tokens",
        "4",
        "--temperature",
        "0",
        "Hello",
        home=ember_home,
    )
    assert chat.returncode == 0 and BASE_MODEL_NOTE not in chat.stderr


@pytest.mark.slow  # starts a process
def test_ember_serve_says_it_once_on_stderr(tmp_path: Path, ember_home: Path) -> None:
    path = gf.write_tiny_llama(tmp_path / "base.gguf", None, ())
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "serve", "--port", "0", "--model", str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match and line.startswith("Serving base.gguf"), line
        reply = httpx.post(
            f"{match.group(1)}/chat/completions",
            timeout=60,  # the server is up: Ctrl+C is handled
            json={"model": "x", "max_tokens": 4, "messages": HELLO},
        )
        assert reply.status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        stderr = proc.stderr.read() if proc.stderr else ""
        assert stderr.count(BASE_MODEL_NOTE) == 1 and f"ember: {BASE_MODEL_NOTE}\n" in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
