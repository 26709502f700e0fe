"""Compiled twins of the AMD mfma models of :mod:`lowprec.amd` (issue #37).

:mod:`lowprec.amd` is the readable reference: one dot product at a time, in
Python integers. These kernels compute the same arithmetic, bit for bit
(``tests/test_amd_kernels.py``), on float64 values that stand for those
integers exactly:

* **CDNA3** (``mi300``). A product of two inputs has at most 22 significant
  bits, so it is exact in float64, and so is its scaling by a power of two
  (no exponent in play leaves float64's normal range). The reference's
  ``|S| >> shift`` (the product cut to 24 fraction bits below the group's
  largest nominal exponent ``e``, toward zero) is therefore
  ``trunc(a * b * 2**(24 - e))``, and its ``>>`` on a signed sum (rounding
  down) is ``floor(s * 2**-d)``: every step is one float64 multiply and one
  rounding to an integer, which the compiler vectorises across outputs.
  The group's ``e`` is the maximum of integer nominal exponents (a zero
  input's is -126, as in the reference). A product at or beyond ``2**128``
  (a group exponent of 127 or more, BF16/xf32 only) and NaN/inf inputs take
  :func:`_c3_group`, the reference's full rule for one group, special values
  included.
* **CDNA1/CDNA2** (``mi100``, ``mi250``): the reference's pairwise tree of
  FP32 operations is FP32 arithmetic, here in float32 (IEEE products and
  additions, round to nearest even), with CDNA2's flushes as selects.

:func:`cdna3_grid` and :func:`cdna12_grid` compute rows of ``C + A @ B`` with
the output index innermost and B in column tiles that stay in the L2 cache;
:func:`cdna3_pairs` and :func:`cdna12_pairs` compute the dot products of
arbitrary row pairs (``lp.vecdot``, and grids with NaN/inf inputs on CDNA3).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

_jit = njit(cache=True, nogil=True)
_TINY32 = np.float32(2.0 ** -126)
_ZERO32 = np.float32(0.0)
_BIG = 2.0 ** 128
_NO_PRODUCT = -252  # a group's exponent with no products: as zero-padded (0 * 0)
TILE = 64  # columns of B per tile: K x TILE x 12 bytes stay in L2 for K <= 2048


@_jit
def _pow2(e):
    """2.0**e for an integer -1022 <= e <= 1023 (from the bits)."""
    return np.int64((1023 + e) << 52).view(np.float64)


@_jit
def _c_parts(c):
    """(nominal exponent, is finite) of a float32 value c held in a float64: the
    reference's ``_split(c, -126)`` exponent (zero: -126)."""
    bits = np.float64(c).view(np.int64)
    e = ((bits >> 52) & 0x7FF) - 1023
    return max(e, -126), e != 1024


@_jit
def _combine(s, e, c, fp8):
    """The group's sum ``s`` (units 2**(e - 24)) aligned with C, both rounded down
    to 31 and 24 fraction bits below ``max(e, e_c)``, rounded (RNE) to FP32."""
    ec, _ = _c_parts(c)
    top = max(e, ec)
    c24 = np.floor(c * _pow2(24 - top))
    if fp8 and ec < top - 25:
        c24 = 0.0
    # + 0.0: a zero total is +0, as the reference's integer 0 (-0.0 + 0.0 == +0.0)
    total = (np.floor(s * _pow2(7 + e - top)) + c24 * 128.0) + 0.0
    return np.float32(total * _pow2(top - 31))


@_jit
def _c3_sub(a, an, b, bn, k0, k1, step):
    """(sum in units 2**(e - 24), e) of products k0, k0 + step, .. < k1."""
    e = _NO_PRODUCT
    for k in range(k0, k1, step):
        e = max(e, an[k] + bn[k])
    sc = _pow2(24 - e)
    s = 0.0
    for k in range(k0, k1, step):
        s += np.trunc(a[k] * b[k] * sc)
    return s, e


