"""Checking functions for the tutorials' exercises, with specific feedback.

Each ``check_*`` function takes the student's answer, prints a line starting
with ``Correct:`` when it is right, and otherwise raises :class:`ExerciseError`
(an ``AssertionError``) whose message says what the answer is, what the right
answer is, and *why* -- naming the usual mistake when the answer matches one::

    >>> check_fp16_max(65504)  # doctest: +ELLIPSIS
    Correct: the largest finite fp16 is 65504, because the all-ones exponent field (31) ...
    >>> check_fp16_max(65535)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lowprec.exercises.ExerciseError: your fp16 max is 65535, but the largest finite fp16 is 65504 ...

Expected values are computed by lowprec itself (formats, ``round_to``,
``decode``), never typed in, so a check is exactly as right as the emulator
that the tests hold bit for bit against numpy, ml_dtypes and Fraction
arithmetic.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from .formats import FloatFormat, get_format
from .rounding import MODES, check_mode, decode, encode, round_to

__all__ = [
    "ExerciseError",
    "check_accumulator_spacing",
    "check_bits_per_value",
    "check_bytes_per_param",
    "check_current_scale",
    "check_decode",
    "check_delayed_scale",
    "check_device_mode",
    "check_double_rounding",
    "check_fp16_max",
    "check_grad_scaler_scale",
    "check_largest_flushed",
    "check_largest_lost_increment",
    "check_max",
    "check_mx_scale",
    "check_num_finite",
    "check_rounding",
    "check_sequential_sum",
    "check_smallest_loss_scale",
    "check_smallest_normal",
    "check_smallest_subnormal",
    "check_spacing",
    "check_steps_until_visible",
    "check_stochastic_probability",
    "check_ulp_distance",
    "check_underflow_fraction",
    "check_unit_roundoff",
]


class ExerciseError(AssertionError):
    """A wrong answer to an exercise; the message says what is wrong and why."""


# ------------------------------------------------------------------ helpers
def _ok(message: str) -> None:
    print(f"Correct: {message}")


def _wrong(message: str) -> NoReturn:
    raise ExerciseError(message)


def _number(answer: Any, what: str) -> float:
    """The answer as a float, or an ExerciseError saying why it is not a number."""
    if answer is Ellipsis or answer is None:
        _wrong(f"{what}: no answer yet (got {answer!r}); replace it with a number")
    if isinstance(answer, (bool, np.bool_)):
        _wrong(f"{what}: got the boolean {answer!r}; give a number")
    if isinstance(answer, Fraction):
        return float(answer)
    if isinstance(answer, np.ndarray) and answer.ndim == 0:
        answer = answer[()]
    if isinstance(answer, (numbers.Real, np.floating, np.integer)):
        return float(answer)
    _wrong(f"{what}: expected a single number, got {type(answer).__name__} {answer!r}")


def _pow2(v: float) -> str:
    """``v`` written for a reader: powers of two as 2^k, others as short decimals."""
    if v == 0 or not math.isfinite(v):
        return repr(v)
    m, e = math.frexp(abs(v))
    sign = "-" if v < 0 else ""
    if m == 0.5 and abs(e - 1) >= 8:
        return f"{sign}2^{e - 1} (= {v:.6g})"
    if v == int(v) and abs(v) < 2**53:
        return f"{int(v)}"
    return f"{v!r}"


def _bits(code: int, fmt: FloatFormat) -> str:
    """``0b0_1010_101``: the code with sign, exponent and mantissa fields separated."""
    s = format(code, f"0{fmt.width}b")
    parts = []
    k = 0
    if fmt.signed:
        parts.append(s[0])
        k = 1
    parts.append(s[k:k + fmt.exponent_bits])
    if fmt.mantissa_bits:
        parts.append(s[k + fmt.exponent_bits:])
    return "0b" + "_".join(parts)


def _same(a: float, b: float) -> bool:
    """Equal as numbers, NaN equal to NaN, and -0.0 distinct from +0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _why_max(f: FloatFormat) -> str:
    m = f.mantissa_bits
    ones = "1" * m
    e_top = f.exponent_field_max
    if f.nan == "ieee":
        return (
            f"the all-ones exponent field ({e_top}) is reserved for inf/NaN, so the top finite "
            f"binade has exponent field {e_top - 1}, i.e. 2^({e_top - 1}-{f.bias}) = 2^{f.emax}, "
            f"and the largest mantissa there is 1.{ones}b: (2 - 2^-{m}) * 2^{f.emax} = "
            f"{_pow2(f.max)}"
        )
    if f.nan == "max":
        if not f.signed or m == 0:
            return f"only the all-ones code is NaN, so the largest value is 2^{f.emax}"
        return (
            f"only the all-ones code S.{'1' * f.exponent_bits}.{ones} is NaN (OCP 'fn': no "
            f"infinities), so the all-ones exponent field {e_top} is an ordinary binade "
            f"2^({e_top}-{f.bias}) = 2^{f.emax}, whose largest number has mantissa "
            f"1.{ones[:-1]}0b: {_pow2(f.max)}"
        )
    if f.nan == "negzero":
        return (
            f"its only NaN is the code that would be -0, so every other code is a number and "
            f"the largest is exponent field {e_top} (2^({e_top}-{f.bias}) = 2^{f.emax}) with "
            f"mantissa 1.{ones}b: {_pow2(f.max)}"
        )
    return (
        f"it has no inf and no NaN, so the all-ones code is a number: exponent field {e_top} "
        f"(2^({e_top}-{f.bias}) = 2^{f.emax}) and mantissa 1.{ones}b: {_pow2(f.max)}"
    )


