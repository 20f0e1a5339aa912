"""A strict, streaming reader for GGUF headers: metadata and tensor infos, never weights.

Why not `gguf.GGUFReader`: it memory-maps the whole file and builds numpy views for every
field and tensor (about 2.3 s for the 135M built-in model), and it trusts declared
lengths, so a hostile header can make it index past the map or allocate what it declares.
This reader instead:

- streams the header through a small buffer and never maps the file (a file truncated
  under a live map kills the process with SIGBUS);
- checks every declared length and count against the bytes left in the file *before*
  reading, so a 2^60-byte string or a 2^40-entry array fails at once with a one-line
  `GGUFError` and no allocation;
- keeps big arrays out of memory (BPE merges, scores): it walks their strings to find
  where they end, which is the only way GGUF allows. The token list is the exception: its
  strings are kept as bytes, because marker tokens and BOS/EOS are looked up in it;
- parses tensor infos, sizes each tensor from the ggml block sizes, and reports a file
  whose tensor data runs past its end as truncated, before llama.cpp is ever asked.

The layout (GGUF v2/v3, little-endian): magic `GGUF`, u32 version, u64 tensor count,
u64 key count, the key/value pairs, the tensor infos, padding to `general.alignment`
(default 32), tensor data.
"""

from __future__ import annotations

import array
import os
import stat
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias, cast

from models.errors import GGUFError, LoadFailure
from models.gguf.ggml_types import ggml_type_name, quant_sizes, tensor_nbytes

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)  # what llama.cpp reads; v1 used 32-bit counts
DEFAULT_ALIGNMENT = 32

# Sanity caps. Real models have under 100 keys and a few thousand tensors; the caps are
# far above that and still stop a header from keeping the parser busy for minutes.
MAX_KV_COUNT = 1 << 16
MAX_TENSOR_COUNT = 1 << 16  # the largest MoE files hold about 15k (unmerged experts)
MAX_KEY_BYTES = 1 << 16
MAX_TENSOR_NAME = 64  # GGML_MAX_NAME: llama.cpp rejects longer names
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEPT_STRING = 4 << 20  # longer strings (no real template is) are skipped, not read
MAX_KEPT_ITEMS = 1 << 22  # longer numeric arrays are skipped, not read
MAX_KEPT_STRING_ITEMS = 4096  # longer string arrays (merges) are walked, not kept
MAX_KEPT_TOTAL = 256 << 20  # all kept values together; a 262k vocabulary needs ~3 MiB

_CHUNK = 1 << 20

# GGUF value types (gguf.GGUFValueType); duplicated so the reader needs no numpy.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(8, 13)

_SCALARS: dict[int, struct.Struct] = {
    T_UINT8: struct.Struct("<B"),
    T_INT8: struct.Struct("<b"),
    T_UINT16: struct.Struct("<H"),
    T_INT16: struct.Struct("<h"),
    T_UINT32: struct.Struct("<I"),
    T_INT32: struct.Struct("<i"),
    T_FLOAT32: struct.Struct("<f"),
    T_BOOL: struct.Struct("<?"),
    T_UINT64: struct.Struct("<Q"),
    T_INT64: struct.Struct("<q"),
    T_FLOAT64: struct.Struct("<d"),
}
_ARRAY_CODES: dict[int, str] = {
    T_UINT8: "B", T_INT8: "b", T_UINT16: "H", T_INT16: "h", T_UINT32: "I", T_INT32: "i",
    T_FLOAT32: "f", T_BOOL: "B", T_UINT64: "Q", T_INT64: "q", T_FLOAT64: "d",
}  # fmt: skip
_U32 = _SCALARS[T_UINT32]
_U64 = _SCALARS[T_UINT64]
# Smallest encodings, used to reject counts the rest of the file cannot hold.
_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims, type, offset


@dataclass(frozen=True, slots=True)
class Skipped:
    """A value left unread because it is too large to be worth holding."""

    value_type: int
    count: int


# A string alias: array.array is not subscriptable at runtime before Python 3.12.
MetaValue: TypeAlias = "int | float | bool | str | list[str] | array.array[int] | array.array[float] | Skipped"


def kv_str(kv: Mapping[str, MetaValue], key: str) -> str | None:
    v = kv.get(key)
    return v if isinstance(v, str) else None


def kv_int(kv: Mapping[str, MetaValue], key: str, *, low: int | None = None) -> int | None:
    """`key`'s integer (a bool is not one); None when it is missing, of another type or below `low`."""
    v = kv.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
        return None
    return v


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the data section
    n_bytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    version: int
    kv: Mapping[str, MetaValue]
    tensors: tuple[TensorInfo, ...]
    tokens: Sequence[bytes] | None  # tokenizer.ggml.tokens, when asked for
    alignment: int
    data_offset: int
    file_size: int
    complete: bool  # False when `stop_before` ended the read early

    @property
    def data_end(self) -> int:
        """Where the last tensor's bytes end (the data offset when there are none)."""
        ends = (t.offset + t.n_bytes for t in self.tensors)
        return self.data_offset + max(ends, default=0)


