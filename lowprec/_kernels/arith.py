"""Compiled kernels of correctly rounded arithmetic (``lowprec.arith``, ``lowprec.matmul``).

Every operation follows the same three steps, like SoftFloat:

1. **unpack** each operand code into a class (zero, finite, inf, NaN) and, for
   finite values, an exact ``(-1)**neg * sig * 2**exp`` with ``sig`` normalised
   to exactly ``p = m + 1`` bits (subnormals are shifted up, so every finite
   operand has its leading bit at bit ``p - 1``);
2. compute the **exact** result as an integer ``S * 2**lsb`` (plus a sticky bit
   when it has more bits than fit in an int64), using only integer products,
   shifts, sums, one integer division or one integer square root;
3. hand it to THE rounding engine, :func:`lowprec._engine.round_pack`, which
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

from .engine import (
    FLAG_INEXACT,
    FLAG_INFINITE,
    FLAG_INVALID,
    INVALID_NAN,
    NAN_IEEE,
    P_BIAS,
    P_EMIN,
    P_HASINF,
    P_M,
    P_MAXMAG,
    P_NAN,
    P_SIGNBIT,
    P_SUBN,
    RDOWN,
    SR_BLOCK,
    STOCHASTIC,
    _clz64,
    convert_one,
    is_nan_code,
    nan_code,
    round_pack,
    sr_word,
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
    m = P[P_M]
    sign = code & P[P_SIGNBIT]
    neg = sign != 0
    mag = code ^ sign
    if is_nan_code(P, code):
        if P[P_NAN] == NAN_IEEE and m > 0 and (mag >> (m - 1)) & 1 == 0:
            return SNAN, neg, np.int64(0), 0
        return QNAN, neg, np.int64(0), 0
    if P[P_HASINF] and mag == P[P_MAXMAG] + 1:
        return INF, neg, np.int64(0), 0
    e_field = mag >> m
    m_field = np.int64(mag & ((1 << m) - 1))
    if P[P_SUBN] and e_field == 0:
        if m_field == 0:
            return ZERO, neg, np.int64(0), 0
        k = m + 1 - bitlen(m_field)  # shift a subnormal up to p bits
        return FINITE, neg, m_field << k, P[P_EMIN] - m - k
    return FINITE, neg, m_field | (np.int64(1) << m), e_field - P[P_BIAS] - m


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
    return add_exact(P, na, sa, ea, nb, sb, eb, P[P_M] + 1, mode, saturate, ftz, rnd)


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
    p = P[P_M] + 1
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
    p = P[P_M] + 1
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
    p = P[P_M] + 1
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
    return fma_parts(P, ka, na, sa, ea, kb, nb, sb, eb, kc, nc, sc, ec, P[P_M] + 1, mode,
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
    without negative zero.
    """
    for i in range(xbits.shape[0]):
        b = np.int64(xbits[i])
        c, f, st = convert_one(P, b, True, 0, False, False, np.uint64(0))
        if st != 0 or f != 0:
            return i
        if (b & 0x7FFFFFFFFFFFFFFF) == 0x7FF0000000000000 and not P[P_HASINF]:
            return i
        codes[i] = c
    return -1


# ------------------------------------------------ float64 round-to-odd path
# For div and sqrt in deterministic modes, ``lowprec.arith`` may compute the
# quotient or root in float64 and *round it to odd*: the float64 result q is
# correctly rounded to nearest, and the exact residual a - q*b (a - q*q for
# sqrt) is representable and computed without error (Dekker's product, then
# Sterbenz's lemma for a - hi), so its sign says on which side of q the exact
# result lies. If q is inexact and even, its odd neighbour on that side is the
# round-to-odd result. Rounding that once to any format of p <= 51 bits, in any
# deterministic mode, is the correctly rounded result (Boldo & Melquiond, IEEE
# TC 2008). Used only where operands and results stay far from float64's
# overflow and underflow thresholds (checked by the caller).
@_jit
def _two_product(x, y):
    c = 134217729.0  # 2**27 + 1, Veltkamp's split
    t = c * x
    xh = t - (t - x)
    xl = x - xh
    t = c * y
    yh = t - (t - y)
    yl = y - yh
    hi = x * y
    lo = ((xh * yh - hi) + xh * yl + xl * yh) + xl * yl
    return hi, lo


