"""The tensor-core block FMA of ``tc_fast`` with float64 lanes instead of int64 ones.

AVX2 has no int64 multiply and no variable int64 shift worth the name, but float64
multiplies, maxima and truncations vectorise four to a register. Every step below
is exact, so the results are the bits of ``tensor_core_kernel``'s:

* operands as float64 values ``a`` (the significand, at most 11 bits, times a
  power of two) and ``pa = 2**nominal exponent`` (0 for a zero element);
* ``em = max(pa * pb)`` over a block (and C's ``2**nominal``): a power of two,
  ``2**emax``; the scale ``sc = 2**(frac_bits - emax)``;
* each truncated product ``trunc(a * b * sc)``: ``a * b`` has at most 22 bits
  (exact), the power-of-two scale is exact (no float64 subnormal or overflow for
  the formats ``fits`` admits), ``trunc`` drops the bits below ``2**lsb`` toward
  zero as the integer shift does;
* the block sum of at most ``block + 1`` integers below ``2**(frac_bits + 2)``
  each, exact while it stays below ``2**53`` (``fits``);
* the sum ``S * 2**lsb`` normalised with float64 bit operations as ``tc_rows``
  does; results outside C/D's normal range go to the exact ``_normalise``.

Columns are taken in tiles of ``TILE`` (the loop over columns is the innermost
one, the one that vectorises) and rows of A in groups of ``ROWS``: each block of a
tile of B is taken by every row of a group while it is in L1. A promoted sum
(``every > 0``) is added in float32 where that is the wide addition (FP32, RNE),
else by the exact engine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arith import finish, op_add
from .engine import convert_one, decode_one
from .matmul import _normalise, convert
from .params import RNE, RTZ

_jit = njit(cache=True, nogil=True)
_U0 = np.uint64(0)
TILE = 64  # columns of B taken together
ROWS = 8  # rows of A taken through each block of B together


def narrow_powers(fin_emin: int, fin_emax: int, pc_emin: int, pc_emax: int) -> bool:
    """Whether every ``2**nominal exponent`` of a product or C is a float32 normal
    (then the block maxima run eight to a register)."""
    return 2 * fin_emin >= -126 and 2 * fin_emax <= 127 and pc_emin >= -126 and pc_emax <= 127


def fits(fin_m: int, fin_emin: int, fin_emax: int, pc_emin: int, pc_emax: int, block: int,
         frac_bits: int) -> bool:
    """Whether every float64 step of ``tcf_rows`` is exact for these formats and rule:
    a block's ``block + 1`` terms below ``2**(frac_bits + 2)`` sum below ``2**53``,
    products (``2 * (m + 1)`` bits) are exact, and no scaled value leaves float64's
    normal range."""
    if fin_m > 23 or (block + 1) * 2.0 ** (frac_bits + 2) > 2.0 ** 53:
        return False
    lo = min(2 * (fin_emin - fin_m), pc_emin - 30)  # the smallest product or C bit
    hi = max(2 * (fin_emax + 2), pc_emax + 2)  # above the largest term
    return lo - hi - frac_bits > -1000 and hi + frac_bits < 1000


@_jit
def prep(sig, exp, m, emin, transpose, val, pw):
    """Values and ``2**nominal exponent`` (0 for zero) of unpacked operands into ``val``
    (float64) and ``pw`` (float64, or float32 where ``narrow_powers`` allows);
    ``transpose``: the (N, K) input written out as (K, N)."""
    R, C = sig.shape
    for r in range(R):
        for c in range(C):
            s = sig[r, c]
            x = np.int64((1023 + exp[r, c]) << 52).view(np.float64)
            nom = max(exp[r, c] + m, emin)
            p = np.int64((1023 + nom) << 52).view(np.float64) if s != 0 else 0.0
            if transpose:
                val[c, r], pw[c, r] = np.float64(s) * x, p
            else:
                val[r, c], pw[r, c] = np.float64(s) * x, p


@_jit
def _blocks(Pc, Ph, af, pa, i0, R, bf, pb, nt, c0, c1, block, acc, em, sc, S, flag, frac_bits,
            hw_rne, hw_mode):
    """The block FMAs of products c0..c1 (blocks of ``block``) of rows i0..i0+R of A
    (``af``, ``pa``) on a tile of B columns (``bf``, ``pb``: K x TILE); row r's
    accumulators are ``acc[r]`` (in place), ``em[r]``, ``sc[r]``, ``S[r]``, ``flag[r]``.
    Each block is taken by every row in turn while its part of B is in L1."""
    lo_e, hi_e = Pc.emin, (Pc.max_mag >> Pc.m) - Pc.bias  # C/D's normal range
    drop = 52 - Ph.m
    low = (np.int64(1) << drop) - 1
    half = low >> 1
    down = np.int64((1023 - frac_bits) << 52).view(np.float64)  # 2**-frac_bits
    for k0 in range(c0, c1, block):
        k1 = min(k0 + block, c1)
        for r in range(R):
            i = i0 + r
            for jj in range(nt):  # C's 2**nominal exponent (0: zero or inf)
                v = acc[r, jj]
                e = max(((np.float64(v).view(np.int64) >> 52) & 0x7FF) - 1023, lo_e)
                p = np.int64((1023 + e) << 52).view(np.float64)
                em[r, jj] = p if (v != 0.0) & (abs(v) < np.inf) else 0.0
            for k in range(k0, k1):
                a = pa[i, k]
                for jj in range(nt):
                    em[r, jj] = max(em[r, jj], a * pb[k, jj])
            for jj in range(nt):
                eb = np.float64(em[r, jj]).view(np.int64) >> 52  # biased exponent of 2**emax
                s = np.int64((2046 + frac_bits - eb) << 52).view(np.float64)
                s = s if em[r, jj] != 0.0 else 0.0
                sc[r, jj] = s
                S[r, jj] = np.trunc(acc[r, jj] * s) + 0.0 if em[r, jj] != 0.0 else 0.0
            for k in range(k0, k1):
                a = af[i, k]
                for jj in range(nt):
                    S[r, jj] += np.trunc(a * bf[k, jj] * sc[r, jj])
            nbad = 0
            for jj in range(nt):
                v = S[r, jj] * (em[r, jj] * down)  # S * 2**lsb, exact
                bits = np.float64(v).view(np.int64)
                e0 = ((bits >> 52) & 0x7FF) - 1023
                if hw_rne:
                    bits = (bits + half + ((bits >> drop) & 1)) & ~low
                else:
                    bits = bits & ~low
                e = ((bits >> 52) & 0x7FF) - 1023
                x = acc[r, jj]
                keep = (em[r, jj] == 0.0) | ~(abs(x) < np.inf)  # C + nothing, or inf C: kept
                f = ~keep & (v != 0.0) & ((e0 < lo_e) | (e > hi_e))
                flag[r, jj] = f
                nbad += np.int64(f)
                acc[r, jj] = x if keep else np.int64(bits).view(np.float64)
            if nbad:
                for jj in range(nt):
                    if flag[r, jj]:
                        lsb = (np.float64(em[r, jj]).view(np.int64) >> 52) - 1023 - frac_bits
                        code = _normalise(Ph, np.int64(S[r, jj]), lsb, hw_mode)
                        acc[r, jj] = decode_one(Pc, convert(Ph, Pc, code, RNE)[0])


@_jit
def _code(P, v):
    return convert_one(P, np.float64(v).view(np.int64), True, RNE, False, False, _U0)[0]


@_jit
def tcf_rows(Pc, Ph, Po, Pw, af, pa, bf, pb, cc, mode, i0, i1, out, block, frac_bits, hw_rne,
             every, w32):
    """Rows i0..i1 of ``out`` (M x N codes of Po); A as (M, K), B as (K, N) arrays of
    ``prep``. ``every > 0``: the accumulator restarts every ``every`` products and is
    added into a wide accumulator of format Pw starting at C (``w32``: Pw is FP32 and
    the mode RNE, so numba's float32 addition is that addition)."""
    K = af.shape[1]
    N = bf.shape[1]
    hw_mode = RNE if hw_rne else RTZ
    acc = np.empty((ROWS, TILE), np.float64)
    em = np.empty((ROWS, TILE), pa.dtype)
    sc = np.empty((ROWS, TILE), np.float64)
    S = np.empty((ROWS, TILE), np.float64)
    flag = np.empty((ROWS, TILE), np.bool_)
    wide = np.empty((ROWS, TILE), np.int64)
    wide32 = np.empty((ROWS, TILE), np.float32)
    step = every if every > 0 else max(K, 1)
    for j0 in range(0, N, TILE):
        nt = min(TILE, N - j0)
        bt = np.ascontiguousarray(bf[:, j0:j0 + nt])
        pt = np.ascontiguousarray(pb[:, j0:j0 + nt])
        for g in range(i0, i1, ROWS):
            R = min(ROWS, i1 - g)
            for r in range(R):
                for jj in range(nt):
                    wide[r, jj] = cc[(g + r) * N + j0 + jj]
                    if w32:
                        wide32[r, jj] = np.float32(decode_one(Pw, wide[r, jj]))
            for c0 in range(0, max(K, 1), step):
                c1 = min(c0 + step, K)
                for r in range(R):
                    for jj in range(nt):
                        acc[r, jj] = 0.0 if every > 0 else decode_one(Pc, wide[r, jj])
                _blocks(Pc, Ph, af, pa, g, R, bt, pt, nt, c0, c1, block, acc, em, sc, S, flag,
                        frac_bits, hw_rne, hw_mode)
                for r in range(R):
                    for jj in range(nt):
                        if every > 0 and w32:
                            wide32[r, jj] = wide32[r, jj] + np.float32(acc[r, jj])  # IEEE RNE
                        elif every > 0:
                            part = convert(Pc, Pw, _code(Pc, acc[r, jj]), mode)[0]
                            wide[r, jj] = _add(Pw, wide[r, jj], part, mode)
                        else:
                            wide[r, jj] = _code(Pc, acc[r, jj])
            for r in range(R):
                for jj in range(nt):
                    if every > 0 and w32:
                        wide[r, jj] = _code(Pw, np.float64(wide32[r, jj]))
                    out[(g + r) * N + j0 + jj] = convert(Pw if every > 0 else Pc, Po,
                                                         wide[r, jj], mode)[0]


@_jit
def _add(Pw, x, y, mode):
    """``x + y`` of codes of ``Pw``, rounded in ``mode`` (the wide accumulator's addition)."""
    return finish(Pw, op_add(Pw, x, y, False, mode, False, False, _U0), mode, False, False,
                  _U0)[0]
