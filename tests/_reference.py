"""Independent references for the format core, written for the tests only.

Nothing here calls lowprec's engine: a format enters only through its
*primary* fields (exponent/mantissa bits, bias, sign, inf, NaN encoding,
subnormals), and every value is computed from the bit fields with exact
arithmetic (``fractions.Fraction``, or float64 operations that are exact:
scaling by powers of two, ``floor``, the fractional part of a number below
2**53, comparisons).

* :func:`decode_fraction` / :func:`value_table`: the value of a code.
* :func:`round_fraction`: a scalar rounding reference that finds the two
  neighbours of ``x`` among the format's values (bisect in the exact table)
  and applies each mode's rule. Obviously right, slow.
* :func:`round_reference`: the same rules vectorised over numpy float64 with
  exact operations only, fast enough for 10**5 cases per (format, mode); the
  tests hold it equal to :func:`round_fraction`.

Rules (lowprec/rounding.py's module docstring; IEEE 754 where it applies):
round with an unbounded exponent above (subnormal spacing below), then apply
overflow; nearest/stochastic/away-from-zero directed modes overflow to inf (a
format without inf: NaN; without NaN either: max), rtz/odd/toward-zero
directed modes to max; ``saturate`` clamps to max (input infinities too);
``subnormals=False`` flushes subnormal *results* to signed zero; fnuz formats
have no -0; e8m0 has no zero (zero and negatives give NaN, positives below
2**-127 give 2**-127).

Ties and odd for a format with no mantissa bits (e8m0): every value has
significand 1, so "the even neighbour" is the upper one (the significand
``1.1b`` rounds up to ``10b``, the next binade) and round-to-odd truncates.
ml_dtypes, gfloat and lowprec all round e8m0 ties up this way.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import cache

import numpy as np

INEXACT, UNDERFLOW, OVERFLOW, INVALID = 0x01, 0x02, 0x04, 0x10
DETERMINISTIC_MODES = ["rne", "rna", "rtz", "rup", "rdown", "odd"]


# ------------------------------------------------------------------ decoding
def decode_fraction(fmt, code: int) -> Fraction | float:
    """Value of ``code``: a Fraction, or float nan / +-inf. From the fields only."""
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    width = int(fmt.signed) + e_bits + m_bits
    negative = fmt.signed and bool(code >> (width - 1) & 1)
    e_field = (code >> m_bits) & ((1 << e_bits) - 1)
    m_field = code & ((1 << m_bits) - 1)
    e_ones = e_field == (1 << e_bits) - 1
    if fmt.nan == "ieee" and e_ones:
        return math.nan if m_field else (-math.inf if negative else math.inf)
    if fmt.nan == "max" and e_ones and m_field == (1 << m_bits) - 1:
        return math.nan
    if fmt.nan == "negzero" and negative and e_field == 0 and m_field == 0:
        return math.nan
    if fmt.has_subnormals and e_field == 0:  # subnormal (or zero)
        value = Fraction(m_field, 2**m_bits) * Fraction(2) ** (1 - fmt.bias)
    else:  # normal: implicit leading 1
        value = (1 + Fraction(m_field, 2**m_bits)) * Fraction(2) ** (e_field - fmt.bias)
    return -value if negative else value


def value_table(fmt) -> np.ndarray:
    """Every code's value as float64 (see :func:`values_of`)."""
    return values_of(fmt, np.arange(1 << fmt.width, dtype=np.int64))


def values_of(fmt, codes: np.ndarray) -> np.ndarray:
    """Values of ``codes`` as float64, by a vectorised form of the same formula
    (float64 holds them exactly: scaling an integer below 2**32 by a power of two)."""
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    width = int(fmt.signed) + e_bits + m_bits
    codes = np.asarray(codes, dtype=np.int64)
    sign = (codes >> (width - 1) & 1) if fmt.signed else np.zeros(codes.shape, np.int64)
    negative = sign.astype(bool)
    e_field = (codes >> m_bits) & ((1 << e_bits) - 1)
    m_field = codes & ((1 << m_bits) - 1)
    sub = (e_field == 0) & fmt.has_subnormals
    sig = np.where(sub, m_field, m_field + (1 << m_bits)).astype(np.float64)
    exp = np.where(sub, 1 - fmt.bias, e_field - fmt.bias) - m_bits
    value = np.ldexp(sig, exp.astype(np.int32))
    value = np.where(negative, -value, value)
    e_ones = e_field == (1 << e_bits) - 1
    if fmt.nan == "ieee":
        value = np.where(e_ones, np.where(m_field == 0, np.copysign(np.inf, value), np.nan), value)
    elif fmt.nan == "max":
        value = np.where(e_ones & (m_field == (1 << m_bits) - 1), np.nan, value)
    elif fmt.nan == "negzero":
        value = np.where(negative & (e_field == 0) & (m_field == 0), np.nan, value)
    return value