@_jit
def _to_odd(q, direction):
    """q moved to its odd neighbour in ``direction`` (+1 up, -1 down) if q is even."""
    bits = np.float64(q).view(np.int64)
    if bits & 1 == 0:
        away = (direction > 0) == (q > 0)  # away from zero in magnitude?
        bits += 1 if away else -1
    return np.int64(bits).view(np.float64)


@njit(cache=True, nogil=True, error_model="numpy")  # x/0 -> inf, as IEEE says
def div_sqrt_odd_kernel(is_sqrt, a, b, out):
    """out[i] = a[i]/b[i] (or sqrt(a[i])) rounded to odd in float64; a length-1
    operand is broadcast."""
    sa = 0 if a.shape[0] == 1 else 1
    sb = 0 if b.shape[0] == 1 else 1
    for i in range(out.shape[0]):
        x = a[i * sa]
        if is_sqrt:
            q = np.sqrt(x) if x >= 0 else np.nan
            if np.isfinite(q) and q != 0.0:
                hi, lo = _two_product(q, q)
                r = (x - hi) - lo
                if r != 0.0:
                    q = _to_odd(q, 1.0 if r > 0 else -1.0)
        else:
            y = b[i * sb]
            q = x / y
            if np.isfinite(q) and q != 0.0:
                hi, lo = _two_product(q, y)
                r = (x - hi) - lo
                if r != 0.0:
                    q = _to_odd(q, 1.0 if (r > 0) == (y > 0) else -1.0)
        out[i] = q


@njit(cache=True, nogil=True, error_model="numpy")
def fma_odd_kernel(a, b, c, rdown, out):
    """out[i] = a[i]*b[i] + c[i] rounded to odd in float64 (length-1 operands
    broadcast). The product of two p <= 24-bit values is exact in float64; the
    sum is rounded to odd with TwoSum's exact error (see _to_odd): one rounding
    of it into the format is the correctly rounded fma. Exact zeros take IEEE's
    signs: float64 gives them for round-to-nearest; ``rdown`` makes an exact
    zero sum -0 unless both terms are +0."""
    sa = 0 if a.shape[0] == 1 else 1
    sb = 0 if b.shape[0] == 1 else 1
    sc = 0 if c.shape[0] == 1 else 1
    for i in range(out.shape[0]):
        p = a[i * sa] * b[i * sb]
        z = c[i * sc]
        s = p + z
        if np.isfinite(s):
            bb = s - p
            err = (p - (s - bb)) + (z - bb)
            if err != 0.0:
                s = _to_odd(s, 1.0 if err > 0 else -1.0)
            elif s == 0.0 and rdown and (np.signbit(p) or np.signbit(z)):
                s = -0.0
        out[i] = s


# ------------------------------------------- stochastic div, sqrt, fma: fast
# ``op_kernel`` computes the 60-bit quotient and root of stochastic rounding
# with two integer divisions, or a digit loop, per element. The functions below
# produce the *same* (sig, lsb, sticky) with float64 estimates and exact 64-bit
# integer corrections, and :func:`sr_kernel` hands them straight to the engine
# (tests hold it equal to ``op_kernel`` bit for bit, results and flags).
@_jit
def div_sig60(sa, sb):
    """q = floor(sa * 2**60 / sb) and whether sb does not divide sa * 2**60,
    for p-bit sigs (3 <= p <= 24, so 2**59 < q < 2**61).

    The float64 quotient sa * (1/sb), scaled, is within 2**9 of q (relative
    error < 2**-51 of a value below 2**61); the remainder R = sa 2**60 - q0 sb
    of that guess is below 2**33 in magnitude, so computing it modulo 2**64
    (wrapping uint64 products) gives it exactly; floor(R / sb) from R * (1/sb)
    is off by at most one, which the last two tests correct.
    """
    inv = 1.0 / np.float64(sb)
    q0 = np.int64(np.float64(sa) * inv * 1152921504606846976.0)  # * 2**60
    R = np.int64((np.uint64(sa) << np.uint64(60)) - np.uint64(q0) * np.uint64(sb))
    j = np.int64(np.floor(np.float64(R) * inv))
    R -= j * sb
    if R < 0:
        j -= 1
        R += sb
    elif R >= sb:
        j += 1
        R -= sb
    return q0 + j, R != 0


