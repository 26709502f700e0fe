"""Seeing a number: ``explain`` one value, ``range_stats`` of an array.

``explain(0.1, "bf16")`` shows what happens to one number: its bits, exponent,
class, the format's neighbours and the exact rounding error. The input is
rounded exactly, by the same engine as :func:`lowprec.round_to`: a float is
taken at its exact binary value, and a ``str``, ``Fraction`` or ``Decimal``
at its exact decimal value (so ``"0.1"`` means 1/10, not the float64 nearest
to it).

``range_stats(x, "fp8_e4m3")`` counts what rounding does to a whole array:
how many values were exact, inexact, became subnormal, underflowed to zero,
overflowed, or were NaN.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from ._kernels import params, vec
from ._runtime import _get_rng
from .formats import FloatFormat, get_format
from .rounding import check_mode, decode, encode

__all__ = ["Explanation", "RangeStats", "explain", "range_stats"]



@dataclass(frozen=True)
class Explanation:
    """What rounding one value to a format does. ``print()`` it to read it.

    Errors are exact ``Fraction``s (``None`` when the input or the result is
    not finite). ``ulp`` is the format's spacing at the input,
    ``2**(max(e, emin) - mantissa_bits)`` with ``2**e <= |x| < 2**(e+1)``, so
    round-to-nearest errors are at most 0.5 ulp.
    """

    input: Fraction | float  #: the exact input (a float only for nan and ±inf)
    format: FloatFormat
    mode: str
    result: float  #: the rounded value (every value of every format is a float64)
    code: int
    sign: int
    exponent_field: int  #: the biased exponent, as stored
    mantissa_field: int
    exponent: int | None  #: the true exponent e of the result (x = 1.m * 2**e; emin if subnormal)
    kind: str  #: "zero", "subnormal", "normal", "inf" or "nan"
    next_down: float | None  #: the format's largest value below the result
    next_up: float | None  #: the format's smallest value above the result
    abs_error: Fraction | None  #: result - input
    rel_error: Fraction | None  #: (result - input) / input
    ulp: Fraction | None  #: the format's spacing at the input
    ulp_error: Fraction | None  #: (result - input) / ulp
    flags: tuple[str, ...]  #: IEEE exceptions: inexact, underflow, overflow, invalid

    @property
    def code_hex(self) -> str:
        digits = (self.format.width + 3) // 4
        return f"0x{self.code:0{digits}x}"

    @property
    def code_bits(self) -> str:
        """The code in binary, split as sign|exponent|mantissa."""
        f = self.format
        parts = []
        if f.signed:
            parts.append(str(self.sign))
        parts.append(format(self.exponent_field, f"0{f.exponent_bits}b"))
        if f.mantissa_bits:
            parts.append(format(self.mantissa_field, f"0{f.mantissa_bits}b"))
        return "|".join(parts)

    def __str__(self) -> str:
        f = self.format
        lines = [f"{_show(self.input)} in {f.name} ({self.mode}): {_show(self.result)}"]
        add = lines.append
        add(f"  input        {_exact_decimal(self.input)}")
        add(f"  rounded      {_exact_decimal(self.result) if self.result else repr(self.result)}"
            + ("   (exact)" if self.abs_error == 0 else ""))
        add(f"  code         {self.code_hex} = {self.code_bits}   (sign|exponent|mantissa)")
        if self.kind in ("normal", "subnormal"):
            lead = "1" if self.kind == "normal" else "0"
            mant = format(self.mantissa_field, f"0{f.mantissa_bits}b") if f.mantissa_bits else ""
            sig = f"{lead}.{mant}" if mant else lead
            add(f"  exponent     field {self.exponent_field}, bias {f.bias}: "
                f"2**{self.exponent}" + ("  (subnormal: exponent fixed at emin)"
                                         if self.kind == "subnormal" else ""))
            add(f"  value        {'-' if self.sign else '+'}{sig} (binary) * 2**{self.exponent}")
        elif self.kind == "zero":
            add(f"  exponent     field {self.exponent_field}, bias {f.bias}")
        add(f"  class        {self.kind}")
        add(f"  neighbours   {_show(self.next_down)} < {_show(self.result)} < "
            f"{_show(self.next_up)}")
        if self.abs_error is None:
            if "overflow" in self.flags:
                add("  error        overflow: beyond the largest finite value "
                    f"{_show(f.max)}")
        else:
            ulp, ulp_error = self.ulp, self.ulp_error  # set whenever abs_error is
            assert ulp is not None and ulp_error is not None
            add(f"  error        {_approx(self.abs_error, '+.8g')} absolute, "
                + (f"{_approx(self.rel_error, '+.8g')} relative, "
                   if self.rel_error is not None else "")
                + f"{_approx(ulp_error, '+.4g')} ulp "
                f"(ulp = {_show(float(ulp) if _in_float_range(ulp) else ulp)})")
        add(f"  flags        {', '.join(self.flags) if self.flags else 'none'}")
        return "\n".join(lines)


def _show(v: Any) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, Fraction):
        if not _in_float_range(v):
            return _approx(v, ".17g")
        v = float(v) if v.denominator != 1 or abs(v) < 2**53 else v
    return repr(float(v)) if isinstance(v, float) else str(v)


def _in_float_range(v: Fraction) -> bool:
    """Whether float(v) keeps v's magnitude: zero, or a normal float64's range."""
    return v == 0 or Fraction(2) ** -1022 <= abs(v) < Fraction(2) ** 1024


def _approx(v: Fraction, spec: str) -> str:
    """``format(float(v), spec)``, also for ``v`` beyond float64's range (1e400, 1e-400)."""
    if _in_float_range(v):
        return format(float(v), spec)
    with localcontext() as ctx:
        ctx.prec = 20
        return format((Decimal(v.numerator) / Decimal(v.denominator)).normalize(), spec)


