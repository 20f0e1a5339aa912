"""How fast a model will answer on this machine, predicted from its file and the machine profile.

Decoding one token reads every matrix once, the output projection included (`output.weight`, or
the token embedding when the file ties them: Gemma 3 270M's 262k-token vocabulary makes that one
matrix 170M of its 270M parameters), but only one row of a separate token embedding: its time is
those bytes over the effective memory bandwidth, plus a fixed cost per layer (the ggml operations
and thread barriers, which dominate small models on a busy CPU). Reading a prompt is bound by
compute: 2 × the matrix parameters per token, the output projection once per prompt (llama.cpp
computes the last token's logits only), plus the same kind of cost per layer. The counts come
from the GGUF's own tensor list (`file_weights`). Tensors in formats without llama.cpp's
repacked CPU kernels (Q4_1, Q5_0, Q6_K, …) cost more per byte decoding, and those without its
repacked or tinyBLAS kernels (Q4_1, Q6_K, …, not Q5_0) more per operation reading a prompt: the
issue's quiet-machine figures for the built-in model (Q4_0 against Q4_1: prompt ×1.68, decode
×1.54) give the factors (`SLOW_DECODE`, `SLOW_PROMPT`).
The machine profile holds the figures, measured once on
the built-in model (`engine.llama.machine_profile`); it is an input here, so tests pass
their own.

Measured speeds of real use replace the prediction for that file, and their ratio to what was
predicted (`calibration`) scales the next predictions for files never run (issue #48).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from models.errors import EmberError
from models.gguf.ggml_types import ggml_type_name
from models.gguf.header import TensorInfo, read_header
from models.gguf.meta import ModelMetadata, shard_paths

# A thinking model writes this many tokens of reasoning before its first answer word: a few
# hundred is typical of Qwen3 and DeepSeek-R1 distils on a short question (issue #48).
THINKING_TOKENS = 400
# A prompt of this size is the first turn of a chat (the system prompt and a question).
FIRST_PROMPT_TOKENS = 200
OUTPUT_NAME, EMBEDDING_NAME = "output.weight", "token_embd.weight"
WORDS_PER_TOKEN = 0.75  # English prose in the tokenizers of the catalogue's models
USEFUL_TPS = 8.0  # the default "answers at a useful speed" bar (a setting: `useful_tps`)
# Calibration ratios outside this band are a bad measurement (a machine busy elsewhere).
RATIO_BAND = (0.25, 4.0)
# Formats llama.cpp repacks into its fast interleaved CPU kernels (ggml-cpu's repack.cpp).
REPACKED = frozenset({"Q4_0", "Q8_0", "Q4_K_S", "Q4_K_M", "IQ4_NL"})
REPACKED_TENSORS = frozenset({"Q4_0", "Q8_0", "Q4_K", "IQ4_NL"})  # the same, named by tensor type
# A prompt's batch also multiplies fast in the formats of llamafile's tinyBLAS kernels
# (ggml-cpu/llamafile/sgemm.cpp on x86: F32, F16, BF16, Q8_0, Q4_0, Q5_0, IQ4_NL): Q5_0 is slow
# decoding (no repacked kernel) but not reading a prompt. Gemma 3 270M's Q4_K_M file is mostly Q5_0.
PROMPT_FAST = REPACKED | {"Q5_0"}
PROMPT_FAST_TENSORS = REPACKED_TENSORS | {"Q5_0"}
# The share of the built-in model's time per token taken by the per-layer costs (the rest
# scales with bytes or operations). Set so Gemma 3 270M (18 layers, 253 MB) is predicted from
# SmolLM2 135M (30 layers, 98 MB) within its measured speed on a loaded and a quiet machine.
LAYER_SHARE = 0.3
# The quiet-machine figures for the whole built-in model, Q4_1 against Q4_0: prompt
# ×1.68, decode ×1.54. Decoding's is used per byte as it is. Reading's is the whole model's: its
# per-layer costs (`LAYER_SHARE` of the Q4_1 time) do not change with the format, so the matrices'
# own cost per operation is (1 - LAYER_SHARE) / (1 / 1.68 - LAYER_SHARE), ×2.37. (With ×1.68 per
# operation Gemma 3 270M was predicted to read prompts ×1.29 the built-in's speed; measured ×2.3–2.4.)
SLOW_DECODE = 1.54  # per byte, in any quantized format without a repacked kernel
SLOW_PROMPT = (1 - LAYER_SHARE) / (1 / 1.68 - LAYER_SHARE)  # per operation, outside `PROMPT_FAST`
UNKNOWN_LAYERS = 28  # a catalogue entry whose architecture was not checked


def format_factors(
    quant: str, repacked: frozenset[str] = REPACKED, *, cpu: bool = True, prompt_fast: frozenset[str] = PROMPT_FAST
) -> tuple[float, float]:
    """(decode, prompt) cost of `quant` (a file type, or a tensor type with `REPACKED_TENSORS`
    and `PROMPT_FAST_TENSORS`) relative to a fast format; F16/F32 and unknown: 1. On a GPU
    (`cpu` False) every format costs its bytes: the repacked and tinyBLAS kernels are the CPU's."""
    quant = quant.upper()
    if not cpu or not quant.startswith(("Q", "IQ")):
        return 1.0, 1.0
    return (1.0 if quant in repacked else SLOW_DECODE), (1.0 if quant in prompt_fast else SLOW_PROMPT)