# ---------------------------------------------------------- tutorial 01
def check_max(fmt: FloatFormat | str, answer: Any) -> None:
    """The largest finite value of ``fmt``."""
    f = get_format(fmt)
    x = _number(answer, f"largest finite {f.name}")
    expected = f.max
    if x == expected:
        _ok(f"the largest finite {f.name} is {_pow2(expected)}, because {_why_max(f)}.")
        return
    hint = ""
    m = f.mantissa_bits
    if x == 2**f.width - 1:
        hint = (
            f" {_pow2(x)} is the largest {f.width}-bit *unsigned integer*: a float's bits are "
            "not read as one integer but as sign, exponent and mantissa fields."
        )
    elif math.isinf(x):
        hint = " Infinity is not finite: the question asks for the largest finite number."
    elif x == (2 - 2.0**-m) * 2.0 ** (f.emax + 1):
        hint = (
            f" You used exponent {f.emax + 1}: one binade too high, because "
            "the all-ones exponent field is not an ordinary binade here."
        )
    elif x == 2.0 ** (f.emax + 1):
        hint = f" 2^{f.emax + 1} is the first power of two beyond the format's range."
    elif x == 2.0**f.emax:
        hint = (
            f" 2^{f.emax} is the *smallest* number of the top binade; the mantissa can be "
            "non-zero."
        )
    elif f.nan == "max" and x == (2 - 2.0**-m) * 2.0**f.emax:
        hint = f" That would be the all-ones code, which is {f.name}'s NaN."
    elif x == f.max + 2.0 ** (f.emax - m - 1):
        hint = (
            " That is the midpoint between the max and the next power-of-two step: values from "
            "there on round to overflow, but it is not itself representable."
        )
    _wrong(
        f"your {f.name} max is {_pow2(x)}, but the largest finite {f.name} is "
        f"{_pow2(expected)} because {_why_max(f)}.{hint}"
    )


def check_fp16_max(answer: Any) -> None:
    """The largest finite fp16 (65504), with the usual wrong answers explained."""
    check_max("fp16", answer)


def check_smallest_normal(fmt: FloatFormat | str, answer: Any) -> None:
    """The smallest positive normal number of ``fmt``."""
    f = get_format(fmt)
    x = _number(answer, f"smallest normal {f.name}")
    expected = f.smallest_normal
    why = (
        f"the smallest normal exponent field is 1 (0 is kept for zero and subnormals), so "
        f"emin = 1 - bias = 1 - {f.bias} = {f.emin} and the value is 1.0b * 2^{f.emin}"
        if f.has_subnormals
        else f"{f.name} has no subnormals, so exponent field 0 is 2^(0-{f.bias})"
    )
    if x == expected:
        _ok(f"the smallest normal {f.name} is {_pow2(expected)}: {why}.")
        return
    hint = ""
    if x == f.smallest_subnormal:
        hint = " That is the smallest *subnormal*; normal numbers start higher."
    elif x == 2.0**-f.bias:
        hint = " You used exponent field 0, but that field holds zero and the subnormals."
    _wrong(
        f"your smallest normal {f.name} is {_pow2(x)}, but it is {_pow2(expected)}: {why}.{hint}"
    )


def check_smallest_subnormal(fmt: FloatFormat | str, answer: Any) -> None:
    """The smallest positive value of ``fmt`` (the smallest subnormal)."""
    f = get_format(fmt)
    x = _number(answer, f"smallest positive {f.name}")
    expected = f.smallest_subnormal
    why = (
        f"subnormals have exponent field 0, value 0.mantissa * 2^emin with emin = {f.emin}; "
        f"the smallest non-zero mantissa is 0.{'0' * (f.mantissa_bits - 1)}1b = "
        f"2^-{f.mantissa_bits}, so the value is 2^({f.emin}-{f.mantissa_bits}) = "
        f"2^{f.smallest_subnormal_exponent}"
        if f.has_subnormals and f.mantissa_bits
        else f"{f.name} has no subnormals; its smallest value is 2^{f.emin}"
    )
    if x == expected:
        _ok(f"the smallest positive {f.name} is {_pow2(expected)}: {why}.")
        return
    hint = ""
    if x == f.smallest_normal:
        hint = " That is the smallest *normal* number; subnormals reach further down."
    elif x == 2.0 ** (f.emin - f.mantissa_bits - 1) or x == 2.0 ** (-f.bias - f.mantissa_bits):
        hint = (
            " You are one binade too low: subnormals share the exponent of the smallest normal "
            f"binade (2^{f.emin}), not 2^(0 - bias)."
        )
    elif 0 < x < expected:
        hint = f" Anything below {_pow2(expected)} rounds to zero or to it."
    _wrong(f"your smallest positive {f.name} is {_pow2(x)}, but it is {_pow2(expected)}: {why}."
           f"{hint}")


def _fields(code: int, f: FloatFormat) -> tuple[int, int, int]:
    sign = (code >> (f.width - 1)) & 1 if f.signed else 0
    e = (code >> f.mantissa_bits) & f.exponent_field_max
    m = code & ((1 << f.mantissa_bits) - 1)
    return sign, e, m


def _decode_story(code: int, f: FloatFormat) -> str:
    sign, e, m = _fields(code, f)
    value = float(decode(np.uint32(code), f))
    head = (
        f"{_bits(code, f)} has sign {sign}, exponent field {e} and mantissa field {m} "
        f"(of 2^{f.mantissa_bits} = {1 << f.mantissa_bits})"
    )
    if math.isnan(value) or math.isinf(value):
        return f"{head}: that code is {f.name}'s {value!r}"
    s = "-" if sign else "+"
    if e == 0 and f.has_subnormals:
        return (f"{head}: exponent field 0 is subnormal, no implicit 1: "
                f"{s}({m}/{1 << f.mantissa_bits}) * 2^{f.emin} = {value!r}")
    return (f"{head}: normal, so {s}(1 + {m}/{1 << f.mantissa_bits}) * 2^({e}-{f.bias}) = "
            f"{value!r}")


