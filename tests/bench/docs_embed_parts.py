"""Where embedding's time goes, every variant side by side on the same passages in one run (issue #50).

    uv run --no-sync python -m tests.bench.docs_embed_parts [--passages 32] [--rounds 3] [--json OUT]

The held-out corpus is chunked as the defaults chunk it (each passage's indexed text, heads and
all), and a sample of its passages is embedded by each variant in turn, round after round
(interleaved, so a change in the machine's load falls on every variant alike). Reported per
variant: passages/s and characters/s (medians over the rounds), CPU seconds per passage (the
process's, all its threads: other load distorts it less than the wall clock), the ratio to
`today` (f16 reading 512 tokens, two passages a call, no flash attention: the path before issue
#50) and to the Q8_0 default that came before the per-CPU format, and the vectors' cosine to
f16's at the same window (min, mean). `tokenize` is the tokenizer alone, on the same texts. The
machine is shared: only the ratios of one run mean anything.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.docs.default_format import cpu_format, default_copy
from engine.docs.embed import DEFAULT_WINDOW, LlamaEmbedder
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from models.library.default_embedder import default_embedder_path
from tests.bench import docs_heldout_corpus
from tests.bench.report import emit

Q8_DEFAULT = "the Q8_0 default before (q8, 256, 8 a call)"


@dataclass
class Variant:
    name: str
    embedder: LlamaEmbedder
    group: int  # passages per call
    threads: int = 1


def say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class Recording:
    """An embedder that keeps the texts the indexer would embed (and returns zeros)."""

    name = "recording"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return np.zeros((len(texts), 4), dtype=np.float32)


def passages(tmp: Path, n: int) -> list[str]:
    """`n` passages of the held-out corpus, evenly spread, as the defaults index them."""
    folder = tmp / "heldout"
    docs_heldout_corpus.write_corpus(folder)
    recording = Recording()
    with DocIndex.open(tmp / "p.sqlite3") as index:
        coll = index.create_collection("p")
        index.add_roots(coll, [folder])
        index_collection(index, coll, embedder=recording)
    texts = recording.texts
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def embed_all(variant: Variant, texts: Sequence[str]) -> np.ndarray[Any, Any]:
    variant.embedder.fixed_threads = variant.threads
    rows = [variant.embedder.embed(texts[i : i + variant.group]) for i in range(0, len(texts), variant.group)]
    return np.concatenate(rows)


def tokenize_all(embedder: LlamaEmbedder, texts: Sequence[str]) -> None:
    llama: Any = embedder.llama
    for text in texts:
        llama.tokenize(text.encode("utf-8", "ignore"))


def timed(work: Callable[[], object]) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds (this process, all its threads) and the result."""
    started, cpu = time.perf_counter(), time.process_time()
    out = work()
    return time.perf_counter() - started, time.process_time() - cpu, out


