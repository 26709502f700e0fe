"""Block-scaled quantization (MX, NVFP4) in one compiled pass over the blocks.

The reference implementations in :mod:`lowprec.mx` and :mod:`lowprec.nvfp4` are
written with whole-array numpy steps: block amax, scales, the scaled elements
(a full float32/float64 temporary), then :func:`lowprec.encode`. Here the same
steps run block by block over a *chunk* of blocks at a time:

1. per block, ``amax`` and whether it holds a NaN or an infinity;
2. per block, the scale code (MX: the E8M0 code under the scale rule, computed
   here from ``amax``; NVFP4: the E4M3 code, rounded beforehand by ``bits32``);
3. the block's elements times the reciprocal of the scale, into a small scratch
   buffer that stays in cache;
4. the scratch buffer through the one element rounding of ``round_to``/``encode``
   for float32 bits (:func:`convert.kernel_for`), straight into the codes.

So the input is read once (NVFP4: twice, as its tensor scale needs the amax of
the whole tensor first) and nothing of the array's size is allocated but the
codes. Nothing rounds here but ``bits32``; every product is the one the
reference forms, in the same precision, so codes and scales are the reference's
bit for bit (``tests/test_blocks_fast.py`` holds them equal on adversarial data).

Arrays are seen as ``rows x cols`` (C order), blocks of ``bs`` along ``cols``,
``nb = ceil(cols / bs)`` blocks per row, block ``r * nb + b`` covering elements
``r * cols + b * bs`` up to the row's end; the last block of a row may be short
(the reference pads it with zeros, which change no amax and no code).
Format facts come in as plain ints and floats: this module imports nothing of
lowprec above ``_kernels``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from . import odd64
from .sr import SR_BLOCK

__all__ = [
    "RULE_INT", "dequantize_blocks", "move_axis", "mx_quantize", "nvfp4_block_amax",
    "nvfp4_elements", "nvfp4_ready", "twos_complement",
]

_jit = njit(cache=True, nogil=True, error_model="numpy")  # x / 0 is inf, as in numpy

#: MX scale rules as the kernels see them (see :data:`lowprec.mx.SCALE_RULES`).
FLOOR, CEIL, RCEIL, EVEN, TRN = range(5)
RULE_INT = {"floor": FLOOR, "ceil": CEIL, "rceil": RCEIL, "even": EVEN, "trn": TRN}

E8M0_NAN = 0xFF
E8M0_BIAS = 127
_F32_MAX = np.float32(np.finfo(np.float32).max)
_F32_ZERO = np.float32(0)
_F32_ONE = np.float32(1)
_FRAC52 = (np.int64(1) << 52) - 1
_ABS = np.int32(0x7FFFFFFF)  # float32 bits without the sign
_INF_BITS = np.int32(0x7F800000)
#: Elements per chunk: the scratch buffer (256 KiB of float32) stays in L2.
CHUNK = 1 << 16
_NO_SEEDS = np.empty(0, np.uint64)


def move_axis(a: np.ndarray, source: int, destination: int) -> np.ndarray:
    """``np.moveaxis(a, source, destination)`` for one axis: the same view, without
    numpy's argument normalisation (about 3 µs) where the axis stays put or a matrix
    is transposed, the block formats' usual cases (a training step of the demo's
    block-format presets moves axes about 300 times). Anything else, errors
    included, is numpy's.

    >>> a = np.arange(6).reshape(2, 3)
    >>> move_axis(a, 0, -1).shape, np.shares_memory(move_axis(a, -1, 1), a)
    ((3, 2), True)
    """
    nd = getattr(a, "ndim", 0)
    if type(source) is int and type(destination) is int and nd and -nd <= source < nd \
            and -nd <= destination < nd:
        if source % nd == destination % nd:
            return a.view()
        if nd == 2:
            return a.T
    return np.moveaxis(a, source, destination)


@njit(cache=True, nogil=True, inline="always")
def _log2_fields(v):
    """(floor(log2 v), the 52 fraction bits) of a positive float32 ``v``, exactly: the
    fields of ``v`` as a float64 (where float32 subnormals are normal)."""
    b = np.float64(v).view(np.int64)
    return ((b >> 52) & 0x7FF) - 1023, b & _FRAC52


@njit(cache=True, nogil=True, inline="always")
def e8m0_code(amax, finite, rule, emax_elem, mant_bits, rcp):
    """The E8M0 scale code of a block with largest magnitude ``amax`` (float32).

    ``finite`` is False for a block holding NaN or inf (code 0xFF). ``rcp`` is
    ``float32(1 / elem_max)``. With ``e = floor(log2 v)`` and ``f`` the fraction bits
    of ``v`` (``v = amax``, for rceil ``v = amax * rcp`` in float32, as on the GPU):

    * floor: ``k = e - emax_elem``;
    * ceil: one more unless ``v`` is a power of two (``f != 0``);
    * even: one more when ``amax`` rounds up into the next binade at the element's
      precision (``mant_bits + 1`` bits, ties away: ``1.f >= 2 - 2**-(mant_bits + 1)``);
    * rceil: ``k = ceil(log2 v)``, the smallest power of two ``>= v``;
    * trn: one more than floor, always.

    ``k`` below -127 is clamped to -127 (code 0), above 127 gives the NaN code; ``v``
    zero (a zero block, or an rceil quotient that underflowed) gives code 0. Written
    with selects only: a branch here keeps LLVM from vectorising the loops around it.
    """
    d = amax * rcp
    v = d if rule == RCEIL else amax
    e, f = _log2_fields(v)
    if_even = f >= _FRAC52 + 1 - (np.int64(1) << (51 - mant_bits))
    up = (f != 0) if (rule == RCEIL or rule == CEIL) else (
        if_even if rule == EVEN else rule == TRN)
    k = e + np.int64(up) - (0 if rule == RCEIL else emax_elem)
    code = min(max(k, -E8M0_BIAS), E8M0_BIAS + 1) + E8M0_BIAS  # 0xFF when k > 127
    code = code if v != 0 else 0
    return code if finite else E8M0_NAN


@njit(cache=True, nogil=True, inline="always")
def _pow2(k):
    """2**k as a float64, for -1022 <= k <= 1023 (from its bits)."""
    return np.int64((k + 1023) << 52).view(np.float64)


@njit(cache=True, nogil=True, inline="always")
def _span(blk, cols, bs, nb, uniform):
    """(start, stop) of block ``blk``'s elements in the flat array (``uniform``: every
    block is whole, ``cols % bs == 0``: the fast case, without the division)."""
    if uniform:
        return blk * bs, blk * bs + bs
    r = blk // nb
    start = r * cols + (blk - r * nb) * bs
    return start, min(start + bs, r * cols + cols)


@njit(cache=True, nogil=True, inline="always")
def _mx_block_code(xs_bits, rule, emax_elem, mant_bits, rcp):
    """The E8M0 code of one block (its float32 bits). amax is the largest magnitude
    bit pattern: patterns of ``|x|`` are ordered like ``|x|``, and inf and NaN are
    the patterns from 0x7F800000 on."""
    mag = np.int32(0)
    for i in range(xs_bits.shape[0]):
        mag = max(mag, xs_bits[i] & _ABS)
    return e8m0_code(np.int32(mag).view(np.float32), mag < _INF_BITS, rule, emax_elem,
                     mant_bits, rcp)


@_jit
def _mx_chunk(x, cols, bs, b0, b1, rule, emax_elem, mant_bits, rcp, scale_codes, scratch):
    """Blocks b0..b1 of ``x`` (float32): their E8M0 codes into ``scale_codes`` and their
    elements times ``2**-k`` into ``scratch`` (from 0). The product is exact in
    float64; a float32 ``scratch`` rounds it once, which is the float32 product the
    reference scales with for rne, rna and rtz, and a float64 one keeps it exact
    (the other modes). Loops run over slices from 0, so LLVM vectorises them."""
    x_bits = x.view(np.int32)
    nb = (cols + bs - 1) // bs
    uniform = cols % bs == 0
    j = 0
    for blk in range(b0, b1):
        start, stop = _span(blk, cols, bs, nb, uniform)
        xs, out = x[start:stop], scratch[j:j + stop - start]
        j += stop - start
        code = _mx_block_code(x_bits[start:stop], rule, emax_elem, mant_bits, rcp)
        scale_codes[blk] = code
        inv = _pow2(E8M0_BIAS - code)  # exact, 2**-127 included
        for i in range(xs.shape[0]):
            out[i] = np.float64(xs[i]) * inv
        if code == E8M0_NAN:  # a NaN scale: elements stored as code 0
            out[:] = 0.0


def _chunks(n_blocks: int, cols: int, bs: int, per: int):
    """(b0, b1, e0, e1): ``per`` blocks at a time and the elements they cover."""
    nb = -(-cols // bs)
    for b0 in range(0, n_blocks, per):
        b1 = min(b0 + per, n_blocks)
        e0 = (b0 // nb) * cols + (b0 % nb) * bs
        e1 = (b1 // nb) * cols + (b1 % nb) * bs
        yield b0, b1, e0, e1


def mx_quantize(x: np.ndarray, cols: int, bs: int, rule: int, emax_elem: int, mant_bits: int,
                rcp: float, kernel: Any, q: np.ndarray, wide: bool, auto: bool = False
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """MX codes and E8M0 scale codes of ``x`` (flat, C-contiguous float32 holding
    ``rows x cols``), elements rounded by a float32-bits ``kernel`` with params ``q``
    (:func:`convert.kernel_for`, a deterministic mode; ``wide``: the scaled elements are formed in float64 and
    reach ``bits32`` rounded to odd in float32, see :mod:`odd64`).

    Returns ``(codes, scale_codes)``: ``rows * cols`` and ``rows * nb`` uint8; with
    ``auto``, None where a kernel it runs is not compiled yet (:func:`.route.ready`
    has it loaded or compiled in the background; the caller's numpy reference
    answers meanwhile, bit for bit the same).
    """
    n = x.shape[0]
    nb = -(-cols // bs)
    n_blocks = (n // cols) * nb
    codes = np.empty(n, np.uint8)
    scale_codes = np.empty(n_blocks, np.uint8)
    per = max(1, CHUNK // bs)
    size = min(per * bs, n)
    scratch = np.empty(size, np.float64 if wide else np.float32)
    odd = np.empty(size if wide else 0, np.uint32)
    rcp32 = np.float32(rcp)
    if auto:
        calls = [(_mx_chunk, (x, cols, bs, 0, 0, rule, emax_elem, mant_bits, rcp32, scale_codes,
                              scratch)),
                 (kernel, (q, odd[:0].view(np.float32) if wide else scratch[:0], _NO_SEEDS,
                           codes[:0]))]
        if wide:
            calls.append((odd64.to_float32_odd, (scratch[:0], odd[:0])))
        if not _ready(calls):
            return None
    for b0, b1, e0, e1 in _chunks(n_blocks, cols, bs, per):
        _mx_chunk(x, cols, bs, b0, b1, rule, emax_elem, mant_bits, rcp32, scale_codes, scratch)
        m = e1 - e0
        if wide:
            odd64.to_float32_odd(scratch[:m], odd[:m])
            xs = odd[:m].view(np.float32)
        else:
            xs = scratch[:m]
        bad = kernel(q, xs, _NO_SEEDS, codes[e0:e1])
        assert bad == 0  # scaled elements are finite: every code exists
    return codes, scale_codes


def _ready(calls: list[tuple[Any, tuple]]) -> bool:
    """Whether every ``(kernel, args)`` runs now without compiling; each one that does
    not is queued for the background (:func:`.route.ready`)."""
    from . import route

    return all([route.ready(kernel, args) for kernel, args in calls])  # noqa: C419 (ask all)


def nvfp4_ready(x: np.ndarray, cols: int, bs: int, kernel: Any, q: np.ndarray,
                seeds: np.ndarray, scale_kernel: Any, scale_q: np.ndarray) -> bool:
    """Whether NVFP4's block kernels (:func:`nvfp4_block_amax`, :func:`nvfp4_elements`
    with the element ``kernel``, and the E4M3 ``scale_kernel``) run now without
    compiling; those that do not are loaded or compiled in the background."""
    f0, b0, u0 = np.empty(0, np.float32), np.empty(0, np.bool_), np.empty(0, np.uint8)
    return _ready([(nvfp4_block_amax, (x, cols, bs, f0, b0)),
                   *_element_calls(x, cols, bs, kernel, q, seeds),
                   (scale_kernel, (scale_q, f0, _NO_SEEDS, u0))])


def nvfp4_elements_ready(x: np.ndarray, cols: int, bs: int, kernel: Any, q: np.ndarray,
                         seeds: np.ndarray) -> bool:
    """Whether :func:`nvfp4_elements` with the element ``kernel`` runs now without
    compiling (the recipe's 16x16 tiles bring their own amax and scale codes)."""
    return _ready(_element_calls(x, cols, bs, kernel, q, seeds))


def _element_calls(x: np.ndarray, cols: int, bs: int, kernel: Any, q: np.ndarray,
                   seeds: np.ndarray) -> list[tuple[Any, tuple]]:
    f0, b0, u0 = np.empty(0, np.float32), np.empty(0, np.bool_), np.empty(0, np.uint8)
    return [(_nvfp4_chunk, (x, cols, bs, 0, 0, u0, f0, np.float32(1), b0, f0)),
            (kernel, (q, f0, seeds, u0))]


@_jit
def twos_complement(codes):
    """In place: sign-magnitude bytes (bit 7 the sign) as two's complement bytes of the
    same integer (MXINT8; -0 becomes 0)."""
    for i in range(codes.shape[0]):
        c = codes[i]
        neg = c >> 7
        codes[i] = ((c & 0x7F) ^ (0 - neg)) + neg  # -m is ~m + 1, in 8 bits


@_jit
def nvfp4_block_amax(x, cols, bs, amax, bad):
    """Per block of ``x`` (float32): the largest finite magnitude into ``amax``
    (float32), and into ``bad`` whether the block holds NaN or inf."""
    x_bits = x.view(np.int32)
    nb = (cols + bs - 1) // bs
    uniform = cols % bs == 0
    for blk in range(amax.shape[0]):
        start, stop = _span(blk, cols, bs, nb, uniform)
        xs_bits = x_bits[start:stop]
        top = np.int32(0)  # the largest magnitude pattern (see _mx_block_code)
        for i in range(xs_bits.shape[0]):
            top = max(top, xs_bits[i] & _ABS)
        is_bad = top >= _INF_BITS
        if is_bad:  # rare: again, without the non-finite values
            top = np.int32(0)
            for i in range(xs_bits.shape[0]):
                a = xs_bits[i] & _ABS
                top = max(top, a if a < _INF_BITS else np.int32(0))
        amax[blk] = np.int32(top).view(np.float32)
        bad[blk] = is_bad


@_jit
def _nvfp4_chunk(x, cols, bs, b0, b1, scale_codes, scale_values, s_dec, bad, scratch):
    """Blocks b0..b1: elements times ``min(1 / (s_block * s_dec), FLT_MAX)`` in float32
    into ``scratch`` (0 for a bad block), ``s_block = scale_values[code]`` (float32)."""
    nb = (cols + bs - 1) // bs
    uniform = cols % bs == 0
    j = 0
    for blk in range(b0, b1):
        start, stop = _span(blk, cols, bs, nb, uniform)
        xs, out = x[start:stop], scratch[j:j + stop - start]
        j += stop - start
        f = _F32_ONE / (scale_values[scale_codes[blk]] * s_dec)
        f = _F32_MAX if f > _F32_MAX else f  # inf -> FLT_MAX; NaN stays
        for i in range(xs.shape[0]):
            out[i] = xs[i] * f
    j = 0
    for blk in range(b0, b1):  # bad blocks (rare; inf * f may be NaN): zeros instead
        start, stop = _span(blk, cols, bs, nb, uniform)
        if bad[blk]:
            scratch[j:j + stop - start] = _F32_ZERO
        j += stop - start


def nvfp4_elements(x: np.ndarray, cols: int, bs: int, scale_codes: np.ndarray,
                   scale_values: np.ndarray, s_dec: np.float32, bad: np.ndarray,
                   kernel: Any, q: np.ndarray, seeds: np.ndarray) -> np.ndarray | None:
    """E2M1 codes of ``x`` (flat float32, ``rows x cols``) given the blocks' E4M3 codes
    (their float32 values in ``scale_values``), rounded by a float32-bits ``kernel``
    (params ``q``, :func:`convert.kernel_for`; ``seeds``: one per SR_BLOCK elements for stochastic rounding, then
    ``cols`` must be a multiple of ``bs``). None when a scaled element is NaN (the
    caller's reference path raises the error)."""
    n = x.shape[0]
    n_blocks = scale_codes.shape[0]
    codes = np.empty(n, np.uint8)
    per = max(1, CHUNK // bs)
    if seeds.shape[0]:  # chunks must start on a stochastic-rounding block
        whole = math.lcm(bs, SR_BLOCK)
        per = whole // bs * max(1, CHUNK // whole)
    scratch = np.empty(min(per * bs, n), np.float32)
    s_dec = np.float32(s_dec)
    for b0, b1, e0, e1 in _chunks(n_blocks, cols, bs, per):
        _nvfp4_chunk(x, cols, bs, b0, b1, scale_codes, scale_values, s_dec, bad, scratch)
        m = e1 - e0
        s = seeds[e0 // SR_BLOCK:] if seeds.shape[0] else seeds
        if kernel(q, scratch[:m], s, codes[e0:e1]):
            return None
    return codes


@_jit
def _dequantize(codes, cols, bs, table, per_block, out):
    """out[i] = table[codes[i]] * per_block[block of i] (float64 product, stored in
    out's dtype); returns the index of the first code past the table, or -1."""
    nb = (cols + bs - 1) // bs
    n_codes = table.shape[0]
    for r in range(codes.shape[0] // cols if cols else 0):
        for b in range(nb):
            start = r * cols + b * bs
            stop = min(start + bs, r * cols + cols)
            cs, os_ = codes[start:stop], out[start:stop]
            f = per_block[r * nb + b]
            for i in range(cs.shape[0]):
                c = cs[i]
                if c >= n_codes:
                    return start + i
                os_[i] = table[c] * f
    return -1


def dequantize_blocks(codes: np.ndarray, per_block: np.ndarray, table: np.ndarray, axis: int,
                      bs: int, dtype: Any) -> np.ndarray | None:
    """``table[code] * per_block[block]`` for a block-scaled tensor: ``codes`` (uint8,
    the tensor's shape), ``per_block`` (float64, ``axis`` cut into blocks of ``bs``),
    the product in float64 stored as ``dtype``. None where this does not apply (a
    dtype other than float32/float64, arrays of other shapes or types, a code past
    the table) or the kernel is not compiled yet: the caller's numpy path then
    answers, errors included."""
    if np.dtype(dtype) not in (np.float32, np.float64) or not (
            isinstance(codes, np.ndarray) and codes.dtype == np.uint8 and codes.ndim >= 1
            and isinstance(per_block, np.ndarray) and per_block.dtype == np.float64):
        return None
    moved = move_axis(codes, axis, -1)
    cols = moved.shape[-1]
    scales = move_axis(per_block, axis, -1)
    if scales.shape != moved.shape[:-1] + (-(-cols // bs),) or codes.size == 0:
        return None
    out = np.empty(moved.shape, dtype)
    args = (np.ascontiguousarray(moved).reshape(-1), cols, bs, table,
            np.ascontiguousarray(scales).reshape(-1), out.reshape(-1))
    if not _ready([(_dequantize, args)]) or _dequantize(*args) >= 0:
        return None
    return np.ascontiguousarray(move_axis(out, -1, axis))