def check_decode(code: int, fmt: FloatFormat | str, answer: Any) -> None:
    """The value of one code (bit pattern) of ``fmt``, decoded by hand."""
    f = get_format(fmt)
    code = int(code)
    if not 0 <= code < 1 << f.width:
        raise ValueError(f"code {code} is not a {f.width}-bit {f.name} code")
    expected = float(decode(np.uint32(code), f))
    x = _number(answer, f"value of {_bits(code, f)}")
    story = _decode_story(code, f)
    if _same(x, expected):
        _ok(story + ".")
        return
    sign, e, m = _fields(code, f)
    s = -1.0 if sign else 1.0
    frac = m / 2**f.mantissa_bits
    subnormal = e == 0 and f.has_subnormals
    candidates = [
        (-expected, "The sign is wrong: the first bit is the sign, 1 means negative."),
        (s * frac * 2.0 ** (e - f.bias),
         "You left out the implicit leading 1: a normal number's significand is 1.mantissa."),
        (s * (1 + frac) * 2.0**e, "You forgot to subtract the bias from the exponent field."),
        (s * (1 + frac) * 2.0 ** (e - f.bias + 1), "The bias is off by one."),
        (s * (1 + frac) * 2.0 ** (e - f.bias - 1), "The bias is off by one."),
        (float(code), "That is the code read as an integer, not as a float's fields."),
    ]
    if subnormal:
        candidates = [
            (s * (1 + frac) * 2.0**f.emin,
             "Exponent field 0 means subnormal: there is no implicit leading 1."),
            (s * frac * 2.0**-f.bias,
             f"Subnormals use exponent emin = 1 - bias = {f.emin}, not 0 - bias."),
        ] + candidates[:1] + candidates[5:]
    hint = next((" " + h for v, h in candidates if not math.isnan(x) and v == x), "")
    _wrong(f"you decoded {_bits(code, f)} as {x!r}, but {story}.{hint}")


def check_num_finite(fmt: FloatFormat | str, answer: Any) -> None:
    """How many distinct finite values ``fmt`` has (+0 and -0 counted once)."""
    f = get_format(fmt)
    x = _number(answer, f"number of finite {f.name} values")
    expected = f.num_finite
    codes = 1 << f.width
    special = codes - (f.max_code_magnitude + 1) * (2 if f.signed else 1)
    why = (
        f"{f.name} has 2^{f.width} = {codes} codes; {special} of them are inf/NaN, "
        + ("and +0 and -0 are the same number, so " if f.has_negative_zero else "so ")
        + f"{expected} distinct finite values remain"
    )
    if x == expected:
        _ok(why + ".")
        return
    hint = ""
    if x == codes:
        hint = " You counted every code, but inf and NaN codes are not finite numbers."
    elif f.has_negative_zero and x == expected + 1:
        hint = " You counted +0 and -0 as two values; they are the same number (0.0 == -0.0)."
    _wrong(f"you counted {_pow2(x)} finite {f.name} values, but {why}.{hint}")


