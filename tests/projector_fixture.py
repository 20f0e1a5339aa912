"""The fixture projector and PNG helpers, from `tests.bench.vision_fixture` (the bench uses them too)."""

from tests.bench.vision_fixture import SMOLLM_WIDTH, png, png_chunks, write_projector_fixture

__all__ = ["SMOLLM_WIDTH", "png", "png_chunks", "write_projector_fixture"]