def _exact_decimal(v: Fraction | float) -> str:
    """All the digits of a dyadic rational (or the fraction, if not dyadic)."""
    if isinstance(v, float):
        if not math.isfinite(v) or v == 0:
            return repr(v)
        v = Fraction(v)
    if not _in_float_range(v):  # 1e400, 1e-400: hundreds of digits say little
        return f"{_approx(v, '.17g')} (exactly: {len(str(v.numerator))}-digit numerator, " \
            f"{len(str(v.denominator))}-digit denominator)"
    den = v.denominator
    if den & (den - 1):  # not a power of two: decimals would not end
        return f"{v.numerator}/{den} = {_show(v)}..."
    k = den.bit_length() - 1
    digits = abs(v.numerator) * 5**k
    s = str(digits).rjust(k + 1, "0")
    text = (s[:-k] + "." + s[-k:]) if k else s
    return ("-" if v < 0 else "") + text


#: Decimal exponents beyond this are refused: every format lowprec knows overflows above
#: 3.5e38 and rounds to zero below 1.5e-45, and exact arithmetic on 10**(10**9) would hang.
MAX_DECIMAL_EXPONENT = 1000


def _exact_text(value: str) -> Fraction | float:
    """The exact value written in ``value``: ``0.1``, ``-3e-5``, ``1/3``, ``inf``, ``nan``."""
    text = value.strip()
    accepted = "decimals (0.1, -3e-5), fractions (1/3), inf or nan"
    if len(text) > 1000:
        raise ValueError(f"the number {text[:20]}... has {len(text)} characters; explain "
                         f"takes at most 1000 ({accepted})")
    try:  # Decimal reads the exponent without expanding 10**exponent
        exponent = Decimal(text).adjusted() if Decimal(text).is_finite() else 0
    except ArithmeticError:  # not a decimal: "1/3", "abc"
        exponent = 0
    if abs(exponent) > MAX_DECIMAL_EXPONENT:
        raise ValueError(f"{text!r} is too far out of range: explain takes decimal exponents "
                         f"from -{MAX_DECIMAL_EXPONENT} to {MAX_DECIMAL_EXPONENT} (every format "
                         "overflows above 3.5e38 and rounds to zero below 1.5e-45)")
    try:
        return Fraction(text)  # exact, beyond float64's range too: 1e400 is 10**400
    except ZeroDivisionError:
        raise ValueError(f"{text!r} divides by zero; give a number ({accepted})") from None
    except ValueError:
        pass
    try:
        f = float(text)  # "inf", "-infinity", "nan"
    except ValueError:
        raise ValueError(f"{text!r} is not a number; explain takes {accepted}") from None
    return f if not math.isfinite(f) else Fraction(f)