def check_spacing(fmt: FloatFormat | str, x: float, answer: Any) -> None:
    """The gap between ``x`` (a positive finite value of ``fmt``) and the next larger value."""
    f = get_format(fmt)
    xv = float(x)
    if not (xv > 0 and math.isfinite(xv)) or float(round_to(xv, f)) != xv or xv >= f.max:
        raise ValueError(f"x={x!r} must be a positive {f.name} value below its max")
    code = int(encode(xv, f))
    expected = float(decode(np.uint32(code + 1), f)) - xv
    a = _number(answer, f"{f.name} spacing at {xv!r}")
    exp = math.frexp(xv)[1] - 1
    why = (
        f"{xv!r} lies in the binade [2^{exp}, 2^{exp + 1}), where {f.name}'s "
        f"{f.mantissa_bits} mantissa bits split each binade into 2^{f.mantissa_bits} steps of "
        f"2^{exp} * 2^-{f.mantissa_bits} = {_pow2(expected)}"
    )
    if exp < f.emin:
        why = (f"{xv!r} is subnormal: all subnormals are spaced by the smallest subnormal "
               f"{_pow2(expected)}")
    if a == expected:
        _ok(f"the next {f.name} above {xv!r} is {xv + expected!r}; {why}.")
        return
    hint = ""
    if a == f.eps and expected != f.eps:
        hint = " That is eps, the spacing at 1.0; spacing grows with the binade."
    elif a == expected / 2:
        hint = " That is half the spacing (the largest rounding error), not the spacing."
    elif a == expected * 2 or a == expected / 4:
        hint = " Off by a factor of two: check which binade x is in."
    _wrong(f"you said the {f.name} spacing at {xv!r} is {_pow2(a)}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 02
def _neighbours(x: float, f: FloatFormat) -> tuple[float, float]:
    lo = float(round_to(x, f, "rdown", saturate=True))
    hi = float(round_to(x, f, "rup", saturate=True))
    return lo, hi


def check_rounding(x: float, fmt: FloatFormat | str, mode: str, answer: Any) -> None:
    """``x`` rounded to ``fmt`` in ``mode`` (a deterministic mode), worked out by hand."""
    f = get_format(fmt)
    mode = check_mode(mode)
    if mode == "stochastic":
        raise ValueError("check_rounding takes a deterministic mode; for stochastic rounding "
                         "use check_stochastic_probability")
    xv = float(x)
    expected = float(round_to(xv, f, mode))
    a = _number(answer, f"{xv!r} rounded to {f.name} ({mode})")
    lo, hi = _neighbours(xv, f)
    if lo == hi:
        story = f"{xv!r} is a {f.name} value, so every mode returns it unchanged"
    else:
        mid = (lo + hi) / 2
        where = ("exactly halfway (a tie)" if xv == mid
                 else "nearer the lower" if xv < mid else "nearer the upper")
        story = (f"{xv!r} lies between the {f.name} neighbours {lo!r} and {hi!r}, {where}; "
                 f"{mode} ({MODES[mode].split(' (')[0]}) gives {expected!r}")
        if xv == mid and mode in ("rne", "rna"):
            even = lo if int(encode(lo, f)) % 2 == 0 else hi
            story += (f" (ties: rne picks the neighbour whose last mantissa bit is 0, {even!r};"
                      f" rna picks the one farther from zero)")
    if _same(a, expected):
        _ok(story + ".")
        return
    others = [m for m in MODES if m not in ("stochastic", mode)
              and _same(float(round_to(xv, f, m)), a)]
    hint = ""
    if others:
        names = [repr(m) for m in others]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        hint = f" Your answer is what {listed} give{'s' if len(names) == 1 else ''}."
    elif not math.isnan(a) and (not lo <= a <= hi or float(round_to(a, f, "rne")) != a):
        hint = f" A rounded result is always one of the two neighbours {lo!r} and {hi!r}."
    _wrong(f"you rounded {xv!r} to {a!r}, but {story}.{hint}")


def check_stochastic_probability(x: float, fmt: FloatFormat | str, answer: Any) -> None:
    """The probability that stochastic rounding sends ``x`` *up* to its upper ``fmt`` neighbour."""
    f = get_format(fmt)
    xv = float(x)
    lo, hi = _neighbours(xv, f)
    if lo == hi:
        raise ValueError(f"{xv!r} is a {f.name} value; stochastic rounding leaves it unchanged")
    expected = (xv - lo) / (hi - lo)
    p = _number(answer, "probability of rounding up")
    why = (f"{xv!r} lies between {lo!r} and {hi!r}; it rounds up with probability "
           f"(x - lower) / (upper - lower) = {expected:.6g}, which makes the expected result "
           f"exactly x (no bias)")
    if abs(p - expected) <= 1e-9:
        _ok(why + ".")
        return
    hint = ""
    if abs(p - (1 - expected)) <= 1e-9:
        hint = " That is the probability of rounding *down*."
    elif not 0 <= p <= 1:
        hint = " A probability lies between 0 and 1."
    _wrong(f"you said x rounds up with probability {p:.6g}, but {why}.{hint}")


def check_double_rounding(x: Any, fmt: FloatFormat | str = "bf16",
                          via: FloatFormat | str = "fp32") -> None:
    """``x`` (a float64) must round differently through ``via`` than directly to ``fmt``."""
    f, v = get_format(fmt), get_format(via)
    xv = _number(x, "your double-rounding example")
    if not math.isfinite(xv):
        _wrong(f"{xv!r} is not finite; choose a finite float64")
    direct = float(round_to(np.float64(xv), f))
    mid_value = float(round_to(np.float64(xv), v))
    twice = float(round_to(mid_value, f))
    if direct != twice:
        _ok(f"{xv!r} rounds directly to {f.name} as {direct!r}, but through {v.name} it first "
            f"becomes {mid_value!r} and then {twice!r}: the first rounding moved it onto a "
            f"{f.name} midpoint (or across one), and the second rounding broke the tie.")
        return
    lo, hi = _neighbours(xv, f)
    if lo == hi:
        hint = f"{xv!r} is a {f.name} value; no rounding happens at all."
    elif mid_value == xv:
        hint = (f"{xv!r} is already a {v.name} value, so rounding to {v.name} changes nothing. "
                f"Add a tiny amount that {v.name} cannot hold, e.g. 2^-40 relative.")
    else:
        hint = (f"Its {f.name} neighbours are {lo!r} and {hi!r} (midpoint {(lo + hi) / 2!r}); "
                f"choose x just beside that midpoint, closer to it than half a {v.name} ulp, "
                f"so that rounding to {v.name} lands exactly on the midpoint.")
    _wrong(f"{xv!r} gives {direct!r} both directly and through {v.name}. {hint}")


def check_largest_lost_increment(start: float, fmt: FloatFormat | str, answer: Any, *,
                                 direction: str = "up") -> None:
    """The largest d > 0 such that ``round_to(start ± d, fmt)`` (rne) is still ``start``.

    ``direction`` is ``"up"`` (start + d) or ``"down"`` (start - d). ``start`` must be
    a positive value of ``fmt`` with an even last mantissa bit (then the tie at half the
    spacing rounds back to ``start``, so a largest lost increment exists).
    """
    f = get_format(fmt)
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
    s = float(start)
    if not (s > 0 and float(round_to(s, f)) == s) or s >= f.max:
        raise ValueError(f"start={start!r} must be a positive {f.name} value below its max")
    code = int(encode(s, f))
    if code % 2:
        raise ValueError(f"start={start!r} has an odd last mantissa bit; ties would round away "
                         "from it and no largest lost increment exists; pick an even one")
    up = direction == "up"
    other = float(decode(np.uint32(code + (1 if up else -1)), f))
    gap = abs(other - s)
    expected = gap / 2
    d = abs(_number(answer, f"largest change lost at {s!r}"))
    sign, word = ("+", "above") if up else ("-", "below")
    why = (f"the next {f.name} {word} {s!r} is {other!r}, so {s!r} {sign} d rounds back to "
           f"{s!r} while d is below half that gap, {_pow2(expected)}; at exactly "
           f"{_pow2(expected)} it is a tie, and rne picks {s!r} because its last mantissa bit "
           f"is 0 (even)")
    if not up:
        above = float(decode(np.uint32(code + 1), f)) - s
        if above != gap:
            why += (f". Note the gap below a power of two is half the gap above it "
                    f"({_pow2(gap)} against {_pow2(above)})")
    if d == expected:
        _ok(why + ".")
        return
    hint = ""
    if d == gap:
        hint = (f" {s!r} {sign} {_pow2(d)} = {other!r} is itself representable, so that "
                "update survives.")
    elif not up and d == float(decode(np.uint32(code + 1), f)) - s or (
            not up and d == (float(decode(np.uint32(code + 1), f)) - s) / 2):
        hint = (f" You used the gap *above* {s!r}; going down from a power of two you enter "
                "the binade below, where the gap is half as large.")
    elif 0 < d < expected:
        hint = " Larger changes are lost too."
    elif expected < d < gap:
        hint = f" {s!r} {sign} {d!r} is nearer {other!r} than {s!r}, so it rounds to {other!r}."
    _wrong(f"you said {_pow2(d)}, but {why}.{hint}")


def check_steps_until_visible(weight: float, update: float, fmt: FloatFormat | str,
                              answer: Any, *, master: FloatFormat | str = "fp32") -> None:
    """After how many steps ``master += update`` does the ``fmt`` copy first leave ``weight``?

    The master copy (format ``master``, rne) starts at ``weight`` and accumulates
    ``update`` once per step; the low-precision copy is the master rounded to ``fmt``.
    """
    f, mf = get_format(fmt), get_format(master)
    w0 = float(weight)
    if float(round_to(w0, f)) != w0:
        raise ValueError(f"weight={weight!r} must be a {f.name} value")
    u = float(round_to(update, mf))
    if u == 0:
        raise ValueError("update must be non-zero in the master format")
    m = w0
    expected = None
    for k in range(1, 1_000_001):
        m = float(round_to(m + u, mf))
        if float(round_to(m, f)) != w0:
            expected, seen, master_value = k, float(round_to(m, f)), m
            break
    if expected is None:
        raise ValueError("the low-precision copy does not change within 10^6 steps")
    a = _number(answer, "number of steps")
    code = int(encode(w0, f))
    nb = float(decode(np.uint32(code + (1 if u > 0 else -1)), f))
    half = abs(nb - w0) / 2
    why = (f"the {f.name} neighbour of {w0!r} in that direction is {nb!r}, so the {f.name} copy "
           f"changes once the {mf.name} master has moved more than half the gap ({_pow2(half)}; "
           f"exactly half is a tie that goes back to the even {w0!r}); after {expected} steps "
           f"of {u!r} the master is {master_value!r} and the {f.name} copy becomes {seen!r}")
    if a == expected:
        _ok(why + ".")
        return
    hint = ""
    if a == expected - 1:
        hint = " One step early: at that point the master is still within half a gap."
    elif abs(a - 2 * half / abs(u)) < 1.5 or abs(a - math.ceil(2 * half / abs(u))) < 1:
        hint = " You waited for a whole gap; half a gap is enough to round to the neighbour."
    _wrong(f"you said {a:g} steps, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 03
def check_largest_flushed(fmt: FloatFormat | str, answer: Any) -> None:
    """The largest positive number that rounds to zero in ``fmt`` (round to nearest even)."""
    f = get_format(fmt)
    if not f.has_zero:
        raise ValueError(f"{f.name} has no zero")
    x = _number(answer, f"largest number that {f.name} rounds to zero")
    tiny = f.smallest_subnormal
    expected = tiny / 2
    why = (f"the smallest positive {f.name} is {_pow2(tiny)}; numbers below half of it, "
           f"{_pow2(expected)}, are nearer to 0, and {_pow2(expected)} itself is a tie between 0 "
           f"(even) and {_pow2(tiny)} (odd last bit), which round-to-nearest-even sends to 0")
    if x == expected:
        _ok(why + ".")
        return
    hint = ""
    if x == tiny:
        hint = f" {_pow2(tiny)} is itself representable; it does not round to zero."
    elif x == f.smallest_normal:
        hint = " That is the smallest normal number; subnormals fill the range below it."
    elif x == f.smallest_normal / 2 or x == f.smallest_normal / 4:
        hint = " Subnormals continue down to the smallest subnormal, not just one binade."
    elif expected < x < tiny:
        hint = f" {x!r} is nearer {_pow2(tiny)} than 0, so it rounds up to the smallest subnormal."
    elif 0 < x < expected:
        hint = " Larger numbers round to zero too."
    _wrong(f"you said {_pow2(x)}, but {why}.{hint}")


def check_underflow_fraction(x: Any, fmt: FloatFormat | str, answer: Any, *,
                             loss_scale: float = 1.0) -> None:
    """The fraction of the non-zero values of ``x * loss_scale`` that round to zero in ``fmt``."""
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64)).ravel() * float(loss_scale)
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        raise ValueError("x has no non-zero finite values")
    with np.errstate(over="ignore"):
        expected = float(np.mean(round_to(a, f) == 0))
    p = _number(answer, "underflow fraction")
    scaled = f" after multiplying by the loss scale {loss_scale:g}" if loss_scale != 1 else ""
    why = (f"{np.count_nonzero(round_to(a, f) == 0)} of the {a.size} non-zero values{scaled} "
           f"round to zero in {f.name} (they are at most {_pow2(f.smallest_subnormal / 2)}), a "
           f"fraction of {expected:.6g}")
    if abs(p - expected) <= 1e-9:
        _ok(why + ".")
        return
    below_sub = float(np.mean(a < f.smallest_subnormal))
    below_normal = float(np.mean(a < f.smallest_normal))
    hint = ""
    if abs(p - 100 * expected) <= 1e-7 and expected > 0:
        hint = " Give a fraction between 0 and 1, not a percentage."
    elif abs(p - below_sub) <= 1e-9 and below_sub != expected:
        hint = (f" You counted the values below the smallest subnormal {_pow2(f.smallest_subnormal)}"
                f"; those between {_pow2(f.smallest_subnormal / 2)} and it round *up* to it.")
    elif abs(p - below_normal) <= 1e-9 and below_normal != expected:
        hint = (" You counted the values below the smallest normal number; subnormals are "
                "small but not zero.")
    elif abs(p - float(np.mean(np.asarray(x).ravel() == 0))) <= 1e-9:
        hint = " Count the values that *become* zero, among those that were not zero before."
    _wrong(f"you said {p:.6g}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 04
def check_smallest_loss_scale(x: Any, fmt: FloatFormat | str, answer: Any, *,
                              max_underflow: float = 0.01) -> None:
    """The smallest power-of-two loss scale S with at most ``max_underflow`` of ``x * S``
    rounding to zero in ``fmt`` and nothing overflowing."""
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        raise ValueError("x has no non-zero finite values")

    def shares(scale: float) -> tuple[float, float]:
        with np.errstate(over="ignore"):
            r = round_to(a * scale, f)
        return float(np.mean(r == 0)), float(np.mean(~np.isfinite(r)))

    expected = None
    for k in range(-64, 200):
        under, over = shares(2.0**k)
        if under <= max_underflow and over == 0:
            expected = 2.0**k
            break
    if expected is None:
        raise ValueError(f"no power-of-two scale brings the underflow of x in {f.name} to "
                         f"{max_underflow:.2%} without overflow")
    s = _number(answer, "loss scale")
    e = int(math.log2(expected))
    u_exp, _ = shares(expected)
    u_half, _ = shares(expected / 2)
    why = (f"with S = 2^{e} {u_exp:.2%} of the values of x * S round to zero in {f.name} and "
           f"none overflow, while with 2^{e - 1} {u_half:.2%} still do")
    if s == expected:
        _ok(why + ".")
        return
    if not (s > 0 and math.isfinite(s)):
        _wrong(f"a loss scale must be a positive finite number, got {s!r}")
    under, over = shares(s)
    if over > 0:
        detail = (f"with S = {s:g}, {over:.2%} of the values overflow to inf/NaN (the step would "
                  "be skipped)")
    elif under > max_underflow:
        detail = f"with S = {s:g}, {under:.2%} of the values still round to zero"
    else:
        detail = (f"S = {s:g} works ({under:.2%} underflow), but it is not the smallest "
                  "power of two that does")
    hint = "" if math.log2(s) == round(math.log2(s)) else " (Loss scales are powers of two.)"
    _wrong(f"{detail}; {why}.{hint}")


def check_grad_scaler_scale(found_inf: list[bool], answer: Any, *,
                            init_scale: float = 2.0**16, growth_interval: int = 2000) -> None:
    """The scale of a PyTorch-style ``GradScaler`` after steps whose gradients had inf/NaN
    (True) or not (False), with growth factor 2 and backoff 0.5 (lowprec.train.GradScaler)."""
    from .train import GradScaler  # the trainer's scaler is the reference

    events = [bool(e) for e in found_inf]
    scaler = GradScaler(init_scale=init_scale, growth_interval=growth_interval)
    trace = [scaler.get_scale()]
    for bad in events:
        param = _Param(np.array([np.inf if bad else 1.0], dtype=np.float32))
        with np.errstate(invalid="ignore", over="ignore"):
            scaler.step(_NoOptimizer([param]))
        scaler.update()
        trace.append(scaler.get_scale())
    expected = trace[-1]
    s = _number(answer, "final loss scale")
    steps = " -> ".join(f"2^{int(math.log2(t))}" for t in trace)
    why = (f"the scale halves after every step with inf/NaN (and that step is skipped) and "
           f"doubles after every {growth_interval} consecutive good steps; here it goes {steps}")
    if s == expected:
        _ok(why + ".")
        return
    hint = ""
    if s == init_scale * 2.0 ** (len(events) // growth_interval) or s == init_scale:
        hint = " Check each overflow: it halves the scale *and* restarts the count of good steps."
    _wrong(f"you said {s:g}, but {why}.{hint}")


class _Param:
    """The one attribute of a parameter that GradScaler reads and writes."""

    def __init__(self, grad: np.ndarray) -> None:
        self.grad = grad


class _NoOptimizer:
    def __init__(self, params: list[_Param]) -> None:
        self.params = params

    def step(self) -> None:
        return None


# ---------------------------------------------------------- tutorial 06
def check_unit_roundoff(fmt: FloatFormat | str, answer: Any) -> None:
    """The largest relative error of round-to-nearest in ``fmt``'s normal range, eps / 2."""
    f = get_format(fmt)
    u = _number(answer, f"unit roundoff of {f.name}")
    expected = f.unit_roundoff
    why = (f"{f.name} keeps {f.mantissa_bits} mantissa bits, so the gap between 1 and the next "
           f"value is eps = 2^-{f.mantissa_bits}; rounding to nearest errs by at most half a gap, "
           f"and relative to the value that is at most eps / 2 = 2^-{f.mantissa_bits + 1} = "
           f"{expected:g}")
    if u == expected:
        _ok(why + ".")
        return
    hint = ""
    if u == f.eps:
        hint = " That is eps itself, the gap; round to nearest never errs by more than half of it."
    elif u == 2.0 ** -(f.mantissa_bits + 2):
        hint = (" Too small by half: the implicit leading bit is not stored, so eps is "
                "2^-(mantissa bits), not 2^-(mantissa bits + 1).")
    _wrong(f"you said {u:g}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 07
def check_current_scale(amax: float, fmt: FloatFormat | str, answer: Any, *,
                        margin: int = 0, power_of_two: bool = False) -> None:
    """The per-tensor scale for a tensor with largest magnitude ``amax`` (Transformer
    Engine's convention: ``codes = round(x * scale)``, ``scale = max / amax / 2**margin``)."""
    from .scaling import current_scale

    f = get_format(fmt)
    expected = current_scale(amax, f, margin=margin, power_of_two=power_of_two)
    s = _number(answer, "scale")
    how = f"{f.name}'s max {f.max:g} / amax {float(amax):g}" + (
        f" / 2^{margin}" if margin else "")
    why = (f"the scale maps the tensor's largest magnitude onto the format's largest value: "
           f"scale = {how} = "
           + (f"{f.max / float(amax) / 2.0**margin:g}, rounded down to a power of two: "
              if power_of_two else "")
           + f"{expected:g} (computed in float32)")
    if s == expected or (not power_of_two and abs(s - expected) <= 1e-6 * expected):
        _ok(why + ".")
        return
    hint = ""
    if expected and abs(s * expected - 1) < 1e-6:
        hint = (" That is scale_inv = 1 / scale, the factor that dequantization multiplies by; "
                "the scale multiplies on the way in.")
    else:
        for other in ("fp8_e4m3", "fp8_e5m2", "fp16"):
            g = get_format(other)
            if g != f and abs(s - g.max / float(amax) / 2.0**margin) <= 1e-6 * s:
                hint = f" You used {g.name}'s max ({g.max:g}) instead of {f.name}'s."
        if power_of_two and abs(s - f.max / float(amax) / 2.0**margin) <= 1e-6 * s:
            hint = " Round it down to a power of two."
    _wrong(f"you said {s:g}, but {why}.{hint}")


def check_delayed_scale(amaxes: list[float], fmt: FloatFormat | str, answer: Any, *,
                        history_len: int = 1024, amax_compute: str = "max",
                        margin: int = 0) -> None:
    """The scale delayed scaling uses at the step *after* the steps whose amaxes are
    ``amaxes`` (lowprec.scaling.DelayedScaling, Transformer Engine's recipe)."""
    from .scaling import DelayedScaling

    ds = DelayedScaling(fmt, margin=margin, history_len=history_len, amax_compute=amax_compute)
    for a in amaxes:
        ds.quantize(np.array([float(a)], dtype=np.float32))
        ds.update()
    expected = ds.scale
    f = get_format(fmt)
    s = _number(answer, "delayed scale")
    window = [float(a) for a in amaxes][-history_len:]
    used = max(window) if amax_compute == "max" else window[-1]
    why = (f"delayed scaling takes the amax from the history of the last {history_len} step(s) "
           f"({'their maximum' if amax_compute == 'max' else 'the most recent'}: {used:g}), "
           f"not from the tensor it is about to quantize, so the next scale is "
           f"{f.max:g} / {used:g}" + (f" / 2^{margin}" if margin else "") + f" = {expected:g}")
    if abs(s - expected) <= 1e-6 * abs(expected):
        _ok(why + ".")
        return
    hint = ""
    if amaxes and abs(s - f.max / float(amaxes[-1])) <= 1e-6 * s and used != amaxes[-1]:
        hint = " You used only the most recent amax; the recipe takes the maximum over the window."
    elif abs(s - f.max / max(float(a) for a in amaxes)) <= 1e-6 * s and used != max(amaxes):
        hint = f" The window holds only the last {history_len} step(s); older amaxes have left it."
    _wrong(f"you said {s:g}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 08
def check_mx_scale(block: Any, fmt: str, answer: Any, *, scale_rule: str = "floor") -> None:
    """The shared power-of-two scale of one MX block (``lowprec.mx.quantize``)."""
    from . import mx

    values = np.asarray(block, dtype=np.float64).ravel()
    t = mx.quantize(values, fmt, block_size=values.size, scale_rule=scale_rule)
    expected = float(t.scales.ravel()[0])
    mxf = mx.get_mx_format(fmt)
    s = _number(answer, "block scale")
    amax = float(np.max(np.abs(values)))
    emax = mxf.emax_elem
    deq = t.dequantize().ravel()
    clipped = [(float(v), float(d)) for v, d in zip(values, deq)
               if abs(v) > mxf.element_max * expected]
    why = (f"the block's amax is {amax:g}; {fmt}'s elements reach {mxf.element_max:g} "
           f"(largest binade 2^{emax}); the {scale_rule!r} rule gives scale 2^"
           f"{int(math.log2(expected))} = {expected:g}")
    if scale_rule == "floor":
        why += f" (2^(floor(log2 {amax:g}) - {emax}))"
    if clipped:
        why += ", so " + ", ".join(f"{v:g} clips to {d:g}" for v, d in clipped)
    if s == expected:
        _ok(why + ".")
        return
    hint = ""
    for rule in ("floor", "ceil", "rceil", "even"):
        if rule != scale_rule:
            other = float(mx.quantize(values, fmt, block_size=values.size,
                                      scale_rule=rule).scales.ravel()[0])
            if s == other:
                hint = f" That is the {rule!r} rule's scale."
                break
    if not hint and s == amax / mxf.element_max:
        hint = " MX scales are powers of two (E8M0 stores only an exponent)."
    elif not hint and s > 0 and s == 2.0 ** (math.floor(math.log2(amax))):
        hint = f" Subtract the element format's largest exponent ({emax})."
    _wrong(f"you said {s:g}, but {why}.{hint}")


def check_bits_per_value(fmt: str, answer: Any, *, block_size: int = 32) -> None:
    """Storage bits per value of an MX format (elements plus the shared E8M0 scale)."""
    from . import mx

    mxf = mx.get_mx_format(fmt)
    t = mx.quantize(np.zeros(block_size * 4), fmt, block_size=block_size)
    expected = float(t.bits_per_value)
    b = _number(answer, "bits per value")
    why = (f"each value stores a {mxf.element_bits}-bit element and shares one 8-bit E8M0 scale "
           f"with the {block_size - 1} others of its block: {mxf.element_bits} + 8/{block_size} "
           f"= {expected:g} bits")
    if abs(b - expected) <= 1e-12:
        _ok(why + ".")
        return
    hint = ""
    if b == mxf.element_bits:
        hint = " Do not forget the scale's share."
    elif b == mxf.element_bits + 32 / block_size:
        hint = " MX scales are 8-bit E8M0, not fp32."
    _wrong(f"you said {b:g}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 09
def check_sequential_sum(value: float, count: int, fmt: FloatFormat | str, answer: Any) -> None:
    """The result of adding ``value`` ``count`` times into a ``fmt`` accumulator that
    rounds (rne) after every addition, starting from 0 (``lowprec.matmul``, sequential)."""
    from .matmul import matmul

    f = get_format(fmt)
    v = float(value)
    if float(round_to(v, f)) != v or v <= 0:
        raise ValueError(f"value must be a positive {f.name} number, got {value!r}")
    expected = float(matmul(np.full((1, int(count)), v), np.ones((int(count), 1)), inputs=f,
                            accumulate=f, model="sequential")[0, 0])
    s = _number(answer, "sequential sum")
    exact = v * int(count)
    why = (f"the exact sum is {exact:g}, but the {f.name} accumulator stops growing once the gap "
           f"between its value and the next {f.name} reaches 2 × {v:g} = {2 * v:g}: then "
           f"sum + {v:g} is at best a tie, which round-to-nearest-even sends back to the even sum")
    if expected == exact:
        why = (f"every partial sum up to {exact:g} is a {f.name} number here, so nothing is lost "
               f"and the result is exact")
    else:
        why += f"; the sum sticks at {expected:g}"
    if s == expected:
        _ok(why + ".")
        return
    hint = ""
    if s == exact and expected != exact:
        hint = " That is the exact sum; the accumulator rounds after every addition."
    elif s == 2 * expected:
        hint = " One binade too far: at that point the spacing is 2 × value and ties go to even."
    _wrong(f"you said {s:g}, but {why}.{hint}")


def check_accumulator_spacing(value: float, fraction_bits: int, answer: Any) -> None:
    """The spacing (ulp) of an accumulator with ``fraction_bits`` fraction bits when it
    holds ``value``: products below it are truncated away entirely."""
    x = abs(float(value))
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"value must be a non-zero finite number, got {value!r}")
    e = math.frexp(x)[1] - 1
    expected = 2.0 ** (e - int(fraction_bits))
    s = _number(answer, "accumulator spacing")
    why = (f"{x:g} lies in [2^{e}, 2^{e + 1}), and with {fraction_bits} fraction bits the "
           f"spacing there is 2^({e} - {fraction_bits}) = 2^{e - int(fraction_bits)} = "
           f"{expected:g}; a truncating accumulator drops any addend (or part of one) below it")
    if s == expected:
        _ok(why + ".")
        return
    hint = ""
    if s == expected * 2 or s == expected / 2:
        hint = " Off by a factor of two: check the binade of the value."
    elif s == 2.0 ** -int(fraction_bits):
        hint = " That is the spacing at 1; the spacing scales with the value's binade."
    _wrong(f"you said {s:g}, but {why}.{hint}")


# ---------------------------------------------------------- tutorial 10
def _ordinal_code(code: int, f: FloatFormat) -> int:
    """An integer that orders codes like their values (neighbours differ by 1)."""
    if not f.signed:
        return code
    mag = code & (f.sign_mask - 1)
    return -mag if code & f.sign_mask else mag


def check_ulp_distance(code_a: int, code_b: int, fmt: FloatFormat | str, answer: Any) -> None:
    """How many representable steps (ulps) lie between two codes of ``fmt`` (as a
    validation report counts a mismatch: from ``code_b`` to ``code_a``, signed)."""
    f = get_format(fmt)
    a, b = int(code_a), int(code_b)
    for c in (a, b):
        if not 0 <= c < 1 << f.width:
            raise ValueError(f"code {c} is not a {f.width}-bit {f.name} code")
    expected = _ordinal_code(a, f) - _ordinal_code(b, f)
    d = _number(answer, "ulp distance")
    va = float(decode(np.uint32(a), f))
    vb = float(decode(np.uint32(b), f))
    why = (f"{_bits(a, f)} is {va!r} and {_bits(b, f)} is {vb!r}; counting representable "
           f"values from the second to the first gives {expected:+d} step(s)")
    if (a & f.sign_mask) != (b & f.sign_mask):
        why += " (across zero: +0 and -0 are the same point, so the count passes zero once)"
    if d == expected:
        _ok(why + ".")
        return
    hint = ""
    if d == -expected:
        hint = " The sign is the other way round: the distance goes from the second code to the first."
    elif d == a - b and a - b != expected:
        hint = (" Subtracting the codes as integers only works when both have the same sign: "
                "the sign bit is not part of the magnitude's order.")
    _wrong(f"you said {d:g}, but {why}.{hint}")


def check_device_mode(x: float, fmt: FloatFormat | str, device_code: int, answer: Any) -> None:
    """Which rounding mode explains the code a device returned for ``x``?"""
    f = get_format(fmt)
    xv = float(x)
    code = int(device_code)
    fits = [m for m in MODES if m != "stochastic" and int(encode(xv, f, m)) == code]
    if not fits:
        raise ValueError(f"no deterministic mode rounds {xv!r} to code {code:#x} in {f.name}")
    if not isinstance(answer, str):
        _wrong(f"give the mode's name as a string, one of {', '.join(repr(m) for m in MODES)}")
    try:
        mode = check_mode(answer)
    except ValueError as exc:
        raise ExerciseError(str(exc)) from None
    table = ", ".join(f"{m} -> {_bits(int(encode(xv, f, m)), f)}" for m in MODES
                      if m != "stochastic")
    why = (f"{xv!r} rounds in {f.name} as: {table}; the device's {_bits(code, f)} matches "
           f"{' and '.join(repr(m) for m in fits)}")
    if mode in fits:
        _ok(why + ".")
        return
    _wrong(f"{mode!r} gives {_bits(int(encode(xv, f, mode)), f)}, not the device's code: {why}.")


def check_bytes_per_param(model: Any, policy: Any, optimizer: str, answer: Any) -> None:
    """Weight-side bytes per parameter (master + weights + gradients + optimizer state)
    of ``model`` (MLP widths or a :class:`lowprec.train.memory.ModelShape`) under
    ``policy`` with ``optimizer``, exactly as :func:`lowprec.train.memory` counts them."""
    from .train.memory import WEIGHT_SIDE, memory

    t = memory(model, policy, optimizer=optimizer)
    expected = float(t.weight_side_per_param())
    a = _number(answer, "bytes per parameter")
    parts = ", ".join(f"{role} {t.bytes_of(role) / t.n_params:.6g}" for role in WEIGHT_SIDE)
    why = (f"per parameter, {t.policy} with {optimizer} stores: {parts}; together "
           f"{expected:.6g} bytes")
    if abs(a - expected) <= 1e-9 * max(1.0, expected):
        _ok(why + ".")
        return
    hint = ""
    without_master = expected - t.bytes_of("master") / t.n_params
    if t.bytes_of("master") and abs(a - without_master) <= 1e-9 * max(1.0, expected):
        hint = " You left out the FP32 master copy the optimizer updates."
    elif abs(a - (expected - t.bytes_of("optimizer_state") / t.n_params)) <= 1e-9 * expected:
        hint = " You left out the optimizer state (Adam keeps two values per parameter)."
    _wrong(f"you said {a:g}, but {why}.{hint}")