@_jit
def _c3_group(a, an, b, bn, k0, k1, c, fp8):
    """One CDNA3 group (products k0..k1 of rows a, b, nominal exponents an, bn)
    added to the FP32 value c: :func:`lowprec.amd._cdna3_group`, then FP32."""
    exact = 0.0
    pos = neg = False
    for k in range(k0, k1):
        p = a[k] * b[k]
        exact += p
        pos |= p >= _BIG
        neg |= p <= -_BIG
    exact += c
    if not np.isfinite(exact):
        return np.float32(exact)
    if pos and neg:
        return np.float32(np.nan)
    if pos or neg:
        return np.float32(np.inf if pos else -np.inf)
    if fp8:
        s0, e0 = _c3_sub(a, an, b, bn, k0, k1, 2)
        s1, e1 = _c3_sub(a, an, b, bn, k0 + 1, k1, 2)
        e = max(e0, e1)
        s = np.floor(s0 * _pow2(e0 - e)) + np.floor(s1 * _pow2(e1 - e))
    else:
        s, e = _c3_sub(a, an, b, bn, k0, k1, 1)
    return _combine(s, e, c, fp8)


@_jit
def cdna3_pairs(a, an, b, bn, ia, ib, cc, group, fp8, n0, n1, out):
    """out[n] = the mi300 dot product of row ia[n] of (a, an) and row ib[n] of
    (b, bn) (B transposed: N x K), from C = cc[n]; NaN/inf inputs allowed."""
    K = a.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        acc = np.float32(cc[n])
        for k0 in range(0, K, group):
            acc = _c3_group(a[i], an[i], b[j], bn[j], k0, min(k0 + group, K),
                            np.float64(acc), fp8)
        out[n] = acc


@_jit
def _c3_tile_sub(arow, anrow, b, bn, k0, k1, step, j0, jn, emax, s):
    """emax[j], s[j] (units 2**(emax - 24)) of products k0, k0 + step, .. < k1 for
    columns j0 .. j0 + jn, vectorised across columns."""
    for j in range(jn):
        emax[j] = _NO_PRODUCT
    for k in range(k0, k1, step):
        ea = anrow[k]
        bnk = bn[k, j0:j0 + jn]
        for j in range(jn):
            emax[j] = max(emax[j], ea + bnk[j])
    for j in range(jn):
        s[j] = 0.0
        emax[j] = np.int64((1023 + 24 - emax[j]) << 52)  # now the bits of the scale
    sc = emax.view(np.float64)
    for k in range(k0, k1, step):
        x = arow[k]
        bk = b[k, j0:j0 + jn]
        for j in range(jn):
            s[j] += np.trunc(x * bk[j] * sc[j])
    for j in range(jn):  # back to exponents
        emax[j] = 1023 + 24 - (emax[j] >> 52)


@_jit
def _c3_sub8(arow, anrow, b, bn, k0, step, j0, jn, emax, s):
    """:func:`_c3_tile_sub` for exactly 8 products (k0 + t * step), unrolled so that
    each column's terms stay in registers."""
    j1 = j0 + jn
    k = k0
    x0, x1, x2, x3 = arow[k], arow[k + step], arow[k + 2 * step], arow[k + 3 * step]
    x4, x5, x6, x7 = (arow[k + 4 * step], arow[k + 5 * step], arow[k + 6 * step],
                      arow[k + 7 * step])
    n0, n1, n2, n3 = anrow[k], anrow[k + step], anrow[k + 2 * step], anrow[k + 3 * step]
    n4, n5, n6, n7 = (anrow[k + 4 * step], anrow[k + 5 * step], anrow[k + 6 * step],
                      anrow[k + 7 * step])
    b0, b1, b2, b3 = b[k, j0:j1], b[k + step, j0:j1], b[k + 2 * step, j0:j1], \
        b[k + 3 * step, j0:j1]
    b4, b5, b6, b7 = b[k + 4 * step, j0:j1], b[k + 5 * step, j0:j1], \
        b[k + 6 * step, j0:j1], b[k + 7 * step, j0:j1]
    m0, m1, m2, m3 = bn[k, j0:j1], bn[k + step, j0:j1], bn[k + 2 * step, j0:j1], \
        bn[k + 3 * step, j0:j1]
    m4, m5, m6, m7 = bn[k + 4 * step, j0:j1], bn[k + 5 * step, j0:j1], \
        bn[k + 6 * step, j0:j1], bn[k + 7 * step, j0:j1]
    for j in range(jn):
        e = max(max(max(n0 + m0[j], n1 + m1[j]), max(n2 + m2[j], n3 + m3[j])),
                max(max(n4 + m4[j], n5 + m5[j]), max(n6 + m6[j], n7 + m7[j])))
        sc = _pow2(24 - e)
        s[j] = ((np.trunc(x0 * b0[j] * sc) + np.trunc(x1 * b1[j] * sc))
                + (np.trunc(x2 * b2[j] * sc) + np.trunc(x3 * b3[j] * sc))) \
            + ((np.trunc(x4 * b4[j] * sc) + np.trunc(x5 * b5[j] * sc))
               + (np.trunc(x6 * b6[j] * sc) + np.trunc(x7 * b7[j] * sc)))
        emax[j] = e


