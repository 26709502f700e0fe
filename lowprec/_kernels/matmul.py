"""Compiled dot-product kernels of ``lowprec.matmul`` (one per accumulation model).

Every kernel takes the codes of A (M x K, input format ``Pi``) and of B
transposed (N x K), computes rows ``i0 .. i1`` of the output, and ends each
element by converting its accumulator into the output format ``Po`` with
``round_pack``. All arithmetic is exact integer arithmetic plus the one
rounding engine, like ``lowprec._kernels.arith``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arith import (
    FINITE,
    INF,
    QNAN,
    ZERO,
    bitlen,
    finish,
    fma_parts,
    inf_result,
    nan_result,
    op_add,
    rounded,
    unpack,
    zero_result,
)
from .engine import convert_one, decode_one
from .params import FLAG_OVERFLOW, RDOWN, RNE

_jit = njit(cache=True, nogil=True)
_U0 = np.uint64(0)


@_jit
def convert(Pf, Pt, code, mode):
    """A code of format Pf rounded into format Pt (values, specials and all)."""
    k, neg, sig, exp = unpack(Pf, code)
    if k >= QNAN:
        r = nan_result(0)
    elif k == INF:
        r = inf_result(neg, 0)
    elif k == ZERO:
        r = zero_result(neg)
    else:
        r = rounded(neg, sig, exp, False)
    return finish(Pt, r, mode, False, False, _U0)


@_jit
def product_specials(Pi, a, b, k0, k1, i, j):
    """Scan products k0..k1 of row i, column j for NaN/inf.

    Returns 0 (all finite), 1 (+inf), 2 (-inf) or 3 (NaN: a NaN operand,
    inf * 0, or infinities of both signs)."""
    state = 0
    for k in range(k0, k1):
        ka, na, _, _ = unpack(Pi, np.int64(a[i, k]))
        kb, nb, _, _ = unpack(Pi, np.int64(b[j, k]))
        if ka >= QNAN or kb >= QNAN:
            return 3
        if ka == INF or kb == INF:
            if ka == ZERO or kb == ZERO:
                return 3
            s = 2 if na != nb else 1
            if state != 0 and state != s:
                return 3
            state = s
    return state


# ------------------------------------------------------------------ sequential
@_jit
def sequential_kernel(Pi, Pa, Po, a, b, ia, ib, cc, mode, n0, n1, out):
    """acc = fma(a[i,k], b[k,j], acc) for k in order from acc = C, rounded to Pa each step."""
    pin = Pi.m + 1
    K = a.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        acc = cc[n]
        for k in range(K):
            ka, na, sa, ea = unpack(Pi, np.int64(a[i, k]))
            kb, nb, sb, eb = unpack(Pi, np.int64(b[j, k]))
            kc, nc, sc, ec = unpack(Pa, acc)
            acc = finish(Pa, fma_parts(Pa, ka, na, sa, ea, kb, nb, sb, eb, kc, nc, sc, ec,
                                       pin, mode, False, False, _U0),
                         mode, False, False, _U0)[0]
        out[n] = convert(Pa, Po, acc, mode)[0]


@_jit
def _sequential_range(Pi, Pa, a, b, i, j, k0, k1, acc, mode):
    pin = Pi.m + 1
    for k in range(k0, k1):
        ka, na, sa, ea = unpack(Pi, np.int64(a[i, k]))
        kb, nb, sb, eb = unpack(Pi, np.int64(b[j, k]))
        kc, nc, sc, ec = unpack(Pa, acc)
        acc = finish(Pa, fma_parts(Pa, ka, na, sa, ea, kb, nb, sb, eb, kc, nc, sc, ec, pin,
                                   mode, False, False, _U0), mode, False, False, _U0)[0]
    return acc


@_jit
def blocked_kernel(Pi, Pa, Po, a, b, ia, ib, mode, n0, n1, out, zero_code, k_block):
    """Sequential fma inside each block of k_block; block sums added in order."""
    K = a.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        total = zero_code
        for k0 in range(0, K, k_block):
            part = _sequential_range(Pi, Pa, a, b, i, j, k0, min(k0 + k_block, K),
                                     zero_code, mode)
            total = finish(Pa, op_add(Pa, total, part, False, mode, False, False, _U0),
                           mode, False, False, _U0)[0]
        out[n] = convert(Pa, Po, total, mode)[0]


@_jit
def pairwise_kernel(Pi, Pa, Po, a, b, ia, ib, mode, n0, n1, out, zero_code):
    """Products rounded to Pa, then summed as a balanced binary tree: level by
    level, neighbours (0,1), (2,3), ... are added and rounded; an odd last
    element moves up unchanged."""
    K = a.shape[1]
    buf = np.empty(max(K, 1), dtype=np.int64)
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        for k in range(K):
            ka, na, sa, ea = unpack(Pi, np.int64(a[i, k]))
            kb, nb, sb, eb = unpack(Pi, np.int64(b[j, k]))
            # a*b + (+0): the product rounded once to Pa.
            buf[k] = finish(Pa, fma_parts(Pa, ka, na, sa, ea, kb, nb, sb, eb, ZERO, False,
                                          np.int64(0), 0, Pi.m + 1, mode, False, False,
                                          _U0), mode, False, False, _U0)[0]
        cnt = K
        if cnt == 0:
            buf[0] = zero_code
            cnt = 1
        while cnt > 1:
            half = cnt // 2
            for t in range(half):
                buf[t] = finish(Pa, op_add(Pa, buf[2 * t], buf[2 * t + 1], False, mode, False,
                                           False, _U0), mode, False, False, _U0)[0]
            if cnt % 2:
                buf[half] = buf[cnt - 1]
            cnt = half + cnt % 2
        out[n] = convert(Pa, Po, buf[0], mode)[0]


# ----------------------------------------------------------------------- exact
@_jit
def exact_kernel(Pi, Po, a, b, ia, ib, mode, n0, n1, out, base, nlimbs):
    """Exact sum of exact products in 32-bit limbs of a fixed-point integer whose
    unit is 2**base (the smallest product lsb), rounded once into Po."""
    limbs = np.zeros(nlimbs, dtype=np.int64)
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        out[n] = finish(Po, _exact_sum(Pi, a, b, i, j, mode, base, limbs), mode, False,
                           False, _U0)[0]


@_jit
def _exact_sum(Pi, a, b, i, j, mode, base, limbs):
    """The exact dot product of row i and column j as a result tuple."""
    K = a.shape[1]
    nlimbs = limbs.shape[0]
    M32 = np.int64(0xFFFFFFFF)
    st = product_specials(Pi, a, b, 0, K, i, j)
    if st == 3:
        return nan_result(0)
    if st != 0:
        return inf_result(st == 2, 0)
    limbs[:] = 0
    for k in range(K):
        ka, na, sa, ea = unpack(Pi, np.int64(a[i, k]))
        kb, nb, sb, eb = unpack(Pi, np.int64(b[j, k]))
        if ka != FINITE or kb != FINITE:
            continue
        sp = sa * sb
        pos = ea + eb - base
        li = pos >> 5
        off = pos & 31
        lo = (sp & ((np.int64(1) << (32 - off)) - 1)) << off
        rest = sp >> (32 - off)
        if na != nb:
            limbs[li] -= lo
            limbs[li + 1] -= rest & M32
            limbs[li + 2] -= rest >> 32
        else:
            limbs[li] += lo
            limbs[li + 1] += rest & M32
            limbs[li + 2] += rest >> 32
    # Carries: limbs 0..L-2 into [0, 2**32), the top limb keeps the sign.
    for t in range(nlimbs - 1):
        c = limbs[t] >> 32
        limbs[t] -= c << 32
        limbs[t + 1] += c
    neg = limbs[nlimbs - 1] < 0
    if neg:
        for t in range(nlimbs):
            limbs[t] = -limbs[t]
        for t in range(nlimbs - 1):
            c = limbs[t] >> 32
            limbs[t] -= c << 32
            limbs[t + 1] += c
    top = -1
    for t in range(nlimbs - 1, -1, -1):
        if limbs[t] != 0:
            top = t
            break
    if top < 0:
        return zero_result(mode == RDOWN)
    # The 61 leading bits and a sticky bit for everything below them.
    T = 32 * top + bitlen(limbs[top]) - 1  # position of the leading bit
    lo_pos = T - 60 if T > 60 else 0
    sig = np.int64(0)
    sticky = False
    for t in range(top + 1):
        p0 = 32 * t
        if p0 >= lo_pos:
            sig += limbs[t] << (p0 - lo_pos)
        elif p0 + 32 > lo_pos:
            sh = lo_pos - p0
            sig += limbs[t] >> sh
            if limbs[t] & ((np.int64(1) << sh) - 1):
                sticky = True
        elif limbs[t] != 0:
            sticky = True
    return rounded(neg, sig, base + lo_pos, sticky)


# ---------------------------------------------------------------- tensor cores
_NO_TERM = -(1 << 40)


@_jit
def _special_block(Pc, Pi, a, b, i, j, k0, k1, acc):
    """(True, code) when a NaN or inf decides the block's result, else (False, 0)."""
    kc, nc, _, _ = unpack(Pc, acc)
    st = product_specials(Pi, a, b, k0, k1, i, j)
    if st == 0 and kc < INF:
        return False, np.int64(0)
    if st == 3 or kc >= QNAN or (st != 0 and kc == INF and (st == 2) != nc):
        return True, finish(Pc, nan_result(0), RNE, False, False, _U0)[0]
    neg = (st == 2) if st != 0 else nc
    return True, finish(Pc, inf_result(neg, 0), RNE, False, False, _U0)[0]


