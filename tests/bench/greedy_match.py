"""`serve_greedy_match_rate`: Ember's greedy API turns against raw llama-cpp-python's greedy decoding.

For each prompt, the token ids Ember generates for an API request (`Request(verbatim=True)` at
`temperature: 0` with OpenAI's neutral defaults, as `ember serve` builds it) are compared with
`Llama.generate` at temperature 0 over the same prompt tokens, on a `Llama` of the same build,
context, batch size, threads and flash-attention setting. Ember runs with and without
prompt-lookup drafting (which verifies drafted tokens in one batch).

    python -m tests.bench.greedy_match [--model GGUF] [--tokens 48] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.backends.base import Request, Sampling, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece
from engine.llama.llama import LlamaBackend

PROMPTS = (
    "Name three colors.",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "Count from 1 to 10.",
    "What is 12 times 12?",
    "Give me a tip for learning to cook.",
    "Who wrote Romeo and Juliet?",
    "Translate 'good morning' to Spanish.",
    "List four planets.",
    "Describe a cat in two sentences.",
    "Why is the sky blue?",
    "Suggest a name for a pet dog.",
    "What is the boiling point of water?",
    "Write one sentence about autumn.",
    "How many days are in a leap year?",
    "Name a famous painter.",
    "What does a compiler do?",
    "Give three words that rhyme with light.",
    "Tell me a short fact about the moon.",
)
# What a request leaving everything out but `temperature: 0` gets (desktop.serve.wire.NEUTRAL_SAMPLING).
API_GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=1.0, seed=None)


def ember_tokens(backend: LlamaBackend, prompt: str, n: int, info: StreamInfo, *, warm: bool = False) -> list[int]:
    """`warm`: the KV cache keeps the previous request's prefix (the template's system prompt), as a server's does."""
    request = Request(({"role": "user", "content": prompt},), sampling=API_GREEDY, max_tokens=n, verbatim=True)
    if not warm:
        backend.reset_cache()
    pieces = backend.stream(request, CancelToken(), info)
    return [p.token_id for p in pieces if isinstance(p, Piece) and p.token_id is not None]


def raw_tokens(llm: Any, prompt_ids: list[int], n: int, stop: set[int]) -> list[int]:
    llm.reset()
    out: list[int] = []
    for token in llm.generate(prompt_ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        if token in stop or len(out) >= n:
            break
        out.append(int(token))
    return out


def measure(model: Path, n: int = 48, n_ctx: int = 2048, prompts: tuple[str, ...] = PROMPTS) -> dict[str, Any]:
    import llama_cpp

    backend = LlamaBackend(model, n_ctx=n_ctx)
    llm = llama_cpp.Llama(
        str(model),
        n_ctx=backend.n_ctx,
        n_batch=min(512, backend.n_ctx),
        n_threads=backend.n_threads,
        n_threads_batch=backend.n_threads,
        flash_attn=True,
        n_gpu_layers=backend.n_gpu_layers,
        verbose=False,
    )
    try:
        vocab: Any = llama_cpp.llama_model_get_vocab(llm.model)
        stop = {t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}
        rows: list[dict[str, Any]] = []
        for prompt in prompts:
            ids, _ = backend.prompt_tokens(Request(({"role": "user", "content": prompt},), verbatim=True))
            raw = raw_tokens(llm, ids, n, stop)
            backend.prompt_lookup = False
            plain = ember_tokens(backend, prompt, n, StreamInfo())
            backend.prompt_lookup = True
            info = StreamInfo()
            drafted = ember_tokens(backend, prompt, n, info)
            warm = ember_tokens(backend, PROMPTS[-1] if prompt != PROMPTS[-1] else PROMPTS[0], 4, StreamInfo())
            warm = ember_tokens(backend, prompt, n, StreamInfo(), warm=True)
            rows.append(
                {
                    "prompt": prompt,
                    "raw": len(raw),
                    "match_drafting": drafted == raw,
                    "match_plain": plain == raw,
                    "match_warm": warm == raw,
                    "parted_at": _parted(drafted, raw),
                    "drafted": info.drafted,
                    "accepted": info.accepted,
                }
            )
        return {
            "serve_greedy_match_rate": sum(r["match_drafting"] for r in rows) / len(rows),
            "serve_greedy_match_rate_no_drafting": sum(r["match_plain"] for r in rows) / len(rows),
            "serve_greedy_match_rate_warm_cache": sum(r["match_warm"] for r in rows) / len(rows),
            "drafted": sum(r["drafted"] for r in rows),
            "accepted": sum(r["accepted"] for r in rows),
            "prompts": len(rows),
            "tokens": n,
            "context": backend.n_ctx,
            "threads": backend.n_threads,
            "flash_attn": backend.flash_attn_mode,
            "rows": rows,
        }
    finally:
        llm.close()
        backend.close()


def _parted(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main(argv: list[str] | None = None) -> int:
    from models.library.default_model import default_model_path

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", type=Path, default=None)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = measure(args.model or default_model_path(), args.tokens)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for row in result["rows"]:
            print(
                f"{row['prompt'][:40]:40}  drafting={row['match_drafting']!s:5}  plain={row['match_plain']!s:5}  "
                f"warm={row['match_warm']!s:5} parted_at={row['parted_at']} accepted={row['accepted']}/{row['drafted']}"
            )
        print(
            f"serve_greedy_match_rate {result['serve_greedy_match_rate']:.2f} (drafting) "
            f"{result['serve_greedy_match_rate_no_drafting']:.2f} (no drafting) "
            f"{result['serve_greedy_match_rate_warm_cache']:.2f} (warm cache); "
            f"{result['accepted']}/{result['drafted']} drafted tokens accepted"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover - a manual entry point
    sys.exit(main())
