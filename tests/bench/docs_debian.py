"""Issue #39's "Why", measured again: Debian's licences and package docs, BM25 alone against hybrid.

    uv run --no-sync python -m tests.bench.docs_debian [--json OUT] [--no-chat]

Not part of `ember bench` (the corpus is whatever this machine has under /usr/share, so the
figures are this machine's, not a fixed set's). One run, side by side:

- indexing the corpus with BM25 alone (median of 3), and with the default embedder (all-MiniLM);
- recall@1, recall@5 and MRR of the 25 keyword and 25 paraphrase questions
  (`docs_debian_questions`), BM25 alone and hybrid; the licence questions' recall@1 for both;
- five questions through `ember chat --docs` itself (in this process, `--events`, greedy) on the
  built-in SmolLM2: is the answer file first in the sources, does the answer cite it, does it cite
  a number it was not given, its prompt tokens, time to first token, and reply length against the cap.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
from engine.docs.index import DocIndex, default_path
from engine.docs.indexer import index_collection
from tests.bench.docs_debian_corpus import write_corpus
from tests.bench.docs_debian_questions import KEYWORD, PARAPHRASE
from tests.bench.docs_retrieval import ranks, scores
from tests.bench.report import dated, emit, say

COLLECTION = "debian"
CHAT_QUESTIONS: list[tuple[str, str]] = [
    (
        "Why does pip refuse to install packages system-wide here, and what should I use instead?",
        "python3.11-README.venv",
    ),
    (
        "How do I stop services from starting when I install packages inside a chroot?",
        "init-system-helpers-README.policy-rc.d",
    ),
    ("Can root log in over ssh with a password on a new installation?", "openssh-client-README.Debian"),
    ("Is zlib thread-safe?", "zlib1g-dev-FAQ"),
    ("How do I add my own CA certificate so that programs trust it?", "ca-certificates-README.Debian"),
]
_CITE = re.compile(r"\[(\d{1,4})\]")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bm25_indexing_s(tmp: Path, folder: Path, runs: int = 3) -> float:
    times: list[float] = []
    for run in range(runs):
        with DocIndex.open(tmp / f"bm25-{run}.sqlite3") as index:
            coll = index.create_collection(COLLECTION)
            index.add_roots(coll, [folder])
            started = time.perf_counter()
            index_collection(index, coll)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def retrieval(folder: Path) -> dict[str, Any]:
    """The collection `ember chat --docs debian` will use, indexed with the default embedder; both rankings."""
    out: dict[str, Any] = {}
    started = time.perf_counter()
    embedder = shared_embedder(DEFAULT_EMBEDDER)  # converted from its wheel on first use, then loaded
    out["embedder_ready_s"] = round(time.perf_counter() - started, 2)
    with DocIndex.open(default_path()) as index:
        coll = index.create_collection(COLLECTION, DEFAULT_EMBEDDER)
        index.add_roots(coll, [folder])
        say("indexing with the default embedder (all-MiniLM-L6-v2)")
        started = time.perf_counter()
        report = index_collection(index, coll, embedder=embedder)
        out["hybrid_indexing_s"] = round(time.perf_counter() - started, 1)
        out["passages"] = report.chunks
        out["files"] = len(report.indexed)
        for mode, used in (("bm25", None), ("hybrid", embedder)):
            say(f"asking the 50 questions, {mode}")
            keyword, paraphrase = ranks(index, coll, used, KEYWORD), ranks(index, coll, used, PARAPHRASE)
            out[f"{mode}_keyword"] = scores(keyword)
            out[f"{mode}_paraphrase"] = scores(paraphrase)
            out[f"{mode}_all"] = scores(keyword + paraphrase)
            out[f"{mode}_paraphrase_missed"] = sum(r is None for r in paraphrase)
            asked = KEYWORD + PARAPHRASE
            found = keyword + paraphrase
            licence = [r for (_, a), r in zip(asked, found, strict=True) if a.startswith("licence-")]
            out[f"{mode}_licence"] = scores(licence) | {"questions": len(licence)}
            out[f"{mode}_ranks"] = {q: r for (q, _), r in zip(asked, found, strict=True)}
    return out


def chat_once(question: str, collection: str = COLLECTION) -> dict[str, Any]:
    """One `ember chat --docs COLLECTION --events --temperature 0 --no-history QUESTION`, in this process."""
    from desktop.cli.main import main as cli

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli(["chat", "--docs", collection, "--no-history", "--events", "--temperature", "0", question])
    wall = time.perf_counter() - started
    events = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return {"status": status, "wall_s": wall, "events": events, "stderr": err.getvalue()[-500:]}


def answer_figures(run: dict[str, Any], answer_file: str) -> dict[str, Any]:
    from desktop.core.citations import unsupported_citations

    events: list[dict[str, Any]] = run["events"]
    sources = next((e["sources"] for e in events if e["type"] == "sources"), [])
    text = "".join(e["text"] for e in events if e["type"] == "content")
    stats = next((e["stats"] for e in events if e["type"] == "done"), {})
    stems = {int(s["n"]): Path(s["path"]).stem for s in sources}
    cited = list(dict.fromkeys(int(m) for m in _CITE.findall(text)))
    # The sources event sent again after the answer: each paragraph's supporting passages (issue #50)
    final = next((e for e in reversed(events) if e["type"] == "sources" and "paragraphs" in e), {})
    paragraphs = final.get("paragraphs", [])
    supported = list(dict.fromkeys(n for p in paragraphs for n in p["sources"]))
    # What the front ends show as the answer's origin: the supporting passages, else all it was given
    origin = final.get("answer_from", {"basis": None, "sources": []})
    return {
        "status": run["status"],
        "sources": len(sources),
        "first_source": stems.get(1),
        "right_file_first": stems.get(1) == answer_file,
        "right_file_in_sources": answer_file in stems.values(),
        "cited": cited,
        "cited_right_file": any(stems.get(n) == answer_file for n in cited),
        "paragraph_sources": [p["sources"] for p in paragraphs],
        "shown_sources": [stems.get(n) for n in supported],
        "shown_right_file": any(stems.get(n) == answer_file for n in supported),
        "answer_from_basis": origin["basis"],
        "answer_from": [stems.get(n) for n in origin["sources"]],
        "answer_from_right_file": any(stems.get(n) == answer_file for n in origin["sources"]),
        # the same check `ember chat` prints after a plain answer, and the window marks
        "unsupported": unsupported_citations(text, set(stems)),
        "prompt_tokens": stats.get("prompt_tokens"),
        "ttft_s": round(stats.get("ttft_ms", 0.0) / 1000, 1),
        "reply_tokens": stats.get("tokens"),
        "finish_reason": stats.get("finish_reason"),
        "wall_s": round(run["wall_s"], 1),
        "answer": text,
        "stderr": run["stderr"],
    }


def chat(questions: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    for question, answer_file in questions:
        say(f"ember chat --docs: {question}")
        figures.append(
            {"question": question, "answer_file": answer_file} | answer_figures(chat_once(question), answer_file)
        )
        say(f"  -> {figures[-1]['reply_tokens']} tokens, first token {figures[-1]['ttft_s']} s")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #39's figures measured again on Debian's licences and docs")
    p.add_argument("--json", type=Path, default=None, help="also write every figure here")
    p.add_argument("--no-chat", action="store_true", help="leave out the five chat answers")
    args = p.parse_args(argv)
    result: dict[str, Any] = dated(load_start=load_average())
    with tempfile.TemporaryDirectory(prefix="ember-bench-debian-") as name:
        tmp = Path(name)
        os.environ["EMBER_HOME"] = str(tmp / "home")  # a fresh install's data folder: collection, history off
        folder = tmp / "corpus"
        files, missing = write_corpus(folder)
        result |= {"corpus_files": len(files), "corpus_missing": missing}
        say(f"corpus: {len(files)} files; indexing with BM25 alone")
        result["bm25_indexing_s"] = round(bm25_indexing_s(tmp, folder), 2)
        result |= retrieval(folder)
        result["load_after_retrieval"] = load_average()
        if not args.no_chat:
            result["chat"] = chat(CHAT_QUESTIONS)
    result["load_end"] = load_average()
    return emit(result, args.json, {k: v for k, v in result.items() if not k.endswith("_ranks")})


if __name__ == "__main__":
    raise SystemExit(main())
