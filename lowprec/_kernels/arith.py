"""Compiled kernels of correctly rounded arithmetic (``lowprec.arith``, ``lowprec.matmul``).

Every operation follows the same three steps, like SoftFloat:

1. **unpack** each operand code into a class (zero, finite, inf, NaN) and, for
   finite values, an exact ``(-1)**neg * sig * 2**exp`` with ``sig`` normalised
   to exactly ``p = m + 1`` bits (subnormals are shifted up, so every finite
   operand has its leading bit at bit ``p - 1``);
2. compute the **exact** result as an integer ``S * 2**lsb`` (plus a sticky bit
   when it has more bits than fit in an int64), using only integer products,
   shifts, sums, one integer division or one integer square root;
3. hand it to THE rounding engine, :func:`lowprec._kernels.engine.round_pack`, which
   rounds once in the requested mode and sets the IEEE flags.

When is "exact integer + sticky" as good as exact?
    ``round_pack`` rounds ``(S + sticky*eps) * 2**lsb`` for some ``0 < eps < 1``.
    Every rounding decision of every deterministic mode (rne, rna, rtz, rup,
    rdown, odd, and IEEE tininess after rounding) depends only on where the
    exact value lies relative to the *midpoints and representable numbers* of
    the format, all multiples of half a quantum ``2**(qe-1)``. If the result
    quantum is at least ``2**(lsb+1)``, no such boundary lies strictly inside
    the open interval ``(S, S+1) * 2**lsb``, so every value in it, the true
    one and ``S + eps``, rounds the same way. We therefore keep at least two
    bits below the result's last bit (one guard bit for the midpoint, one more
    so that the sticky interval never straddles it) -- and in practice far
    more, because more bits also make stochastic rounding exact (below).

Stochastic rounding. ``round_pack`` rounds up with probability
    ``(R + sticky*2**-64 ... )``: exactly ``frac = rem / 2**shift`` when there is
    no sticky bit, and ``rem / 2**shift + 2**-64`` with one, where ``shift`` is
    the number of bits of ``S`` below the result's quantum. The true
    probability lies in ``(rem, rem+1) / 2**shift``, so with a sticky bit the
    probability is off by less than ``2**-shift``. Each operation below keeps
    ``shift >= 60 - p`` in that case: less than ``2**-49`` for fp16 and tf32,
    ``2**-52`` for bf16, ``2**-56`` for 8-bit formats (``2**-36`` for fp32) --
    far below anything a sample can detect, but not the engine's ``2**-64``
    (a single int64 significand cannot carry 64 bits below a p-bit result).
    Results that are exact integers (all of mul, most add/sub/fma) are exact.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .engine import _clz64, convert_one, is_nan_code, nan_code, round_pack
from .params import (
    FLAG_INFINITE,
    FLAG_INVALID,
    INVALID_NAN,
    NAN_IEEE,
    RDOWN,
    STOCHASTIC,
)

_jit = njit(cache=True, nogil=True)

# Operand classes.
ZERO, FINITE, INF, QNAN, SNAN = range(5)
# Operations.
ADD, SUB, MUL, DIV, SQRT, FMA = range(6)

# float64 bit patterns of the special results; the engine's converter turns
# them into each format's code exactly as round_to does (e.g. +inf -> NaN in
# fp8_e4m3, -> max in fp4, zero -> NaN in e8m0, -0 -> +0 in fnuz formats).
_POS_ZERO = np.int64(0)
_NEG_ZERO = np.int64(-(2**63))
_POS_INF = np.int64(0x7FF0000000000000)
_NEG_INF = np.int64(-0x0010000000000000)  # 0xFFF0000000000000 as int64


@_jit
def bitlen(x):
    """Number of bits of a positive int64."""
    return 64 - _clz64(x)


@_jit
def unpack(P, code):
    """Class, sign, significand and exponent of a code.

    For FINITE: value = (-1)**neg * sig * 2**exp with 2**m <= sig < 2**(m+1).
    """
    m = P.m
    sign = code & P.sign_bit
    neg = sign != 0
    mag = code ^ sign
    if is_nan_code(P, code):
        if P.nan_kind == NAN_IEEE and m > 0 and (mag >> (m - 1)) & 1 == 0:
            return SNAN, neg, np.int64(0), 0
        return QNAN, neg, np.int64(0), 0
    if P.has_inf and mag == P.max_mag + 1:
        return INF, neg, np.int64(0), 0
    e_field = mag >> m
    m_field = np.int64(mag & ((1 << m) - 1))
    if P.subnormals and e_field == 0:
        if m_field == 0:
            return ZERO, neg, np.int64(0), 0
        k = m + 1 - bitlen(m_field)  # shift a subnormal up to p bits
        return FINITE, neg, m_field << k, P.emin - m - k
    return FINITE, neg, m_field | (np.int64(1) << m), e_field - P.bias - m


# Every operation returns a *result tuple* and ends in ONE call of the engine,
# in :func:`finish` (one call site keeps numba's compile time down, and it is
# SoftFloat's shape: every operation ends in the shared round-and-pack):
#   (ROUND, neg, sig, lsb, sticky, 0, flags): round (-1)**neg (sig + sticky) 2**lsb;
#   (BITS,  ...,                 bits, flags): an exact ±0 or ±inf, given as float64
#        bits, converted like round_to converts it (inf -> NaN in fp8_e4m3, ...);
#   (NAN,   ...,                    0, flags): the format's NaN.
ROUND, BITS, NAN = range(3)


@_jit
def rounded(neg, sig, lsb, sticky):
    return ROUND, neg, sig, lsb, sticky, np.int64(0), 0


@_jit
def nan_result(flags):
    return NAN, False, np.int64(0), 0, False, np.int64(0), flags


@_jit
def zero_result(negative):
    return BITS, False, np.int64(0), 0, False, _NEG_ZERO if negative else _POS_ZERO, 0


@_jit
def inf_result(negative, flags):
    return BITS, False, np.int64(0), 0, False, _NEG_INF if negative else _POS_INF, flags


@_jit
def finish(P, r, mode, saturate, ftz, rnd):
    """(code, flags, status) of a result tuple: the one call into the engine."""
    kind, neg, sig, lsb, sticky, bits, flags = r
    if kind == ROUND:
        c, f, st = round_pack(P, neg, sig, lsb, sticky, mode, saturate, ftz, rnd)
    elif kind == BITS:
        c, f, st = convert_one(P, bits, True, mode, saturate, ftz, np.uint64(0))
    else:
        c, f, st = nan_code(P, False), 0, 0
        if c < 0:
            st = INVALID_NAN
    return c, f | flags, st


@_jit
def add_exact(P, negx, sx, ex, negy, sy, ey, W, mode, saturate, ftz, rnd):
    """Round (-1)**negx sx 2**ex + (-1)**negy sy 2**ey, both sigs of exactly W bits.

    Let X be the operand of larger magnitude and d = ex - ey >= 0.
    * d <= K = 61 - W: the exact sum (sx << d) ± sy fits below 2**62: no sticky.
    * d > K: Y is below 2**(ex + W - K - 1) while X >= 2**(ex + W - 1), so the
      result is >= 2**(ex + W - 2) and its quantum (p <= W bits) is at least
      2**(ex + W - 1 - p) >= 2**(ex - K + 1) = 2**(lsb + 1) for K >= 2: Y
      truncated to lsb = ex - K plus a sticky bit rounds like Y itself
      (module docstring). For a subtraction the truncated part t plus the lost
      eps in (0, 1) is subtracted as (t + 1) - (1 - eps): S - t - 1 with sticky.
    W = p (add), W = 2p (fma): K = 61 - W >= 13 even for fp32 fma.
    """
    if ey > ex or (ey == ex and sy > sx):
        negx, sx, ex, negy, sy, ey = negy, sy, ey, negx, sx, ex
    d = ex - ey
    K = 61 - W
    subtract = negx != negy
    sticky = False
    if d <= K:
        S = (sx << d) - sy if subtract else (sx << d) + sy
        lsb = ey
    else:
        sh = d - K
        if sh > 62:
            t = np.int64(0)
            sticky = True
        else:
            t = sy >> sh
            sticky = (sy & ((np.int64(1) << sh) - 1)) != 0
        if subtract:
            S = (sx << K) - t - (1 if sticky else 0)
        else:
            S = (sx << K) + t
        lsb = ex - K
    if S == 0:
        # Exact cancellation x + (-x): +0, except -0 when rounding down (IEEE 754 6.3).
        return zero_result(mode == RDOWN)
    return rounded(negx, S, lsb, sticky)


@_jit
def op_add(P, ca, cb, negate_b, mode, saturate, ftz, rnd):
    ka, na, sa, ea = unpack(P, ca)
    kb, nb, sb, eb = unpack(P, cb)
    if negate_b:
        nb = not nb
    if ka >= QNAN or kb >= QNAN:
        return nan_result(FLAG_INVALID if (ka == SNAN or kb == SNAN) else 0)
    if ka == INF or kb == INF:
        if ka == INF and kb == INF and na != nb:
            return nan_result(FLAG_INVALID)  # inf - inf
        return inf_result(na if ka == INF else nb, 0)
    if ka == ZERO and kb == ZERO:
        # (+0) + (+0) = +0, (-0) + (-0) = -0, mixed signs: +0 (-0 when rounding down).
        return zero_result((na and nb) if na == nb else mode == RDOWN)
    if ka == ZERO:
        return rounded(nb, sb, eb, False)  # exact
    if kb == ZERO:
        return rounded(na, sa, ea, False)
    return add_exact(P, na, sa, ea, nb, sb, eb, P.m + 1, mode, saturate, ftz, rnd)


@_jit
def op_mul(P, ca, cb, mode, saturate, ftz, rnd):
    ka, na, sa, ea = unpack(P, ca)
    kb, nb, sb, eb = unpack(P, cb)
    neg = na != nb
    if ka >= QNAN or kb >= QNAN:
        return nan_result(FLAG_INVALID if (ka == SNAN or kb == SNAN) else 0)
    if ka == INF or kb == INF:
        if ka == ZERO or kb == ZERO:
            return nan_result(FLAG_INVALID)  # 0 * inf
        return inf_result(neg, 0)
    if ka == ZERO or kb == ZERO:
        return zero_result(neg)
    # Exact: a product of two p-bit integers has at most 2p <= 48 bits.
    return rounded(neg, sa * sb, ea + eb, False)


@_jit
def op_div(P, ca, cb, mode, saturate, ftz, rnd):
    ka, na, sa, ea = unpack(P, ca)
    kb, nb, sb, eb = unpack(P, cb)
    neg = na != nb
    if ka >= QNAN or kb >= QNAN:
        return nan_result(FLAG_INVALID if (ka == SNAN or kb == SNAN) else 0)
    if ka == INF:
        if kb == INF:
            return nan_result(FLAG_INVALID)  # inf / inf
        return inf_result(neg, 0)
    if kb == INF:
        return zero_result(neg)
    if kb == ZERO:
        if ka == ZERO:
            return nan_result(FLAG_INVALID)  # 0 / 0
        return inf_result(neg, FLAG_INFINITE)  # x / 0
    if ka == ZERO:
        return zero_result(neg)
    # q = floor(sa * 2**s / sb), 2**(s-1) < q < 2**(s+1): with s = 62 - p the
    # quotient has >= 62 - p bits, >= 2 more than the p-bit result needs
    # (p <= 24); a non-zero remainder is the sticky bit (the exact quotient is
    # strictly between q and q + 1).
    p = P.m + 1
    s = 62 - p
    num = sa << s
    q = num // sb
    r = num - q * sb
    lsb = ea - eb - s
    if r != 0 and mode == STOCHASTIC and p >= 3:
        # More quotient bits so that the up-probability is exact to < 2**-(60-p)
        # (module docstring): q < 2**(63-p), and t = p - 2 more bits keep q < 2**61.
        t = p - 2
        num2 = r << t
        q2 = num2 // sb
        r = num2 - q2 * sb
        q = (q << t) + q2
        lsb -= t
    return rounded(neg, q, lsb, r != 0)


@_jit
def isqrt_rem(n):
    """floor(sqrt(n)) and n - root**2 for 0 <= n < 2**62 (float guess, then fix)."""
    r = np.int64(np.sqrt(np.float64(n)))
    while r * r > n:
        r -= 1
    while (r + 1) * (r + 1) <= n:
        r += 1
    return r, n - r * r


@_jit
def op_sqrt(P, ca, mode, saturate, ftz, rnd):
    ka, na, sa, ea = unpack(P, ca)
    if ka >= QNAN:
        return nan_result(FLAG_INVALID if ka == SNAN else 0)
    if ka == ZERO:
        return zero_result(na)  # sqrt(±0) = ±0
    if na:
        return nan_result(FLAG_INVALID)  # sqrt(x < 0), sqrt(-inf)
    if ka == INF:
        return inf_result(False, 0)
    # N = sa << k with ea - k even and 2**60 <= N < 2**62: the integer root r
    # has 31 bits (>= p + 7 for p <= 24) and sqrt(value) = (r + frac) * 2**((ea-k)/2);
    # a non-zero remainder means the exact root lies strictly inside (r, r+1).
    p = P.m + 1
    k = 62 - p
    if (ea - k) & 1:
        k -= 1
    r, rem = isqrt_rem(sa << k)
    lsb = (ea - k) >> 1
    if rem != 0 and mode == STOCHASTIC:
        # More root bits (up to 2**59) so that the up-probability is exact to
        # < 2**-(60-p). Invariant: rem = N' - r**2 with 0 < rem <= 2r. Appending t
        # bits x: (r 2**t + x)**2 <= rem' ... the largest x with
        # x (2 r 2**t + x) <= rem 4**t; rem 2**t / 2r over-estimates it by at most 1.
        # t <= (60 - bitlen(r)) / 2 keeps every product below 2**63.
        while r < (np.int64(1) << 59):
            t = (60 - bitlen(r)) >> 1
            t = min(t, 59 - bitlen(r))
            t = max(t, 1)
            R2 = r << (t + 1)
            target = rem << (2 * t)
            x = (rem << t) // (r << 1)
            while x * (R2 + x) > target:
                x -= 1
            rem = target - x * (R2 + x)
            r = (r << t) + x
            lsb -= t
    return rounded(False, r, lsb, rem != 0)


@_jit
def fma_parts(P, ka, na, sa, ea, kb, nb, sb, eb, kc, nc, sc, ec, p_in, mode, saturate, ftz,
              rnd):
    """Round a*b + c once: a, b unpacked with p_in-bit sigs, c with a (m+1)-bit sig
    of the result format P (matmul passes inputs of another format)."""
    negp = na != nb
    if ka >= QNAN or kb >= QNAN or kc >= QNAN:
        # SoftFloat (and IEEE, optionally) signal invalid for inf*0 even when c is NaN.
        inv = ka == SNAN or kb == SNAN or kc == SNAN or (
            (ka == INF and kb == ZERO) or (ka == ZERO and kb == INF))
        return nan_result(FLAG_INVALID if inv else 0)
    if ka == INF or kb == INF:
        if ka == ZERO or kb == ZERO:
            return nan_result(FLAG_INVALID)  # inf * 0 + c
        if kc == INF and nc != negp:
            return nan_result(FLAG_INVALID)  # inf - inf
        return inf_result(negp, 0)
    if kc == INF:
        return inf_result(nc, 0)
    p = P.m + 1
    if ka == ZERO or kb == ZERO:
        if kc == ZERO:
            # Signed zeros: equal signs keep theirs, else +0 (-0 when rounding down).
            return zero_result(negp if negp == nc else mode == RDOWN)
        return rounded(nc, sc, ec, False)
    # The product, exact: at most 2*p_in bits; normalise it to exactly W bits.
    sp = sa * sb
    ep = ea + eb
    W = max(p, 2 * p_in)
    n = bitlen(sp)
    sp = sp << (W - n)
    ep -= W - n
    if kc == ZERO:
        return rounded(negp, sp, ep, False)
    n = bitlen(sc)
    return add_exact(P, negp, sp, ep, nc, sc << (W - n), ec - (W - n), W, mode, saturate, ftz,
                     rnd)


@_jit
def op_fma(P, ca, cb, cc, mode, saturate, ftz, rnd):
    ka, na, sa, ea = unpack(P, ca)
    kb, nb, sb, eb = unpack(P, cb)
    kc, nc, sc, ec = unpack(P, cc)
    return fma_parts(P, ka, na, sa, ea, kb, nb, sb, eb, kc, nc, sc, ec, P.m + 1, mode,
                     saturate, ftz, rnd)


@_jit
def op_one(P, op, ca, cb, cc, mode, saturate, ftz, rnd):
    if op == ADD or op == SUB:
        r = op_add(P, ca, cb, op == SUB, mode, saturate, ftz, rnd)
    elif op == MUL:
        r = op_mul(P, ca, cb, mode, saturate, ftz, rnd)
    elif op == DIV:
        r = op_div(P, ca, cb, mode, saturate, ftz, rnd)
    elif op == SQRT:
        r = op_sqrt(P, ca, mode, saturate, ftz, rnd)
    else:
        r = op_fma(P, ca, cb, cc, mode, saturate, ftz, rnd)
    return finish(P, r, mode, saturate, ftz, rnd)


@_jit
def op_kernel(P, op, a, b, c, mode, saturate, ftz, rnd, out, flags, want_flags):
    """out[i] = op(a[i], b[i], c[i]) on codes; an operand array of length 1 is
    broadcast. Returns the first index whose result has no code (or -1)."""
    n = out.shape[0]
    sa = 0 if a.shape[0] == 1 else 1
    sb = 0 if b.shape[0] == 1 else 1
    sc = 0 if c.shape[0] == 1 else 1
    use_rnd = rnd.shape[0] > 0
    for i in range(n):
        w = rnd[i] if use_rnd else np.uint64(0)
        code, f, st = op_one(P, op, np.int64(a[i * sa]), np.int64(b[i * sb]),
                             np.int64(c[i * sc]), mode, saturate, ftz, w)
        if st != 0:
            return i
        out[i] = code
        if want_flags:
            flags[i] = f
    return -1


@_jit
def to_code_kernel(P, xbits, codes):
    """codes[i] = the code of the float64 xbits[i] when it is a value of the
    format; returns the first index that is not (or -1).

    A value is one when converting it is exact (no flags, no status), except
    that ±inf is one only in formats with infinities (the converter maps inf
    to NaN or max elsewhere without a flag). -0.0 is accepted as 0 in formats
    without negative zero. A NaN of any payload is one in formats with a NaN:
    quiet, or signaling (the code S.1..1|0..01) where the format has signaling
    NaNs (IEEE NaNs, 2 or more mantissa bits), as a float16 array holding it.
    """
    for i in range(xbits.shape[0]):
        b = np.int64(xbits[i])
        c, f, st = convert_one(P, b, True, 0, False, False, np.uint64(0))
        is_nan = (b & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000
        if is_nan and st == 0 and f != 0:  # a signaling NaN: the conversion flags invalid
            if P.nan_kind != NAN_IEEE or P.m < 2:
                return i  # no signaling NaN in this format
            c = (c ^ (np.int64(1) << (P.m - 1))) | 1  # quiet bit cleared, payload 1
            f = 0
        if st != 0 or f != 0:
            return i
        if (b & 0x7FFFFFFFFFFFFFFF) == 0x7FF0000000000000 and not P.has_inf:
            return i
        codes[i] = c
    return -1



def to_codes(P, xbits: np.ndarray, codes: np.ndarray) -> int:
    """:func:`to_code_kernel`, compiled where it is ready (:func:`.route.ready`), else
    the same checks in numpy over :func:`.vec.convert` (the engine's conversion)."""
    from . import route, vec

    if route.ready(to_code_kernel, (P, xbits, codes)):
        return int(to_code_kernel(P, xbits, codes))
    b = xbits.view(np.uint64)
    c, f, st = vec.convert(P, b, 0, False, False)
    mag = b & np.uint64(0x7FFFFFFFFFFFFFFF)
    is_nan = mag > np.uint64(0x7FF0000000000000)
    signaling = is_nan & (st == 0) & (f != 0)
    bad = (st != 0) | ((f != 0) & ~signaling)
    if P.nan_kind != NAN_IEEE or P.m < 2:
        bad |= signaling
    else:  # quiet bit cleared, payload 1: the format's signaling NaN
        c = np.where(signaling, (c ^ (np.int64(1) << (P.m - 1))) | 1, c)
    if not P.has_inf:
        bad |= mag == np.uint64(0x7FF0000000000000)
    if bad.any():
        first = int(np.argmax(bad))
        codes[:first] = c[:first]
        return first
    codes[:] = c
    return -1
