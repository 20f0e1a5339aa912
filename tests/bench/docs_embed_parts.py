"""Where embedding's time goes, every variant side by side on the same passages in one run (issue #50).

    uv run --no-sync python -m tests.bench.docs_embed_parts [--passages 32] [--rounds 3] [--json OUT]

The held-out corpus is chunked as the defaults chunk it (each passage's indexed text, heads and
all), and a sample of its passages is embedded by each variant in turn, round after round
(interleaved, so a change in the machine's load falls on every variant alike). Reported per
variant: passages/s and characters/s (medians over the rounds), the ratio to `today` (f16 reading
512 tokens, two passages a call: the path before issue #50), and the vectors' cosine to f16's at
the same window (min, mean). `tokenize` is the tokenizer alone, on the same texts. The machine is
shared: only the ratios of one run mean anything.
"""

from __future__ import annotations

# isort: off
import engine.backends.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import json
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

from engine.docs.default_q8 import default_q8
from engine.docs.embed import DEFAULT_WINDOW, LlamaEmbedder
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from models.library.default_embedder import default_embedder_path
from tests.bench import docs_heldout_corpus


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


def load_flash(path: Path, window: int) -> LlamaEmbedder:
    """The default's load with llama.cpp's flash attention on (llama-cpp-python's default is off)."""
    import llama_cpp

    from engine.backends.llama_plain import new_llama

    llama = new_llama(
        model_path=str(path),
        embedding=True,
        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED,
        n_ctx=window,
        n_batch=window,
        n_ubatch=window,
        n_threads=1,
        n_threads_batch=1,
        flash_attn=True,
        verbose=False,
    )
    return LlamaEmbedder(llama, f"{path} (flash)", window)


def embed_all(variant: Variant, texts: Sequence[str]) -> np.ndarray[Any, Any]:
    variant.embedder.fixed_threads = variant.threads
    rows = [variant.embedder.embed(texts[i : i + variant.group]) for i in range(0, len(texts), variant.group)]
    return np.concatenate(rows)


def tokenize_all(embedder: LlamaEmbedder, texts: Sequence[str]) -> None:
    llama: Any = embedder.llama
    for text in texts:
        llama.tokenize(text.encode("utf-8", "ignore"))


def timed(work: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    out = work()
    return time.perf_counter() - started, out


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
        q8 = default_q8(f16)
        models = {
            "f16-512": LlamaEmbedder.load(f16, max_tokens=512),
            "f16-256": LlamaEmbedder.load(f16, max_tokens=DEFAULT_WINDOW),
            "q8-256": LlamaEmbedder.load(q8, max_tokens=DEFAULT_WINDOW),
            "q8-128": LlamaEmbedder.load(q8, max_tokens=128),
            "q8-512": LlamaEmbedder.load(q8, max_tokens=512),
            "q8-256-flash": load_flash(q8, DEFAULT_WINDOW),
        }
        if args.q4:
            from engine.backends.requantize import requantize

            q4 = tmp / "q4_0.gguf"
            requantize(f16, q4, "Q4_0")
            models["q4-256"] = LlamaEmbedder.load(q4, max_tokens=DEFAULT_WINDOW)
        variants = [
            Variant("today (f16, 512, 2 a call)", models["f16-512"], 2),
            Variant("f16, 256, 8 a call", models["f16-256"], 8),
            Variant("now (q8, 256, 8 a call)", models["q8-256"], 8),
            Variant("q8, 256, 1 a call", models["q8-256"], 1),
            Variant("q8, 256, 32 a call", models["q8-256"], 32),
            Variant("q8, 256, 8 a call, 2 threads", models["q8-256"], 8, 2),
            Variant("q8, 512, 8 a call", models["q8-512"], 8),
            Variant("q8, 128, 8 a call", models["q8-128"], 8),
            Variant("q8, 256, 8 a call, flash attention", models["q8-256-flash"], 8),
        ]
        if args.q4:
            variants.append(Variant("q4_0, 256, 8 a call", models["q4-256"], 8))
        if args.only:
            keep = {variants[0].name, "f16, 256, 8 a call", *args.only}
            variants = [v for v in variants if v.name in keep]
        chars = sum(len(t) for t in texts)
        seconds: dict[str, list[float]] = {v.name: [] for v in variants}
        seconds["tokenize"] = []
        vectors: dict[str, Any] = {}
        load = [os.getloadavg()[0]]
        for r in range(args.rounds):
            for v in variants:
                s, out = timed(lambda v=v: embed_all(v, texts))
                seconds[v.name].append(s)
                vectors[v.name] = out
            s, _ = timed(lambda: tokenize_all(models["q8-256"], texts))
            seconds["tokenize"].append(s)
            load.append(os.getloadavg()[0])
            say(f"round {r + 1}: " + ", ".join(f"{k} {statistics.median(x):.2f}s" for k, x in seconds.items()))
        base = statistics.median(seconds[variants[0].name])
        reference = {
            512: vectors[variants[0].name],
            256: vectors["f16, 256, 8 a call"],
            128: vectors["f16, 256, 8 a call"],
        }
        rows: dict[str, Any] = {}
        for key, xs in seconds.items():
            s = statistics.median(xs)
            row: dict[str, Any] = {
                "seconds": round(s, 3),
                "passages_per_s": round(len(texts) / s, 2),
                "chars_per_s": round(chars / s),
                "ratio_to_today": round(base / s, 2),
            }
            if key in vectors:
                window = 512 if "512" in key else 128 if "128" in key else 256
                cos = np.sum(vectors[key] * reference[window], axis=1)
                row["cosine_to_f16_min"] = round(float(cos.min()), 4)
                row["cosine_to_f16_mean"] = round(float(cos.mean()), 4)
            rows[key] = row
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "passages": len(texts),
            "chars": chars,
            "rounds": args.rounds,
            "load": [round(x, 1) for x in load],
            "variants": rows,
        }
        for model in models.values():
            model.close()
    text = json.dumps(result, indent=2)
    if args.json is not None:
        args.json.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
