"""llama.cpp's own decode loop, driven through llama-cpp-python's public low-level bindings.

`Llama.generate()` samples through Python wrappers, copies every token's logits into a
numpy array and keeps its own token list; on a fast GPU that Python glue is the gap to
native speed (issue #15: 0.79x native on a 135M model). Here each token costs four C
calls and no Python-side arrays:

- `llama_sampler_sample` on a sampler chain built once per request (penalties, grammar,
  then greedy or top-k/top-p/min-p/temperature/seeded dist): the logits stay in C;
- `llama_token_to_piece` into one reused buffer;
- `llama_decode` on one reused `llama_batch` (allocated once per model).

The KV cache holds one sequence (0). `KvCache` remembers which tokens it holds, so the
next request evaluates only the suffix that differs from the previous one.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import llama_cpp.llama_cpp as ll

from engine.backends.base import Sampling
from engine.cancel import CancelToken
from engine.errors import BackendError
from engine.llama.kv_reuse import common_prefix

PENALTY_LAST_N = 64  # what llama-cpp-python's `Llama` uses (`last_n_tokens_size`)
PIECE_BUFFER = 256


class MediaSpan(Protocol):
    """An image's positions in the prompt (`llama_media.Span`)."""

    @property
    def n_pos(self) -> int: ...

    def evaluate(self, ctx: Any, at: int, n_batch: int) -> None: ...


def _outside_spans(keep: int, media: Mapping[int, MediaSpan]) -> int:
    """`keep` moved back to the start of an image span it would cut (an image is all or nothing)."""
    for at, span in media.items():
        if at < keep < at + span.n_pos:
            return at
    return keep


def _next_span(first: int, media: Mapping[int, MediaSpan]) -> int:
    return min((at for at in media if at > first), default=1 << 62)


