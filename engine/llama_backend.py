"""The in-process backend: a local GGUF through llama-cpp-python, streamed token by token.

One thread owns the `Llama` (the engine's worker); nothing here is thread-safe by itself.
`Llama.generate()` yields token ids, so every piece knows its id and class, and the reply
is decoded once, incrementally, instead of re-detokenizing the whole reply every step as
the high-level completion API does.
"""

from __future__ import annotations

import ctypes
import logging
import os
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from engine import llama_log
from engine.backend import CancelToken, Capabilities, Message, Request, StreamInfo
from engine.backends.grammar_guard import grammar_problem
from engine.backends.tool_prompt import fallback_for
from engine.decoding import TokenClasses, Utf8Stream, piece_bytes
from engine.errors import BackendError, ConfigError, ContextOverflowError, ModelLoadError
from engine.events import Piece
from engine.kv_reuse import reuse_shifted
from engine.load_errors import explain_llama_failure, precheck_model_file, read_model_header
from engine.template import ChatTemplate, Segment
from models.formats import prefill_opener

log = logging.getLogger("engine.llama")

DEFAULT_N_CTX = 4096


def gpu_offload_supported() -> bool:
    import llama_cpp as lc

    return bool(lc.llama_supports_gpu_offload())


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


class LlamaBackend:
    """Streams replies from a local GGUF file. Construct it on the thread that will use it."""

    def __init__(self, model_path: str | Path, *, n_ctx: int = DEFAULT_N_CTX, n_gpu_layers: int = 0,
                 n_threads: int | None = None, flash_attn: bool = True) -> None:
        self.path = Path(model_path)
        self.name = self.path.name
        self.gpu_note = ""
        precheck_model_file(self.path)
        self.metadata = read_model_header(self.path)
        llama_log.install()
        self._llm: Any = self._load(n_ctx, n_gpu_layers, n_threads or default_threads(), flash_attn)
        # Tools: rendered by the template, or described in the system message (tool_prompt).
        self.capabilities = Capabilities(grammar=True, token_count=True, tools=True, context_size=self.n_ctx,
                                         device="GPU" if self.n_gpu_layers else "CPU", device_note=self.gpu_note)
        self._vocab = self._llm._model.vocab  # pyright: ignore[reportPrivateUsage]
        self._classes = TokenClasses(self._vocab)
        self._template = self._make_template()
        self._cancel: CancelToken | None = None
        self._abort_cb = self._make_abort_callback()

    # -- loading ---------------------------------------------------------------------------

    def _load(self, n_ctx: int, n_gpu_layers: int, n_threads: int, flash_attn: bool) -> Any:
        import llama_cpp as lc

        if n_gpu_layers and not gpu_offload_supported():
            self.gpu_note = "this llama.cpp build has no GPU support; running on the CPU"
            log.info("GPU layers requested (%d) but %s", n_gpu_layers, self.gpu_note)
            n_gpu_layers = 0
        self.n_gpu_layers = n_gpu_layers
        n_ctx_train = self.metadata.context_length
        self.n_ctx = min(n_ctx, n_ctx_train) if n_ctx_train else n_ctx
        llama_log.clear_recent()
        try:
            return lc.Llama(
                model_path=str(self.path), n_ctx=self.n_ctx, n_batch=min(512, self.n_ctx),
                n_threads=n_threads, n_threads_batch=n_threads, n_gpu_layers=n_gpu_layers,
                # llama.cpp's own default: measured +11% decode speed on CPU (ember bench).
                flash_attn=flash_attn, verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            reason = explain_llama_failure(self.path, exc, llama_log.recent_messages(), self.n_ctx)
            raise ModelLoadError(f"{self.path.name}: {reason}") from exc
        except Exception as exc:  # e.g. a template that does not parse (TemplateSyntaxError)
            raise ModelLoadError(f"{self.path.name}: {type(exc).__name__}: {exc}") from exc

    @property
    def llama(self) -> Any:
        """The loaded `llama_cpp.Llama`, for benchmarks and diagnostics on the owning thread."""
        return self._llm

    @property
    def abort_callback(self) -> Any:
        """The ggml abort callback Ember attaches during prompt evaluation (None on a GPU)."""
        return self._abort_cb

    def _token_text(self, token: int) -> str:
        return piece_bytes(self._vocab, token, special=True).decode("utf-8", "replace")

    def _special_strings(self) -> list[str]:
        out: list[str] = []
        for t in range(self._llm.n_vocab()):
            if self._classes.classify(t)[1]:
                text = self._token_text(t)
                if len(text) > 1:
                    out.append(text)
        return out

    def _make_template(self) -> ChatTemplate:
        meta: dict[str, str] = self._llm.metadata
        bos = self._token_text(self._llm.token_bos()) if self._llm.token_bos() >= 0 else ""
        eos = self._token_text(self._llm.token_eos()) if self._llm.token_eos() >= 0 else ""
        try:
            return ChatTemplate(meta.get("tokenizer.chat_template"), bos_token=bos, eos_token=eos,
                                special_strings=self._special_strings())
        except ConfigError as exc:
            raise ModelLoadError(f"{self.path.name}: {exc}") from exc

    def _make_abort_callback(self) -> Any:
        """A callback that lets a stop interrupt a long prompt evaluation (CPU only)."""
        if self.n_gpu_layers:
            return None
        import llama_cpp as lc

        def should_abort(_data: Any) -> bool:
            return bool(self._cancel and self._cancel.cancelled)

        return lc.ggml_abort_callback(should_abort)  # kept referenced: a collected one crashes decode

    def _set_abort_callback(self, on: bool) -> None:
        """Attach the callback for the prompt evaluation only.

        llama.cpp calls it between graph nodes, hundreds of times per token; during token
        generation the loop checks the stop flag between tokens anyway, so it is detached
        then (it cost about 4.5% of decode speed).
        """
        if self._abort_cb is None:
            return
        import llama_cpp as lc

        cb = self._abort_cb if on else lc.ggml_abort_callback()  # a NULL function pointer
        lc.llama_set_abort_callback(self._llm.ctx, cb, ctypes.c_void_p(0))

    # -- prompt ---------------------------------------------------------------------------

    def prompt_tokens(self, request: Request) -> tuple[list[int], str]:
        """The rendered prompt as token ids, and the thinking opener it pre-fills ('' if none)."""
        # A template that ignores tools gets them described in the system message instead.
        messages, tools = fallback_for(self._template.source, request.messages, request.tools)
        segments = self._template.segments(messages, tools=tools)
        ids: list[int] = []
        for seg in segments:
            ids.extend(self._tokenize(seg))
        bos = self._llm.token_bos()
        if bos >= 0 and _adds_bos(self._llm.metadata) and (not ids or ids[0] != bos):
            ids.insert(0, bos)
        return ids, prefill_opener("".join(s.text for s in segments[-2:]))

    def _tokenize(self, seg: Segment) -> list[int]:
        return list(self._llm.tokenize(seg.text.encode("utf-8"), add_bos=False, special=seg.trusted))

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Exact (the token_count capability): reads only the vocabulary and the template,
        so it is safe beside a streaming reply."""
        return len(self.prompt_tokens(Request(messages=tuple(messages)))[0])

    def _cached_prefix(self, tokens: list[int]) -> int:
        """Prompt tokens already in the KV cache (llama-cpp-python's generate() reuses them)."""
        cached = self._llm.input_ids[: self._llm.n_tokens]
        same = 0
        for a, b in zip(cached, tokens, strict=False):
            if a != b:
                break
            same += 1
        return min(same, len(tokens) - 1)  # the last prompt token is evaluated again for its logits

    # -- streaming ------------------------------------------------------------------------

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        tokens, prefilled = self.prompt_tokens(request)
        info.prompt_tokens = len(tokens)
        reuse_shifted(self._llm, tokens)  # the context window moved: keep what it still holds
        info.cached_tokens = self._cached_prefix(tokens)
        info.context_size = self.n_ctx
        info.prefilled_thinking = prefilled
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise ContextOverflowError(
                f"the conversation ({len(tokens)} tokens) no longer fits the {self.n_ctx}-token context")
        self._cancel = cancel
        try:
            yield from self._generate(tokens, request, cancel, info, min(request.max_tokens, room))
        finally:
            self._cancel = None

    def _generate(self, tokens: list[int], request: Request, cancel: CancelToken, info: StreamInfo,
                  limit: int) -> Iterator[Piece]:
        s = request.sampling
        self._llm.set_seed(s.seed if s.seed is not None else secrets.randbits(31))
        gen = self._llm.generate(
            tokens, temp=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
            repeat_penalty=s.repeat_penalty, reset=True, grammar=self._grammar(request.grammar),
        )
        decoder = Utf8Stream()
        count = 0
        info.finish_reason = "length"
        self._set_abort_callback(True)
        try:
            for token in _guarded(gen, cancel):
                if count == 0:
                    self._set_abort_callback(False)  # the prompt is evaluated
                if cancel.cancelled:
                    info.finish_reason = "cancelled"
                    break
                eog, special, user_defined = self._classes.classify(token)
                if eog:
                    info.finish_reason = "stop"
                    break
                count += 1
                info.completion_tokens = count
                piece = self._piece(token, special, user_defined, decoder)
                if piece is not None:
                    yield piece
                if count >= limit:
                    break
            if cancel.cancelled:
                info.finish_reason = "cancelled"
            tail = decoder.flush()
            if tail:
                yield Piece(tail)
        finally:
            self._set_abort_callback(False)
            gen.close()

    def _piece(self, token: int, special: bool, user_defined: bool, decoder: Utf8Stream) -> Piece | None:
        data = piece_bytes(self._vocab, token, special=special)
        if special:
            return Piece(data.decode("utf-8", "replace"), token, True, user_defined)
        text = decoder.feed(data)
        return Piece(text, token) if text else None

    def _grammar(self, gbnf: str | None) -> Any:
        if not gbnf:
            return None
        from llama_cpp import LlamaGrammar

        error = self.check_grammar(gbnf)
        if error:
            raise ConfigError(error)
        return LlamaGrammar.from_string(gbnf, verbose=False)

    def check_grammar(self, gbnf: str) -> str | None:
        """None if llama.cpp accepts the GBNF; else why not. An invalid grammar would segfault."""
        import llama_cpp as lc

        # Built first in a child process (verdict cached): a crash there cannot take us down.
        problem = grammar_problem(self.path, gbnf)
        if problem:
            return problem

        sampler = lc.llama_sampler_init_grammar(self._vocab, gbnf.encode("utf-8"), b"root")
        if not sampler:
            return "the grammar does not parse (llama.cpp rejected it)"
        lc.llama_sampler_free(sampler)
        return None

    def close(self) -> None:
        llm: Any = getattr(self, "_llm", None)
        if llm is not None:
            llm.close()
            self._llm = None


def _guarded(gen: Iterator[int], cancel: CancelToken) -> Iterator[int]:
    """Turn llama.cpp decode failures into engine errors (an abort after a stop is not one)."""
    try:
        yield from gen
    except RuntimeError as exc:
        if cancel.cancelled:
            return
        raise BackendError(f"llama.cpp failed while generating: {exc}") from exc
    except ValueError as exc:
        raise ContextOverflowError(str(exc)) from exc


def _adds_bos(meta: dict[str, str]) -> bool:
    return meta.get("tokenizer.ggml.add_bos_token", "false").lower() == "true"