@_jit
def _c3_sub4(arow, anrow, b, bn, k0, j0, jn, emax, s):
    """:func:`_c3_tile_sub` for exactly 4 consecutive products, unrolled."""
    j1 = j0 + jn
    k = k0
    x0, x1, x2, x3 = arow[k], arow[k + 1], arow[k + 2], arow[k + 3]
    n0, n1, n2, n3 = anrow[k], anrow[k + 1], anrow[k + 2], anrow[k + 3]
    b0, b1, b2, b3 = b[k, j0:j1], b[k + 1, j0:j1], b[k + 2, j0:j1], b[k + 3, j0:j1]
    m0, m1, m2, m3 = bn[k, j0:j1], bn[k + 1, j0:j1], bn[k + 2, j0:j1], bn[k + 3, j0:j1]
    for j in range(jn):
        e = max(max(n0 + m0[j], n1 + m1[j]), max(n2 + m2[j], n3 + m3[j]))
        sc = _pow2(24 - e)
        s[j] = (np.trunc(x0 * b0[j] * sc) + np.trunc(x1 * b1[j] * sc)) \
            + (np.trunc(x2 * b2[j] * sc) + np.trunc(x3 * b3[j] * sc))
        emax[j] = e


@_jit
def _c3_tile(arow, anrow, b, bn, k0, k1, step, j0, jn, emax, s):
    """emax[j], s[j] of products k0, k0 + step, .. < k1 (columns j0 .. j0 + jn):
    the unrolled loops for whole groups, :func:`_c3_tile_sub` for a last short one."""
    n = (k1 - k0 + step - 1) // step
    if n == 8:
        _c3_sub8(arow, anrow, b, bn, k0, step, j0, jn, emax, s)
    elif n == 4 and step == 1:
        _c3_sub4(arow, anrow, b, bn, k0, j0, jn, emax, s)
    else:
        _c3_tile_sub(arow, anrow, b, bn, k0, k1, step, j0, jn, emax, s)