@_jit
def _root_fits(Y, Dq, j):
    """(y + j)**2 <= X and (y + j)**2 == X, for y = Y 2**7 and Dq = (X - y**2) / 2**14.

    (y + j)**2 <= X  <=>  j**2 + 2**8 Y j <= 2**14 Dq  <=>  j**2 <= 2**8 E,
    E = 2**6 Dq - Y j (|E| < 2**61 for |Dq| <= 2**53, |j| <= 66, Y <= 2**53);
    2**8 E > 2**28 > j**2 when E > 2**20. Branch-free (``sr_kernel``).
    """
    E = (Dq << 6) - Y * j
    t = E << 8  # meaningful only for 0 <= E <= 2**20
    small = (E >= 0) & (E <= (1 << 20))
    return (E > (1 << 20)) | (small & (j * j <= t)), small & (j * j == t)


@_jit
def sqrt_sig60(N):
    """r = floor(sqrt(N * 2**58)) (2**59 <= r < 2**60) and whether N * 2**58 is
    not a perfect square, for N = sa << k with 2**60 <= N < 2**62, sa of p <= 24
    bits and k >= 37.

    X = N 2**58 is exact in float64 (p significant bits) and y = sqrt(X) is
    correctly rounded: a multiple of 2**7 within 2**6 of sqrt(X). With y = Y 2**7,
    Dq = (X - y**2) / 2**14 = sa 2**(k+44) - Y**2 is an integer with
    |Dq| <= 2**53 (|X - y**2| <= 2**6 (sqrt(X) + y) <= 2**67), and since
    k + 44 >= 64 it is -Y**2 modulo 2**64: exact with wrapping uint64 products.
    Then r = y + j for the largest j with (y + j)**2 <= X (:func:`_root_fits`).
    The estimate 2**6 Dq / Y = (X - y**2) / 2y differs from sqrt(X) - y by
    (sqrt(X) - y)**2 / 2y < 2**-47, and by float64 rounding < 2**-46, so j is
    floor(estimate) or one of its two neighbours.
    """
    y = np.sqrt(np.float64(N) * 288230376151711744.0)  # * 2**58
    Y = np.int64(y) >> 7
    Dq = np.int64(np.uint64(0) - np.uint64(Y) * np.uint64(Y))
    # max(Y, 1) == Y (Y >= 2**52): it tells the compiler the divisor is not 0,
    # so no ZeroDivisionError branch stops sr_kernel's loop from vectorising.
    j0 = np.int64(np.floor(64.0 * np.float64(Dq) / np.float64(max(Y, np.int64(1)))))
    ok0, eq0 = _root_fits(Y, Dq, j0)
    ok1, eq1 = _root_fits(Y, Dq, j0 + 1)
    _, eqm = _root_fits(Y, Dq, j0 - 1)  # fits whenever j0 does not
    j = j0 + 1 if ok1 else (j0 if ok0 else j0 - 1)
    eq = eq1 if ok1 else (eq0 if ok0 else eqm)
    return (Y << 7) + j, not eq


@_jit
def normal_parts(P, code):
    """(ok, neg, sig, exp) of a code: ok when it is a finite value with a full
    p-bit significand (a normal number; e8m0's values too), then as ``unpack``:
    value = (-1)**neg * sig * 2**exp. Zeros, subnormals, inf and NaN (every NaN
    and inf code lies outside 2**m <= magnitude <= max_code_magnitude) give ok False."""
    m = P[P_M]
    sign = code & P[P_SIGNBIT]
    mag = code ^ sign
    ok = mag >= (np.int64(1) << m) and mag <= P[P_MAXMAG]
    return ok, sign != 0, (mag & ((np.int64(1) << m) - 1)) | (np.int64(1) << m), (
        (mag >> m) - P[P_BIAS] - m)