class DecodeError(BackendError):
    """`llama_decode` returned `code` (1 = no KV slot, 2 = aborted, < 0 = error)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"llama_decode returned {code}")
        self.code = code


class GrammarError(ValueError):
    """llama.cpp rejected a GBNF grammar."""


class SamplerChain:
    """llama.cpp's sampler chain for one request. Free it with `close()` (the chain owns its parts)."""

    def __init__(
        self,
        vocab: Any,
        sampling: Sampling,
        seed: int,
        grammar: str | None = None,
        recent: Sequence[int] = (),
        *,
        device_ctx: Any = None,
        reply_limit: int = PENALTY_LAST_N,
    ) -> None:
        params = ll.llama_sampler_chain_default_params()
        params.no_perf = True
        self._chain: Any = ll.llama_sampler_chain_init(params)
        self._device_ctx: Any = None
        self.tap: Callable[[int, int], None] | None = None  # sees (batch position, token) of every sample
        try:
            self._build(vocab, sampling, seed, grammar, recent, reply_limit)
            if device_ctx is not None and device_samplable(sampling, grammar):
                self._attach(device_ctx)
        except BaseException:
            self.close()
            raise

    def _attach(self, ctx: Any) -> None:
        """Run the chain inside the model's graph on the GPU (llama.cpp's backend sampling).

        For a greedy chain on a GPU this saves, per token, copying the logits to the host
        and scanning the vocabulary on the CPU (about 0.1 ms of 1.8 ms on a 1.7B model).
        llama.cpp marks the API experimental: if it declines, sampling stays on the CPU.
        """
        if ll.llama_set_sampler(ctx, 0, self._chain):
            self._device_ctx = ctx

    @property
    def on_device(self) -> bool:
        return self._device_ctx is not None

    def _build(
        self, vocab: Any, s: Sampling, seed: int, grammar: str | None, recent: Sequence[int], reply_limit: int
    ) -> None:
        if s.frequency_penalty or s.presence_penalty:  # OpenAI's: the reply's own tokens, all of them
            self._add(
                ll.llama_sampler_init_penalties(
                    ll.llama_vocab_n_tokens(vocab), max(reply_limit, 1), 1.0, s.frequency_penalty, s.presence_penalty
                )
            )
        if s.repeat_penalty != 1.0:
            penalties = ll.llama_sampler_init_penalties(
                ll.llama_vocab_n_tokens(vocab), PENALTY_LAST_N, s.repeat_penalty, 0.0, 0.0
            )
            for token in recent[-PENALTY_LAST_N:]:  # the prompt's tail counts, as in llama.cpp's CLI
                ll.llama_sampler_accept(penalties, token)
            self._add(penalties)
        if grammar:
            sampler = ll.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
            if not sampler:
                raise GrammarError("the grammar does not parse (llama.cpp rejected it)")
            self._add(sampler)
        if s.temperature <= 0.0:
            self._add(ll.llama_sampler_init_greedy())
            return
        if s.top_k > 0:
            self._add(ll.llama_sampler_init_top_k(s.top_k))
        if s.top_p < 1.0:
            self._add(ll.llama_sampler_init_top_p(s.top_p, 1))
        if s.min_p > 0.0:
            self._add(ll.llama_sampler_init_min_p(s.min_p, 1))
        self._add(ll.llama_sampler_init_temp(s.temperature))
        self._add(ll.llama_sampler_init_dist(seed & 0xFFFFFFFF))

    def _add(self, sampler: Any) -> None:
        ll.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, ctx: Any, index: int = -1) -> int:
        """The next token from the logits of batch position `index` (default: the last);
        the chain accepts it (grammar, penalties)."""
        if self._device_ctx is not None:
            token = ll.llama_get_sampled_token_ith(ctx, index)
            if token != ll.LLAMA_TOKEN_NULL:
                return token
        token = ll.llama_sampler_sample(self._chain, ctx, index)
        if self.tap is not None:
            self.tap(index, token)
        return token

    def close(self) -> None:
        if self._device_ctx is not None:  # detach before freeing: the context holds a pointer
            ll.llama_set_sampler(self._device_ctx, 0, None)  # pyright: ignore[reportArgumentType]
            self._device_ctx = None
        if self._chain:
            ll.llama_sampler_free(self._chain)
            self._chain = None


class DeviceGreedy:
    """The greedy chain kept inside the GPU graph from one greedy request to the next.

    Attaching or detaching a chain makes llama.cpp reserve its scheduler again (it frees and
    reallocates the compute buffers): time on every request on a GPU, and on Mesa 22.3's lavapipe
    a use after free (docs/performance.md). Greedy carries no state from token to token, so one
    chain serves every greedy request until one samples on the host, which needs the logits an
    attached chain keeps on the device.
    """

    def __init__(self, vocab: Any) -> None:
        self._vocab = vocab
        self._chain: SamplerChain | None = None
        self._declined = False  # llama.cpp would not run it in the graph: do not ask each request

    @property
    def attached(self) -> SamplerChain | None:
        return self._chain

    def chain(self, ctx: Any) -> SamplerChain | None:
        """The attached greedy chain, or None where llama.cpp declines to run one in the graph."""
        if self._chain is None and not self._declined:
            chain = SamplerChain(self._vocab, Sampling.greedy(), 0, device_ctx=ctx)
            if chain.on_device:
                self._chain = chain
            else:
                chain.close()
                self._declined = True
        return self._chain

    def release(self) -> None:
        """Detach and free the chain: a request that samples on the host, or the context's end."""
        if self._chain is not None:
            self._chain.close()
            self._chain = None


def device_samplable(s: Sampling, grammar: str | None) -> bool:
    """Greedy with no grammar and no penalties: a chain llama.cpp runs wholly on the device,
    with no state to carry between tokens."""
    return (
        s.temperature <= 0.0
        and not grammar
        and s.repeat_penalty == 1.0
        and not s.frequency_penalty
        and not s.presence_penalty
    )


