"""An independent, slow, exact reference for IEEE 754 arithmetic in a FloatFormat.

Written from the standard, not from lowprec's engine: the exact result is a
``fractions.Fraction``; rounding finds the two neighbours on the format's grid
(quantum 2**(max(e, emin) - m), unbounded above the largest binade) and picks
one per mode; overflow, tininess after rounding, signed zeros and the special
cases follow IEEE 754-2019 sections 4.3, 6.3, 7. The conventions for formats
without infinity or NaN are lowprec's documented ones (``lowprec.arith``).
Only the format's primary fields are used (bits, bias, has_inf, nan, max).
"""

from __future__ import annotations

import math
from fractions import Fraction

MODES = ("rne", "rna", "rtz", "rup", "rdown", "odd")
NX, UF, OF, DZ, NV = 0x01, 0x02, 0x04, 0x08, 0x10
CANCEL = object()  # an exact zero from x + (-x): +0, or -0 when rounding down


def floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for x > 0, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if (x.numerator << max(-e, 0)) < (x.denominator << max(e, 0)):
        e -= 1
    return e


def _pick(num: int, den: int, qe: int, mode: str, negative: bool) -> tuple[int, bool]:
    """num/den > 0 rounded to a multiple n of 2**qe in ``mode`` (sign ``negative``).

    Returns (n, exact). Pure integer arithmetic: k = floor(x / 2**qe), and the
    remainder decides, compared with half a quantum for the nearest modes.
    """
    if qe >= 0:
        den = den << qe
    else:
        num = num << -qe
    k, rem = divmod(num, den)
    if rem == 0:
        return k, True
    if mode == "rtz":
        n = k
    elif mode == "rup":
        n = k if negative else k + 1
    elif mode == "rdown":
        n = k + 1 if negative else k
    elif mode == "odd":
        n = k if k % 2 == 1 else k + 1
    elif 2 * rem < den:
        n = k
    elif 2 * rem > den:
        n = k + 1
    else:  # a tie
        n = k + 1 if mode == "rna" else (k if k % 2 == 0 else k + 1)
    return n, False


