"""`ember bench`: speculative decoding and the KV cache type, each side by side in one run.

- `spec_lookup_speedup`: a code edit whose reply repeats its input, greedy, Ember's engine
  with prompt lookup against without it, interleaved; the replies must be identical
  (`spec_outputs_match`). `spec_acceptance_rate` is accepted / drafted tokens.
- `spec_chat_ratio`: the same on the ordinary story prompt, where drafts seldom match: what
  prompt lookup costs when it does not pay (near 1.0 is the point).
- `spec_draft_speedup`: with a draft model (`--draft-model`), against plain decoding.
- `kv_q8_0_vs_f16_tps_ratio` (and q4_0): decode speed with a quantized KV cache against
  f16, and each one's resident memory at a 4,096-token context, loaded in a fresh process.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.backends.base import Sampling, make_request
from engine.child_env import python_child
from engine.errors import BenchError
from engine.llama.llama import LlamaBackend
from engine.turns.rounds import fold_system
from engine.turns.runner import NO_TOOLS_LINE, TurnRunner
from tests.bench.llama import RunTiming, Workload, interleaved_rounds, rss_mb, time_engine

KV_CONTEXT = 4096

CODE = '''import json
from pathlib import Path


def load_settings(path):
    """Read the settings file, or return the defaults when it is missing."""
    file = Path(path)
    if not file.exists():
        return {"theme": "light", "font_size": 12, "recent": []}
    with file.open(encoding="utf-8") as handle:
        data = json.load(handle)
    data.setdefault("theme", "light")
    data.setdefault("font_size", 12)
    data.setdefault("recent", [])
    return data


def save_settings(path, data):
    """Write the settings file atomically."""
    file = Path(path)
    tmp = file.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
    tmp.replace(file)
'''
EDIT_PROMPT = (
    "Rename the function `load_settings` to `read_settings` in this file. Reply with the "
    "whole updated file and nothing else.\n\n```python\n" + CODE + "```"
)


def edit_workload(max_tokens: int) -> Workload:
    request = make_request(
        [{"role": "user", "content": EDIT_PROMPT}], sampling=Sampling.greedy(), max_tokens=max_tokens
    )
    return Workload(request, [m.copy() for m in fold_system(request.messages, NO_TOOLS_LINE)])


def _timed(backend: LlamaBackend, work: Workload, lookup: bool, drafts: dict[str, int]) -> RunTiming:
    backend.prompt_lookup = lookup
    timing = time_engine(backend, work)
    drafts["drafted"] += timing.drafted
    drafts["accepted"] += timing.accepted
    return timing


def compare_lookup(backend: LlamaBackend, work: Workload, runs: int, prefix: str) -> dict[str, Any]:
    """Interleaved runs with and without prompt lookup: the speed-up, the acceptance, equal output."""
    saved = backend.prompt_lookup
    drafts = {"drafted": 0, "accepted": 0}
    try:
        _timed(backend, work, False, drafts)  # warm-up
        _timed(backend, work, True, drafts)
        drafts = {"drafted": 0, "accepted": 0}
        pairs = list(
            interleaved_rounds(
                [lambda: _timed(backend, work, False, drafts), lambda: _timed(backend, work, True, drafts)],
                max(1, runs),
            )
        )
    finally:
        backend.prompt_lookup = saved
    return _speedup(pairs, drafts, prefix)


def _speedup(pairs: list[list[RunTiming]], drafts: dict[str, int], prefix: str) -> dict[str, Any]:
    plain = statistics.median(p[0].tokens_per_s for p in pairs)
    spec = statistics.median(p[1].tokens_per_s for p in pairs)
    ratios = [p[1].tokens_per_s / p[0].tokens_per_s for p in pairs if p[0].tokens_per_s > 0]
    return {
        f"{prefix}_speedup": round(spec / plain, 3) if plain else None,
        f"{prefix}_pairwise_median": round(statistics.median(ratios), 3) if ratios else None,
        f"{prefix}_tps": round(spec, 2),
        f"{prefix}_plain_tps": round(plain, 2),
        f"{prefix}_acceptance_rate": round(drafts["accepted"] / drafts["drafted"], 3) if drafts["drafted"] else None,
        f"{prefix}_drafted": drafts["drafted"],
        f"{prefix}_accepted": drafts["accepted"],
        f"{prefix}_tokens": pairs[0][1].tokens,
        f"{prefix}_outputs_match": all(p[0].text == p[1].text for p in pairs),
    }


def measure_speculative(backend: LlamaBackend, runs: int, max_tokens: int) -> dict[str, Any]:
    """Prompt lookup on the code edit (where it should pay) and on the story (where it should not cost)."""
    edit = compare_lookup(backend, edit_workload(2 * max_tokens), runs, "spec_lookup")
    chat = compare_lookup(backend, Workload.story(max_tokens), runs, "spec_chat")
    out = {
        **edit,
        **{
            k: v
            for k, v in chat.items()
            if k
            in (
                "spec_chat_speedup",
                "spec_chat_pairwise_median",
                "spec_chat_acceptance_rate",
                "spec_chat_outputs_match",
            )
        },
    }
    out["spec_chat_ratio"] = out.pop("spec_chat_speedup")
    out["spec_acceptance_rate"] = out["spec_lookup_acceptance_rate"]
    return out


def measure_draft(
    model: Path, draft: Path, n_ctx: int, threads: int, runs: int, max_tokens: int, gpu_layers: int
) -> dict[str, Any]:
    """A draft model against plain decoding on the code edit (prompt lookup off on both sides)."""
    plain = LlamaBackend(model, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=gpu_layers)
    drafted = LlamaBackend(model, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=gpu_layers, draft_model=draft)
    plain.prompt_lookup = drafted.prompt_lookup = False
    try:
        work = edit_workload(2 * max_tokens)
        drafts = {"drafted": 0, "accepted": 0}
        time_engine(plain, work)
        time_engine(drafted, work)

        def spec() -> RunTiming:
            timing = time_engine(drafted, work)
            drafts["drafted"] += timing.drafted
            drafts["accepted"] += timing.accepted
            return timing

        pairs = list(interleaved_rounds([lambda: time_engine(plain, work), spec], max(1, runs)))
    finally:
        drafted.close()
        plain.close()
    out = _speedup(pairs, drafts, "spec_draft")
    out["spec_draft_model"] = draft.name
    return out


# -- the KV cache type -------------------------------------------------------------------------


def compare_kv(
    model: Path,
    threads: int,
    runs: int,
    max_tokens: int,
    gpu_layers: int,
    kinds: tuple[str, ...] = ("f16", "q8_0", "q4_0"),
) -> dict[str, Any]:
    """Decode speed of each KV cache type at a 4,096-token context, interleaved, one backend each."""
    backends = {
        k: LlamaBackend(model, n_ctx=KV_CONTEXT, n_threads=threads, n_gpu_layers=gpu_layers, kv_cache=k) for k in kinds
    }
    try:
        work = Workload.story(max_tokens)
        for b in backends.values():
            b.prompt_lookup = False
            time_engine(b, work)
        sides: list[Callable[[], RunTiming]] = [lambda b=b: time_engine(b, work) for b in backends.values()]
        rounds = list(interleaved_rounds(sides, max(1, runs)))
    finally:
        for b in backends.values():
            b.close()
    tps = {k: statistics.median(r[i].tokens_per_s for r in rounds) for i, k in enumerate(kinds)}
    out: dict[str, Any] = {f"kv_{k}_tps": round(v, 2) for k, v in tps.items()}
    for k in kinds[1:]:
        out[f"kv_{k}_vs_f16_tps_ratio"] = round(tps[k] / tps["f16"], 3) if tps["f16"] else None
    return out


def kv_probe(model: str, threads: int, gpu_layers: int, kv_cache: str) -> dict[str, float]:
    """Resident memory after loading with a `kv_cache` cache at 4,096 tokens and one reply."""
    backend = LlamaBackend(model, n_ctx=KV_CONTEXT, n_threads=threads, n_gpu_layers=gpu_layers, kv_cache=kv_cache)
    try:
        for _ in TurnRunner(backend).run(Workload.story(1).request):
            pass
        return {"rss_mb": rss_mb()}
    finally:
        backend.close()


def kv_probe_main() -> None:
    model, threads, gpu_layers, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print(json.dumps(kv_probe(model, threads, gpu_layers, kind)))


def measure_kv_memory(
    model: Path, threads: int, gpu_layers: int, env: dict[str, str], kinds: tuple[str, ...] = ("f16", "q8_0", "q4_0")
) -> dict[str, Any]:
    """Each KV cache type's resident memory at 4,096 tokens, each in a fresh interpreter."""
    out: dict[str, Any] = {"kv_context": KV_CONTEXT}
    for kind in kinds:
        code = "from tests.bench.speculative import kv_probe_main; kv_probe_main()"
        child = python_child(code, str(model.absolute()), str(threads), str(gpu_layers), kind, env=env)
        result = subprocess.run(
            child.argv, capture_output=True, text=True, env=child.env, cwd=child.cwd, timeout=300, check=False
        )
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"the KV memory probe ({kind}) failed: {tail}")
        out[f"kv_{kind}_rss_mb"] = json.loads(result.stdout.strip().splitlines()[-1])["rss_mb"]
    return out