def _exact(value: Any) -> Fraction | float:
    """The exact value of a scalar input: a Fraction, or nan/±inf as a float."""
    if isinstance(value, str):
        return _exact_text(value)
    if isinstance(value, (bool, np.bool_)):
        return Fraction(int(value))
    if isinstance(value, (Fraction, numbers.Integral, np.integer)):
        return Fraction(int(value)) if not isinstance(value, Fraction) else value
    if isinstance(value, Decimal):
        return Fraction(value) if value.is_finite() else float(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)  # float16/32/64 and ml_dtypes floats are exact in float64
        return Fraction(f) if math.isfinite(f) and f != 0 else f  # ±0.0 keep their sign
    raise TypeError(
        f"explain takes one real number (float, int, str, Fraction or Decimal), got "
        f"{type(value).__name__}"
    )


def _round_exact(x: Fraction, fmt: FloatFormat, mode: int, saturate: bool,
                 word: int) -> tuple[int, int]:
    """Code and flags of the exact non-zero rational ``x``, by the engine's round_pack
    (its numpy transcription ``_kernels.vec``, held bit-equal to it: nothing to compile).

    ``|x| = sig * 2**lsb (+ sticky)`` with a 62-bit ``sig``: far more bits than
    any format keeps, and the sticky bit records any remainder, so the
    rounding is exact.
    """
    p, q = abs(x.numerator), x.denominator
    lsb = _floor_log2(abs(x)) - 61  # 2**61 <= |x| / 2**lsb < 2**62
    if lsb <= 0:
        sig, rem = divmod(p << -lsb, q)
    else:
        sig, rem = divmod(p, q << lsb)
    code, flags, status = (int(v[0]) for v in vec.round_pack(
        params.format_params(fmt), np.array([x < 0]), np.array([sig], np.int64),
        np.array([lsb], np.int64), mode, saturate, False, np.array([word], np.uint64),
        np.array([rem != 0], np.int64)))
    if status:
        raise ValueError(f"{float(x)!r} is negative, but {fmt.name} is unsigned and has no NaN")
    return int(code), int(flags)


def _neighbour(fmt: FloatFormat, code: int, up: bool) -> float | None:
    """The format's next value above (``up``) or below the value of ``code``.

    Finite magnitudes grow with the code magnitude, so this is a step of one
    code magnitude, away from or toward zero depending on the sign.
    """
    value = float(decode(code, fmt))
    if math.isnan(value):
        return None
    if math.isinf(value):
        return None if (value > 0) == up else math.copysign(fmt.max, value)
    if value == 0:
        if not up and not fmt.signed:
            return None
        return fmt.smallest_subnormal if up else -fmt.smallest_subnormal
    negative = value < 0
    mag = code & ((1 << (fmt.width - int(fmt.signed))) - 1)
    if up != negative:  # away from zero
        if mag == fmt.max_code_magnitude:
            return math.copysign(math.inf, value) if fmt.has_inf else None
        mag += 1
    else:
        if mag == 0:  # the smallest value of a format without zero (e8m0)
            return None
        mag -= 1
        if mag == 0 and fmt.has_zero:
            return 0.0
    return float(decode(mag | (fmt.sign_mask if negative else 0), fmt))