def _row(
    key: str,
    seconds: dict[str, list[float]],
    cpu: dict[str, list[float]],
    vectors: dict[str, Any],
    n: int,
    chars: int,
    today: str,
) -> dict[str, Any]:
    """One variant's medians, its ratios to today's path and to the Q8_0 default, its cosine to f16."""
    wall = statistics.median(seconds[key])
    row: dict[str, Any] = {
        "seconds": round(wall, 3),
        "passages_per_s": round(n / wall, 2),
        "chars_per_s": round(chars / wall),
        "ratio_to_today": round(statistics.median(seconds[today]) / wall, 2),
    }
    if key not in vectors:
        return row
    used = statistics.median(cpu[key])
    per_round = [t / s for t, s in zip(seconds[today], seconds[key], strict=True)]
    row |= {
        "ratio_to_today_rounds": [round(x, 2) for x in per_round],
        "ratio_to_q8_default": round(statistics.median(seconds[Q8_DEFAULT]) / wall, 2),
        "cpu_ms_per_passage": round(1000 * used / n, 1),
        "cpu_ratio_to_today": round(statistics.median(cpu[today]) / used, 2),
        "cpu_ratio_to_q8_default": round(statistics.median(cpu[Q8_DEFAULT]) / used, 2),
    }
    reference = vectors[today] if "512" in key else vectors["f16, 256, 8 a call"]
    cos = np.sum(vectors[key] * reference, axis=1)
    return row | {"cosine_to_f16_min": round(float(cos.min()), 4), "cosine_to_f16_mean": round(float(cos.mean()), 4)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: where embedding's time goes, side by side")
    p.add_argument("--passages", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--q4", action="store_true", help="also Q4_0 (a conversion of a few seconds)")
    p.add_argument("--only", nargs="+", default=None, help="these variants (and today) alone")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ember-bench-embed-") as name:
        tmp = Path(name)
        os.environ.setdefault("EMBER_HOME", str(tmp / "home"))
        texts = passages(tmp, args.passages)
        f16 = default_embedder_path()
        fmt = cpu_format()
        q8 = default_copy(f16, "Q8_0")
        models = {
            "today": LlamaEmbedder.load(f16, max_tokens=512, flash_attn=False),
            "f16-256": LlamaEmbedder.load(f16, max_tokens=DEFAULT_WINDOW),
            "q8-256": LlamaEmbedder.load(q8, max_tokens=DEFAULT_WINDOW),
            "bf16-256": LlamaEmbedder.load(default_copy(f16, "BF16"), max_tokens=DEFAULT_WINDOW),
            "q8-512": LlamaEmbedder.load(q8, max_tokens=512),
        }
        if args.q4:
            from engine.rewrite.requantize import requantize

            q4 = tmp / "q4_0.gguf"
            requantize(f16, q4, "Q4_0")
            models["q4-256"] = LlamaEmbedder.load(q4, max_tokens=DEFAULT_WINDOW)
        now = {"F16": "f16-256", "Q8_0": "q8-256", "BF16": "bf16-256"}[fmt]
        variants = [
            Variant("today (f16, 512, 2 a call, no flash attention)", models["today"], 2),
            Variant("f16, 256, 8 a call", models["f16-256"], 8),
            Variant(Q8_DEFAULT, models["q8-256"], 8),
            Variant(f"now ({fmt}: this CPU's format, 256, 8 a call)", models[now], 8),
            Variant(f"now ({fmt}), 256, 1 a call", models[now], 1),
            Variant(f"now ({fmt}), 256, 32 a call", models[now], 32),
            Variant(f"now ({fmt}), 256, 8 a call, 2 threads", models[now], 8, 2),
            Variant("q8, 512, 8 a call", models["q8-512"], 8),
        ]
        if args.q4:
            variants.append(Variant("q4_0, 256, 8 a call", models["q4-256"], 8))
        if args.only:
            keep = {variants[0].name, "f16, 256, 8 a call", Q8_DEFAULT, *args.only}
            variants = [v for v in variants if v.name in keep]
        chars = sum(len(t) for t in texts)
        seconds: dict[str, list[float]] = {v.name: [] for v in variants}
        cpu: dict[str, list[float]] = {v.name: [] for v in variants}
        seconds["tokenize"] = []
        vectors: dict[str, Any] = {}
        load = [os.getloadavg()[0]]
        for r in range(args.rounds):
            for v in variants:
                wall, used, out = timed(lambda v=v: embed_all(v, texts))
                seconds[v.name].append(wall)
                cpu[v.name].append(used)
                vectors[v.name] = out
            wall, _, _ = timed(lambda: tokenize_all(models["q8-256"], texts))
            seconds["tokenize"].append(wall)
            load.append(os.getloadavg()[0])
            say(f"round {r + 1}: " + ", ".join(f"{k} {statistics.median(x):.2f}s" for k, x in seconds.items()))
        rows = {key: _row(key, seconds, cpu, vectors, len(texts), chars, variants[0].name) for key in seconds}
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "format": fmt,
            "passages": len(texts),
            "chars": chars,
            "rounds": args.rounds,
            "load": [round(x, 1) for x in load],
            "variants": rows,
        }
        for model in models.values():
            model.close()
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
