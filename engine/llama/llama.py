"""The in-process backend: a local GGUF through llama-cpp-python, streamed token by token.

One thread owns the model (the engine's worker); nothing here is thread-safe by itself.
`Llama` loads the model, tokenizes and knows the metadata; generation runs on llama.cpp's
own primitives (`engine.llama.llama_decode`): a C sampler chain, one reused batch, one
reused piece buffer, so every piece knows its id and class and the reply is decoded once,
incrementally.

Layers go to the GPU automatically when the build can offload (`engine.llama.offload`);
a GPU load that fails is retried with fewer layers, then on the CPU, with a note.
"""

from __future__ import annotations

import ctypes
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as ll

import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
from engine.backends.base import MAX_CHARS_PER_TOKEN, Capabilities, Message, Request, StreamInfo, ToolSpec, prompt_key
from engine.backends.image_input import NO_PROJECTOR
from engine.backends.receipt import TokenDigest, request_receipt, text_sha256
from engine.backends.stops import StopMatcher
from engine.cancel import CancelToken
from engine.errors import BackendError, ConfigError, ContextOverflowError, ModelLoadError
from engine.events import FinishReason, Piece, PromptProgress, TokenLogprob
from engine.llama import cpu, gpu_modules, llama_devices, llama_log, load_progress, offload
from engine.llama.builtin_template import BuiltinTemplate
from engine.llama.cpu import ensure_cpu_runs
from engine.llama.cpu_threads import default_threads
from engine.llama.decoding import TokenClasses, Utf8Stream, piece_bytes
from engine.llama.draft_model import DraftModel
from engine.llama.grammar_guard import grammar_problem
from engine.llama.kv_reuse import reuse_shifted
from engine.llama.kv_types import kv_cache_types
from engine.llama.llama_decode import (
    DecodeError,
    DeviceGreedy,
    GrammarError,
    KvCache,
    PieceReader,
    SamplerChain,
    device_samplable,
    grammar_error,
)
from engine.llama.llama_media import Projector, Span, is_pseudo, tokenize_with_images, with_markers
from engine.llama.llama_plain import chat_handler, new_llama
from engine.llama.load_errors import llama_failure, precheck_model_file, read_model_header
from engine.llama.logprobs import LogprobReader
from engine.llama.offload import Placement
from engine.llama.plain_transcript import PlainTranscript
from engine.llama.projector_probe import check_projector
from engine.llama.speculative import Chained, Drafter, DraftPolicy, PromptLookup
from engine.llama.template import ChatTemplate, PromptFormat, Segment
from engine.llama.tool_prompt import call_markup, fallback_for
from models.errors import GGUFError
from models.formats import prefill_opener
from models.gguf.builtin_templates import FORMATS
from models.library.digests import DigestJob
from models.library.origins import origin_of
from models.library.projectors import pair
from models.library.settings import AUTO_GPU_LAYERS, DEFAULT_CONTEXT_LENGTH

log = logging.getLogger("engine.llama")

ABORTED = 2  # llama_decode's code when the abort callback stopped it
PROMPT_CACHE_SIZE = 8  # rendered prompts remembered: a fit's candidates, then the one it keeps


def gpu_offload_supported() -> bool:
    return llama_devices.gpu_offload_supported()