def explain(
    value: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    rng: Any = None,
) -> Explanation:
    """Explain how ``value`` rounds to ``fmt`` under ``mode``.

    ``value`` is one real number: a float (taken exactly), an int, or a
    ``str``/``Fraction``/``Decimal`` (taken exactly, e.g. ``"0.1"`` = 1/10).
    ``rng`` (stochastic mode only) is a seed or Generator; the word used is
    the one :func:`lowprec.round_to` would give a one-element array.

    >>> e = explain(0.1, "bf16")
    >>> e.code_bits, e.result, e.kind
    ('0|01111011|1001101', 0.10009765625, 'normal')
    """
    fmt = get_format(fmt)
    mode = check_mode(mode)
    if mode != "stochastic" and rng is not None:
        raise ValueError(f"rng is only used by mode='stochastic', not mode={mode!r}")
    x = _exact(value)
    word = 0
    if mode == "stochastic":
        seed = _get_rng(rng).bit_generator.random_raw(1)[0]
        word = int(vec.sr_words(np.array([seed], np.uint64), 0, 1)[0])
    if isinstance(x, float) or x == 0:  # nan, ±inf, ±0: the float path of encode
        c, f = encode(np.float64(x), fmt, mode, saturate=saturate, flags=True,
                      rng=rng if mode == "stochastic" else None)
        code, flags = int(c), int(f)
    else:
        code, flags = _round_exact(x, fmt, params.MODE_INT[mode], saturate, word)
    result = float(decode(code, fmt))

    m = fmt.mantissa_bits
    sign = (code >> (fmt.width - 1)) & 1 if fmt.signed else 0
    mag = code & ((1 << (fmt.width - int(fmt.signed))) - 1)
    e_field, m_field = mag >> m, mag & ((1 << m) - 1)
    if math.isnan(result):
        kind, exponent = "nan", None
    elif math.isinf(result):
        kind, exponent = "inf", None
    elif result == 0:
        kind, exponent = "zero", None
    elif fmt.has_subnormals and e_field == 0:
        kind, exponent = "subnormal", fmt.emin
    else:
        kind, exponent = "normal", e_field - fmt.bias

    abs_err = rel_err = ulp = ulp_err = None
    if (isinstance(x, Fraction) or math.isfinite(x)) and math.isfinite(result):
        x = Fraction(x)
        abs_err = Fraction(result) - x
        rel_err = abs_err / x if x != 0 else None
        if x != 0:
            e_x = _floor_log2(abs(x))
            if fmt.has_subnormals:
                e_x = max(e_x, fmt.emin)
            ulp = Fraction(2) ** (e_x - m)
        else:
            ulp = Fraction(fmt.smallest_subnormal)
        ulp_err = abs_err / ulp
    return Explanation(
        input=x, format=fmt, mode=mode, result=result, code=code, sign=sign,
        exponent_field=e_field, mantissa_field=m_field, exponent=exponent, kind=kind,
        next_down=_neighbour(fmt, code, up=False), next_up=_neighbour(fmt, code, up=True),
        abs_error=abs_err, rel_error=rel_err, ulp=ulp, ulp_error=ulp_err,
        flags=tuple(name for bit, name, _ in params.FLAG_TABLE if flags & bit),
    )