@_jit
def _normalise(Ph, S, lsb, hw_mode):
    """The aligned sum S * 2**lsb normalised into Ph in hw_mode; an overflow gives
    inf whatever the mode (the sources' models return inf)."""
    if S == 0:
        return finish(Ph, zero_result(False), RNE, False, False, _U0)[0]
    code, flags, _ = finish(Ph, rounded(S < 0, abs(S), lsb, False), hw_mode, False, False, _U0)
    if flags & FLAG_OVERFLOW:
        code = finish(Ph, inf_result(S < 0, 0), RNE, False, False, _U0)[0]
    return code


@_jit
def hw_block(Pi, Pc, Ph, asig, aexp, bsig, bexp, i, j, k0, k1, acc, frac_bits, hw_mode,
             c_late):
    """One block FMA: C (``acc``, a code of the C/D format Pc) + products k0..k1.

    1. the largest *nominal* exponent among the non-zero terms: C's exponent, or
       e_a + e_b for a product (its significand lies in [1, 4));
    2. every term truncated (magnitude, toward zero) to ``frac_bits`` fraction
       bits below that exponent: an integer multiple of 2**lsb;
    3. the integers summed exactly;
    4. the sum normalised once into Ph (C/D's exponent range, the hardware's
       fraction bits) in ``hw_mode`` and returned as a code of Pc (exact).

    With ``c_late`` C takes no part in steps 1-4; the normalised products' sum is
    rounded (RNE) into Pc and C added to it with one RNE addition in Pc.
    """
    kc, nc, sc, ec = unpack(Pc, acc)
    c_in = kc == FINITE and not c_late
    m, emin = Pi.m, Pi.emin
    emax = _NO_TERM
    if c_in:
        emax = max(ec + Pc.m, Pc.emin)
    for k in range(k0, k1):
        if asig[i, k] * bsig[j, k] != 0:
            e = max(aexp[i, k] + m, emin) + max(bexp[j, k] + m, emin)
            emax = max(emax, e)
    lsb = emax - frac_bits
    S = np.int64(0)
    if emax != _NO_TERM:
        if c_in:
            t = _truncate(sc, ec, lsb)
            S += -t if nc else t
        for k in range(k0, k1):
            p = asig[i, k] * bsig[j, k]
            if p != 0:
                t = _truncate(abs(p), aexp[i, k] + bexp[j, k], lsb)
                S += -t if p < 0 else t
    if not c_late:
        if S == 0 and kc == ZERO and emax == _NO_TERM:
            return acc  # C + nothing: C unchanged (keeps -0)
        return convert(Ph, Pc, _normalise(Ph, S, lsb, hw_mode), RNE)[0]
    part = convert(Ph, Pc, _normalise(Ph, S, lsb, hw_mode), RNE)[0]
    return finish(Pc, op_add(Pc, acc, part, False, RNE, False, False, _U0), RNE, False, False,
                  _U0)[0]