class LlamaBackend:
    """Streams replies from a local GGUF file. Construct it on the thread that will use it."""

    # Greedy sampling inside the GPU graph (llama.cpp's experimental backend sampling).
    device_sampling = os.environ.get("EMBER_DEVICE_SAMPLING", "1") != "0"
    # Prompt-lookup drafting (speculative decoding); `EMBER_PROMPT_LOOKUP=0` turns it off.
    prompt_lookup = os.environ.get("EMBER_PROMPT_LOOKUP", "1") != "0"

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = DEFAULT_CONTEXT_LENGTH,
        n_gpu_layers: int = AUTO_GPU_LAYERS,
        n_threads: int | None = None,
        flash_attn: bool = True,
        kv_cache: str = "f16",
        draft_model: str | Path | None = None,
        projector: str | Path | None = None,
        gpu_device: str = "",
    ) -> None:
        self.path = Path(model_path)
        self.kv_cache = kv_cache
        self.name = self.path.name
        self.gpu_note = ""
        precheck_model_file(self.path)
        self.metadata = read_model_header(self.path)
        llama_log.install()
        self.n_threads = n_threads or default_threads()
        n_ctx_train = self.metadata.n_ctx_train
        self.n_ctx = min(n_ctx, n_ctx_train) if n_ctx_train else n_ctx
        self._kv_types = kv_cache_types(kv_cache, self.metadata, flash_attn, self.name)
        # The template is compiled, bounded, before any Llama is built (Jinja folds constants while
        # compiling: `{{ 'x' * 3000000000 }}` would run at load), and llama-cpp-python never sees it
        # (engine.llama.llama_plain).
        checked = self._checked_template()
        self.gpu_note = gpu_modules.want(gpu_device)  # before the first load: the pick is once per process
        ensure_cpu_runs()  # loads the CPU variant that runs here; one that traps is refused, not a SIGILL
        self.placement = self._place(n_gpu_layers)
        self._llm: Any = self._load(flash_attn)
        self._draft: DraftModel | None = None
        # Tools: rendered by the template, or described in the system message (tool_prompt).
        self.capabilities = Capabilities(
            grammar=True,
            token_count=True,
            tools=True,
            n_ctx=self.n_ctx,
            device=self.where,
            device_note=self.gpu_note,
            base_model=self.metadata.base_model,
        )
        self._vocab = ll.llama_model_get_vocab(self._llm.model)
        self._device_greedy = DeviceGreedy(self._vocab)
        self.projector_refused = ""  # why a projector beside the model was refused (one line)
        self._projector: Projector | None = self._load_projector(projector)
        self._marker = f"<ember-image-{secrets.token_hex(8)}>"  # no one types it: where an image goes
        self._classes = TokenClasses(self._vocab)
        self._template = self._make_template(checked)
        self._stop_ids = self._single_tokens(self._template.stop_markers)
        # create_chat_completion (only the bench's raw side calls it) renders with Ember's own format.
        eos = self._token_text(self._llm.token_eos()) if self._llm.token_eos() >= 0 else ""
        self._llm.chat_handler = chat_handler(self._template.render, eos, self._llm.token_eos())
        self.capabilities = replace(
            self.capabilities,
            tool_markup=call_markup(self._template.source),
            vision=self._projector is not None,
            vision_note=self.projector_refused,
        )
        # The receipt's model digest: hashed once per file (cached), on a thread of its own.
        self._digest = DigestJob(self.path)
        origin = origin_of(self.path)  # where a downloaded file came from (repo@revision/path), for the receipt
        self._source = origin.source if origin is not None else None
        self._cancel: CancelToken | None = None
        self._abort_cb = self._make_abort_callback()
        self._kv = KvCache(self._llm.ctx, min(512, self.n_ctx))
        self._kv_trimmable = self._kv.can_trim()
        self.draft_policy = DraftPolicy()  # measured costs and acceptance, kept across requests
        self._pieces = PieceReader(self._vocab)
        # By prompt key: ids, the thinking opener, and the images' spans by offset in the ids (the
        # spans own their image chunks, so an entry stays valid whatever the projector evicts).
        self._prompts: OrderedDict[str, tuple[tuple[int, ...], str, dict[int, Span]]] = OrderedDict()
        self._prompt_lock = threading.Lock()
        self._cache_state: dict[str, Any] = {"type": kv_cache, "warm_tokens": 0, "shifted_tokens": 0}
        self.renders = 0  # prompts rendered and tokenized (not served from the cache): for benches and tests
        if draft_model is not None:
            self._draft = self._load_draft(Path(draft_model), flash_attn)

    # -- where it runs ----------------------------------------------------------------------

    @property
    def n_gpu_layers(self) -> int:
        """Layers on the GPU (0 on the CPU)."""
        return self.placement.offloaded

    @property
    def where(self) -> str:
        """One line for the status bar: `GPU · Vulkan · 30/30 layers · NVIDIA H200`, `CPU · …`."""
        return self.placement.summary()

    def _place(self, requested: int) -> Placement:
        supported = gpu_offload_supported()
        if requested > 0 and not supported:
            self.gpu_note = "this llama.cpp build has no GPU support; running on the CPU"
            log.info("GPU layers requested (%d) but %s", requested, self.gpu_note)
        if requested == 0 or not supported:
            gpus: list[llama_devices.Device] = []
            backends: list[str] = [] if supported else offload.gpu_backend_names(llama_devices.backend_names())
        else:
            gpus, backends = llama_devices.gpu_devices(), []
        return offload.plan(
            requested,
            self.metadata,
            self.n_ctx,
            supported=supported,
            gpus=gpus,
            gpu_backends=backends,
            kv_cache=self.kv_cache,
        )

    # -- loading ---------------------------------------------------------------------------

    def _load(self, flash_attn: bool) -> Any:
        attempts = offload.fallbacks(self.placement, llama_devices.gpu_devices() if self.placement.on_gpu else [])
        for i, placement in enumerate(attempts):
            try:
                llm = self._load_with(placement, flash_attn)
            except ModelLoadError as exc:
                if i + 1 == len(attempts):
                    raise
                log.warning(
                    "loading with %s failed (%s); trying %s", placement.summary(), exc, attempts[i + 1].summary()
                )
                continue
            if i > 0:
                self.gpu_note = (
                    f"the GPU could not hold {attempts[0].offloaded} layers; "
                    f"running {'with ' + placement.summary() if placement.on_gpu else 'on the CPU'}"
                )
                log.warning("%s: %s", self.name, self.gpu_note)
            self.placement = placement
            return llm
        raise AssertionError("unreachable: the last attempt raises")

    def _load_with(self, placement: Placement, flash_attn: bool) -> Any:
        llama_log.clear_recent()
        try:
            return new_llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_batch=min(512, self.n_ctx),
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                n_gpu_layers=placement.n_gpu_layers,
                # llama.cpp's own default: measured +11% decode speed on CPU (ember bench).
                flash_attn=flash_attn,
                type_k=self._kv_types[0],
                type_v=self._kv_types[1],
                verbose=False,
                on_progress=load_progress.current(),
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise llama_failure(self.path.name, self.path, exc, llama_log.recent_messages(), self.n_ctx) from exc
        except Exception as exc:  # e.g. a template that does not parse (TemplateSyntaxError)
            raise ModelLoadError(f"{self.path.name}: {type(exc).__name__}: {exc}") from exc

    def _load_draft(self, path: Path, flash_attn: bool) -> DraftModel:
        """The draft model, on the same device as the target; freed again if it is refused."""
        try:
            return DraftModel(
                path,
                target_vocab=self._vocab,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_gpu_layers=-1 if self.placement.on_gpu else 0,
                flash_attn=flash_attn,
                type_k=self._kv_types[0],
                type_v=self._kv_types[1],
            )
        except BaseException:
            self.close()
            raise

    def _load_projector(self, chosen: str | Path | None) -> Projector | None:
        """The model's vision projector (chosen, else a fitting sibling `mmproj*.gguf`), loaded
        against it; the model is freed if a chosen one does not fit or load."""
        try:
            pairing = pair(self.path, self.metadata.embedding_length, Path(chosen) if chosen else None)
            if pairing.note:
                log.info("%s: projectors passed over: %s", self.name, pairing.note)
            self.projector_refused = pairing.refused
            if pairing.projector is None:
                return None
            refused = check_projector(self.path, pairing.projector.path)  # a child encodes once per file
            if refused and chosen:
                raise GGUFError(refused, pairing.projector.path)
            if refused:
                log.warning("%s: %s", self.name, refused)
                self.projector_refused = refused
                return None
            return Projector(pairing.projector.path, self._llm.model, self.n_threads, use_gpu=self.placement.on_gpu)
        except GGUFError as exc:
            self.close()
            raise ModelLoadError(f"{exc.path.name if exc.path else 'projector'}: {exc}", exc.kind) from None
        except BaseException:
            self.close()
            raise

    @property
    def projector(self) -> Path | None:
        return self._projector.path if self._projector is not None else None

    @property
    def draft_model(self) -> Path | None:
        return self._draft.path if self._draft is not None else None

    # -- for the bench and diagnostics -------------------------------------------------------

    @property
    def model_path(self) -> Path:
        return self.path

    @property
    def flash_attn_mode(self) -> str:
        """The context's flash-attention setting, spelled as llama-bench's `-fa` value."""
        code = int(self._llm.context_params.flash_attn_type)
        return {-1: "auto", 0: "off", 1: "on"}.get(code, "auto")

    @property
    def cached_tokens(self) -> int:
        """How many tokens the KV cache holds (the prefix the next request may reuse)."""
        return len(self._kv.tokens)

    @property
    def last_prompt_evaluated(self) -> int:
        """Prompt tokens the last request actually decoded (the rest came from the KV cache)."""
        return self._kv.last_evaluated

    def reset_cache(self) -> None:
        """Empty the KV cache: the next request evaluates its whole prompt."""
        self._kv.forget()
        if self._draft is not None:
            self._draft.reset()

    def raw(self) -> Any:
        """The underlying `llama_cpp.Llama`, for side-by-side measurements (`ember bench`).

        Whatever the caller does to its context, the backend forgets its KV-cache record,
        so its next request starts from an empty cache; no chain stays attached to it.
        """
        self._kv.forget()
        self._device_greedy.release()
        return self._llm

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

    def _checked_template(self) -> ChatTemplate | None:
        """The file's chat template (Ember's own GGUF reader), compiled in the bounded sandbox before
        any Llama is built; None when the file has none."""
        source = self.metadata.chat_template
        if not (source and source.strip()):
            return None
        try:
            return ChatTemplate(source)
        except ConfigError as exc:
            raise ModelLoadError(f"{self.path.name}: {exc}") from exc

    def _make_template(self, checked: ChatTemplate | None) -> PromptFormat:
        """The file's own chat template with the vocabulary's token strings; without one,
        llama.cpp's built-in format for its architecture, else a plain transcript
        (`models.gguf.builtin_templates`)."""
        if checked is None:
            builtin = FORMATS.get(self.metadata.builtin_template or "")
            if builtin is None:
                return PlainTranscript()
            return BuiltinTemplate(builtin, special_strings=self._special_strings())
        bos = self._token_text(self._llm.token_bos()) if self._llm.token_bos() >= 0 else ""
        eos = self._token_text(self._llm.token_eos()) if self._llm.token_eos() >= 0 else ""
        checked.set_tokens(bos_token=bos, eos_token=eos, special_strings=self._special_strings())
        return checked

    def _single_tokens(self, texts: Sequence[str]) -> frozenset[int]:
        """The ids of those `texts` that are one token of the vocabulary."""
        ids = (self._llm.tokenize(t.encode("utf-8"), add_bos=False, special=True) for t in texts)
        return frozenset(i[0] for i in ids if len(i) == 1)

    def _make_abort_callback(self) -> Any:
        """A callback that lets a stop interrupt a long prompt evaluation (CPU only)."""
        if self.placement.on_gpu:
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
        """The rendered prompt as token ids, and the thinking opener it pre-fills ('' if none).

        Remembered by content: the context fit measures the very request a turn then
        streams, so the prompt is rendered and tokenized once (the counting thread and the
        model's thread share the cache under a lock).
        """
        ids, prefilled, _ = self._prompt(request)
        return ids, prefilled

    def _prompt(self, request: Request) -> tuple[list[int], str, dict[int, Span]]:
        """`prompt_tokens`, with the images' spans by their offset in the ids."""
        if request.prompt is not None:
            return self._raw_prompt(request.prompt, request.suffix), "", {}
        key = prompt_key(request.messages, request.tools)
        with self._prompt_lock:
            known = self._prompts.get(key)
            if known is not None:
                self._prompts.move_to_end(key)
                return list(known[0]), known[1], known[2]
        media: dict[int, Span] = {}
        ids, prefilled = self._render(request, media)
        with self._prompt_lock:
            self._prompts[key] = (tuple(ids), prefilled, media)
            while len(self._prompts) > PROMPT_CACHE_SIZE:
                self._prompts.popitem(last=False)
        return ids, prefilled, media

    def _raw_prompt(self, prompt: str, suffix: str | None) -> list[int]:
        """A raw prompt's tokens, no template (special tokens in it parse, as llama.cpp's server does);
        with `suffix`, fill-in-the-middle: FIM_PRE prompt FIM_SUF suffix FIM_MID."""
        if len(prompt) + len(suffix or "") > self.n_ctx * MAX_CHARS_PER_TOKEN:
            raise ContextOverflowError(f"the prompt is far more than the model's {self.n_ctx:,}-token context holds")
        text = self._llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if suffix is None:
            ids = list(text)
        else:
            fim = self.fim_tokens
            if fim is None:
                raise ConfigError(f"{self.name} has no fill-in-the-middle tokens, so 'suffix' cannot be used")
            tail = self._llm.tokenize(suffix.encode("utf-8"), add_bos=False, special=True)
            ids = [fim[0], *text, fim[1], *tail, fim[2]]
        bos = self._llm.token_bos()
        if bos >= 0 and _adds_bos(self._llm.metadata) and (not ids or ids[0] != bos):
            ids.insert(0, bos)
        return ids

    @property
    def fim_tokens(self) -> tuple[int, int, int] | None:
        """The vocabulary's fill-in-the-middle tokens (prefix, suffix, middle); None when it lacks one."""
        vocab: Any = self._vocab
        pre, suf, mid = (
            int(ll.llama_vocab_fim_pre(vocab)),
            int(ll.llama_vocab_fim_suf(vocab)),
            int(ll.llama_vocab_fim_mid(vocab)),
        )
        return None if min(pre, suf, mid) < 0 else (pre, suf, mid)

    def _render(self, request: Request, media: dict[int, Span]) -> tuple[list[int], str]:
        self.renders += 1
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        if chars > self.n_ctx * MAX_CHARS_PER_TOKEN:  # never handed to the template and tokenizer
            raise ContextOverflowError(
                f"the prompt is {chars:,} characters long, far more than the model's "
                f"{self.n_ctx:,}-token context can hold; shorten it"
            )
        # A template that ignores tools gets them described in the system message instead.
        messages, images = with_markers(request.messages, self._marker)
        if images and self._projector is None:
            raise ConfigError(f"{self.name}: {self.projector_refused or NO_PROJECTOR}")
        messages, tools = fallback_for(self._template.source, messages, request.tools)
        segments = self._template.segments(messages, tools=tools)
        ids: list[int] = []
        for seg in segments:
            if images and self._projector is not None and self._marker in seg.text:
                tokenize_with_images(
                    seg.text,
                    self._marker,
                    images,
                    self._projector,
                    lambda text, seg=seg: self._tokenize(replace(seg, text=text)),
                    ids,
                    media,
                )
            else:
                ids.extend(self._tokenize(seg))
        if images:
            raise ConfigError(f"{self.name}: its chat template dropped {len(images)} image(s) from the prompt")
        bos = self._llm.token_bos()
        if bos >= 0 and _adds_bos(self._llm.metadata) and (not ids or ids[0] != bos):
            ids.insert(0, bos)
        return ids, prefill_opener("".join(s.text for s in segments[-2:]))

    def _tokenize(self, seg: Segment) -> list[int]:
        return list(self._llm.tokenize(seg.text.encode("utf-8"), add_bos=False, special=seg.trusted))

    def count_tokens(self, text: str) -> int:
        if len(text) > self.n_ctx * MAX_CHARS_PER_TOKEN:  # more than fits, whatever its exact count
            return len(text) // MAX_CHARS_PER_TOKEN + 1
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        """Exact (the token_count capability): reads only the vocabulary and the template,
        so it is safe beside a streaming reply."""
        return len(self.prompt_tokens(Request(messages=tuple(messages), tools=tuple(tools) if tools else None))[0])

    # -- streaming ------------------------------------------------------------------------

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece | PromptProgress]:
        tokens, prefilled, media = self._prompt(request)  # one look: the spans belong to these ids
        info.prompt_tokens = len(tokens)
        # The context window moved: keep what the cache still holds (not with images: a shift could cut one).
        shifted = 0 if media else reuse_shifted(self._kv, tokens)
        info.cached_tokens = self._kv.reusable(tokens)
        self._cache_state = {"type": self.kv_cache, "warm_tokens": info.cached_tokens, "shifted_tokens": shifted}
        info.n_ctx = self.n_ctx
        info.prefilled_thinking = prefilled
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise ContextOverflowError(
                f"the conversation ({len(tokens)} tokens) no longer fits the {self.n_ctx}-token context"
            )
        self._cancel = cancel
        try:
            pieces = self._generate(tokens, request, cancel, info, min(request.max_tokens, room), media)
            stops = self._template.stop_texts if request.prompt is None else ()  # a raw prompt: the client's stops
            yield from _until_stop_text(pieces, stops, info) if stops else pieces
        finally:
            self._cancel = None

    def _generate(
        self,
        tokens: list[int],
        request: Request,
        cancel: CancelToken,
        info: StreamInfo,
        limit: int,
        media: dict[int, Span],
    ) -> Generator[Piece | PromptProgress, None, None]:
        s = request.sampling
        seed = s.seed if s.seed is not None else secrets.randbits(31)
        info.receipt = self._receipt(request, seed, tokens)
        chain = self._sampler(request, seed, [t for t in tokens if not is_pseudo(t)] if media else tokens, limit)
        probs = None
        if request.logprobs is not None:
            probs = LogprobReader(
                self._llm.ctx, self._llm.n_vocab(), request.logprobs, lambda t: self._pieces.read(t, True)
            )
            chain.tap = probs.record
        info.finish_reason = FinishReason.LENGTH
        reply = TokenDigest()
        try:
            if request.score_prompt and not media:
                evaluated = self._score_prompt(tokens, request, cancel, info)
            else:
                evaluated = yield from self._evaluate_prompt(tokens, cancel, media)
            if not evaluated:
                info.finish_reason = FinishReason.CANCELLED
                return
            if limit <= 0:  # `max_tokens: 0`: the prompt scored, nothing generated
                return
            yield from self._decode_loop(chain, cancel, info, limit, tokens, reply, probs, drafting=not media)
        finally:
            if chain is not self._device_greedy.attached:
                chain.close()
            info.receipt["reply"] = reply.to_json()
            info.receipt["model"]["sha256"] = self._digest.result()  # ready long before, but for a huge file

    def _sampler(self, request: Request, seed: int, text_ids: list[int], limit: int) -> SamplerChain:
        """This request's sampler chain: greedy on a GPU samples inside the graph, with the one
        chain kept attached between requests (`DeviceGreedy`); anything else on the host."""
        s = request.sampling
        on_device = self.placement.on_gpu and self.device_sampling and request.logprobs is None  # logits: host
        if on_device and device_samplable(s, request.grammar):
            kept = self._device_greedy.chain(self._llm.ctx)
            if kept is not None:
                return kept
        else:
            self._device_greedy.release()
        try:  # the chain refuses a grammar llama.cpp cannot parse (a NULL sampler), so no second parse first
            return SamplerChain(self._vocab, s, seed, request.grammar, text_ids, reply_limit=limit)
        except GrammarError as exc:
            raise ConfigError(str(exc)) from exc

    def _receipt(self, request: Request, seed: int, tokens: list[int]) -> dict[str, Any]:
        import llama_cpp as lc

        return {
            "backend": "llama.cpp",
            "llama_cpp_python": str(getattr(lc, "__version__", "?")),
            "device": self.where,
            "context_size": self.n_ctx,
            "model": {"file": self.name, "bytes": self.path.stat().st_size, "sha256": None}
            | ({"source": self._source} if self._source else {}),
            "chat_template_sha256": text_sha256(self._template.source),
            **request_receipt(request, seed),
            "prompt": TokenDigest(tokens).to_json(),
            # What changes llama.cpp's arithmetic without changing the prompt: a warm KV cache (the
            # prefix was decoded in other batches), its type, drafting (tokens verified in batches).
            "kv_cache": dict(self._cache_state),
            "prompt_lookup": self.prompt_lookup,
            "draft_model": self._draft is not None,
            "cpu_variant": _cpu_variant(),
        }

    def _score_prompt(self, tokens: list[int], request: Request, cancel: CancelToken, info: StreamInfo) -> bool:
        """Decode the prompt with logits at every position and keep each token's log probability
        given the ones before it (`info.prompt_logprobs`; the first has no context: 0.0, no
        alternatives); False if a stop came first."""
        reader = LogprobReader(
            self._llm.ctx, self._llm.n_vocab(), request.logprobs or 0, lambda t: self._pieces.read(t, True)
        )

        def read(first: int, n: int) -> None:
            for i in range(n):
                if first + i + 1 < len(tokens):
                    reader.record(i, tokens[first + i + 1])

        try:
            done = self._kv.score(tokens, read, cancel)
        except DecodeError as exc:
            raise _decode_failure(exc) from exc
        if done:
            head = self._pieces.read(tokens[0], True)
            first = TokenLogprob(head.decode("utf-8", "replace"), tuple(head), 0.0)
            info.prompt_logprobs = (first, *(reader.take() for _ in tokens[1:]))
        return done

    def _evaluate_prompt(
        self, tokens: list[int], cancel: CancelToken, media: dict[int, Span]
    ) -> Generator[PromptProgress, None, bool]:
        """Bring the KV cache to `tokens`; False if a stop came first.

        A prompt longer than one batch reports its progress (before the first batch, then
        after each but the last); a stop is seen between batches, and on the CPU the abort
        callback also interrupts a batch. Not for a single token (a warm cache re-reads only the
        prompt's last one): that decode is as short as a reply token's, which runs without the
        callback too, and its hundreds of calls into Python cost ~0.5 ms of the first token.
        """
        cpu.decoding()  # the first decode is where a CPU variant traps: a marker until it is done
        try:
            for done, total in self._kv.batches(tokens, media):
                if done == 0 and total > 1:
                    self._set_abort_callback(True)
                if done < total:
                    if total > self._kv.n_batch or media:
                        yield PromptProgress(done, total)
                    if cancel.cancelled:
                        return False
            cpu.decoded()  # the CPU variant decoded here: no start marker left behind
            return True
        except DecodeError as exc:
            if exc.code == ABORTED and cancel.cancelled:
                return False
            raise _decode_failure(exc) from exc
        finally:
            self._set_abort_callback(False)

    def _decode_loop(
        self,
        chain: SamplerChain,
        cancel: CancelToken,
        info: StreamInfo,
        limit: int,
        tokens: list[int],
        reply: TokenDigest,
        probs: LogprobReader | None,
        *,
        drafting: bool = True,
    ) -> Iterator[Piece]:
        """Sample, yield, decode, the stop flag checked before each token is used.

        With `probs`, each piece carries the log probabilities of the tokens it completes (a
        character split over tokens comes with the last of them).
        """
        classify, stop_ids = self._classes.classify, self._stop_ids
        decoder = Utf8Stream()
        count = 0
        carried: list[TokenLogprob] = []
        for token in self._sampled(chain, info, limit, tokens, drafting):
            if cancel.cancelled:
                break
            eog, special, user_defined = classify(token)
            if eog or token in stop_ids:
                info.finish_reason = FinishReason.STOP
                break
            count += 1
            reply.add(token)
            info.completion_tokens = count
            piece = self._piece(token, special, user_defined, decoder)
            if probs is not None:
                carried.append(probs.take())
                if piece is not None:
                    piece, carried = replace(piece, logprobs=tuple(carried)), []
            if piece is not None:
                yield piece
            if count >= limit:
                break
        if cancel.cancelled:
            info.finish_reason = FinishReason.CANCELLED
        tail = decoder.flush()
        if tail or carried:
            yield Piece(tail, logprobs=tuple(carried))

    def _sampled(
        self, chain: SamplerChain, info: StreamInfo, limit: int, prompt: list[int], drafting: bool = True
    ) -> Iterator[int]:
        """The reply's tokens, one at a time; the caller stops taking them when it is done.

        Each token is decoded into the KV cache only when the next one is asked for. With a
        drafter, the token and a draft are decoded as one batch and the draft is checked
        position by position (`engine.llama.speculative`).
        """
        ctx, kv = self._llm.ctx, self._kv
        drafter = self._drafter(chain) if drafting else None  # a draft could echo an image's pseudo-ids
        token = chain.sample(ctx)
        if drafter is None:
            while True:
                yield token
                self._decode_step(kv.append, token)
                token = chain.sample(ctx)
        history, policy, emitted = list(prompt), self.draft_policy, 1
        try:
            while True:
                yield token
                history.append(token)
                k = policy.length(limit - emitted)
                started = time.perf_counter()  # drafting counts too: a draft model's decodes cost
                draft = drafter.draft(history, k) if k else []
                self._decode_step(kv.extend, [token, *draft])
                policy.observe_decode(1 + len(draft), time.perf_counter() - started)
                accepted = 0
                for i, guess in enumerate(draft):
                    token = chain.sample(ctx, i)
                    if token != guess:
                        kv.keep(len(kv.tokens) - (len(draft) - i))
                        break
                    accepted += 1
                    emitted += 1
                    yield token
                    history.append(token)
                else:
                    token = chain.sample(ctx, len(draft))
                emitted += 1
                if draft:
                    info.drafted += len(draft)
                    info.accepted += accepted
                    policy.observe_draft(len(draft), accepted)
        finally:
            drafter.close()

    def _decode_step(self, decode: Callable[[Any], None], arg: Any) -> None:
        try:
            decode(arg)
        except DecodeError as exc:
            raise _decode_failure(exc) from exc

    def _drafter(self, chain: SamplerChain) -> Drafter | None:
        """What drafts this request's tokens, or None to decode one token at a time.

        Not with sampling inside the GPU graph (it samples the batch's last position only)
        or a model whose cache cannot drop a rejected draft (recurrent, hybrid).
        """
        if chain.on_device or not self._kv_trimmable:
            return None
        drafters: list[Drafter] = [PromptLookup()] if self.prompt_lookup else []
        if self._draft is not None:
            drafters.append(self._draft)
        if not drafters:
            return None
        return drafters[0] if len(drafters) == 1 else Chained(*drafters)

    def _piece(self, token: int, special: bool, user_defined: bool, decoder: Utf8Stream) -> Piece | None:
        data = self._pieces.read(token, special)
        if special:
            return Piece(data.decode("utf-8", "replace"), token, True, user_defined)
        text = decoder.feed(data)
        return Piece(text, token) if text else None

    def check_grammar(self, gbnf: str) -> str | None:
        """None if llama.cpp accepts the GBNF; else why not. An invalid grammar would segfault."""
        # Built first in a child process (verdict cached): a crash there cannot take us down.
        return grammar_problem(self.path, gbnf) or grammar_error(self._vocab, gbnf)

    def close(self) -> None:
        draft: DraftModel | None = getattr(self, "_draft", None)
        if draft is not None:
            draft.shutdown()
            self._draft = None
        projector: Projector | None = getattr(self, "_projector", None)
        if projector is not None:
            projector.close()  # before the model it was loaded against
            self._projector = None
        greedy: DeviceGreedy | None = getattr(self, "_device_greedy", None)
        if greedy is not None:
            greedy.release()  # detached before the context that points at it goes
        llm: Any = getattr(self, "_llm", None)
        if llm is not None and hasattr(self, "_kv"):
            self._kv.close()
            llm.close()
            self._llm = None


