"""Compiled inner loops of :mod:`lowprec.recipes.nvfp4` (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels  # noqa: F401  (installs the kernel cache folder first)

__all__ = ["sr8_e2m1"]


@njit(cache=True, nogil=True)
def _sr8(v, rbits, out):  # pragma: no cover - compiled
    for i in range(v.shape[0]):
        x = np.float64(v[i])  # |x| <= 6 (clamped by the caller), never NaN
        a = abs(x)
        if a < 2.0:
            q = 0.5
        elif a < 4.0:
            q = 1.0
        else:
            q = 2.0
        k = np.floor(a / q)
        t = np.int64(np.floor((a - k * q) / q * 256.0))  # exact: 0..255
        if t + np.int64(rbits[i]) >= 256:
            k += 1.0
        m = k * q  # 0, .5, 1, 1.5, 2, 3, 4 or 6
        if m < 2.0:
            c = np.int64(m * 2.0)
        elif m < 4.0:
            c = np.int64(m) + 2
        elif m == 4.0:
            c = 6
        else:
            c = 7
        if np.signbit(v[i]):
            c += 8
        out[i] = c


def sr8_e2m1(v: np.ndarray, rbits: np.ndarray) -> np.ndarray:
    """E2M1 codes of ``v`` (float32, |v| <= 6) by stochastic rounding with one random byte
    per element: ``|v|`` between neighbours ``lo`` and ``lo + q`` rounds up iff
    ``rbits + floor(256 (|v| - lo) / q) >= 256``; the sign bit is ``v``'s (-0.0 and
    negatives that round to 0 give code 8)."""
    out = np.empty(v.shape[0], np.uint8)
    _sr8(np.ascontiguousarray(v, np.float32), np.ascontiguousarray(rbits, np.uint8), out)
    return out


def tile_amax(x: np.ndarray, tr: int, amax: np.ndarray, bad: np.ndarray) -> None:
    """Per tile of ``tr`` rows x 16 columns of ``x`` (float32, both dims whole tiles): the
    largest finite magnitude into ``amax`` and whether it holds NaN or inf into ``bad``
    (lowprec.nvfp4's compiled 1x16 pass, then the largest of each ``tr`` rows)."""
    from .._kernels.blocks import nvfp4_block_amax

    rows, cols = x.shape
    row_amax = np.empty(rows * (cols // 16), np.float32)
    row_bad = np.empty(row_amax.shape, np.bool_)
    nvfp4_block_amax(x.reshape(-1), cols, 16, row_amax, row_bad)
    amax[:] = row_amax.reshape(rows // tr, tr, cols // 16).max(axis=1)
    bad[:] = row_bad.reshape(rows // tr, tr, cols // 16).any(axis=1)


@njit(cache=True, nogil=True)
def tile_codes(x, tr, enc, bad, rbits, stochastic, out):  # pragma: no cover - compiled
    """E2M1 codes of ``clamp(x * enc[tile], -6, 6)`` (the product in float32), rounded to
    nearest even or, with ``stochastic``, by the byte rule of :func:`sr8_e2m1` with
    ``rbits`` (one byte per element of ``x``); code 0 in a ``bad`` tile."""
    cols = x.shape[1]
    for r in range(x.shape[0]):
        t = r // tr
        for b in range(cols // 16):
            if bad[t, b]:
                for i in range(16):
                    out[r, b * 16 + i] = 0
                continue
            f = enc[t, b]
            for i in range(16):
                c0 = b * 16 + i
                v = x[r, c0] * f
                if v > np.float32(6):
                    v = np.float32(6)
                elif v < np.float32(-6):
                    v = np.float32(-6)
                a = abs(np.float64(v))
                if a < 2.0:
                    q, base = 0.5, 0
                elif a < 4.0:
                    q, base = 1.0, 2
                else:
                    q, base = 2.0, 4
                k = np.floor(a / q)
                rem = a - k * q
                ki = np.int64(k)
                if stochastic:
                    up = np.int64(np.floor(rem / q * 256.0)) + np.int64(rbits[r * cols + c0]) >= 256
                else:
                    half = q * 0.5
                    up = rem > half or (rem == half and ki % 2 == 1)
                c = ki + base + (1 if up else 0)
                if np.signbit(v):
                    c += 8
                out[r, c0] = c


def rne_codes(x: np.ndarray, tr: int, tile_scale_codes: np.ndarray, bad: np.ndarray,
              s_dec: np.float32) -> np.ndarray | None:
    """:func:`tile_codes` in round-to-nearest-even through lowprec.nvfp4's compiled
    element pass (the same products and rounding, its SIMD kernel), each tile's scale
    code repeated on its ``tr`` rows; None where that pass declines."""
    from .._kernels import convert
    from .._kernels.blocks import nvfp4_elements
    from .._kernels.params import MODE_INT
    from ..nvfp4 import ELEMENT, _scale_table

    rows, cols = x.shape
    per_row = np.ascontiguousarray(np.repeat(tile_scale_codes, tr, axis=0)).reshape(-1)
    bad_rows = np.ascontiguousarray(np.repeat(bad, tr, axis=0)).reshape(-1)
    codes = nvfp4_elements(x.reshape(-1), cols, 16, per_row, _scale_table(), s_dec, bad_rows,
                           *convert.kernel_for(ELEMENT, MODE_INT["rne"], True, False, True),
                           np.empty(0, np.uint64))
    return None if codes is None else codes.reshape(rows, cols)
