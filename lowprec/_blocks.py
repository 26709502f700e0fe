"""Helpers shared by the block-scaled formats (``mx``, ``nvfp4``): cutting an
axis into blocks, and packing narrow codes densely into bytes.

Blocks
------
``to_blocks(a, axis, block_size)`` moves ``axis`` last, pads it with zeros to a
multiple of ``block_size`` and returns an array of shape
``(*other_dims, n_blocks, block_size)``; ``from_blocks`` undoes it. When the
axis is already last and divisible, both are views (no copy).

Bit packing (the layout ``MXTensor.pack`` and ``NVFP4Tensor.pack`` use)
-----------------------------------------------------------------------
Codes of ``width`` bits are written as one little-endian bit stream: code ``i``
occupies stream bits ``i*width .. i*width + width - 1`` (least significant bit
first), and stream bit ``j`` is bit ``j % 8`` of byte ``j // 8``. For 4-bit
codes this puts element 0 in the low nibble of byte 0 and element 1 in the
high nibble (the convention of PyTorch's ``float4_e2m1fn_x2`` and of NVIDIA's
FP4 storage); for 6-bit codes four elements fill three bytes::

    byte 0: e1[1:0] e0[5:0]    byte 1: e2[3:0] e1[5:2]    byte 2: e3[5:0] e2[5:4]

(most significant bit on the left). The stream is padded with zero bits to a
whole number of bytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._kernels.blocks import move_axis
from ._runtime import _as_float_array
from .formats import FloatFormat

__all__ = [
    "as_working_array",
    "from_blocks",
    "normalize_axis",
    "overflow_threshold",
    "pack_bits",
    "to_blocks",
    "unpack_bits",
]


def overflow_threshold(fmt: FloatFormat) -> float:
    """Smallest magnitude that round-to-nearest carries past ``fmt.max``:
    ``max + ulp(max) / 2`` (every OCP format's max has an odd significand, so
    the tie itself overflows). Inputs at or beyond it are the *clipped* ones."""
    return fmt.max + 2.0 ** (fmt.emax - fmt.mantissa_bits) / 2


def as_working_array(x: Any) -> np.ndarray:
    """``x`` as float32 if its values are float32 exactly (float32, float16, bfloat16
    and narrower float dtypes: the GPU computes in FP32 for them), else float64."""
    src = getattr(x, "dtype", None)
    if src is not None and np.dtype(src).kind not in "iubOSUMm" and np.dtype(src).itemsize <= 4:
        if np.dtype(src).kind == "V":  # ml_dtypes (bfloat16, fp8...): exact in float32
            x = np.asarray(x).astype(np.float32)
        arr, _ = _as_float_array(x)
        return arr.astype(np.float32, copy=False)
    arr, _ = _as_float_array(x)
    return arr


def normalize_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis!r} is out of range for an array with {ndim} dimensions")
    return int(axis) % ndim


def check_block_size(block_size: int) -> int:
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    return int(block_size)


def to_blocks(a: np.ndarray, axis: int, block_size: int) -> np.ndarray:
    """``a`` with ``axis`` moved last, zero-padded and split into blocks:
    shape ``(*other_dims, n_blocks, block_size)``."""
    moved = move_axis(a, axis, -1)
    n = moved.shape[-1]
    nb = -(-n // block_size)
    pad = nb * block_size - n
    if pad:
        moved = np.concatenate(
            [moved, np.zeros(moved.shape[:-1] + (pad,), dtype=moved.dtype)], axis=-1
        )
    return moved.reshape(moved.shape[:-1] + (nb, block_size))


def from_blocks(blocks: np.ndarray, axis: int, n: int) -> np.ndarray:
    """Inverse of :func:`to_blocks` for an axis of original length ``n``."""
    flat = blocks.reshape(blocks.shape[:-2] + (blocks.shape[-2] * blocks.shape[-1],))[..., :n]
    return move_axis(flat, -1, axis)


def _group(width: int) -> tuple[int, int]:
    """(codes, bytes) per group: the smallest whole number of both."""
    bits = math.lcm(width, 8)
    return bits // width, bits // 8


def pack_bits(codes: np.ndarray, width: int) -> np.ndarray:
    """Pack unsigned codes of ``width`` (1..8) bits into a dense uint8 stream."""
    if not 1 <= width <= 8:
        raise ValueError(f"pack_bits packs codes of 1..8 bits, got width={width}")
    flat = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    if width == 8:
        return flat.copy()
    per, nbytes = _group(width)
    n = flat.shape[0]
    groups = -(-n // per)
    padded = np.zeros(groups * per, dtype=np.uint64)
    padded[:n] = flat
    words = np.zeros(groups, dtype=np.uint64)
    for i, column in enumerate(padded.reshape(groups, per).T):
        words |= column << np.uint64(i * width)
    out = np.empty((groups, nbytes), dtype=np.uint8)
    for b in range(nbytes):
        out[:, b] = (words >> np.uint64(8 * b)) & np.uint64(0xFF)
    total = -(-n * width // 8)
    return out.reshape(-1)[:total]


def unpack_bits(data: np.ndarray, width: int, n: int) -> np.ndarray:
    """The first ``n`` codes of ``width`` bits from a stream made by :func:`pack_bits`."""
    if not 1 <= width <= 8:
        raise ValueError(f"unpack_bits reads codes of 1..8 bits, got width={width}")
    data = np.asarray(data)
    if data.dtype != np.uint8:
        raise TypeError(f"packed data must be a uint8 array or bytes, got dtype {data.dtype}")
    data = data.reshape(-1)
    need = -(-n * width // 8)
    if data.shape[0] < need:
        raise ValueError(
            f"packed data holds {data.shape[0]} bytes, but {n} codes of {width} bits need {need}"
        )
    if width == 8:
        return data[:n].copy()
    per, nbytes = _group(width)
    groups = -(-n // per)
    buf = np.zeros(groups * nbytes, dtype=np.uint64)
    buf[:need] = data[:need]
    byte_rows = buf.reshape(groups, nbytes)
    words = np.zeros(groups, dtype=np.uint64)
    for b in range(nbytes):
        words |= byte_rows[:, b] << np.uint64(8 * b)
    mask = np.uint64((1 << width) - 1)
    out = np.empty((groups, per), dtype=np.uint8)
    for i in range(per):
        out[:, i] = (words >> np.uint64(i * width)) & mask
    return out.reshape(-1)[:n]


def unpack_scaled(data: Any, shape: tuple[int, ...], axis: int, block_size: int,
                  element_bits: int, header_bytes: int, what: str):
    """Undo the packed layout shared by MX and NVFP4 tensors.

    The layout is ``header_bytes`` bytes (NVFP4's FP32 tensor scale; none for MX),
    one scale byte per block (blocks in C order, block index last), then the
    element codes as a little-endian bit stream (:func:`pack_bits`).

    Returns ``(header, scale_codes, element_codes, shape, axis, block_size)`` with
    the scales and codes shaped as the tensor's own arrays.
    """
    shape = tuple(int(s) for s in shape)
    if not shape:
        raise ValueError("shape must have at least one dimension")
    axis = normalize_axis(axis, len(shape))
    block_size = check_block_size(block_size)
    buf = (np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray))
           else np.asarray(data))
    moved_shape = shape[:axis] + shape[axis + 1:]
    nb = -(-shape[axis] // block_size)
    n_blocks = int(np.prod(moved_shape, dtype=np.int64)) * nb
    n_elems = n_blocks * block_size
    need = header_bytes + n_blocks + -(-n_elems * element_bits // 8)
    if buf.shape[0] != need:
        raise ValueError(f"packed {what} data of shape {shape} with block_size {block_size} "
                         f"is {need} bytes, got {buf.shape[0]}")
    header = buf[:header_bytes]
    body = buf[header_bytes:]
    scales = move_axis(body[:n_blocks].reshape(moved_shape + (nb,)), -1, axis)
    elems = unpack_bits(body[n_blocks:], element_bits, n_elems)
    codes = from_blocks(elems.reshape(moved_shape + (nb, block_size)), axis, shape[axis])
    return (header, np.ascontiguousarray(scales), np.ascontiguousarray(codes), shape, axis,
            block_size)