def _until_stop_text(
    pieces: Generator[Piece | PromptProgress, None, None], stops: Sequence[str], info: StreamInfo
) -> Iterator[Piece | PromptProgress]:
    """`pieces` up to the first stop text (not included), which ends the generation.

    Stop texts match text (user-defined tokens print as text: Gemma's newlines are some); a
    control token between releases what was held. Leading white space is dropped: a plain
    transcript's reply starts with the space after `Assistant:`.
    """
    matcher = StopMatcher(tuple(stops))
    started = False
    for item in pieces:
        if not isinstance(item, Piece) or (item.special and not item.user_defined):
            held = matcher.flush() if started else matcher.flush().lstrip()
            if held:
                yield Piece(held)
            started = started or isinstance(item, Piece)
            yield item
            continue
        text = matcher.feed(item.text)
        text = text if started else text.lstrip()
        if text:
            started = True
            yield item if text == item.text else Piece(text, item.token_id)  # whole: it keeps its class
        if matcher.hit:
            pieces.close()  # the decode loop's cleanup runs now, before the finish reason is set
            info.finish_reason = FinishReason.STOP
            return
    tail = matcher.flush()
    if tail:
        yield Piece(tail)


def _decode_failure(exc: DecodeError) -> Exception:
    """An engine error for a failed `llama_decode` (1: the KV cache has no room)."""
    if exc.code == 1:
        return ContextOverflowError("the context is full (llama.cpp found no room in the KV cache)")
    return BackendError(f"llama.cpp failed while generating: {exc}")


def _adds_bos(meta: dict[str, str]) -> bool:
    return meta.get("tokenizer.ggml.add_bos_token", "false").lower() == "true"


def _cpu_variant() -> str | None:
    from engine.llama.cpu import loaded

    choice = loaded()
    return choice.chosen if choice is not None else None