@dataclass(frozen=True, slots=True)
class MachineProfile:
    """Effective decode bandwidth (bytes/s), prompt compute (operations/s) and the per-layer costs.

    `device` is "CPU", or the GPU's name for the profile of a model offloaded whole; the CPU's
    profile carries the GPU's (`gpu`) where llama.cpp has one."""

    decode_bytes_per_s: float
    prompt_ops_per_s: float
    decode_s_per_layer: float = 0.0
    prompt_s_per_layer: float = 0.0
    device: str = "CPU"
    seconds: float = 0.0  # how long the measurement took
    calibration: float = 1.0  # measured/predicted decode of files run since (median)
    output_bytes_per_s: float = 0.0  # the output projection's own (measured apart); 0: `decode_bytes_per_s`
    gpu: MachineProfile | None = None  # the same, measured with every layer on the GPU

    @property
    def on_cpu(self) -> bool:
        return self.device == "CPU"

    def to_json(self) -> dict[str, object]:
        gpu: dict[str, object] = {"gpu": self.gpu.to_json()} if self.gpu is not None else {}
        return gpu | {
            "decode_bytes_per_s": round(self.decode_bytes_per_s),
            "prompt_ops_per_s": round(self.prompt_ops_per_s),
            "decode_s_per_layer": self.decode_s_per_layer,
            "prompt_s_per_layer": self.prompt_s_per_layer,
            "device": self.device,
            "seconds": round(self.seconds, 2),
            "calibration": round(self.calibration, 3),
            "output_bytes_per_s": round(self.output_bytes_per_s),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MachineProfile | None:
        try:
            bw, ops = float(str(data["decode_bytes_per_s"])), float(str(data["prompt_ops_per_s"]))
            dl, pl = float(str(data.get("decode_s_per_layer", 0))), float(str(data.get("prompt_s_per_layer", 0)))
            cal, seconds = float(str(data.get("calibration", 1.0))), float(str(data.get("seconds", 0.0)))
            out = float(str(data.get("output_bytes_per_s", 0.0)))
        except (KeyError, ValueError):
            return None
        if not (bw > 0 and ops > 0 and dl >= 0 and pl >= 0 and out >= 0 and RATIO_BAND[0] <= cal <= RATIO_BAND[1]):
            return None
        raw_gpu = data.get("gpu")
        gpu = cls.from_json(cast(Mapping[str, object], raw_gpu)) if isinstance(raw_gpu, Mapping) else None
        return cls(bw, ops, dl, pl, str(data.get("device", "CPU")), seconds, cal, out, gpu)

    @classmethod
    def from_run(cls, run: ModelRun, seconds: float = 0.0, device: str = "CPU") -> MachineProfile:
        """The profile from one model's measured speeds (`LAYER_SHARE` of each per-token time per layer).

        The output projection's share of a decoded token (`run.output_s`, measured apart) gives its
        own bandwidth; without it the projection's bytes count with the layers'."""
        t_decode, t_prompt = 1.0 / run.decode_tps, 1.0 / run.prompt_tps
        w = run.weights
        apart = 0 < run.output_s < t_decode and w.output_bytes > 0
        if not apart:
            w = dataclasses.replace(w, decode_bytes=w.decode_bytes + w.output_bytes, output_bytes=0.0)
        t_layers = t_decode - run.output_s if apart else t_decode
        return cls(
            decode_bytes_per_s=w.decode_bytes / ((1 - LAYER_SHARE) * t_layers),
            output_bytes_per_s=w.output_bytes / run.output_s if apart else 0.0,
            prompt_ops_per_s=run.weights.prompt_ops_per_token(run.prompt_tokens) / ((1 - LAYER_SHARE) * t_prompt),
            decode_s_per_layer=LAYER_SHARE * t_layers / run.layers,
            prompt_s_per_layer=LAYER_SHARE * t_prompt / run.layers,
            device=device,
            seconds=seconds,
        )


@dataclass(frozen=True, slots=True)
class Weights:
    """What a token costs in a model's tensors, each scaled by its format's cost (`format_factors`)."""

    decode_bytes: float  # read per decoded token outside the output projection (one row of an embedding)
    prompt_ops: float  # 2 × multiply-adds per prompt token, outside the output projection
    output_ops: float = 0.0  # 2 × the output projection's: once per prompt, for the last token
    output_bytes: float = 0.0  # the output projection's, read whole per decoded token

    def prompt_ops_per_token(self, tokens: int) -> float:
        return self.prompt_ops + self.output_ops / max(tokens, 1)


def estimated_weights(size_bytes: float, parameters: float, quant: str, *, cpu: bool = True) -> Weights:
    """A model known by its size, matrix parameters and format only (a catalogue entry not downloaded)."""
    decode_f, prompt_f = format_factors(quant, cpu=cpu)
    return Weights(size_bytes * decode_f, 2.0 * parameters * prompt_f)


def tensor_weights(tensors: Iterable[TensorInfo], *, cpu: bool = True) -> Weights:
    """`Weights` from a GGUF's tensors (`cpu`: at the CPU's format costs): a file without
    `output.weight` ties it to the token embedding."""
    tensors = list(tensors)
    tied = not any(t.name == OUTPUT_NAME for t in tensors)
    decode = prompt = output = output_bytes = 0.0
    for t in tensors:
        decode_f, prompt_f = format_factors(
            ggml_type_name(t.ggml_type), REPACKED_TENSORS, cpu=cpu, prompt_fast=PROMPT_FAST_TENSORS
        )
        if t.name == OUTPUT_NAME or (tied and t.name == EMBEDDING_NAME):
            output_bytes, output = output_bytes + t.n_bytes * decode_f, output + 2.0 * t.n_elements * prompt_f
        elif t.name.endswith("_embd.weight"):  # a lookup: one row a token (per-layer embeddings too)
            decode += t.n_bytes / max(t.shape[-1], 1) * decode_f
        else:
            decode += t.n_bytes * decode_f
            prompt += 2.0 * t.n_elements * prompt_f if len(t.shape) > 1 else 0.0
    return Weights(decode, prompt, output, output_bytes)


def file_weights(meta: ModelMetadata, *, cpu: bool = True) -> Weights:
    """`tensor_weights` over every shard of `meta`'s file; its size and format when they cannot be read."""
    try:
        return _file_weights(meta.path, meta.size_bytes, cpu)
    except (OSError, EmberError):
        return estimated_weights(meta.size_bytes, matmul_parameters(meta), meta.quantization, cpu=cpu)


@functools.lru_cache(maxsize=64)
def _file_weights(path: Path, size: int, cpu: bool) -> Weights:  # `size` keys the cache: a replaced file reads again
    tensors = [t for shard in shard_paths(path) for t in read_header(shard, keep_tokens=False).tensors]
    return tensor_weights(tensors, cpu=cpu)


@dataclass(frozen=True, slots=True)
class ModelRun:
    """What the profile measured: one model's weights, layers and speeds (a prompt of `prompt_tokens`)."""

    weights: Weights
    layers: int
    prompt_tps: float
    decode_tps: float
    prompt_tokens: int = FIRST_PROMPT_TOKENS
    output_s: float = 0.0  # of each decoded token's time, the output projection's (0: not measured)


@dataclass(frozen=True, slots=True)
class Prediction:
    prompt_tps: float
    decode_tps: float
    first_word_s: float | None  # thinking models: expected seconds to the first answer word
    measured: bool = False  # the decode figure was measured on this machine, not predicted

    def to_json(self) -> dict[str, object]:
        return {
            "prompt_tps": round(self.prompt_tps, 1),
            "decode_tps": round(self.decode_tps, 1),
            "first_word_s": None if self.first_word_s is None else round(self.first_word_s),
            "measured": self.measured,
        }

    def useful(self, bar: float = USEFUL_TPS) -> bool:
        return self.decode_tps >= bar

    def words(self) -> str:
        """'about 6 words a second here' (and, for a thinking model, when its answer starts)."""
        rate = self.decode_tps * WORDS_PER_TOKEN
        how = "measured at" if self.measured else "about"
        if rate < 0.75:
            text = "less than 1 word a second here"
        else:
            amount = f"{rate:.0f} words" if rate >= 1.5 else "1 word"
            text = f"{how} {amount} a second here"
        if self.first_word_s is not None:
            text += f", answers after about {_duration(self.first_word_s)} of thinking"
        return text


def predict(
    profile: MachineProfile,
    *,
    size_bytes: int,
    parameters: float,
    quant: str = "Q4_K_M",
    layers: int | None = None,
    thinks: bool = False,
    measured_decode_tps: float | None = None,
    weights: Weights | None = None,
) -> Prediction:
    """Prompt and decode tokens/s of a model of `size_bytes`, `parameters` (matrix weights, a
    count) and `layers` in `quant` here (or of its tensors' `weights`, read from the file);
    a measured decode speed replaces the estimate."""
    w = weights or estimated_weights(size_bytes, parameters, quant, cpu=profile.on_cpu)
    n_layers = layers or UNKNOWN_LAYERS
    output_bw = profile.output_bytes_per_s or profile.decode_bytes_per_s
    t_decode = n_layers * profile.decode_s_per_layer + w.decode_bytes / profile.decode_bytes_per_s
    t_decode += w.output_bytes / output_bw
    t_prompt = (
        n_layers * profile.prompt_s_per_layer + w.prompt_ops_per_token(FIRST_PROMPT_TOKENS) / profile.prompt_ops_per_s
    )
    decode = measured_decode_tps or profile.calibration / max(t_decode, 1e-9)
    prompt = 1.0 / max(t_prompt, 1e-9)
    first = FIRST_PROMPT_TOKENS / prompt + THINKING_TOKENS / decode if thinks else None
    return Prediction(prompt, decode, first, measured=measured_decode_tps is not None)


def matmul_parameters(meta: ModelMetadata) -> float:
    """The parameters a prompt multiplies: all but the token embedding (a row lookup)."""
    embedding = (meta.vocab_size or 0) * (meta.embedding_length or 0)
    return float(meta.parameters - embedding if 0 < embedding < meta.parameters else meta.parameters)


def model_run(
    meta: ModelMetadata,
    prompt_tps: float,
    decode_tps: float,
    prompt_tokens: int,
    output_s: float = 0.0,
    *,
    cpu: bool = True,
) -> ModelRun:
    layers = meta.block_count or UNKNOWN_LAYERS
    return ModelRun(file_weights(meta, cpu=cpu), layers, prompt_tps, decode_tps, prompt_tokens, output_s)


def predict_meta(
    profile: MachineProfile, meta: ModelMetadata, *, thinks: bool = False, measured_decode_tps: float | None = None
) -> Prediction:
    """`predict` for a GGUF file described by its header."""
    return predict(
        profile,
        size_bytes=meta.size_bytes,
        parameters=matmul_parameters(meta),
        quant=meta.quantization,
        layers=meta.block_count,
        thinks=thinks,
        measured_decode_tps=measured_decode_tps,
        weights=file_weights(meta, cpu=profile.on_cpu),
    )


def calibration(ratios: list[float]) -> float:
    """The median measured/predicted decode ratio of earlier runs (1.0 with none in band)."""
    kept = [r for r in ratios if RATIO_BAND[0] <= r <= RATIO_BAND[1]]
    return statistics.median(kept) if kept else 1.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"