@_jit
def bitlen_fast(x):
    """Number of bits of a positive int64 below 2**62, branch-free (from the
    exponent of float64(x), which may round up to the next power of two)."""
    n = ((np.float64(x).view(np.int64) >> 52) - 1022)
    return n - np.int64(x < (np.int64(1) << (n - 1)))


@_jit
def sr_round_normal(P, neg, sig, lsb, nbits, sticky, rnd):
    """(ok, code, flags): ``round_pack`` in stochastic mode of (-1)**neg (sig +
    sticky) 2**lsb (sig of nbits bits), for results whose leading bit lies in
    the normal range with 1 <= shift <= 62 bits below the quantum; ok False
    otherwise, and when rounding up overflows (the caller then takes the
    general route). It is the engine's own path for that case: r = sig >> shift
    rounds up iff rnd < (sig mod 2**shift) 2**(64-shift) + sticky; the code
    magnitude is linear in r, so a carry steps the exponent; no underflow is
    possible; inexact iff a dropped bit or sticky is set.

    Branch-free (bitwise tests, selects) so that ``sr_kernel``'s loops
    vectorise: the sign and the coin toss are random, and mispredicted
    branches would cost more than the arithmetic.
    """
    m = P[P_M]
    emin = P[P_EMIN]
    e = lsb + nbits - 1
    shift = e - m - lsb
    ok = ((e >= emin) & (e <= emin + (P[P_MAXMAG] >> m) - P[P_SUBN]) & (shift >= 1)
          & (shift <= 62) & ((neg & (P[P_SIGNBIT] == 0)) ^ True))
    shift = min(max(shift, 1), 62)
    r = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    thresh = (np.uint64(rem) << np.uint64(64 - shift)) + np.uint64(sticky)
    r += np.int64(rnd < thresh)
    mag = ((e - emin) << m) + r - (0 if P[P_SUBN] else (np.int64(1) << m))
    ok = ok & (mag <= P[P_MAXMAG])
    return ok, mag | (P[P_SIGNBIT] * np.int64(neg)), FLAG_INEXACT * np.int64((rem != 0) | sticky)


def sr_kernel(P: tuple, op: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, saturate: bool,
              ftz: bool, seeds: np.ndarray, out: np.ndarray, flags: np.ndarray,
              want_flags: bool) -> int:
    """``op_kernel`` for op in (DIV, SQRT, FMA) in stochastic mode, with the
    words of ``seeds`` (one per SR_BLOCK elements, as ``_engine.sr_expand``):
    the same codes, flags and return value, faster. :func:`sr_fast_pass` does
    the elements whose operands and result are normal; ``op_kernel`` the
    others (zeros, subnormals, inf, NaN, overflow, cancellation, p < 3), with
    their own words. (``op_kernel`` is not called from the compiled pass: that
    would compile all of the arithmetic a second time.)"""
    n = out.shape[0]
    fl = flags if want_flags else np.empty(n, np.uint8)
    sr_fast_pass(P, op, a, b, c, seeds, out, fl)
    rest = np.flatnonzero(out < 0)
    if rest.size == 0:
        return -1
    part = [x if x.shape[0] == 1 else np.ascontiguousarray(x[rest]) for x in (a, b, c)]
    o = np.empty(rest.size, np.int64)
    f = np.zeros(rest.size if want_flags else 0, np.uint8)
    bad = op_kernel(P, op, part[0], part[1], part[2], STOCHASTIC, saturate, ftz,
                    sr_words_at(seeds, rest), o, f, want_flags)
    done = rest.size if bad < 0 else bad  # op_kernel wrote the elements before bad
    out[rest[:done]] = o[:done]
    if want_flags:
        flags[rest[:done]] = f[:done]
    return -1 if bad < 0 else int(rest[bad])


