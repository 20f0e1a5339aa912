"""How fast a model will answer on this machine, predicted from its file and the machine profile.

Decoding one token reads every weight once (the output matrix included): its time is the file's
bytes over the effective memory bandwidth, plus a fixed cost per layer (the ggml operations and
thread barriers, which dominate small models on a busy CPU). Reading a prompt is bound by
compute: 2 × the parameters outside the token embedding per token, plus the same kind of cost
per layer. Formats without llama.cpp's repacked CPU kernels (Q4_1, Q5_K, Q6_K, …) cost more per
byte: the issue's quiet-machine figures for the built-in model (Q4_0 against Q4_1: prompt
×1.68, decode ×1.54) give the factors. The machine profile holds the figures, measured once on
the built-in model (`engine.backends.machine_profile`); it is an input here, so tests pass
their own.

Measured speeds of real use replace the prediction for that file, and their ratio to what was
predicted (`calibration`) scales the next predictions for files never run (issue #48).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from models.gguf.meta import ModelMetadata

# A thinking model writes this many tokens of reasoning before its first answer word: a few
# hundred is typical of Qwen3 and DeepSeek-R1 distils on a short question (issue #48).
THINKING_TOKENS = 400
# A prompt of this size is the first turn of a chat (the system prompt and a question).
FIRST_PROMPT_TOKENS = 200
WORDS_PER_TOKEN = 0.75  # English prose in the tokenizers of the catalogue's models
USEFUL_TPS = 8.0  # the default "answers at a useful speed" bar (a setting: `useful_tps`)
# Calibration ratios outside this band are a bad measurement (a machine busy elsewhere).
RATIO_BAND = (0.25, 4.0)
# Formats llama.cpp repacks into its fast interleaved CPU kernels (ggml-cpu's repack.cpp).
REPACKED = frozenset({"Q4_0", "Q8_0", "Q4_K_S", "Q4_K_M", "IQ4_NL"})
SLOW_DECODE, SLOW_PROMPT = 1.54, 1.68  # per byte / per operation, in any other quantized format
# The share of the built-in model's time per token taken by the per-layer costs (the rest
# scales with bytes or operations). Set so Gemma 3 270M (18 layers, 253 MB) is predicted from
# SmolLM2 135M (30 layers, 98 MB) within its measured speed on a loaded and a quiet machine.
LAYER_SHARE = 0.3
UNKNOWN_LAYERS = 28  # a catalogue entry whose architecture was not checked


def format_factors(quant: str) -> tuple[float, float]:
    """(decode, prompt) cost of `quant` relative to a repacked format; F16/F32 and unknown: 1."""
    quant = quant.upper()
    if quant in REPACKED or not quant.startswith(("Q", "IQ")):
        return 1.0, 1.0
    return SLOW_DECODE, SLOW_PROMPT


@dataclass(frozen=True, slots=True)
class MachineProfile:
    """Effective decode bandwidth (bytes/s), prompt compute (operations/s) and the per-layer costs."""

    decode_bytes_per_s: float
    prompt_ops_per_s: float
    decode_s_per_layer: float = 0.0
    prompt_s_per_layer: float = 0.0
    device: str = "CPU"
    seconds: float = 0.0  # how long the measurement took
    calibration: float = 1.0  # measured/predicted decode of files run since (median)

    def to_json(self) -> dict[str, object]:
        return {
            "decode_bytes_per_s": round(self.decode_bytes_per_s),
            "prompt_ops_per_s": round(self.prompt_ops_per_s),
            "decode_s_per_layer": self.decode_s_per_layer,
            "prompt_s_per_layer": self.prompt_s_per_layer,
            "device": self.device,
            "seconds": round(self.seconds, 2),
            "calibration": round(self.calibration, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MachineProfile | None:
        try:
            bw, ops = float(str(data["decode_bytes_per_s"])), float(str(data["prompt_ops_per_s"]))
            dl, pl = float(str(data.get("decode_s_per_layer", 0))), float(str(data.get("prompt_s_per_layer", 0)))
            cal, seconds = float(str(data.get("calibration", 1.0))), float(str(data.get("seconds", 0.0)))
        except (KeyError, ValueError):
            return None
        if not (bw > 0 and ops > 0 and dl >= 0 and pl >= 0 and RATIO_BAND[0] <= cal <= RATIO_BAND[1]):
            return None
        return cls(bw, ops, dl, pl, str(data.get("device", "CPU")), seconds, cal)

    @classmethod
    def from_run(cls, run: ModelRun, seconds: float = 0.0) -> MachineProfile:
        """The profile from one model's measured speeds (`LAYER_SHARE` of each per-token time per layer)."""
        decode_f, prompt_f = format_factors(run.quant)
        t_decode, t_prompt = 1.0 / run.decode_tps, 1.0 / run.prompt_tps
        return cls(
            decode_bytes_per_s=run.size_bytes * decode_f / ((1 - LAYER_SHARE) * t_decode),
            prompt_ops_per_s=2.0 * run.matmul_parameters * prompt_f / ((1 - LAYER_SHARE) * t_prompt),
            decode_s_per_layer=LAYER_SHARE * t_decode / run.layers,
            prompt_s_per_layer=LAYER_SHARE * t_prompt / run.layers,
            seconds=seconds,
        )


@dataclass(frozen=True, slots=True)
class ModelRun:
    """What the profile measured: one model's size, shape, format and speeds."""

    size_bytes: int
    matmul_parameters: float  # outside the token embedding (a lookup when reading a prompt)
    layers: int
    quant: str
    prompt_tps: float
    decode_tps: float


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
) -> Prediction:
    """Prompt and decode tokens/s of a model of `size_bytes`, `parameters` (matrix weights, a
    count) and `layers` in `quant` here; a measured decode speed replaces the estimate."""
    decode_f, prompt_f = format_factors(quant)
    n_layers = layers or UNKNOWN_LAYERS
    t_decode = n_layers * profile.decode_s_per_layer + size_bytes * decode_f / profile.decode_bytes_per_s
    t_prompt = n_layers * profile.prompt_s_per_layer + 2.0 * parameters * prompt_f / profile.prompt_ops_per_s
    decode = measured_decode_tps or profile.calibration / max(t_decode, 1e-9)
    prompt = 1.0 / max(t_prompt, 1e-9)
    first = FIRST_PROMPT_TOKENS / prompt + THINKING_TOKENS / decode if thinks else None
    return Prediction(prompt, decode, first, measured=measured_decode_tps is not None)


def matmul_parameters(meta: ModelMetadata) -> float:
    """The parameters a prompt multiplies: all but the token embedding (a row lookup)."""
    embedding = (meta.vocab_size or 0) * (meta.embedding_length or 0)
    return float(meta.parameters - embedding if 0 < embedding < meta.parameters else meta.parameters)


def model_run(meta: ModelMetadata, prompt_tps: float, decode_tps: float) -> ModelRun:
    return ModelRun(
        meta.size_bytes, matmul_parameters(meta), meta.block_count or UNKNOWN_LAYERS, meta.quantization,
        prompt_tps, decode_tps,
    )  # fmt: skip


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
    )


def calibration(ratios: list[float]) -> float:
    """The median measured/predicted decode ratio of earlier runs (1.0 with none in band)."""
    kept = [r for r in ratios if RATIO_BAND[0] <= r <= RATIO_BAND[1]]
    return statistics.median(kept) if kept else 1.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"