@cache
def max_value(fmt) -> float:
    """Largest finite value: the largest in the value table, or for wide formats
    the value of the largest finite code the NaN encoding leaves (the all-ones
    magnitude, less one for "max", less the top binade for "ieee")."""
    if fmt.width > 20:
        e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
        ones = (1 << (e_bits + m_bits)) - 1
        code = {"ieee": ones - (1 << m_bits), "max": ones - 1}.get(fmt.nan, ones)
        return float(decode_fraction(fmt, code))
    t = value_table(fmt)
    return float(t[np.isfinite(t)].max())


def max_step(fmt) -> float:
    """The spacing of values in max's binade (the step to the next value an
    unbounded exponent would give)."""
    return 2.0 ** (math.frexp(max_value(fmt))[1] - 1 - fmt.mantissa_bits)


def emin(fmt) -> int:
    """Exponent of the smallest normal binade (of the smallest value, for e8m0)."""
    return (1 if fmt.has_subnormals else 0) - fmt.bias


@cache
def _sorted_positive(fmt) -> tuple[list[Fraction], list[int]]:
    """Finite non-negative values (exact) and their codes, ascending."""
    pairs = []
    for code in range(1 << (fmt.exponent_bits + fmt.mantissa_bits)):  # sign bit clear
        v = decode_fraction(fmt, code)
        if isinstance(v, Fraction):
            pairs.append((v, code))
    pairs.sort()
    return [v for v, _ in pairs], [c for _, c in pairs]


# ------------------------------------------------------------ scalar rounding
def _to_inf(mode: str, negative: bool) -> bool:
    return mode in ("rne", "rna", "stochastic") or (mode == "rup" and not negative) or (
        mode == "rdown" and negative)


def _overflow_value(fmt, mode: str, negative: bool, saturate: bool) -> float:
    big = max_value(fmt)
    if _to_inf(mode, negative) and not saturate:
        if fmt.has_inf:
            big = math.inf
        elif fmt.nan != "none":
            return math.nan
    return -big if negative else big


def round_fraction(x: float, fmt, mode: str, saturate: bool = False,
                   subnormals: bool = True) -> float:
    """Scalar reference for a finite non-zero float ``x`` (a format of <= 16 bits).

    Finds the neighbours lo <= |x| <= hi among the format's non-negative values
    (extended above max by one more step of max's binade: rounding first sees an
    unbounded exponent), picks one by the mode's rule, then applies overflow,
    flush-to-zero and the format's zero/sign rules. Returns a float (exact).
    """
    values, codes = _sorted_positive(fmt)
    negative = x < 0
    a = abs(Fraction(x))
    if not fmt.signed and negative:
        return math.nan
    if not fmt.has_subnormals and a < values[0]:
        return float(values[0])  # e8m0: below 2**-127 gives 2**-127
    # One more value above max, at max's spacing (rounding first sees an
    # unbounded exponent).
    top = values[-1] + Fraction(max_step(fmt))
    if a > top:
        return _overflow_value(fmt, mode, negative, saturate)
    if a >= values[-1]:
        lo, hi, lo_code = values[-1], top, codes[-1]
    else:
        i = bisect.bisect_right(values, a) - 1  # values[i] <= a < values[i+1]
        lo, hi, lo_code = values[i], values[i + 1], codes[i]
    if lo == a:
        result = lo
    else:
        # "Even"/"odd" neighbour: by code parity; with no mantissa bits the
        # significand is always 1, so the upper neighbour (1.1b -> 10b) is even.
        lo_even = lo_code % 2 == 0 if fmt.mantissa_bits else False
        up_if = {
            "rne": a - lo > hi - a or (a - lo == hi - a and not lo_even),
            "rna": a - lo >= hi - a,
            "rtz": False,
            "rup": not negative,
            "rdown": negative,
            "odd": lo_even,
        }[mode]
        result = hi if up_if else lo
    if result > values[-1]:
        return _overflow_value(fmt, mode, negative, saturate)
    smallest_normal = Fraction(2) ** emin(fmt)
    if not subnormals and fmt.has_subnormals and 0 < result < smallest_normal:
        result = Fraction(0)
    if result == 0:
        return -0.0 if negative and fmt.nan != "negzero" else 0.0
    return float(-result if negative else result)


