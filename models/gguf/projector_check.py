"""Is a vision projector safe to hand to llama.cpp's clip code? Checked from its header alone.

llama.cpp's multimodal library trusts a projector's numbers: it builds the vision encoder's
graph from them and ggml *asserts* (aborts the whole process) where they disagree with the
tensors, at the first picture, long after the file loaded. A position table shorter than the
patches (`ggml_get_rows` past its end), a NaN layer-norm epsilon (`eps >= 0`), a head count
that does not divide the width (a reshape of the wrong size) each killed `ember chat` and one
request killed `ember serve`. `projector_problem` reads the same keys and tensor shapes clip
reads (`clip.vision.*`, `v.*`) and says in one line what is wrong, before anything loads.

What the header cannot show (a type whose graph this module does not know, a shape only a
real encode reveals) is left to `engine.llama.projector_probe`, which encodes one picture
in a child process once per file.

Shapes are GGUF's `ne` order: a `[rows, width]` table is stored as `(width, rows)`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from models.gguf.header import GGUFHeader, MetaValue, TensorInfo, kv_int, kv_str

# clip's projector names (`PROJECTOR_TYPE_NAMES` in llama.cpp's tools/mtmd/clip-impl.h) at the
# llama-cpp-python version uv.lock pins; a name outside it is refused by clip at load anyway.
KNOWN_TYPES = frozenset(
    """mlp ldp ldpv2 resampler adapter qwen2vl_merger qwen2.5vl_merger qwen3vl_merger ling3vl step3vl
    gemma3 gemma3nv gemma3na gemma4v gemma4a gemma4uv gemma4ua phi4 idefics3 pixtral ultravox internvl
    llama4 qwen2a qwen3a glma qwen2.5o voxtral meralion musicflamingo lfm2 kimivl paddleocr lightonocr
    cogvlm janus_pro dots_ocr dots3note_v dots3note_a deepseekocr deepseekocr2 deepseek4v lfm2a glm4v
    glm5v youtuvl yasa2 kimik25 nemotron_v2_vl exaone4_5 hunyuanvl minicpmv4_6 granite_speech mimovl
    minimax_m3 granite4_vision mimo_audio parakeet qwen3tts_spkenc qwen3tts_gen pockettts_spkenc
    pockettts_gen""".split()
)
# Graphs that look a patch's position up by its index (`ggml_get_rows`, llava's graph): the
# table needs a row per patch, plus one for the class token.
ROW_LOOKUP = frozenset({"mlp", "ldp", "ldpv2", "adapter"})
# Graphs that add the table to the patches as it is (siglip's graph, no resize): one row per patch.
ROW_ADD = frozenset({"gemma3", "idefics3", "janus_pro"})
# Graphs that resize the table as a square grid (`resize_position_embeddings`): a square row count.
ROW_SQUARE = frozenset({"lfm2", "phi4", "kimivl", "paddleocr", "step3vl"})
# Types whose encoder is the standard ViT: `block_count` blocks of `v.blk.N.*`, heads splitting the width.
STANDARD_VIT = ROW_LOOKUP | ROW_ADD | ROW_SQUARE

MAX_IMAGE_SIZE = 8192  # pixels a side; real encoders take 224 to 2048
MAX_PATCHES = 1 << 20  # patches of one picture (clip caps its own int32 count near here)
MAX_BLOCKS = 1024


def projector_problem(header: GGUFHeader) -> str | None:
    """Why clip could abort on this vision projector, in one line; None when the header is sound."""
    kv = header.kv
    kind = kv_str(kv, "clip.projector_type") or kv_str(kv, "clip.vision.projector_type") or ""
    if kind not in KNOWN_TYPES:
        return f"its projector type {kind[:40]!r} is not one llama.cpp knows" if kind else "it states no projector type"
    tensors = {t.name: t for t in header.tensors}
    problem = _sizes(kv) or _epsilon(kv)  # every vision graph divides by the patch size and normalises
    if problem or kind not in STANDARD_VIT:
        return problem  # other graphs (MobileNet, mergers, resamplers): the probe judges the rest
    return _heads(kv) or _blocks(kv, tensors) or _patch_kernel(kind, kv, tensors) or _positions(kind, kv, tensors)


def _sizes(kv: Mapping[str, MetaValue]) -> str | None:
    image, patch = kv_int(kv, "clip.vision.image_size"), kv_int(kv, "clip.vision.patch_size")
    if image is None or not 0 < image <= MAX_IMAGE_SIZE:
        return f"its image size {_shown(kv, 'clip.vision.image_size')} is not 1 to {MAX_IMAGE_SIZE} pixels"
    if patch is None or not 0 < patch <= image:
        return f"its patch size {_shown(kv, 'clip.vision.patch_size')} is not 1 to the image size ({image})"
    if (image // patch) ** 2 > MAX_PATCHES:
        return f"its {image} px images in {patch} px patches make over {MAX_PATCHES:,} patches"
    return None


def _heads(kv: Mapping[str, MetaValue]) -> str | None:
    width, heads = kv_int(kv, "clip.vision.embedding_length"), kv_int(kv, "clip.vision.attention.head_count")
    if not width:
        return f"its encoder width {_shown(kv, 'clip.vision.embedding_length')} is not a positive number"
    if not heads:
        return f"its attention head count {_shown(kv, 'clip.vision.attention.head_count')} is not a positive number"
    if "clip.vision.attention.head_dim" not in kv and width % heads:
        return f"its {heads} attention heads do not divide its width ({width})"
    return None


def _epsilon(kv: Mapping[str, MetaValue]) -> str | None:
    eps = kv.get("clip.vision.attention.layer_norm_epsilon")
    if eps is None:
        return None  # clip refuses a missing key itself, in a sentence
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not math.isfinite(eps) or eps < 0:
        shown = _shown(kv, "clip.vision.attention.layer_norm_epsilon")
        return f"its layer-norm epsilon {shown} is not a finite number ≥ 0"
    return None


def _blocks(kv: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]) -> str | None:
    blocks = kv_int(kv, "clip.vision.block_count")
    if blocks is None or not 0 < blocks <= MAX_BLOCKS:
        return f"its block count {_shown(kv, 'clip.vision.block_count')} is not 1 to {MAX_BLOCKS}"
    present = {int(n.split(".")[2]) for n in tensors if n.startswith("v.blk.") and n.split(".")[2].isdecimal()}
    missing = [b for b in range(blocks) if b not in present]
    if missing:
        return f"it states {blocks} encoder blocks but holds no tensors for block {missing[0]}"
    return None


def _patch_kernel(kind: str, kv: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]) -> str | None:
    """The conv kernel of the fixed-size graphs (llava's, siglip's); the resizing ones may differ."""
    kernel = tensors.get("v.patch_embd.weight")
    patch, width = kv_int(kv, "clip.vision.patch_size"), kv_int(kv, "clip.vision.embedding_length")
    if kind in ROW_SQUARE or kernel is None or len(kernel.shape) != 4:
        return None  # a linear patch embedding (or none): the probe judges it
    kx, ky, _channels, out = kernel.shape
    if (kx, ky) != (patch, patch) or out != width:
        return f"its patch kernel is {kx}×{ky}→{out}, its header says {patch}×{patch}→{width}"
    return None


def _positions(kind: str, kv: Mapping[str, MetaValue], tensors: Mapping[str, TensorInfo]) -> str | None:
    table = tensors.get("v.position_embd.weight")
    if table is None:
        return None if kind not in ROW_LOOKUP else "it has no position table (v.position_embd.weight)"
    width = kv_int(kv, "clip.vision.embedding_length")
    if len(table.shape) != 2 or table.shape[0] != width:
        return f"its position table is {_dims(table)}, not {width} wide"
    rows = table.shape[1]
    image, patch = kv_int(kv, "clip.vision.image_size") or 1, kv_int(kv, "clip.vision.patch_size") or 1
    patches = (image // patch) ** 2
    if kind in ROW_LOOKUP:
        needed = patches + (1 if "v.class_embd" in tensors else 0)
        if rows < needed:
            return f"its position table has {rows} rows; its {patches} patches need {needed}"
    elif kind in ROW_ADD and rows != patches:
        return f"its position table has {rows} rows; its {patches} patches need {patches}"
    elif kind in ROW_SQUARE and math.isqrt(rows) ** 2 != rows:
        return f"its position table has {rows} rows, not a square grid"
    return None


def _shown(kv: Mapping[str, MetaValue], key: str) -> str:
    v = kv.get(key)
    return "(missing)" if v is None else repr(v)[:40]


def _dims(tensor: TensorInfo) -> str:
    return "×".join(str(d) for d in reversed(tensor.shape))
