"""Kernels of NVIDIA's NVFP4 training recipe (:mod:`lowprec.hadamard`,
:mod:`lowprec.recipes.nvfp4`), each with its numpy reference.

Each entry point asks the router (:func:`.route.ready`) whether its compiled
loop runs now; where it would have to compile first, the numpy twin below it
answers (the same operations in the same order, so the same bits) while the
loop compiles in the background. ``tests/test_route.py`` holds every twin
bit-equal to its loop.

* :func:`fwht_groups` / :func:`fwht_columns`: the random Hadamard transform's
  butterfly, along the last axis or along axis 0 written transposed;
* :func:`tile_amax`: per tile of ``tr`` rows x 16 columns, the largest finite
  magnitude and whether it holds NaN or inf;
* :func:`tile_codes`: E2M1 codes of the scaled elements, round to nearest even
  or the recipe's 8-bit stochastic rounding;
* :func:`rne_codes`: the same in round-to-nearest-even through
  :mod:`lowprec.nvfp4`'s element pass (None where its kernels are cold).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from . import route
from .blocks import nvfp4_block_amax

__all__ = ["fwht_columns", "fwht_groups", "rne_codes", "tile_amax", "tile_codes"]

_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)


# ------------------------------------------------------------ Hadamard butterfly
@njit(cache=True, nogil=True, inline="always")
def _to_bf16(v):  # pragma: no cover - compiled
    """float32 ``v`` rounded to bfloat16 (RNE; NaN stays NaN), as a float32."""
    b = np.float32(v).view(np.uint32)
    if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.float32(v)
    r = np.uint32((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))
                  & np.uint32(0xFFFF0000))
    return r.view(np.float32)


@njit(cache=True, nogil=True)
def _fwht_groups(x, signs, scale, bf16, out):  # pragma: no cover - compiled
    """out[g*n:(g+1)*n] = float32((signs * x_group) @ H * scale), butterfly in float64,
    then to bfloat16 if ``bf16``."""
    n = signs.shape[0]
    buf = np.empty(n, np.float64)
    for g in range(x.shape[0] // n):
        base = g * n
        for i in range(n):
            buf[i] = np.float64(x[base + i]) * signs[i]
        h = 1
        while h < n:
            for i in range(0, n, 2 * h):
                for j in range(i, i + h):
                    a = buf[j]
                    b = buf[j + h]
                    buf[j] = a + b
                    buf[j + h] = a - b
            h *= 2
        for i in range(n):
            v = np.float32(buf[i] * scale)
            out[base + i] = _to_bf16(v) if bf16 else v


@njit(cache=True, nogil=True)
def _fwht_columns(x, signs, scale, bf16, out):  # pragma: no cover - compiled
    """out[j, g*n + i] = transform of x[g*n:(g+1)*n, j]: the transform along axis 0 of a
    2-D ``x``, written transposed (rows of 16 at a time, the butterfly across columns)."""
    n = signs.shape[0]
    cols = x.shape[1]
    buf = np.empty((n, cols), np.float64)
    for g in range(x.shape[0] // n):
        for i in range(n):
            for j in range(cols):
                buf[i, j] = np.float64(x[g * n + i, j]) * signs[i]
        h = 1
        while h < n:
            for i in range(0, n, 2 * h):
                for r in range(i, i + h):
                    for j in range(cols):
                        a = buf[r, j]
                        b = buf[r + h, j]
                        buf[r, j] = a + b
                        buf[r + h, j] = a - b
            h *= 2
        for j in range(cols):
            for i in range(n):
                v = np.float32(buf[i, j] * scale)
                out[j, g * n + i] = _to_bf16(v) if bf16 else v


def _fwht_reference(groups: np.ndarray, signs: np.ndarray, scale: float,
                    bf16: bool) -> np.ndarray:
    """The butterfly of :func:`_fwht_groups` on ``groups`` (shape ``(G, n)``) in numpy:
    the same float64 sums in the same order, then float32 and bfloat16 (RNE)."""
    n = signs.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):  # IEEE results, as the kernel's
        return _butterfly(groups.astype(np.float64) * signs, n, scale, bf16)


def _butterfly(buf: np.ndarray, n: int, scale: float, bf16: bool) -> np.ndarray:
    h = 1
    while h < n:
        pairs = buf.reshape(buf.shape[0], n // (2 * h), 2, h)
        a = pairs[:, :, 0, :].copy()
        b = pairs[:, :, 1, :]
        pairs[:, :, 0, :] = a + b
        pairs[:, :, 1, :] = a - b
        h *= 2
    v = (buf * scale).astype(np.float32)
    if bf16:
        bits = v.view(np.uint32)
        up = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
            & np.uint32(0xFFFF0000)
        v = np.where((bits & _ABS) > _INF, bits, up).view(np.float32)
    return v


def fwht_groups(x: np.ndarray, signs: np.ndarray, scale: float, bf16: bool,
                out: np.ndarray) -> None:
    """``out`` (flat float32) = the transform of every ``len(signs)`` consecutive values
    of the flat, C-contiguous ``x``."""
    args = (x, signs, scale, bf16, out)
    if route.ready(_fwht_groups, args):
        _fwht_groups(*args)
    else:
        out[:] = _fwht_reference(x.reshape(-1, signs.shape[0]), signs, scale, bf16).reshape(-1)


def fwht_columns(x: np.ndarray, signs: np.ndarray, scale: float, bf16: bool,
                 out: np.ndarray) -> None:
    """``out`` (``x.T``'s shape) = the transform of the 2-D C-contiguous ``x`` along axis
    0, transposed."""
    args = (x, signs, scale, bf16, out)
    if route.ready(_fwht_columns, args):
        _fwht_columns(*args)
    else:
        n = signs.shape[0]
        groups = np.ascontiguousarray(x.T).reshape(-1, n)
        out[:] = _fwht_reference(groups, signs, scale, bf16).reshape(out.shape)


# ------------------------------------------------------------ NVFP4 tiles
def tile_amax(x: np.ndarray, tr: int, amax: np.ndarray, bad: np.ndarray) -> None:
    """Per tile of ``tr`` rows x 16 columns of ``x`` (float32, C-contiguous, both dims
    whole tiles): the largest finite magnitude into ``amax`` and whether it holds NaN or
    inf into ``bad`` (:mod:`lowprec.nvfp4`'s 1x16 pass, then the largest of ``tr`` rows)."""
    rows, cols = x.shape
    row_amax = np.empty(rows * (cols // 16), np.float32)
    row_bad = np.empty(row_amax.shape, np.bool_)
    flat = x.reshape(-1)
    if route.ready(nvfp4_block_amax, (flat, cols, 16, row_amax, row_bad)):
        nvfp4_block_amax(flat, cols, 16, row_amax, row_bad)
    else:  # magnitudes compared as bit patterns, as the kernel does
        mag = flat.view(np.uint32).reshape(-1, 16) & _ABS
        row_bad[:] = (mag >= _INF).any(axis=1)
        row_amax[:] = np.where(mag < _INF, mag, np.uint32(0)).max(axis=1).view(np.float32)
    amax[:] = row_amax.reshape(rows // tr, tr, cols // 16).max(axis=1)
    bad[:] = row_bad.reshape(rows // tr, tr, cols // 16).any(axis=1)


@njit(cache=True, nogil=True)
def _tile_codes(x, tr, enc, bad, rbits, stochastic, out):  # pragma: no cover - compiled
    """E2M1 codes of ``clamp(x * enc[tile], -6, 6)`` (the product in float32), rounded to
    nearest even or, with ``stochastic``, up iff ``rbits + floor(256 (|v| - lo) / q)
    >= 256`` (one byte per element of ``x``); code 0 in a ``bad`` tile."""
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


def _tile_codes_reference(x: np.ndarray, tr: int, enc: np.ndarray, bad: np.ndarray,
                          rbits: np.ndarray, stochastic: bool) -> np.ndarray:
    """:func:`_tile_codes` in numpy, element by element the same operations."""
    per_elem = np.repeat(np.repeat(enc, tr, axis=0), 16, axis=1)
    with np.errstate(over="ignore", invalid="ignore"):  # a bad tile's values: code 0
        v = np.clip(x * per_elem, np.float32(-6), np.float32(6))  # float32 product, clamp
        a = np.abs(v.astype(np.float64))
        q = np.where(a < 2.0, 0.5, np.where(a < 4.0, 1.0, 2.0))
        base = np.where(a < 2.0, 0, np.where(a < 4.0, 2, 4))
        k = np.floor(a / q)
        rem = a - k * q
        ki = k.astype(np.int64)
        if stochastic:
            up = np.floor(rem / q * 256.0).astype(np.int64) \
                + rbits.reshape(x.shape).astype(np.int64) >= 256
        else:
            half = q * 0.5
            up = (rem > half) | ((rem == half) & (ki % 2 == 1))
    c = ki + base + up + 8 * np.signbit(v)
    c[np.repeat(np.repeat(bad, tr, axis=0), 16, axis=1)] = 0
    return c.astype(np.uint8)


def tile_codes(x: np.ndarray, tr: int, enc: np.ndarray, bad: np.ndarray, rbits: np.ndarray,
               stochastic: bool, out: np.ndarray) -> None:
    """``out`` (uint8, ``x``'s shape) = the E2M1 codes of :func:`_tile_codes`."""
    args = (x, tr, enc, bad, rbits, stochastic, out)
    if route.ready(_tile_codes, args):
        _tile_codes(*args)
    else:
        out[:] = _tile_codes_reference(x, tr, enc, bad, rbits, stochastic)


def rne_codes(x: np.ndarray, tr: int, tile_scale_codes: np.ndarray, bad: np.ndarray,
              s_dec: np.float32, kernel: Any, q: np.ndarray,
              scale_table: np.ndarray) -> np.ndarray | None:
    """:func:`tile_codes` in round-to-nearest-even through :mod:`lowprec.nvfp4`'s element
    pass (the same products and rounding, its SIMD kernel; ``kernel``/``q`` round the
    elements), each tile's scale code repeated on its ``tr`` rows; None where that pass
    declines or its kernels are not compiled yet."""
    from .blocks import nvfp4_elements, nvfp4_elements_ready

    rows, cols = x.shape
    flat = x.reshape(-1)
    seeds = np.empty(0, np.uint64)
    if not nvfp4_elements_ready(flat, cols, 16, kernel, q, seeds):
        return None
    per_row = np.ascontiguousarray(np.repeat(tile_scale_codes, tr, axis=0)).reshape(-1)
    bad_rows = np.ascontiguousarray(np.repeat(bad, tr, axis=0)).reshape(-1)
    codes = nvfp4_elements(flat, cols, 16, per_row, scale_table, s_dec, bad_rows, kernel, q,
                           seeds)
    return None if codes is None else codes.reshape(rows, cols)