# -------------------------------------------------------- vectorised rounding
def _round_up(mode: str, frac: np.ndarray, n0: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Whether to step from n0 (truncated significand) to n0 + 1, given the
    dropped fraction ``frac`` in [0, 1) of a quantum."""
    odd = np.fmod(n0, 2) == 1
    if mode == "rne":
        return (frac > 0.5) | ((frac == 0.5) & odd)
    if mode == "rna":
        return frac >= 0.5
    if mode == "rtz":
        return np.zeros(frac.shape, bool)
    if mode == "rup":
        return (frac > 0) & ~negative
    if mode == "rdown":
        return (frac > 0) & negative
    if mode == "odd":
        return (frac > 0) & ~odd
    raise ValueError(mode)


def _round_at(a: np.ndarray, qe: np.ndarray, mode: str, negative: np.ndarray):
    """|x| = a rounded to a multiple of 2**qe; returns (result, inexact). Exact:
    a * 2**-qe < 2**54 is a float64 product by a power of two, floor and the
    fractional part of such a number are exact, and so is n * 2**qe (the one
    inexact case, a * 2**-qe below 2**-60, is replaced by 2**-60: same decisions)."""
    k = np.ldexp(a, -qe)
    # Far below the quantum, a * 2**-qe could underflow float64; any value in
    # (0, 1/2) then gives the same decisions (truncated significand 0, below half).
    e = np.frexp(a)[1] - 1
    k = np.where(e - qe < -60, 2.0**-60, k)
    n0 = np.floor(k)
    frac = k - n0
    n = n0 + _round_up(mode, frac, n0, negative)
    return np.ldexp(n, qe), frac != 0


@np.errstate(over="ignore", under="ignore")  # n * 2**qe may be inf: that is overflow
def round_reference(x: np.ndarray, fmt, mode: str, saturate: bool = False,
                    subnormals: bool = True, signaling: np.ndarray | None = None):
    """Vectorised exact reference: ``(values, flags)`` for float64 ``x``.

    ``flags`` are TestFloat's (inexact, underflow after rounding, overflow,
    invalid). ``signaling`` marks signaling-NaN inputs (invalid).
    """
    x = np.asarray(x, dtype=np.float64)
    m = fmt.mantissa_bits
    big = max_value(fmt)
    e_min = emin(fmt)
    negative = np.signbit(x)
    a = np.abs(x)
    out = np.full(x.shape, np.nan)
    flags = np.zeros(x.shape, np.uint8)

    fin = np.isfinite(a) & (a > 0)
    af, nf = a[fin], negative[fin]
    e = (np.frexp(af)[1] - 1).astype(np.int64)  # floor(log2 a), exact
    if fmt.has_subnormals:
        qe = np.maximum(e, e_min) - m
    else:
        qe = e - m
    r, inexact = _round_at(af, qe, mode, nf)
    fl = np.where(inexact, INEXACT, 0).astype(np.uint8)
    if fmt.has_subnormals:
        # Tininess after rounding: rounded to full precision with an unbounded
        # exponent, is the result still below 2**emin?
        t, _ = _round_at(af, e - m, mode, nf)
        fl |= np.where(inexact & (t < 2.0**e_min), UNDERFLOW, 0).astype(np.uint8)
        if not subnormals:
            flush = (r > 0) & (r < 2.0**e_min)
            r = np.where(flush, 0.0, r)
            fl = np.where(flush, INEXACT | UNDERFLOW, fl).astype(np.uint8)
    else:  # e8m0: below the smallest value
        below = e < e_min
        r = np.where(below, 2.0**e_min, r)
        fl = np.where(below, INEXACT | UNDERFLOW, fl).astype(np.uint8)
    over = r > big
    if over.any():
        to_inf = np.isin(mode, ["rne", "rna"]) | ((mode == "rup") & ~nf) | (
            (mode == "rdown") & nf)
        big_value = big
        if fmt.has_inf:
            big_value = np.inf
        elif fmt.nan != "none":
            big_value = np.nan
        ov = big_value if not saturate else big
        r = np.where(over, np.where(to_inf, ov, big), r)
        fl = np.where(over, OVERFLOW | INEXACT, fl).astype(np.uint8)
    value = np.where(nf, -r, r)
    if fmt.nan == "negzero":
        value = np.where(value == 0, 0.0, value)  # no -0
    if not fmt.signed:
        value = np.where(nf, np.nan, value)
        fl = np.where(nf, INVALID, fl).astype(np.uint8)
    out[fin] = value
    flags[fin] = fl

    zero = a == 0
    if fmt.has_subnormals:
        # fnuz and unsigned formats have no -0: a zero of either sign is +0
        out[zero] = 0.0 if fmt.nan == "negzero" or not fmt.signed else x[zero]
    else:
        flags[zero] = INVALID  # no zero: NaN
    inf = np.isinf(x)
    if fmt.has_inf and not saturate:
        out[inf] = x[inf]
    elif fmt.nan != "none" and not saturate:
        flags[inf] = INVALID  # out stays NaN
    else:
        out[inf] = np.copysign(big, x[inf])
    if not fmt.signed:
        neg_inf = inf & negative
        out[neg_inf] = np.nan
        flags[neg_inf] = INVALID
    if signaling is not None:
        flags[np.isnan(x) & signaling] = INVALID
    return out, flags


# ----------------------------------------------------------------- test inputs
def positive_values(fmt) -> np.ndarray:
    """Sorted finite positive values as float64 (formats of <= 20 bits)."""
    t = value_table(fmt)
    return np.unique(t[np.isfinite(t) & (t > 0)])


@np.errstate(over="ignore")
def edge_cases(fmt) -> np.ndarray:
    """Non-negative float64 edge cases: zero, the smallest subnormal, half of it,
    the smallest normal, max, the overflow threshold (half a step of max's binade
    above max), each with one float64 step either side, and inf."""
    big = max_value(fmt)
    step = max_step(fmt)
    tiny = 2.0 ** (emin(fmt) - (fmt.mantissa_bits if fmt.has_subnormals else 0))
    points = [tiny, tiny / 2, 1.5 * tiny, 2.0 ** emin(fmt), big, big + step / 2, big + step,
              2 * big, 1.0, 1.5]
    pts = np.array(points, dtype=np.float64)
    out = np.concatenate([pts, np.nextafter(pts, 0), np.nextafter(pts, np.inf), [0.0, np.inf]])
    return out


@np.errstate(over="ignore")
def cases(fmt, n: int, seed: int) -> np.ndarray:
    """At least ``n`` float64 inputs for ``fmt``, both signs: every value and every
    midpoint between neighbours (sampled when there are too many) with one float64
    step either side, edge cases, and random float64 bit patterns whose exponents
    span the format's range and a few binades beyond."""
    rng = np.random.default_rng(seed)
    big = max_value(fmt)
    m = fmt.mantissa_bits
    if fmt.width <= 20:
        v = positive_values(fmt)
        v = np.append(v, v[-1] + max_step(fmt))  # one step above max (unbounded exponent)
        if fmt.has_subnormals:
            v = np.insert(v, 0, 0.0)
        if v.size > n // 8:
            idx = np.sort(rng.choice(v.size - 1, n // 8, replace=False))
        else:
            idx = np.arange(v.size - 1)
        lo, hi = v[idx], v[idx + 1]
    else:  # wide formats: random codes below max and their successors
        top = fmt.max_code_magnitude
        c = rng.integers(0, top, n // 8, dtype=np.int64)
        lo, hi = values_of(fmt, c), values_of(fmt, c + 1)
    mid = (lo + hi) / 2  # exact: adjacent values of a format with <= 24 bits
    anchors = np.concatenate([lo, mid])
    structured = np.concatenate([anchors, np.nextafter(anchors, 0),
                                 np.nextafter(anchors, np.inf)])
    # Random float64 patterns with exponents from below the smallest subnormal
    # to above max.
    e_lo = emin(fmt) - m - 3
    e_hi = math.floor(math.log2(big)) + 2
    k = max(n - structured.size - 64, n // 4)
    exps = rng.integers(e_lo, e_hi + 1, k)
    mant = rng.integers(0, 1 << 52, k, dtype=np.int64).astype(np.float64)
    rand = np.ldexp(1.0 + mant * 2.0**-52, exps)
    # Random multiples of a sixteenth of the quantum near the bottom (ties and
    # sticky bits in the subnormal range).
    few = np.ldexp(rng.integers(1, 1 << (m + 6), n // 16).astype(np.float64),
                   emin(fmt) - m - 4)
    x = np.concatenate([structured, rand, few, edge_cases(fmt)])
    x = x[np.isfinite(x) | np.isinf(x)]
    signs = np.where(rng.random(x.size) < 0.5, -1.0, 1.0)
    return np.concatenate([x * signs, -x * signs, [0.0, -0.0]])
