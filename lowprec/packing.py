"""Packing codes of narrow formats into bytes, and back: ``pack`` / ``unpack``.

:func:`lowprec.encode` gives one code per ``uint8`` (sub-byte formats in the
low bits), which wastes half the memory for fp4 and a quarter for fp6. Packed
storage puts the codes side by side in a **little-endian bit stream**: element
``k`` occupies bits ``k*w .. k*w + w - 1`` of the stream, where bit ``j`` of
the stream is bit ``j % 8`` (counting from the least significant) of byte
``j // 8``. For the widths in use this means:

==========  ==========================================================================
width       layout
==========  ==========================================================================
4 (fp4)     two codes per byte; element ``2i`` in the **low nibble** (bits 3..0) of
            byte ``i``, element ``2i+1`` in the high nibble (bits 7..4)
6 (fp6)     four codes per three bytes; with ``w = b0 | b1 << 8 | b2 << 16`` the
            24-bit little-endian word of bytes ``3i .. 3i+2``, element ``4i+k``
            is ``(w >> 6k) & 0x3F``
8, 16, 32   one code per 1, 2, 4 bytes, little-endian (``codes.astype('<u2').tobytes()``)
==========  ==========================================================================

Other custom widths (5, 7, 12, ...) follow the same bit-stream rule. A
trailing partial byte is padded with zero bits, so ``n`` codes of width ``w``
take ``ceil(n*w / 8)`` bytes.

The fp4 order is the one of the OCP MX specification and ONNX (first element
in the least significant bits; pytorch/ao issue #2939 quotes both), of
NVIDIA's ``__nv_fp4x2_e2m1`` (low nibble is the ``.x``/first element of the
pair) and of PyTorch's ``torch.float4_e2m1fn_x2`` (second element in the most
significant nibble, pytorch/pytorch PR #148791). Beware that PTX's
``cvt.rn.satfinite.e2m1x2.f32 d, a, b`` puts its *first* operand ``a`` in the
upper nibble. The fp6 order is AMD's (rocRoller ``DataTypes_FP6``: element 0
in bits 0..5 of byte 0, element 1 in bits 6..7 of byte 0 and 0..3 of byte 1).

>>> import numpy as np
>>> pack(np.array([0b0010, 0b1011], dtype=np.uint8), "fp4")   # 1.0, -1.5
array([178], dtype=uint8)
>>> bin(178)
'0b10110010'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .formats import FloatFormat, get_format

__all__ = ["pack", "packed_size", "unpack"]


def packed_size(count: int, fmt: FloatFormat | str) -> int:
    """Bytes that ``count`` packed codes of ``fmt`` take: ``ceil(count * width / 8)``."""
    width = get_format(fmt).width
    return (count * width + 7) // 8


def _check_codes(codes: Any, fmt: FloatFormat) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"codes must be an integer array (as returned by lowprec.encode), got dtype "
            f"{arr.dtype}; encode values first: pack(lowprec.encode(x, {fmt.name!r}), ...)"
        )
    flat = arr.reshape(-1)
    if flat.size:
        lo, hi = int(flat.min()), int(flat.max())
        if lo < 0 or hi >= 1 << fmt.width:
            bad = int(np.argmax((flat < 0) | (flat >= (1 << fmt.width))))
            raise ValueError(
                f"code {int(flat[bad])} at index {bad} is out of range for {fmt.name}: "
                f"codes are 0 .. {(1 << fmt.width) - 1} ({fmt.width} bits)"
            )
    return flat


def pack(codes: Any, fmt: FloatFormat | str) -> np.ndarray:
    """Pack the codes of ``fmt`` into a 1-D ``uint8`` array (layout: module docstring).

    ``codes`` is any integer array (flattened in C order) whose values are
    codes of ``fmt``, e.g. the output of :func:`lowprec.encode`.

    >>> pack([0x1, 0x2, 0x3, 0x3F], "fp6_e2m3").tolist()   # w = 0xFC3081
    [129, 48, 252]
    """
    fmt = get_format(fmt)
    flat = _check_codes(codes, fmt)
    w = fmt.width
    n = flat.shape[0]
    if w in (8, 16, 32):
        return np.ascontiguousarray(flat.astype(f"<u{w // 8}")).view(np.uint8).copy()
    if w == 4:
        c = flat.astype(np.uint8)
        if n % 2:
            c = np.concatenate([c, np.zeros(1, np.uint8)])
        return c[0::2] | (c[1::2] << 4)
    if w == 6:
        c = flat.astype(np.uint32)
        pad = (-n) % 4
        if pad:
            c = np.concatenate([c, np.zeros(pad, np.uint32)])
        quad = c.reshape(-1, 4)
        word = quad[:, 0] | (quad[:, 1] << 6) | (quad[:, 2] << 12) | (quad[:, 3] << 18)
        out = np.empty((word.shape[0], 3), np.uint8)
        out[:, 0] = word & 0xFF
        out[:, 1] = (word >> 8) & 0xFF
        out[:, 2] = word >> 16
        return out.reshape(-1)[: packed_size(n, fmt)]
    # Any other width: the same little-endian bit stream, bit by bit.
    bits = (flat.astype(np.uint64)[:, None] >> np.arange(w, dtype=np.uint64)) & 1
    return np.packbits(bits.astype(np.uint8).reshape(-1), bitorder="little")


def unpack(data: Any, fmt: FloatFormat | str, count: int | None = None) -> np.ndarray:
    """The ``count`` codes packed in ``data`` by :func:`pack`, as ``fmt.code_dtype``.

    ``data`` is a ``uint8`` array or a ``bytes`` object of exactly
    ``ceil(count * width / 8)`` bytes. Without ``count``, every whole code in
    ``data`` is returned (``8 * len(data) // width`` codes). Padding bits after
    the last code must be zero, which catches most wrong counts.
    """
    fmt = get_format(fmt)
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = np.frombuffer(data, dtype=np.uint8)
    else:
        raw = np.asarray(data)
        if raw.dtype != np.uint8:
            raise TypeError(
                f"packed data must be uint8 (or bytes), got dtype {raw.dtype}; "
                "use pack() to make it"
            )
        raw = raw.reshape(-1)
    w = fmt.width
    nbytes = raw.shape[0]
    if count is None:
        count = 8 * nbytes // w
    if not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"count must be a non-negative int, got {count!r}")
    count = int(count)
    need = packed_size(count, fmt)
    if nbytes != need:
        raise ValueError(
            f"{count} codes of {fmt.name} ({w} bits each) take {need} bytes, got {nbytes}"
        )
    if w in (8, 16, 32):
        return raw.view(f"<u{w // 8}").astype(fmt.code_dtype)
    if w == 4:
        codes = np.empty(2 * nbytes, np.uint8)
        codes[0::2] = raw & 0x0F
        codes[1::2] = raw >> 4
    elif w == 6:
        pad = (-nbytes) % 3
        b = np.concatenate([raw, np.zeros(pad, np.uint8)]) if pad else raw
        b = b.reshape(-1, 3).astype(np.uint32)
        word = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        codes = ((word[:, None] >> np.array([0, 6, 12, 18], np.uint32)) & 0x3F)
        codes = codes.reshape(-1).astype(np.uint8)
    else:
        bits = np.unpackbits(raw, bitorder="little")
        codes = np.zeros(len(bits) // w, np.uint64)
        for j in range(w):
            codes |= bits[j: len(codes) * w: w].astype(np.uint64) << np.uint64(j)
    tail_bits = np.unpackbits(raw[-1:], bitorder="little")[(count * w) % 8:] if (
        (count * w) % 8) else np.zeros(0, np.uint8)
    if tail_bits.any():
        raise ValueError(
            f"the padding bits after code {count - 1} are not zero: the data holds more "
            f"than {count} codes of {fmt.name}, or was not packed by lowprec.pack"
        )
    return codes[:count].astype(fmt.code_dtype)