@_jit
def _truncate(sig, exp, lsb):
    """floor(sig * 2**exp / 2**lsb) for sig > 0: the bits below 2**lsb dropped."""
    sh = lsb - exp
    if sh <= 0:
        return sig << (-sh)
    if sh > 62:
        return np.int64(0)
    return sig >> sh


@_jit
def tensor_core_kernel(Pi, Pc, Ph, Pw, Po, a, b, asig, aexp, bsig, bexp, ia, ib, cc, special,
                       mode, n0, n1, out, block, frac_bits, hw_mode, c_late, every, zero_c):
    """Outputs n0..n1: row ia[n] of A against row ib[n] of B (B transposed), C = cc[n].

    Blocks of ``block`` products are chained (each block's D is the next one's C,
    codes of Pc). With ``every > 0`` the tensor-core accumulator restarts from
    zero every ``every`` products and its value is added (rounded in ``mode``)
    into a wide accumulator of format Pw that starts at C -- DeepSeek-V3's
    promotion of partial sums to FP32 CUDA-core registers."""
    K = asig.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        wide = cc[n]
        step = every if every > 0 else max(K, 1)
        for c0 in range(0, max(K, 1), step):
            c1 = min(c0 + step, K)
            acc = zero_c if every > 0 else cc[n]
            for k0 in range(c0, c1, block):
                k1 = min(k0 + block, c1)
                if special:
                    hit, code = _special_block(Pc, Pi, a, b, i, j, k0, k1, acc)
                    if hit:
                        acc = code
                        continue
                elif unpack(Pc, acc)[0] >= INF:
                    continue  # inf or NaN + finite products stays what it is
                acc = hw_block(Pi, Pc, Ph, asig, aexp, bsig, bexp, i, j, k0, k1, acc,
                               frac_bits, hw_mode, c_late)
            if every > 0:
                part = convert(Pc, Pw, acc, mode)[0]
                wide = finish(Pw, op_add(Pw, wide, part, False, mode, False, False, _U0),
                              mode, False, False, _U0)[0]
            else:
                wide = acc
        out[n] = convert(Pw if every > 0 else Pc, Po, wide, mode)[0]