class _Stream:
    """Bounded reads from a file: every read is checked against the real file size first."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self.size = size
        self._buf = b""
        self._p = 0  # read position inside _buf
        self._base = 0  # file offset of _buf[0]
        self._kept = 0  # bytes handed out so far, against MAX_KEPT_TOTAL

    @property
    def pos(self) -> int:
        return self._base + self._p

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        """Raise unless `n` more bytes exist in the file (not only in the buffer)."""
        if n > self.remaining:
            raise GGUFError(
                f"truncated: {what} at byte {self.pos} needs {n} bytes, only {self.remaining} left",
                kind=LoadFailure.INCOMPLETE,
            )

    def _fill(self, n: int, what: str) -> None:
        # Callers bound n (caps above), so this never reads more than a few MiB at once.
        self.need(n, what)
        tail = self._buf[self._p :]
        more = self._f.read(max(_CHUNK, n - len(tail)))
        self._base += self._p
        self._buf = tail + more
        self._p = 0
        if len(self._buf) < n:  # the file shrank while we read it
            raise GGUFError(f"truncated: {what} at byte {self.pos} ends early", kind=LoadFailure.INCOMPLETE)

    def keep(self, n: int, what: str) -> None:
        """Account for `n` bytes held in memory; a header may not make us hold too many."""
        self._kept += n
        if self._kept > MAX_KEPT_TOTAL:
            raise GGUFError(f"{what}: more metadata than Ember keeps in memory ({MAX_KEPT_TOTAL} bytes)")

    def take(self, n: int, what: str) -> bytes:
        self.keep(n, what)
        if self._p + n > len(self._buf):
            self._fill(n, what)
        out = self._buf[self._p : self._p + n]
        self._p += n
        return out

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        if self._p + n <= len(self._buf):
            self._p += n
            return
        target = self.pos + n
        self._f.seek(target)
        self._base, self._buf, self._p = target, b"", 0

    def scalar(self, value_type: int, what: str) -> int | float | bool:
        s = _SCALARS[value_type]
        value: int | float | bool = s.unpack(self.take(s.size, what))[0]
        return value

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])

    def u64(self, what: str) -> int:
        return int(_U64.unpack(self.take(8, what))[0])

    def string_bytes(self, what: str, limit: int) -> bytes | None:
        """A length-prefixed string; None (and skipped) when longer than `limit`."""
        n = self.u64(what)
        self.need(n, what)
        if n > limit:
            self.skip(n, what)
            return None
        return self.take(n, what)

    def walk_strings(self, count: int, keep: bool, what: str) -> list[bytes]:
        """`count` length-prefixed strings: kept as bytes, or only walked over.

        The hot loop of the whole reader (150k tokens plus 150k merges in big vocabularies),
        so it works on the buffer directly and leaves it only to refill.
        """
        out: list[bytes] = []
        append = out.append
        unpack = _U64.unpack_from
        buf, p = self._buf, self._p
        end = len(buf)
        budget = MAX_KEPT_TOTAL - self._kept
        kept = 0
        for _ in range(count):
            if p + 8 > end:
                buf, p = self._refill(p, 8, what)
                end = len(buf)
            n: int = unpack(buf, p)[0]
            p += 8
            q = p + n
            if n > MAX_KEPT_STRING:  # no real token is this long: step over it
                self._p = p
                self.skip(n, what)
                buf, p, end = self._buf, self._p, len(self._buf)
                if keep:
                    append(b"")  # keeps the ids of the tokens after it right
                continue
            if q > end:
                buf, p = self._refill(p, n, what)
                end, q = len(buf), p + n
            if keep:
                kept += n + 40  # the bytes object's own overhead counts too
                if kept > budget:
                    self.keep(kept, what)  # raises
                append(buf[p:q])
            p = q
        self._p = p
        self._kept += kept
        return out

    def _refill(self, p: int, n: int, what: str) -> tuple[bytes, int]:
        self._p = p
        self._fill(n, what)
        return self._buf, self._p


# --- opening -------------------------------------------------------------------------


def _open(path: Path) -> BinaryIO:
    """Open a regular file for reading, or raise GGUFError saying why not."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise GGUFError("no such file", kind=LoadFailure.MISSING) from None
    except PermissionError:
        raise GGUFError("cannot read: permission denied", kind=LoadFailure.DENIED) from None
    except OSError as exc:
        raise GGUFError(f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise GGUFError("is a directory, not a GGUF file", kind=LoadFailure.NOT_GGUF)
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block open() forever
        raise GGUFError("not a regular file")
    try:
        return path.open("rb", buffering=0)
    except PermissionError:
        raise GGUFError("cannot read: permission denied", kind=LoadFailure.DENIED) from None
    except OSError as exc:
        raise GGUFError(f"cannot read: {exc.strerror or exc}") from None


def read_magic(path: Path) -> bool:
    """True when `path` is a readable regular file that starts with the GGUF magic."""
    try:
        with _open(path) as f:
            return f.read(4) == MAGIC
    except (GGUFError, OSError):
        return False


# --- parsing ---------------------------------------------------------------------------


def _check_count(s: _Stream, count: int, min_bytes: int, cap: int, what: str) -> None:
    if count > cap or count * min_bytes > s.remaining:
        raise GGUFError(f"header declares {count} {what}, more than the file could hold")


def _read_preamble(s: _Stream) -> tuple[int, int, int]:
    if s.size == 0:
        raise GGUFError("empty file (0 bytes)")
    if s.size < 4:
        raise GGUFError(f"not a GGUF file (only {s.size} bytes)", kind=LoadFailure.NOT_GGUF)
    magic = s.take(4, "magic")
    if magic != MAGIC:
        raise GGUFError(f"not a GGUF file (wrong magic {magic!r}, expected b'GGUF')", kind=LoadFailure.NOT_GGUF)
    version = s.u32("version")
    if version not in SUPPORTED_VERSIONS:
        if int.from_bytes(version.to_bytes(4, "little"), "big") in SUPPORTED_VERSIONS:
            raise GGUFError("big-endian GGUF files are not supported")
        raise GGUFError(f"unsupported GGUF version {version} (llama.cpp reads 2 and 3)")
    n_tensors = s.u64("tensor count")
    n_kv = s.u64("key count")
    _check_count(s, n_kv, _MIN_KV_BYTES, MAX_KV_COUNT, "metadata keys")
    _check_count(s, n_tensors, _MIN_TENSOR_INFO_BYTES, MAX_TENSOR_COUNT, "tensors")
    return version, n_tensors, n_kv


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _read_array(s: _Stream, key: str, keep_tokens: bool) -> tuple[MetaValue, list[bytes] | None]:
    item_type = s.u32(f"array type of {key!r}")
    count = s.u64(f"array length of {key!r}")
    what = f"array {key!r}"
    if item_type == T_STRING:
        s.need(count * 8, what)  # every string carries an 8-byte length
        if key == "tokenizer.ggml.tokens" and keep_tokens:
            return Skipped(T_STRING, count), s.walk_strings(count, True, what)
        if count > MAX_KEPT_STRING_ITEMS:
            s.walk_strings(count, False, what)
            return Skipped(T_STRING, count), None
        return [_decode(b) for b in s.walk_strings(count, True, what)], None
    code = _ARRAY_CODES.get(item_type)
    if code is None:
        kind = "nested arrays are" if item_type == T_ARRAY else f"value type {item_type} is"
        raise GGUFError(f"key {key!r}: {kind} not supported")
    nbytes = count * _SCALARS[item_type].size
    s.need(nbytes, what)
    if count > MAX_KEPT_ITEMS:
        s.skip(nbytes, what)
        return Skipped(item_type, count), None
    # The typecode is only known at run time, hence the cast.
    values = cast("array.array[int] | array.array[float]", array.array(code))
    values.frombytes(s.take(nbytes, what))
    return values, None


def _read_value(s: _Stream, key: str, keep_tokens: bool) -> tuple[MetaValue, list[bytes] | None]:
    value_type = s.u32(f"type of {key!r}")
    if value_type in _SCALARS:
        return s.scalar(value_type, f"value of {key!r}"), None
    if value_type == T_STRING:
        raw = s.string_bytes(f"string {key!r}", MAX_KEPT_STRING)
        return (Skipped(T_STRING, 1) if raw is None else _decode(raw)), None
    if value_type == T_ARRAY:
        return _read_array(s, key, keep_tokens)
    raise GGUFError(f"key {key!r} has unknown value type {value_type}")


KVResult = tuple[dict[str, MetaValue], list[bytes] | None, bool]


def _read_kvs(s: _Stream, n_kv: int, keep_tokens: bool, stop_before: Callable[[str], bool] | None) -> KVResult:
    kv: dict[str, MetaValue] = {}
    tokens: list[bytes] | None = None
    for i in range(n_kv):
        raw = s.string_bytes(f"key #{i}", MAX_KEY_BYTES)
        if raw is None:
            raise GGUFError(f"metadata key #{i} is longer than {MAX_KEY_BYTES} bytes")
        key = _decode(raw)
        if key in kv:
            raise GGUFError(f"duplicate metadata key {key!r}")
        if stop_before is not None and stop_before(key):
            return kv, tokens, False
        value, toks = _read_value(s, key, keep_tokens)
        kv[key] = value
        tokens = toks if toks is not None else tokens
    return kv, tokens, True


def _alignment(kv: Mapping[str, MetaValue]) -> int:
    value = kv.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GGUFError("general.alignment is not an integer")
    if value <= 0 or value & (value - 1):
        raise GGUFError(f"general.alignment {value} is not a power of two")
    return value


def _read_tensor_info(s: _Stream, i: int, alignment: int) -> TensorInfo:
    raw = s.string_bytes(f"name of tensor #{i}", MAX_TENSOR_NAME - 1)
    if raw is None:
        raise GGUFError(f"tensor #{i} has a name longer than {MAX_TENSOR_NAME - 1} bytes")
    name = _decode(raw)
    n_dims = s.u32(f"dimensions of tensor {name!r}")
    if n_dims > MAX_DIMS:
        raise GGUFError(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
    shape = tuple(s.u64(f"shape of tensor {name!r}") for _ in range(n_dims))
    ggml_type = s.u32(f"type of tensor {name!r}")
    offset = s.u64(f"offset of tensor {name!r}")
    if ggml_type not in quant_sizes():
        raise GGUFError(f"tensor {name!r} has unknown ggml type {ggml_type}")
    if any(d >= 1 << 62 for d in shape):  # llama.cpp's int64 overflow guard
        raise GGUFError(f"tensor {name!r} has an absurd shape {shape}")
    n_bytes = tensor_nbytes(ggml_type, shape)
    if n_bytes is None:
        raise GGUFError(f"tensor {name!r} shape {shape} does not fit {ggml_type_name(ggml_type)} blocks")
    if offset % alignment:
        raise GGUFError(f"tensor {name!r} offset {offset} is not aligned to {alignment}")
    return TensorInfo(name, shape, ggml_type, offset, n_bytes)


def _read_tensor_infos(s: _Stream, n_tensors: int, alignment: int) -> tuple[TensorInfo, ...]:
    infos: list[TensorInfo] = []
    seen: set[str] = set()
    for i in range(n_tensors):
        info = _read_tensor_info(s, i, alignment)
        if info.name in seen:
            raise GGUFError(f"duplicate tensor {info.name!r}")
        seen.add(info.name)
        infos.append(info)
    return tuple(infos)


def _check_data_bounds(header: GGUFHeader) -> None:
    end = header.data_end
    # Without tensors there is no data section, and its padding need not exist (llama.cpp
    # seeks past the end without complaint).
    if header.tensors and end > header.file_size:
        raise GGUFError(
            f"truncated: tensor data ends at byte {end} but the file has "
            f"{header.file_size} bytes (incomplete download?)",
            kind=LoadFailure.INCOMPLETE,
        )


def _parse(s: _Stream, keep_tokens: bool, stop_before: Callable[[str], bool] | None) -> GGUFHeader:
    version, n_tensors, n_kv = _read_preamble(s)
    kv, tokens, complete = _read_kvs(s, n_kv, keep_tokens, stop_before)
    if not complete:
        return GGUFHeader(version, kv, (), tokens, DEFAULT_ALIGNMENT, 0, s.size, False)
    alignment = _alignment(kv)
    tensors = _read_tensor_infos(s, n_tensors, alignment)
    data_offset = -(-s.pos // alignment) * alignment
    header = GGUFHeader(version, kv, tensors, tokens, alignment, data_offset, s.size, True)
    _check_data_bounds(header)
    return header


def read_header(
    path: Path,
    *,
    keep_tokens: bool = True,
    stop_before: Callable[[str], bool] | None = None,
) -> GGUFHeader:
    """Parse the header of the GGUF file at `path`, or raise GGUFError with one-line reason.

    `keep_tokens` keeps the token strings (needed for markers and BOS/EOS). `stop_before`
    ends the read (header.complete is False) at the first key it returns True for; the
    library uses it to peek at `general.*` keys without walking the vocabulary.
    """
    try:
        with _open(path) as f:
            size = os.fstat(f.fileno()).st_size
            return _parse(_Stream(f, size), keep_tokens, stop_before)
    except GGUFError as exc:
        raise exc.with_path(path) from None
    except OSError as exc:  # an I/O error mid-read (a failing disk, a vanished share)
        raise GGUFError(f"cannot read: {exc.strerror or exc}", path) from None
