"""Retrieval quality and embedding speed on real text (`ember bench`; figures reported, never asserted).

The corpus is the standard library's own docstrings (`docs_stdlib`), the questions are
`docs_questions` (keyword and paraphrase). Each question is asked of the same collection with
BM25 alone and with the default embedder's vectors fused in (hybrid); a question's rank is
where its answer file first appears among the distinct files of the top 10 passages.

- `docs_recall_at_1`, `docs_recall_at_5`, `docs_mrr`: hybrid, all questions (the default);
  `…_bm25` and `…_hybrid`, each also `…_keyword` / `…_paraphrase`;
- `docs_keyword_recall_at1`, `docs_paraphrase_recall_at5`: issue #50's names for two of them;
- `docs_embed_passages_per_s`: the default embedder on the corpus's passages (beside
  `docs_embed_f16_passages_per_s`, the path before issue #50 on the same passages, and
  `docs_embed_vs_f16_ratio`), and
  `docs_embed_chat_passages_per_s` the chat model (mean pooling, as Ember's only embedder was
  before) on the first few of the same passages, in the same run; their ratio;
- `docs_search_ms`: one hybrid search (query embedded, BM25, vectors, fused) in a warm process;
- `docs_ttft_ms`: the chat model's time to first token for a question with the collection's
  passages (as `ember chat --docs` builds it), against `docs_ttft_plain_ms` for the same question alone.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.cancel import CancelToken
from engine.docs.embed import DEFAULT_EMBEDDER, Embedder, LlamaEmbedder, embed_in_groups, shared_embedder
from engine.docs.index import Collection, DocIndex
from engine.docs.indexer import index_collection
from engine.docs.sources import CollectionSource
from models.library.default_embedder import default_embedder_path
from tests.bench.docs_questions import KEYWORD, PARAPHRASE
from tests.bench.docs_stdlib import write_corpus

DEPTH = 10  # passages looked at per question
CHAT_PASSAGES = 6  # the chat model is slow: a few passages give its rate


def ranks(
    index: DocIndex, coll: Collection, embedder: Embedder | None, questions: Sequence[tuple[str, str]]
) -> list[int | None]:
    """Each question's answer file's rank among the distinct files found (None: not in the top passages)."""
    source = CollectionSource(index, coll, embedder)
    found: list[int | None] = []
    for question, answer in questions:
        files = list(dict.fromkeys(Path(r.path).stem for r in source.search(question, DEPTH)))
        found.append(files.index(answer) + 1 if answer in files else None)
    return found


def scores(found: Sequence[int | None]) -> dict[str, float]:
    n = len(found) or 1
    return {
        "recall_at_1": round(sum(r == 1 for r in found) / n, 3),
        "recall_at_5": round(sum(r is not None and r <= 5 for r in found) / n, 3),
        "mrr": round(sum(1 / r for r in found if r) / n, 3),
    }


def measure_retrieval(chat_model: Path | None, say: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ember-bench-retrieval-") as tmp:
        folder = Path(tmp) / "stdlib"
        write_corpus(folder)
        with DocIndex.open(Path(tmp) / "r.sqlite3") as index:
            coll = index.create_collection("stdlib", DEFAULT_EMBEDDER)
            index.add_roots(coll, [folder])
            embedder = shared_embedder(DEFAULT_EMBEDDER)
            say("docs: indexing the standard-library corpus with the default embedder")
            index_collection(index, coll, embedder=embedder)
            passages = [str(r[0]) for r in index.conn.execute("SELECT text FROM chunks ORDER BY id")]
            out: dict[str, Any] = {
                "docs_retrieval_files": len(list(folder.iterdir())),
                "docs_retrieval_passages": len(passages),
                "docs_retrieval_questions": len(KEYWORD) + len(PARAPHRASE),
            }
            out |= _quality(index, coll, embedder)
            out |= _search_ms(index, coll, embedder)
            if chat_model is not None:
                say("docs: time to first token with and without the passages")
                out |= _ttft(chat_model, CollectionSource(index, coll, embedder))
        out |= _embed_rates(embedder, passages, chat_model, say)
    return out


def _quality(index: DocIndex, coll: Collection, embedder: Embedder) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, used in (("bm25", None), ("hybrid", embedder)):
        keyword, paraphrase = ranks(index, coll, used, KEYWORD), ranks(index, coll, used, PARAPHRASE)
        for part, found in (("", keyword + paraphrase), ("_keyword", keyword), ("_paraphrase", paraphrase)):
            out |= {f"docs_{key}_{mode}{part}": value for key, value in scores(found).items()}
    out |= {f"docs_{key}": out[f"docs_{key}_hybrid"] for key in ("recall_at_1", "recall_at_5", "mrr")}
    # issue #50's names (tests/bench/docs_recall.py reports them on the Debian and held-out corpora)
    out["docs_keyword_recall_at1"] = out["docs_recall_at_1_hybrid_keyword"]
    out["docs_paraphrase_recall_at5"] = out["docs_recall_at_5_hybrid_paraphrase"]
    return out


def _search_ms(index: DocIndex, coll: Collection, embedder: Embedder) -> dict[str, Any]:
    source = CollectionSource(index, coll, embedder)
    source.search("warm up", 8)
    times: list[float] = []
    for question, _ in PARAPHRASE + KEYWORD:
        started = time.perf_counter()
        source.search(question, 8)
        times.append((time.perf_counter() - started) * 1000)
    return {"docs_search_ms": round(statistics.median(times), 2)}


def _embed_rates(
    embedder: Embedder, passages: list[str], chat_model: Path | None, say: Callable[[str], None]
) -> dict[str, Any]:
    sample = passages[:64]
    started = time.perf_counter()
    embed_in_groups(embedder, sample, CancelToken())
    rate = len(sample) / (time.perf_counter() - started)
    out: dict[str, Any] = {
        "docs_embed_passages_per_s": round(rate, 2),
        "docs_embed_model": "all-MiniLM-L6-v2",
        "docs_embed_format": Path(embedder.name).name,
    }
    # Before issue #50, side by side: f16, llama.cpp reading 512 tokens, two passages a call.
    f16 = LlamaEmbedder.load(default_embedder_path(), max_tokens=512, flash_attn=False)
    try:
        started = time.perf_counter()
        for at in range(0, len(sample), 2):
            f16.embed(sample[at : at + 2])
        f16_rate = len(sample) / (time.perf_counter() - started)
    finally:
        f16.close()
    out |= {"docs_embed_f16_passages_per_s": round(f16_rate, 2), "docs_embed_vs_f16_ratio": round(rate / f16_rate, 2)}
    if chat_model is not None:
        say("docs: the chat model as embedder, on the same passages")
        chat = LlamaEmbedder.load(chat_model)
        try:
            few = sample[:CHAT_PASSAGES]
            started = time.perf_counter()
            chat.embed(few)
            chat_rate = len(few) / (time.perf_counter() - started)
        finally:
            chat.close()
        out |= {
            "docs_embed_chat_passages_per_s": round(chat_rate, 3),
            "docs_embed_vs_chat_ratio": round(rate / chat_rate, 1),
            "docs_embed_chat_model": chat_model.name,
        }
    return out


TTFT_QUESTION = "How can I always pull out the smallest item of a growing collection cheaply?"
TTFT_CTX = 4096


def _ttft(chat_model: Path, source: CollectionSource) -> dict[str, Any]:
    from engine.backends.base import Message, Sampling, make_request
    from engine.docs.fit import with_documents
    from engine.events import TurnDone
    from engine.llama.llama import LlamaBackend
    from engine.turns.runner import TurnRunner

    backend = LlamaBackend(chat_model, n_ctx=TTFT_CTX)
    try:

        def first_token_ms(messages: list[Message]) -> float:
            request = make_request(messages, sampling=Sampling.greedy(), max_tokens=1)
            done = [e for e in TurnRunner(backend).run(request, CancelToken()) if isinstance(e, TurnDone)]
            return round(done[-1].stats.ttft_ms, 1) if done else float("nan")

        plain: list[Message] = [{"role": "user", "content": TTFT_QUESTION}]
        alone = first_token_ms(plain)
        with_docs, ctx = with_documents(backend, plain, [source], 512)
        return {
            "docs_ttft_ms": first_token_ms(with_docs),
            "docs_ttft_plain_ms": alone,
            "docs_ttft_passages": len(ctx.passages),
            "docs_ttft_prompt_tokens": backend.count_prompt_tokens(with_docs),
            "docs_ttft_n_ctx": TTFT_CTX,
        }
    finally:
        backend.close()