def grammar_error(vocab: Any, gbnf: str) -> str | None:
    """None if llama.cpp accepts the GBNF; else why not (an invalid grammar would segfault later)."""
    sampler = ll.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        return "the grammar does not parse (llama.cpp rejected it)"
    ll.llama_sampler_free(sampler)
    return None


class PieceReader:
    """`llama_token_to_piece` into one reused buffer, grown when a piece is longer.

    llama-cpp-python's own detokenizer uses a 32-byte buffer and silently drops longer
    pieces (#2362); this one keeps them.
    """

    def __init__(self, vocab: Any) -> None:
        self._vocab = vocab
        self._size = PIECE_BUFFER
        self._buf = ctypes.create_string_buffer(self._size)

    def read(self, token: int, special: bool) -> bytes:
        n = ll.llama_token_to_piece(self._vocab, token, self._buf, self._size, 0, special)
        if n < 0:  # negative: the bytes it needs
            self._size = -n
            self._buf = ctypes.create_string_buffer(self._size)
            n = ll.llama_token_to_piece(self._vocab, token, self._buf, self._size, 0, special)
        return ctypes.string_at(self._buf, n)


class KvCache:
    """One reused `llama_batch` and the record of which tokens the context's KV cache holds."""

    def __init__(self, ctx: Any, n_batch: int) -> None:
        self._ctx = ctx
        self._memory = ll.llama_get_memory(ctx)
        self.n_batch = n_batch
        self._batch: Any = ll.llama_batch_init(n_batch, 0, 1)
        # Pointers into the batch, fetched once: each attribute read would build a new one.
        self._token, self._pos, self._logits = self._batch.token, self._batch.pos, self._batch.logits
        self._n_seq_id, self._seq_id = self._batch.n_seq_id, self._batch.seq_id
        for i in range(n_batch):
            self._n_seq_id[i] = 1
            self._seq_id[i][0] = 0
        self.tokens: list[int] = []  # what the KV cache holds, position by position
        self.last_evaluated = 0  # prompt tokens the last `evaluate` actually decoded

    def forget(self) -> None:
        """Empty the KV cache (someone else used the context, or it is in doubt)."""
        if self._memory:
            ll.llama_memory_clear(self._memory, True)
        self.tokens = []

    def reusable(self, tokens: Sequence[int]) -> int:
        """Prompt tokens the next `evaluate` takes from the cache (the last is always decoded again)."""
        return min(common_prefix(self.tokens, tokens), max(len(tokens) - 1, 0))

    def can_shift(self) -> bool:
        """Whether the model's memory can move cached positions (not a recurrent model's)."""
        return bool(self._memory) and bool(ll.llama_memory_can_shift(self._memory))

    def drop_span(self, start: int, end: int) -> bool:
        """Remove positions start..end-1 and shift what follows left to close the gap."""
        memory = self._memory
        if not memory or not ll.llama_memory_seq_rm(memory, -1, start, end):
            return False
        ll.llama_memory_seq_add(memory, 0, end, -1, start - end)  # sequence 0: the only one used
        del self.tokens[start:end]
        return True

    def _truncate(self, keep: int) -> None:
        if keep >= len(self.tokens):
            return
        if self._memory and ll.llama_memory_seq_rm(self._memory, -1, keep, -1):
            del self.tokens[keep:]
        else:  # a recurrent model cannot drop a suffix: start over
            self.forget()

    def evaluate(self, tokens: Sequence[int], stop: CancelToken) -> bool:
        """Make the cache hold `tokens`, decoding only what differs; False if `stop` was cancelled.

        `stop` is checked between batches (on the CPU the abort callback also interrupts
        a batch).
        """
        return all(done == total or not stop.cancelled for done, total in self.batches(tokens))

    def batches(
        self,
        tokens: Sequence[int],
        media: Mapping[int, MediaSpan] | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Make the cache hold `tokens`, one batch per step: yields (decoded, to decode), first
        (0, n) before any batch, then after each. Stop iterating to stop between batches.

        Only what differs from the cache is decoded; its last token always is, so its logits
        are fresh for the first sample. `media` maps an offset in `tokens` to an image's span
        (its positions hold pseudo-ids, `llama_media`): the span is evaluated whole, never cut,
        and a stop is seen before and after it.
        """
        if not tokens:
            raise ValueError("an empty prompt")
        media = media or {}
        keep = _outside_spans(min(common_prefix(self.tokens, tokens), len(tokens) - 1), media)
        self._truncate(keep)
        start = len(self.tokens)
        total = self.last_evaluated = len(tokens) - start
        yield 0, total
        first = start
        while first < len(tokens):
            span = media.get(first)
            if span is not None:
                span.evaluate(self._ctx, first, self.n_batch)
                self.tokens.extend(tokens[first : first + span.n_pos])
                first += span.n_pos
                yield first - start, total
                continue
            end = min(first + self.n_batch, len(tokens), _next_span(first, media))
            chunk = tokens[first:end]
            self._fill(chunk, first, last_has_logits=end == len(tokens))
            self._decode()
            self.tokens.extend(chunk)
            first = end
            yield first - start, total

    def score(self, tokens: Sequence[int], on_batch: Callable[[int, int], None], stop: CancelToken) -> bool:
        """Decode `tokens` from an empty cache with logits at every position (a prompt scored token by
        token: the cache's prefix has none to give); `on_batch(first, n)` reads a batch's logits
        right after it is decoded. False if `stop` was cancelled between batches."""
        self.forget()
        first = 0
        while first < len(tokens):
            if stop.cancelled:
                return False
            chunk = tokens[first : first + self.n_batch]
            self._fill(chunk, first, last_has_logits=True, every=True)
            self._decode()
            self.tokens.extend(chunk)
            on_batch(first, len(chunk))
            first += len(chunk)
        self.last_evaluated = len(tokens)
        return True

    def _fill(self, chunk: Sequence[int], pos: int, *, last_has_logits: bool, every: bool = False) -> None:
        token, position, logits = self._token, self._pos, self._logits
        for i, t in enumerate(chunk):
            token[i] = t
            position[i] = pos + i
            logits[i] = 1 if every else 0
        logits[len(chunk) - 1] = 1 if last_has_logits else 0
        self._batch.n_tokens = len(chunk)

    def append(self, token: int) -> None:
        """Decode one generated token at the next position (its logits are the next sample's)."""
        self._token[0] = token
        self._pos[0] = len(self.tokens)
        self._logits[0] = 1
        self._batch.n_tokens = 1
        self._decode()
        self.tokens.append(token)

    def extend(self, tokens: Sequence[int]) -> None:
        """Decode `tokens` at the next positions in one batch, with logits at every one
        (speculative decoding: the pending token and its draft, verified together)."""
        token, position, logits = self._token, self._pos, self._logits
        pos = len(self.tokens)
        for i, t in enumerate(tokens):
            token[i] = t
            position[i] = pos + i
            logits[i] = 1
        self._batch.n_tokens = len(tokens)
        self._decode()
        self.tokens.extend(tokens)

    def can_trim(self) -> bool:
        """Whether the cache can drop its last positions (not a recurrent or hybrid model's)."""
        model: Any = ll.llama_get_model(self._ctx)
        return bool(self._memory) and not ll.llama_model_is_recurrent(model) and not ll.llama_model_is_hybrid(model)

    def keep(self, n: int) -> None:
        """Hold only the first `n` tokens (a rejected draft leaves the cache)."""
        self._truncate(n)

    def _decode(self) -> None:
        code = ll.llama_decode(self._ctx, self._batch)
        if code != 0:
            # The failed batch may have left part of itself in the cache: drop it.
            if self._memory:
                ll.llama_memory_seq_rm(self._memory, -1, len(self.tokens), -1)
            raise DecodeError(int(code))

    def close(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
