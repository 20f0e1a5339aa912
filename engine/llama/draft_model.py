"""A draft model for speculative decoding: a small model with the target's vocabulary.

It runs in its own llama.cpp context beside the target, keeps its own KV cache in step
with the conversation (only what changed is decoded again, as for the target) and drafts
greedily: its most likely next tokens, which the target then checks in one batch
(`engine.llama.speculative`). Token ids must mean the same text in both models, so a
model with another vocabulary is refused in one line (`vocab_mismatch`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as ll

from engine.cancel import CancelToken
from engine.errors import ConfigError
from engine.llama import llama_log
from engine.llama.llama_decode import DecodeError, KvCache
from engine.llama.llama_plain import new_llama
from engine.llama.load_errors import llama_failure, precheck_model_file

log = logging.getLogger("engine.llama")

CHECK_FROM = 5  # llama.cpp's own check skips the first few ids (special tokens) as well


def vocab_mismatch(target: Any, draft: Any) -> str | None:
    """None if two llama.cpp vocabularies give every token id the same text; else how they differ."""
    n_target, n_draft = ll.llama_vocab_n_tokens(target), ll.llama_vocab_n_tokens(draft)
    if n_target != n_draft:
        return f"its vocabulary has {n_draft:,} tokens, the model's {n_target:,}"
    if ll.llama_vocab_type(target) != ll.llama_vocab_type(draft):
        return "its tokenizer is of another kind"
    for name in ("bos", "eos"):
        a = getattr(ll, f"llama_vocab_{name}")(target)
        b = getattr(ll, f"llama_vocab_{name}")(draft)
        if a != b:
            return f"its {name.upper()} token is {b}, the model's {a}"
    for token in range(CHECK_FROM, n_target):
        if ll.llama_vocab_get_text(target, token) != ll.llama_vocab_get_text(draft, token):
            return f"token {token} differs"
    return None


class DraftModel:
    """Greedy drafts from a second model. Owned by the target's thread, like the target."""

    def __init__(
        self,
        path: Path,
        *,
        target_vocab: Any,
        n_ctx: int,
        n_threads: int,
        n_gpu_layers: int,
        flash_attn: bool,
        type_k: int,
        type_v: int,
    ) -> None:
        self.path = path
        self._llm: Any = _load(
            path,
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
            flash_attn=flash_attn,
            type_k=type_k,
            type_v=type_v,
        )
        try:
            vocab: Any = ll.llama_model_get_vocab(self._llm.model)
            problem = vocab_mismatch(target_vocab, vocab)
            if problem:
                raise ConfigError(f"draft model {path.name} cannot draft for this model: {problem}")
            self._vocab = vocab
            self._kv = KvCache(self._llm.ctx, min(512, n_ctx))
            params = ll.llama_sampler_chain_default_params()
            params.no_perf = True
            self._greedy: Any = ll.llama_sampler_chain_init(params)
            ll.llama_sampler_chain_add(self._greedy, ll.llama_sampler_init_greedy())
        except BaseException:
            self._llm.close()
            raise
        self.usable = self._kv.can_trim()

    def draft(self, history: Sequence[int], limit: int) -> list[int]:
        """Up to `limit` greedy tokens after `history`; none if the draft model fails."""
        if limit <= 0 or not self.usable:
            return []
        ctx, kv = self._llm.ctx, self._kv
        out: list[int] = []
        try:
            kv.evaluate(history, CancelToken())
            while True:
                token = ll.llama_sampler_sample(self._greedy, ctx, -1)
                if ll.llama_vocab_is_eog(self._vocab, token):
                    break
                out.append(token)
                if len(out) >= limit:
                    break
                kv.append(token)
        except DecodeError as exc:  # e.g. its context is full: draft nothing, the target goes on
            log.warning("draft model %s stopped drafting: %s", self.path.name, exc)
            kv.forget()
            self.usable = False
        return out

    def reset(self) -> None:
        self._kv.forget()

    def close(self) -> None:
        """Kept between requests (its KV cache is reused); `shutdown` frees it."""

    def shutdown(self) -> None:
        if self._llm is not None:
            self._kv.close()
            ll.llama_sampler_free(self._greedy)
            self._llm.close()
            self._llm = None


def _load(path: Path, **kwargs: Any) -> Any:
    precheck_model_file(path)
    llama_log.clear_recent()
    n_ctx = kwargs["n_ctx"]
    try:
        return new_llama(
            model_path=str(path), n_batch=min(512, n_ctx), n_threads_batch=kwargs["n_threads"], verbose=False, **kwargs
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise llama_failure(f"draft model {path.name}", path, exc, llama_log.recent_messages(), n_ctx) from exc