# ------------------------------------------------------------------ fast paths
# When no input is inf or NaN (checked once), the operands are unpacked once
# into signed significands (0 for zero) and exponents instead of at every step.
@_jit
def unpack_matrix(Pi, codes, sig, exp):
    """sig, exp of every code; returns True if any code is inf or NaN."""
    special = False
    for i in range(codes.shape[0]):
        for k in range(codes.shape[1]):
            kk, n, s, e = unpack(Pi, np.int64(codes[i, k]))
            if kk >= INF:
                special = True
            sig[i, k] = 0 if kk != FINITE else (-s if n else s)
            exp[i, k] = e
    return special


@_jit
def _odd_sum(p, c, mode):
    """p + c rounded to odd at float64's 53 bits (p, c float64 values).

    TwoSum gives s = fl(p + c) and the exact error err; if err != 0 and s is
    even, the odd neighbour of s on the side of err is the round-to-odd sum.
    Rounding that to a format of p' <= 51 bits in any mode gives the correctly
    rounded p + c (Boldo & Melquiond, IEEE TC 2008: round to odd with two
    extra bits, then round once). Exact zeros get IEEE's signs.
    """
    s = p + c
    if not np.isfinite(s):
        return s
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    if err != 0.0:
        bits = np.float64(s).view(np.int64)
        if bits & 1 == 0:
            bits += 1 if (err > 0.0) == (s > 0.0) else -1
            s = np.int64(bits).view(np.float64)
    elif s == 0.0 and mode == RDOWN and not (p == 0.0 and c == 0.0 and not np.signbit(p)
                                             and not np.signbit(c)):
        s = -0.0  # x + (-x) = -0 when rounding down
    return s


@_jit
def sequential_fast(Pa, Po, af, bf, ia, ib, cc, mode, n0, n1, out, zero_code, k_block):
    """sequential_kernel (k_block >= K, starting from C) or blocked_kernel (C = 0)
    on finite inputs given as float64 values: each product is exact in float64
    (<= 48 bits), the sum is rounded to odd in float64 (_odd_sum) and then once
    into Pa by the engine."""
    K = af.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        total = cc[n]
        for k0 in range(0, K, k_block):
            code = cc[n] if k0 == 0 else zero_code
            acc = decode_one(Pa, code)
            for k in range(k0, min(k0 + k_block, K)):
                s = _odd_sum(af[i, k] * bf[j, k], acc, mode)
                code = convert_one(Pa, np.float64(s).view(np.int64), True, mode, False,
                                   False, _U0)[0]
                acc = decode_one(Pa, code)
            if k0 == 0:
                total = code
            else:
                total = finish(Pa, op_add(Pa, total, code, False, mode, False, False, _U0),
                               mode, False, False, _U0)[0]
        out[n] = convert(Pa, Po, total, mode)[0]