@_jit
def sr_words_at(seeds, idx):
    """The stochastic-rounding words of elements ``idx`` (as ``_engine.sr_expand``)."""
    words = np.empty(idx.shape[0], np.uint64)
    for t in range(idx.shape[0]):
        words[t] = sr_word(seeds[idx[t] // SR_BLOCK], idx[t] % SR_BLOCK)
    return words


@_jit
def sr_fast_pass(P, op, a, b, c, seeds, out, fl):
    """Codes and flags of op (DIV, SQRT, FMA) in stochastic mode where operands
    and result are normal, -1 elsewhere: what ``op_kernel`` gives there.

    Branch-free, so that LLVM vectorises it: keep the loop bodies inline and
    free of calls that can fail (a possible ZeroDivisionError is a branch).
    Each computes the exact (sig, lsb, sticky) that op_div, op_sqrt and
    op_fma hand the engine and rounds it with :func:`sr_round_normal`.
    * div: floor(sa 2**s / sb) with s = 62 - p, then p - 2 more bits (op_div),
      i.e. floor(sa 2**60 / sb) (:func:`div_sig60`), lsb ea - eb - 60.
    * sqrt: N = sa << k, ea - k even, 2**60 <= N < 2**62, then 29 more root
      bits (op_sqrt's digit loop): floor(sqrt(N 2**58)) (:func:`sqrt_sig60`).
      An exact root carries 29 zero bits more than op_sqrt keeps, and an exact
      quotient p - 2 more than op_div: that changes nothing.
    * fma: the exact sum of the exact product sp 2**ep (2p bits) and sc 2**ec
      when their last bits are at most 61 - 2p apart (so |S| < 2**62): the
      value fma_parts rounds, with no sticky bit (its lsb may differ, which
      changes nothing for 1 <= shift <= 62: the threshold is frac * 2**64
      either way). An exact zero is left to op_fma (the sign rules).
    """
    n = out.shape[0]
    sa = 0 if a.shape[0] == 1 else 1
    sb = 0 if b.shape[0] == 1 else 1
    sc = 0 if c.shape[0] == 1 else 1
    m = P[P_M]
    p = m + 1
    if m < 2:  # p < 3: op_div takes no extra quotient bits
        out[:] = -1
    for blk in range((n + SR_BLOCK - 1) // SR_BLOCK if m >= 2 else 0):
        seed = seeds[blk]
        base = blk * SR_BLOCK
        if op == DIV:
            for j in range(min(SR_BLOCK, n - base)):
                i = base + j
                oka, na, xa, ea = normal_parts(P, np.int64(a[i * sa]))
                okb, nb, xb, eb = normal_parts(P, np.int64(b[i * sb]))
                q, sticky = div_sig60(xa, xb)
                nbits = 60 + np.int64(q >= (np.int64(1) << 60))
                ok, code, f = sr_round_normal(P, na != nb, q, ea - eb - 60, nbits, sticky,
                                              sr_word(seed, j))
                out[i] = code if ok & oka & okb else -1
                fl[i] = f
        elif op == SQRT:
            for j in range(min(SR_BLOCK, n - base)):
                i = base + j
                oka, na, xa, ea = normal_parts(P, np.int64(a[i * sa]))
                k = 61 - m
                k -= (ea - k) & 1
                r, sticky = sqrt_sig60(xa << k)
                ok, code, f = sr_round_normal(P, False, r, ((ea - k) >> 1) - 29, 60, sticky,
                                              sr_word(seed, j))
                out[i] = code if ok & oka & (na ^ True) else -1
                fl[i] = f
        else:
            for j in range(min(SR_BLOCK, n - base)):
                i = base + j
                oka, na, xa, ea = normal_parts(P, np.int64(a[i * sa]))
                okb, nb, xb, eb = normal_parts(P, np.int64(b[i * sb]))
                okc, nc, xc, ec = normal_parts(P, np.int64(c[i * sc]))
                sp = xa * xb
                ep = ea + eb
                lo = min(ep, ec)
                dp = min(ep - lo, 62)
                dc = min(ec - lo, 62)
                S = (sp << dp) * (1 - 2 * np.int64(na != nb)) + (xc << dc) * (1 - 2 * np.int64(nc))
                mag = max(abs(S), np.int64(1))
                ok, code, f = sr_round_normal(P, S < 0, mag, lo, bitlen_fast(mag), False,
                                              sr_word(seed, j))
                good = ok & oka & okb & okc & (max(dp, dc) <= 61 - 2 * p) & (S != 0)
                out[i] = code if good else -1
                fl[i] = f