def _floor_log2(x: Fraction) -> int:
    """e with 2**e <= x < 2**(e+1), for x > 0."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if x >= Fraction(2) ** e else e - 1


# ------------------------------------------------------------- range_stats
_OUTCOMES = (
    ("exact", "exact (no rounding error)"),
    ("inexact", "inexact (rounded)"),
    ("subnormal", "result subnormal (non-zero)"),
    ("underflow_to_zero", "non-zero input became zero"),
    ("overflow", "overflowed (inf, NaN or saturated)"),
    ("nan_in", "NaN in"),
    ("inf_in", "infinity in"),
)


@dataclass(frozen=True)
class RangeStats:
    """Counts of what rounding an array to a format did. ``print()`` it for a table.

    Every count is over all elements: ``exact + inexact + nan_in + inf_in ==
    total``; ``subnormal``, ``underflow_to_zero`` and ``overflow`` are
    subsets of the finite inputs (exact or inexact).
    """

    format: FloatFormat
    mode: str
    saturate: bool
    total: int
    exact: int
    inexact: int
    subnormal: int
    underflow_to_zero: int
    overflow: int
    nan_in: int
    inf_in: int

    def fraction(self, name: str) -> float:
        """``count / total`` for one outcome (0.0 for an empty input)."""
        if name not in dict(_OUTCOMES):
            raise ValueError(f"unknown outcome {name!r}; valid: {', '.join(dict(_OUTCOMES))}")
        return getattr(self, name) / self.total if self.total else 0.0

    @property
    def fractions(self) -> dict[str, float]:
        return {name: self.fraction(name) for name, _ in _OUTCOMES}

    def __str__(self) -> str:
        head = (f"{self.total:,} values -> {self.format.name} ({self.mode}"
                + (", saturate" if self.saturate else "") + ")")
        rows = [(text, f"{getattr(self, name):,}", f"{100 * self.fraction(name):.4g}%")
                for name, text in _OUTCOMES]
        w = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join([head] + [f"  {a.ljust(w[0])}  {b.rjust(w[1])}  {c.rjust(w[2])}"
                                   for a, b, c in rows])


def range_stats(
    x: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    rng: Any = None,
) -> RangeStats:
    """Round ``x`` to ``fmt`` and count what happened (see :class:`RangeStats`).

    Uses the exception flags of :func:`lowprec.encode` (the same rounding as
    :func:`lowprec.round_to`), a chunk at a time, so memory stays small.
    NaN into a format without NaN (fp4, fp6) is counted, not an error.

    >>> import numpy as np
    >>> s = range_stats(np.array([1.0, 0.1, 1e-9, 1e9, np.nan]), "fp16")
    >>> s.exact, s.inexact, s.underflow_to_zero, s.overflow, s.nan_in
    (1, 3, 1, 1, 1)
    """
    fmt = get_format(fmt)
    mode = check_mode(mode)
    gen = _get_rng(rng) if mode == "stochastic" else None
    if gen is None and rng is not None:
        raise ValueError(f"rng is only used by mode='stochastic', not mode={mode!r}")
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        # Let encode produce the usual TypeError for complex, object, strings.
        encode(arr.reshape(-1)[:0], fmt)
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    flat = arr.reshape(-1)
    m = fmt.mantissa_bits
    mag_mask = (1 << (fmt.width - int(fmt.signed))) - 1
    counts = dict.fromkeys(dict(_OUTCOMES), 0)
    chunk = 1 << 20
    for start in range(0, flat.shape[0], chunk):
        part = flat[start:start + chunk]
        nan = np.isnan(part)
        inf = np.isinf(part)
        n_nan = int(np.count_nonzero(nan))
        if n_nan and not fmt.has_nan:
            part = np.where(nan, 0, part)  # encode refuses NaN here; counted above
        codes, flags = encode(part, fmt, mode, saturate=saturate, flags=True, rng=gen)
        finite = ~(nan | inf)
        inexact = finite & ((flags & params.FLAG_INEXACT) != 0)
        mag = codes & codes.dtype.type(mag_mask)
        counts["nan_in"] += n_nan
        counts["inf_in"] += int(np.count_nonzero(inf))
        counts["inexact"] += int(np.count_nonzero(inexact))
        counts["exact"] += int(np.count_nonzero(finite)) - int(np.count_nonzero(inexact))
        counts["overflow"] += int(np.count_nonzero(
            finite & ((flags & params.FLAG_OVERFLOW) != 0)))
        if fmt.has_zero:
            zero = mag == 0
            if fmt.nan == "negzero":
                zero &= codes == 0  # the code of -0 is the NaN
            counts["underflow_to_zero"] += int(np.count_nonzero(zero & finite & (part != 0)))
            counts["subnormal"] += int(np.count_nonzero(
                finite & (mag != 0) & ((mag >> codes.dtype.type(m)) == 0)))
    return RangeStats(format=fmt, mode=mode, saturate=saturate, total=int(flat.shape[0]),
                      **counts)