class Reference:
    def __init__(self, fmt):
        self.fmt = fmt
        self.m = fmt.mantissa_bits
        self.emin = fmt.emin
        self.max = fmt.max
        self.cache: dict = {}

    # -------------------------------------------------------------- results
    def _inf(self, negative: bool):
        """An exact infinity, converted like lowprec.round_to converts ±inf."""
        f = self.fmt
        if f.has_inf:
            return (-math.inf if negative else math.inf), 0
        if f.nan != "none":
            return math.nan, NV
        return (-float(self.max) if negative else float(self.max)), 0

    def _nan(self, flags: int):
        if self.fmt.nan == "none":
            return None, flags  # no result: lowprec raises ValueError
        return math.nan, flags

    def _zero(self, negative: bool):
        if self.fmt.nan == "negzero":
            negative = False
        return (-0.0 if negative else 0.0), 0

    def round(self, x: Fraction, mode: str, zero_negative: bool = False):
        """(value as float, flags) of the exact x rounded in mode (x == 0 -> signed zero)."""
        if x == 0:
            return self._zero(zero_negative)
        key = (x, mode)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        negative = x < 0
        a = -x if negative else x
        num, den = a.numerator, a.denominator
        e = floor_log2(a)
        qe = max(e, self.emin) - self.m
        n, exact = _pick(num, den, qe, mode, negative)
        flags = 0 if exact else NX
        v = math.ldexp(n, qe)  # exact: n has at most m + 2 bits
        if v > self.max:
            signed_max = -float(self.max) if negative else float(self.max)
            to_inf = mode in ("rne", "rna") or (mode == "rup" and not negative) or (
                mode == "rdown" and negative)
            if not to_inf or self.fmt.nan == "none":
                out = (signed_max, OF | NX)
            elif self.fmt.has_inf:
                out = (-math.inf if negative else math.inf, OF | NX)
            else:
                out = (math.nan, OF | NX)  # overflow to NaN (no invalid flag)
            self.cache[key] = out
            return out
        if flags and e < self.emin:
            # Tininess after rounding: round to p bits with an unbounded exponent.
            n_unb, _ = _pick(num, den, e - self.m, mode, negative)
            if n_unb < 1 << (self.emin - e + self.m):  # n_unb * 2**(e-m) < 2**emin
                flags |= UF
        if n == 0:
            out = (self._zero(negative)[0], flags)
        else:
            out = (-v if negative else v, flags)
        self.cache[key] = out
        return out

    # ----------------------------------------------------------- operations
    # Each exact_<op> returns a non-zero Fraction (the exact result, or for sqrt a
    # number strictly inside the same rounding interval), CANCEL for an exact
    # zero sum of non-zero terms, or a finished (value, flags) pair.
    def finish(self, exact, mode: str):
        if isinstance(exact, Fraction):
            return self.round(exact, mode)
        if exact is CANCEL:
            return self._zero(mode == "rdown")
        return exact

    def exact_add(self, a: float, b: float):
        if math.isnan(a) or math.isnan(b):
            return self._nan(0)
        if math.isinf(a) or math.isinf(b):
            if math.isinf(a) and math.isinf(b) and (a > 0) != (b > 0):
                return self._nan(NV)
            return self._inf((a if math.isinf(a) else b) < 0)
        s = Fraction(a) + Fraction(b)
        if s == 0:
            if a == 0 and b == 0 and math.copysign(1, a) == math.copysign(1, b):
                return self._zero(math.copysign(1, a) < 0)
            return CANCEL
        return s

    def exact_sub(self, a: float, b: float):
        return self.exact_add(a, -b)

    def exact_mul(self, a: float, b: float):
        if math.isnan(a) or math.isnan(b):
            return self._nan(0)
        negative = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
        if math.isinf(a) or math.isinf(b):
            if a == 0 or b == 0:
                return self._nan(NV)
            return self._inf(negative)
        if a == 0 or b == 0:
            return self._zero(negative)
        return Fraction(a) * Fraction(b)

    def exact_div(self, a: float, b: float):
        if math.isnan(a) or math.isnan(b):
            return self._nan(0)
        negative = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
        if math.isinf(a):
            return self._nan(NV) if math.isinf(b) else self._inf(negative)
        if math.isinf(b):
            return self._zero(negative)
        if b == 0:
            if a == 0:
                return self._nan(NV)
            v, f = self._inf(negative)
            return v, f | DZ
        if a == 0:
            return self._zero(negative)
        return Fraction(a) / Fraction(b)

    def exact_sqrt(self, a: float):
        if math.isnan(a):
            return self._nan(0)
        if a == 0:
            return self._zero(math.copysign(1, a) < 0)
        if a < 0:
            return self._nan(NV)
        if math.isinf(a):
            return self._inf(False)
        # The root is irrational unless x is a square: bracket it between
        # multiples of 2**-k, k bits finer than any quantum near it; the middle
        # of the bracket rounds like the root itself.
        x = Fraction(a)
        k = 60 + abs(floor_log2(x))
        scaled = x * Fraction(4) ** k
        n = scaled.numerator // scaled.denominator
        r = math.isqrt(n)
        if r * r == n and scaled.denominator == 1:
            return Fraction(r, 2**k)
        return Fraction(2 * r + 1, 2 ** (k + 1))

    def exact_fma(self, a: float, b: float, c: float):
        if math.isnan(a) or math.isnan(b) or math.isnan(c):
            inv = (math.isinf(a) and b == 0) or (a == 0 and math.isinf(b))
            return self._nan(NV if inv else 0)
        negp = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
        if math.isinf(a) or math.isinf(b):
            if a == 0 or b == 0:
                return self._nan(NV)
            if math.isinf(c) and (c < 0) != negp:
                return self._nan(NV)
            return self._inf(negp)
        if math.isinf(c):
            return self._inf(c < 0)
        s = Fraction(a) * Fraction(b) + Fraction(c)
        if s == 0:
            if (a == 0 or b == 0) and c == 0 and negp == (math.copysign(1, c) < 0):
                return self._zero(negp)
            return CANCEL
        return s

    def evaluate(self, op: str, operands, modes=MODES):
        """{mode: (values float64 array or None entries, flags list)} for all elements."""
        exact_op = getattr(self, "exact_" + op)
        exact = [exact_op(*(float(x[i]) for x in operands)) for i in range(len(operands[0]))]
        return {mode: [self.finish(e, mode) for e in exact] for mode in modes}
