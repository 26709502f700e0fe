"""Fast twins of the reference arithmetic kernels (``lowprec._kernels.arith``),
tested equal to them bit for bit: float64 round-to-odd div, sqrt and fma for
the deterministic modes, and the stochastic div, sqrt and fma pass."""

from __future__ import annotations

import numpy as np
from numba import njit

from .arith import DIV, SQRT, op_kernel
from .params import FLAG_INEXACT, STOCHASTIC
from .sr import SR_BLOCK, sr_word, sr_words_at

_jit = njit(cache=True, nogil=True)

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


def fma_odd(a: np.ndarray, b: np.ndarray, c: np.ndarray, rdown: bool, out: np.ndarray) -> None:
    """:func:`fma_odd_kernel`, compiled where it is ready (:func:`.route.ready`), else
    the same float64 operations in numpy (TwoSum, then the even results moved to their
    odd neighbour toward the exact sum)."""
    from . import route

    if route.ready(fma_odd_kernel, (a, b, c, rdown, out)):
        fma_odd_kernel(a, b, c, rdown, out)
    else:
        out[:] = np.broadcast_to(fma_odd_reference(a, b, c, rdown), out.shape)


def fma_odd_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, rdown: bool) -> np.ndarray:
    """:func:`fma_odd_kernel`'s operations in numpy, broadcast."""
    with np.errstate(all="ignore"):  # IEEE results, as the kernel's
        p = a * b
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        fin = np.isfinite(s)
        bits = s.view(np.int64)
        away = (err > 0) == (s > 0)
        move = fin & (err != 0) & ((bits & 1) == 0)
        r = np.where(move, bits + np.where(away, 1, -1), bits).view(np.float64)
        if rdown:
            signed = np.signbit(p) | np.signbit(np.broadcast_to(c, p.shape))
            r = np.where(fin & (err == 0) & (s == 0) & signed, -0.0, r)
    return r


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
    m = P.m
    sign = code & P.sign_bit
    mag = code ^ sign
    ok = mag >= (np.int64(1) << m) and mag <= P.max_mag
    return ok, sign != 0, (mag & ((np.int64(1) << m) - 1)) | (np.int64(1) << m), (
        (mag >> m) - P.bias - m)


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
    m = P.m
    emin = P.emin
    e = lsb + nbits - 1
    shift = e - m - lsb
    ok = ((e >= emin) & (e <= emin + (P.max_mag >> m) - P.subnormals) & (shift >= 1)
          & (shift <= 62) & ((neg & (P.sign_bit == 0)) ^ True))
    shift = min(max(shift, 1), 62)
    r = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    thresh = (np.uint64(rem) << np.uint64(64 - shift)) + np.uint64(sticky)
    r += np.int64(rnd < thresh)
    mag = ((e - emin) << m) + r - (0 if P.subnormals else (np.int64(1) << m))
    ok = ok & (mag <= P.max_mag)
    return ok, mag | (P.sign_bit * np.int64(neg)), FLAG_INEXACT * np.int64((rem != 0) | sticky)


def sr_kernel(P: tuple, op: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, saturate: bool,
              ftz: bool, seeds: np.ndarray, out: np.ndarray, flags: np.ndarray,
              want_flags: bool) -> int:
    """``op_kernel`` for op in (DIV, SQRT, FMA) in stochastic mode, with the
    words of ``seeds`` (one per SR_BLOCK elements, as ``sr.sr_expand``):
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
    m = P.m
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