@_jit
def cdna3_grid(a, an, b, bn, N, cc, group, fp8, big, i0, i1, out):
    """Rows i0..i1 of the mi300 ``C + A @ B`` (B in tiles: :func:`tiles`; finite
    inputs; C any
    FP32 value) into ``out`` (M * N float32, row-major), C = cc (M * N).
    ``big``: products may reach 2**128 (BF16, xf32): groups whose largest
    nominal exponent is 127 or more are redone by :func:`_c3_group`."""
    K = a.shape[1]
    e0 = np.empty(TILE, np.int64)
    e1 = np.empty(TILE, np.int64)
    s0 = np.empty(TILE, np.float64)
    s1 = np.empty(TILE, np.float64)
    acc = np.empty(TILE, np.float64)
    old = np.empty(TILE, np.float64)
    for j0 in range(0, N, TILE):
        jn = min(TILE, N - j0)
        bt, bnt = b[j0 // TILE], bn[j0 // TILE]  # K x TILE, contiguous
        for i in range(i0, i1):
            arow, anrow = a[i], an[i]
            for j in range(jn):
                acc[j] = cc[i * N + j0 + j]
            for k0 in range(0, K, group):
                k1 = min(k0 + group, K)
                if fp8:
                    _c3_tile(arow, anrow, bt, bnt, k0, k1, 2, 0, jn, e0, s0)
                    _c3_tile(arow, anrow, bt, bnt, k0 + 1, k1, 2, 0, jn, e1, s1)
                    for j in range(jn):
                        e = max(e0[j], e1[j])
                        s0[j] = (np.floor(s0[j] * _pow2(e0[j] - e))
                                 + np.floor(s1[j] * _pow2(e1[j] - e)))
                        e0[j] = e
                else:
                    _c3_tile(arow, anrow, bt, bnt, k0, k1, 1, 0, jn, e0, s0)
                if big:
                    for j in range(jn):
                        old[j] = acc[j]
                for j in range(jn):
                    c = acc[j]
                    r = np.float64(_combine(s0[j], e0[j], c, fp8))
                    acc[j] = r if np.isfinite(c) else c
                if big:
                    for j in range(jn):
                        if e0[j] >= 127:
                            acc[j] = _c3_group(arow, anrow, bt[:, j], bnt[:, j], k0,
                                               k1, old[j], fp8)
            for j in range(jn):
                out[i * N + j0 + j] = np.float32(acc[j])


# ------------------------------------------------------------------ CDNA1/2
@_jit
def _leaf(x, y, flush):
    """fmaf(x, y, +0) in FP32 (x, y float32: the product is rounded once), flushed."""
    r = x * y + _ZERO32
    if flush and abs(r) < _TINY32:
        r = r * _ZERO32
    return r


@_jit
def _add(x, y, flush):
    r = x + y
    if flush and abs(r) < _TINY32:
        r = r * _ZERO32
    return r


@_jit
def _tree(x, b, k0, n, flush, j):
    """The pairwise tree of the n <= 4 products x[t] * b[k0 + t, j] (x float32), as
    the reference's ``_pairwise`` splits them (halves of n // 2 and the rest)."""
    if n == 1:
        return _leaf(x[0], b[k0, j], flush)
    if n == 2:
        return _add(_leaf(x[0], b[k0, j], flush), _leaf(x[1], b[k0 + 1, j], flush), flush)
    if n == 3:
        return _add(_leaf(x[0], b[k0, j], flush),
                    _add(_leaf(x[1], b[k0 + 1, j], flush), _leaf(x[2], b[k0 + 2, j], flush),
                         flush), flush)
    return _add(_add(_leaf(x[0], b[k0, j], flush), _leaf(x[1], b[k0 + 1, j], flush), flush),
                _add(_leaf(x[2], b[k0 + 2, j], flush), _leaf(x[3], b[k0 + 3, j], flush),
                     flush), flush)


@_jit
def _c12_start(c, flush):
    """C as the accumulator starts: FP32, a subnormal flushed to +0 on CDNA2."""
    c = np.float32(c)
    if flush and c != 0 and abs(c) < _TINY32:
        c = _ZERO32
    return c


@_jit
def cdna12_pairs(a, b, ia, ib, cc, group, flush, n0, n1, out):
    """out[n] = the mi100/mi250 dot product of rows ia[n] of a and ib[n] of b
    (float32 values, B transposed: N x K; CDNA2's inputs already flushed)."""
    K = a.shape[1]
    x = np.empty(4, np.float32)
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        acc = _c12_start(cc[n], flush)
        bt = b[j:j + 1].T  # K x 1
        for k0 in range(0, K, group):
            m = min(group, K - k0)
            for t in range(m):
                x[t] = a[i, k0 + t]
            acc = _add(acc, _tree(x, bt, k0, m, flush, 0), flush)
        out[n] = acc


@_jit
def cdna12_grid(a, b, N, cc, group, flush, i0, i1, out):
    """Rows i0..i1 of the mi100/mi250 ``C + A @ B`` (float32 values, B in tiles: :func:`tiles`;
    CDNA2's inputs already flushed) into ``out`` (M * N float32), C = cc."""
    K = a.shape[1]
    acc = np.empty(TILE, np.float32)
    x = np.empty(4, np.float32)
    for j0 in range(0, N, TILE):
        jn = min(TILE, N - j0)
        bt = b[j0 // TILE]  # K x TILE, contiguous
        for i in range(i0, i1):
            for j in range(jn):
                acc[j] = _c12_start(cc[i * N + j0 + j], flush)
            for k0 in range(0, K, group):
                m = min(group, K - k0)
                for t in range(m):
                    x[t] = a[i, k0 + t]
                if m == 4:
                    b0, b1 = bt[k0, :jn], bt[k0 + 1, :jn]
                    b2, b3 = bt[k0 + 2, :jn], bt[k0 + 3, :jn]
                    x0, x1, x2, x3 = x[0], x[1], x[2], x[3]
                    for j in range(jn):
                        t = _add(_add(_leaf(x0, b0[j], flush), _leaf(x1, b1[j], flush), flush),
                                 _add(_leaf(x2, b2[j], flush), _leaf(x3, b3[j], flush), flush),
                                 flush)
                        acc[j] = _add(acc[j], t, flush)
                elif m == 2:
                    b0, b1 = bt[k0, :jn], bt[k0 + 1, :jn]
                    x0, x1 = x[0], x[1]
                    for j in range(jn):
                        t = _add(_leaf(x0, b0[j], flush), _leaf(x1, b1[j], flush), flush)
                        acc[j] = _add(acc[j], t, flush)
                else:
                    for j in range(jn):
                        acc[j] = _add(acc[j], _tree(x, bt, k0, m, flush, j), flush)
            for j in range(jn):
                out[i * N + j0 + j] = acc[j]


# ------------------------------------------------------------------ the driver
def tiles(b: np.ndarray) -> np.ndarray:
    """B transposed (N x K) as column tiles of B (N / TILE, K, TILE), zero-padded:
    each tile contiguous, so that its rows do not contend for the same cache sets.

    >>> tiles(np.arange(6.0).reshape(3, 2)).shape == (1, 2, TILE)
    True
    """
    n, k = b.shape
    t = -(-n // TILE)
    padded = np.zeros((t * TILE, k), b.dtype)
    padded[:n] = b
    return np.ascontiguousarray(padded.reshape(t, TILE, k).transpose(0, 2, 1))


def kernel_for(gen: str, grid: bool, special: bool) -> Any:
    """The kernel that serves ``gen`` ("CDNA1", "CDNA2", "CDNA3"): the grid kernel
    for a full ``A @ B`` (on CDNA3 only with finite inputs), else the pairs kernel.

    >>> kernel_for("CDNA3", True, False) is cdna3_grid
    True
    """
    if gen == "CDNA3":
        return cdna3_grid if grid and not special else cdna3_pairs
    return cdna12_grid if grid else cdna12_pairs


def mfma_values(a: np.ndarray, b: np.ndarray, c: np.ndarray, gen: str, inputs: str,
                emin: int, group: int, pairs: tuple[np.ndarray, np.ndarray] | None,
                auto: bool) -> np.ndarray:
    """FP32 results of the mfma dot products: ``a`` (M, K) and ``b`` (N, K, B
    transposed) float64 values of ``inputs`` (xf32 already truncated), ``c``
    float64 C values (one per output); ``pairs`` (ia, ib) or None for every (i, j)
    (then M * N outputs, row-major). With ``auto``, :class:`route.Cold` where the
    kernel is not compiled yet (:func:`route.ready` has it compiled meanwhile).
    """
    from .._runtime import _threads
    from . import route

    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    special = not (np.isfinite(a).all() and np.isfinite(b).all())
    kernel = kernel_for(gen, pairs is None, special)
    M, N = a.shape[0], b.shape[0]
    if pairs is not None:
        ia, ib = (np.ascontiguousarray(p, dtype=np.int64) for p in pairs)
    elif kernel is cdna3_pairs:  # a grid with NaN/inf inputs
        ia, ib = np.repeat(np.arange(M), N), np.tile(np.arange(N), M)
    else:
        ia = ib = np.empty(0, np.int64)
    out = np.empty(M * N if pairs is None else len(ia), np.float32)
    cc = np.ascontiguousarray(c, dtype=np.float32).astype(np.float64)
    head: tuple[Any, ...]
    if gen == "CDNA3":
        with np.errstate(invalid="ignore"):
            an, bn = (np.where((x == 0) | ~np.isfinite(x), -126,
                               np.maximum(np.frexp(x)[1] - 1, emin)).astype(np.int64)
                      for x in (a, b))
        fp8 = inputs.startswith("fp8")
        if kernel is cdna3_grid:
            head = (a, an, tiles(b), tiles(bn), N, cc, group, fp8, inputs in ("bf16", "xf32"))
        else:
            head = (a, an, b, bn, ia, ib, cc, group, fp8)
    else:
        flush = gen == "CDNA2"
        a32, b32 = (np.where(flush & (np.abs(x) < 2.0 ** emin), 0.0, x).astype(np.float32)
                    for x in (a, b))
        if kernel is cdna12_grid:
            head = (a32, tiles(b32), N, cc, group, flush)
        else:
            head = (a32, b32, ia, ib, cc, group, flush)
    rows = M if kernel in (cdna3_grid, cdna12_grid) else len(out)  # what n0..n1 count
    if auto and not route.ready(kernel, (*head, 0, 0, out)):
        raise route.Cold(route.kernel_name(kernel))
    nt = max(1, min(_threads(), rows, len(out) * max(a.shape[1], 1) // (1 << 18)))
    cuts = [rows * t // nt for t in range(nt + 1)]
    if nt == 1:
        kernel(*head, 0, rows, out)
    else:
        with ThreadPoolExecutor(max_workers=nt) as pool:
            list(pool.map(lambda t: kernel(*head, cuts[t], cuts[t + 1], out), range(nt)))
    return out
