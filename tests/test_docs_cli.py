"""`ember chat --attach/--docs` and `ember docs`: sources before the answer, kept in history and both exports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from doc_fixtures import write_pdf, write_scanned_pdf

from engine.history.export import export_json, export_markdown
from engine.history.store import HistoryStore
from models.library.paths import ember_paths

ROOT = Path(__file__).resolve().parents[1]


def ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def _script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": [[r] for r in replies]}))
    return f"script:{path}"


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.mark.slow  # starts a process
def test_attach_a_pdf_sources_come_first_and_history_keeps_them(tmp_path: Path, ember_home: Path) -> None:
    pdf = write_pdf(tmp_path / "policy.pdf", ["Cover page.", "Refunds are paid within 14 days."])
    result = ember(
        "chat",
        "--backend",
        _script(tmp_path, "Within 14 days [2]."),
        "--events",
        "--attach",
        str(pdf),
        "How fast are refunds?",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    events = _lines(result.stdout)
    assert [e["type"] for e in events][:2] == ["sources", "content"]
    sources = events[0]["sources"]
    assert [(s["n"], s["page"], Path(s["path"]).name) for s in sources] == [(1, 1, "policy.pdf"), (2, 2, "policy.pdf")]
    assert set(sources[1]) >= {"n", "path", "page", "start", "end", "score"}
    assert sources[1]["path"] == str(pdf.resolve()) and "14 days" in sources[1]["text"]
    with HistoryStore(ember_paths().history_db) as store:
        conv = store.latest_conversation()
        assert conv is not None
        user, reply = store.path(conv.id)
        assert user.content == "How fast are refunds?"  # the question is stored, not the passages
        assert reply.stats["sources"] == sources
        assert export_json(store, conv.id)["messages"][1]["stats"]["sources"] == sources
        md = export_markdown(store, conv.id)
    assert f"**Sources**\n\n- [1] `{pdf.resolve()}`, page 1" in md and "- [2]" in md


@pytest.mark.slow  # starts a process
def test_plain_output_lists_sources_after_the_answer(tmp_path: Path, ember_home: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("The meeting moved to Thursday.")
    result = ember(
        "chat", "--backend", _script(tmp_path, "Thursday [1]."), "--attach", str(note), "When?", home=ember_home
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Thursday [1].\n"
    assert f"[1] note.md ({note.resolve()}, characters 0-30)" in result.stderr


def test_the_prompt_numbers_the_passages_and_fits_the_context(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli import cmd_chat
    from desktop.cli.main import main
    from engine.backends.scripted import ScriptedBackend

    scripted = ScriptedBackend.from_texts("It is blue [1].", "Yes.")
    scripted.n_ctx = 4096
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    note = tmp_path / "sky.md"
    note.write_text("# Sky\n\nThe sky over the harbour is blue.")
    assert main(["chat", "--attach", str(note), "What colour is the sky?"]) == 0
    sent = scripted.requests[0].messages[-1]["content"]
    assert sent.endswith("[1] sky.md\n# Sky\n\nThe sky over the harbour is blue.\n\nQuestion: What colour is the sky?")
    assert sent.startswith("Answer using these passages from my documents")
    # the next turn of the conversation stores and re-sends the question alone; the file stays
    # attached to the conversation, so the new question gets the document again
    assert main(["chat", "-c", "Sure?"]) == 0
    history = [m["content"] for m in scripted.requests[1].messages if m["role"] != "system"]
    assert history[:2] == ["What colour is the sky?", "It is blue [1]."]
    assert history[2].endswith("The sky over the harbour is blue.\n\nQuestion: Sure?")
    capsys.readouterr()


@pytest.mark.slow  # starts a process
def test_an_unreadable_attachment_is_one_line_and_the_turn_goes_on(tmp_path: Path, ember_home: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Lunch is at noon.")
    scan = write_scanned_pdf(tmp_path / "scan.pdf")
    result = ember(
        "chat",
        "--backend",
        _script(tmp_path, "Noon [1]."),
        "--events",
        "--attach",
        str(scan),
        "--attach",
        str(tmp_path / "missing.md"),
        "--attach",
        str(good),
        "When is lunch?",
        home=ember_home,
    )
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "ember: missing.md: not found",
        "ember: scan.pdf: has no text layer (2 pages of images, e.g. a scan); Ember does not read text from images",
    ]
    assert [Path(s["path"]).name for s in _lines(result.stdout)[0]["sources"]] == ["good.txt"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`ember ARGS` in this process (a subprocess per call is slow on a loaded machine)."""
    from desktop.cli.main import main

    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_collections_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "tax"
    folder.mkdir()
    (folder / "receipts.md").write_text("# Receipts\n\nThe plumber invoice was 380 euros.\n")
    write_pdf(folder / "letter.pdf", ["Dear taxpayer.", "Your deadline is 31 July."])
    (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff")  # skipped in a folder: not a document
    status, out, err = _run(capsys, "docs", "add", "Tax 2026", str(folder), "--json")
    assert status == 0, err
    report = json.loads(out)
    assert sorted(Path(p).name for p in report["indexed"]) == ["letter.pdf", "receipts.md"]
    assert report["pages"] == 2 and report["failed"] == []
    assert [Path(s["path"]).name for s in report["skipped"]] == ["photo.jpg"]  # said, not failed
    assert "photo.jpg: is not a document Ember reads" in err
    listed = json.loads(_run(capsys, "docs", "list", "--json")[1])
    # A new collection embeds with the default embedder (all-MiniLM-L6-v2) unless told otherwise.
    assert [(c["name"], c["ready"], c["embedder"]) for c in listed] == [("Tax 2026", 2, "default")]
    assert _run(capsys, "docs", "list")[1] == f"Tax 2026: 2 files, {listed[0]['passages']} passages (BM25 + vectors)\n"
    found = json.loads(_run(capsys, "docs", "search", "Tax 2026", "plumber invoice", "--json")[1])
    assert found[0]["n"] == 1 and Path(found[0]["path"]).name == "receipts.md"
    again = json.loads(_run(capsys, "docs", "reindex", "Tax 2026", "--json")[1])
    assert again["indexed"] == [] and again["unchanged"] == 2
    status, out, err = _run(
        capsys,
        "chat",
        "--backend",
        _script(tmp_path, "31 July [1].", "Yes."),
        "--events",
        "--docs",
        "Tax 2026",
        "When is the deadline?",
    )
    assert status == 0, err
    assert Path(_lines(out)[0]["sources"][0]["path"]).name == "letter.pdf"
    # the conversation remembers its collection
    out = _run(capsys, "chat", "--backend", _script(tmp_path, "Yes."), "--events", "-c", "And the plumber invoice?")[1]
    assert Path(_lines(out)[0]["sources"][0]["path"]).name == "receipts.md"
    assert _run(capsys, "docs", "remove", "Tax 2026", "--json")[0] == 0
    assert json.loads(_run(capsys, "docs", "list", "--json")[1]) == []
    status, _, err = _run(capsys, "docs", "search", "Tax 2026", "x")
    assert status == 2 and err == "ember: no collection named 'Tax 2026' (see `ember docs list`)\n"


@pytest.mark.slow  # loads the default embedder (it passed unmarked only after a test that had loaded it)
def test_an_unreadable_file_in_a_collection_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scanned_pdf(tmp_path / "scan.pdf")
    (tmp_path / "ok.md").write_text("Fine.")
    status, out, err = _run(capsys, "docs", "add", "Mixed", str(tmp_path / "scan.pdf"), str(tmp_path / "ok.md"))
    assert status == 0
    assert err.startswith("ember: scan.pdf: has no text layer") and len(err.splitlines()) == 1
    assert out == "Mixed: 1 indexed, 0 unchanged, 1 could not be read (1 passages, 0 pages)\n"


@pytest.mark.slow
def test_the_real_model_answers_from_an_attached_pdf(tmp_path: Path, ember_home: Path) -> None:
    pdf = write_pdf(tmp_path / "facts.pdf", ["The capital of the fictional land of Zorbia is Quillton."])
    result = ember(
        "chat",
        "--temperature",
        "0",
        "--max-tokens",
        "24",
        "--events",
        "--attach",
        str(pdf),
        "What is the capital of Zorbia?",
        home=ember_home,
    )
    assert result.returncode == 0, result.stderr
    events = _lines(result.stdout)
    assert events[0]["type"] == "sources" and events[0]["sources"][0]["page"] == 1
    assert "".join(e["text"] for e in events if e["type"] == "content").strip()
    assert events[-1]["type"] == "done"


def test_one_file_and_one_passage_are_counted_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot.\n")
    assert _run(capsys, "docs", "add", "Keys", str(note), "--embedder", "none")[0] == 0
    assert _run(capsys, "docs", "list")[1] == "Keys: 1 file, 1 passage (BM25)\n"


class _QuestionsApart:
    """A scripted embedder whose questions (ending in '?') point away from every passage."""

    name = "apart"

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.asarray([[0.0, 1.0] if t.endswith("?") else [1.0, 0.0] for t in texts], dtype=np.float32)


def test_search_with_nothing_relevant_says_the_line_chat_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot.\n")
    line = "No passage in 'Keys' matches this question"
    assert _run(capsys, "docs", "add", "Keys", str(note), "--embedder", "none")[0] == 0
    # BM25 alone: no word in common.
    assert _run(capsys, "docs", "search", "Keys", "Which train leaves at noon?") == (0, line + "\n", "")
    # With vectors: "key" is a shared word, but the embedder finds the passage unrelated (the cut-off).
    monkeypatch.setattr("desktop.cli.cmd_docs.shared_embedder", lambda spec: _QuestionsApart())
    monkeypatch.setattr("engine.session.turn_documents.shared_embedder", lambda spec: _QuestionsApart())
    assert _run(capsys, "docs", "add", "Keys", str(note), "--embedder", "default")[0] == 0
    assert _run(capsys, "docs", "search", "Keys", "What key signature is the sonata in?") == (0, line + "\n", "")
    assert "under the blue pot" in _run(capsys, "docs", "search", "Keys", "spare key")[1]  # not a question: near
    # `ember chat --docs` says the same line.
    status, out, err = _run(
        capsys, "chat", "--backend", _script(tmp_path, "I don't know."), "--docs", "Keys", "What key is the sonata in?"
    )
    assert status == 0 and out == "I don't know.\n" and f"ember: {line}\n" in err


@pytest.mark.slow  # the real default embedder
def test_removing_a_root_drops_its_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "one.md").write_text("Apples grow on trees.")
    (b / "two.md").write_text("Bananas grow in bunches.")
    assert _run(capsys, "docs", "add", "Fruit", str(a), str(b))[0] == 0
    status, out, _ = _run(capsys, "docs", "remove", "Fruit", str(b), "--json")
    assert status == 0 and json.loads(out)["removed_files"] == 1
    listing = json.loads(_run(capsys, "docs", "list", "Fruit", "--json")[1])
    assert [Path(f["path"]).name for f in listing["file_list"]] == ["one.md"] and listing["roots"] == [str(a)]
    status, _, err = _run(capsys, "docs", "remove", "Fruit", str(tmp_path / "elsewhere"))
    assert status == 1 and err.startswith("ember: elsewhere: not in collection 'Fruit'")


def test_ctrl_c_asks_the_indexer_to_stop_instead_of_killing_it() -> None:
    import signal

    from desktop.cli.cmd_docs import _cancel_on_sigint  # pyright: ignore[reportPrivateUsage]

    with _cancel_on_sigint() as cancelled:
        assert not cancelled.cancelled
        signal.raise_signal(signal.SIGINT)  # the first Ctrl+C: a request, not an exception
        assert cancelled.cancelled
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # the second one stops at once
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
