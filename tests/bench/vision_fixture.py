"""A tiny random-weight vision projector that libmtmd loads, for benches and tests.

`write_projector_fixture()` writes a `clip` GGUF (general.type mmproj, projector type "mlp"):
a one-layer 32-wide ViT over 28×28 images in 14-pixel patches (4 image tokens) and a two-layer
MLP projecting to `projection` (576 pairs it with SmolLM2-135M). It stands in for a real
projector in the in-process image path: load, tokenize-with-image, evaluation, KV positions,
cancel. Its "seeing" means nothing. It needs the `gguf` package (a development dependency).
`png()` draws a small gradient PNG with the standard library.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import gguf
import numpy as np

SMOLLM_WIDTH = 576


def write_projector_fixture(
    path: Path,
    *,
    projection: int = SMOLLM_WIDTH,
    width: int = 32,
    image_size: int = 28,
    patch: int = 14,
    seed: int = 0,
    heads: int = 2,
    blocks: int = 1,
    blocks_written: int | None = None,
    kind: str = "mlp",
    pos_rows: int | None = None,
    eps: float = 1e-5,
) -> Path:
    """The fixture; the keyword knobs make hostile variants (a short position table, a NaN epsilon…)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type("mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", kind)
    for key, value in (
        ("image_size", image_size),
        ("patch_size", patch),
        ("embedding_length", width),
        ("feed_forward_length", 2 * width),
        ("projection_dim", projection),
        ("attention.head_count", heads),
        ("block_count", blocks),
    ):
        w.add_uint32(f"clip.vision.{key}", value)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", eps)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_bool("clip.use_gelu", True)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def linear(name: str, n_out: int, n_in: int) -> None:
        w.add_tensor(f"{name}.weight", rand(n_out, n_in))
        w.add_tensor(f"{name}.bias", rand(n_out))

    def norm(name: str) -> None:
        w.add_tensor(f"{name}.weight", np.ones(width, np.float32))
        w.add_tensor(f"{name}.bias", rand(width))

    side = max(patch, 1)
    w.add_tensor("v.patch_embd.weight", rand(width, 3, side, side).astype(np.float16))
    w.add_tensor("v.class_embd", rand(width))
    rows = (image_size // side) ** 2 + 1 if pos_rows is None else pos_rows
    w.add_tensor("v.position_embd.weight", rand(rows, width))
    norm("v.pre_ln")
    for b in range(blocks if blocks_written is None else blocks_written):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            linear(f"v.blk.{b}.{name}", width, width)
        norm(f"v.blk.{b}.ln1")
        norm(f"v.blk.{b}.ln2")
        linear(f"v.blk.{b}.ffn_up", 2 * width, width)
        linear(f"v.blk.{b}.ffn_down", width, 2 * width)
    linear("mm.0", projection, width)
    linear("mm.2", projection, projection)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def png(width: int, height: int, seed: int = 0, *, bit_depth: int = 8) -> bytes:
    """An RGB PNG of a gradient (different `seed`, different picture)."""
    step = bit_depth // 8
    rows = b"".join(
        b"\0" + bytes(((x * 7 + y * 3 + seed) % 256) for x in range(width * 3 * step)) for y in range(height)
    )
    return png_chunks(struct.pack(">IIBBBBB", width, height, bit_depth, 2, 0, 0, 0), zlib.compress(rows))


def png_chunks(ihdr: bytes, idat: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
