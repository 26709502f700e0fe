"""Tutorial 01, anatomy of a format: largest, smallest, decoding, counting, spacing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import decode, encode, round_to
from ._common import _bits, _number, _pow2, _same
from ._verdict import Mistake, verdict

__all__ = [
    "check_decode",
    "check_fp16_max",
    "check_max",
    "check_num_finite",
    "check_smallest_normal",
    "check_smallest_subnormal",
    "check_spacing",
]


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


_KNOWN = ("fp16", "bf16", "fp32", "fp8_e4m3", "fp8_e5m2")  # formats students mix up


def describe(f: FloatFormat) -> str:
    """Which format ``f`` is, in words (for feedback that names the format)."""
    kind = {"ieee": "IEEE-style: the all-ones exponent is inf/NaN",
            "max": "'fn': no infinities, only the all-ones code is NaN",
            "negzero": "'fnuz': the -0 code is its NaN"}.get(f.nan, "no inf or NaN")
    return (f"{f.width} bits: {f.exponent_bits} exponent, {f.mantissa_bits} mantissa, bias "
            f"{f.bias}; {kind}")


def _other_formats_max(f: FloatFormat, x: float) -> list[Mistake]:
    """The max of a format the student may have meant instead of ``f``."""
    e, m = f.exponent_bits, f.mantissa_bits
    ieee = (2 - 2.0**-m) * 2.0 ** (2**e - 2 - f.bias)  # same fields, inf/NaN reserved
    fn = (2 - 2.0 ** (1 - m)) * 2.0 ** (2**e - 1 - f.bias)  # same fields, 'fn'
    found = [Mistake(f.nan == "max" and x == ieee,
                     f"{_pow2(x)} is the max of an IEEE-style E{e}M{m}, whose all-ones exponent "
                     f"is inf/NaN; {f.name} here is the 'fn' variant ({describe(f)}), so its "
                     "all-ones exponent is an ordinary binade."),
             Mistake(f.nan == "ieee" and x == fn,
                     f"{_pow2(x)} is the max of the 'fn' variant E{e}M{m} (no infinities); "
                     f"{f.name} here is IEEE-style ({describe(f)}).")]
    for name in _KNOWN:
        g = get_format(name)
        if g.name != f.name and g.max != f.max:
            found.append(Mistake(x == g.max, f"{_pow2(x)} is the largest finite {g.name}, a "
                                             f"different format: this one is {f.name} "
                                             f"({describe(f)})."))
    return found


def check_max(fmt: FloatFormat | str, answer: Any) -> None:
    """The largest finite value of ``fmt``."""
    f = get_format(fmt)
    x = _number(answer, f"largest finite {f.name}")
    expected, why, m = f.max, _why_max(f), f.mantissa_bits
    verdict(
        x == expected,
        right=f"the largest finite {f.name} is {_pow2(expected)}, because {why}.",
        said=f"your {f.name} max is {_pow2(x)}",
        solution=f"the largest finite {f.name} is {_pow2(expected)} because {why}",
        mistakes=[
            Mistake(x == 2**f.width - 1,
                    f"{_pow2(x)} is the largest {f.width}-bit *unsigned integer*: a float's bits "
                    "are not read as one integer but as sign, exponent and mantissa fields."),
            Mistake(math.isinf(x),
                    "Infinity is not finite: the question asks for the largest finite number."),
            Mistake(x == (2 - 2.0**-m) * 2.0 ** (f.emax + 1),
                    f"You used exponent {f.emax + 1}: one binade too high, because the all-ones "
                    "exponent field is not an ordinary binade here."),
            Mistake(x == 2.0 ** (f.emax + 1),
                    f"2^{f.emax + 1} is the first power of two beyond the format's range."),
            Mistake(x == 2.0**f.emax,
                    f"2^{f.emax} is the *smallest* number of the top binade; the mantissa can be "
                    "non-zero."),
            Mistake(f.nan == "max" and x == (2 - 2.0**-m) * 2.0**f.emax,
                    f"That would be the all-ones code, which is {f.name}'s NaN."),
            Mistake(x == f.max + 2.0 ** (f.emax - m - 1),
                    "That is the midpoint between the max and the next power-of-two step: values "
                    "from there on round to overflow, but it is not itself representable."),
            *_other_formats_max(f, x),
        ],
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
    verdict(
        x == expected,
        right=f"the smallest normal {f.name} is {_pow2(expected)}: {why}.",
        said=f"your smallest normal {f.name} is {_pow2(x)}",
        solution=f"it is {_pow2(expected)}: {why}",
        mistakes=[
            Mistake(x == f.smallest_subnormal,
                    "That is the smallest *subnormal*; normal numbers start higher."),
            Mistake(x == 2.0**-f.bias,
                    "You used exponent field 0, but that field holds zero and the subnormals."),
        ],
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
    verdict(
        x == expected,
        right=f"the smallest positive {f.name} is {_pow2(expected)}: {why}.",
        said=f"your smallest positive {f.name} is {_pow2(x)}",
        solution=f"it is {_pow2(expected)}: {why}",
        mistakes=[
            Mistake(x == f.smallest_normal,
                    "That is the smallest *normal* number; subnormals reach further down."),
            Mistake(x == 2.0 ** (f.emin - f.mantissa_bits - 1)
                    or x == 2.0 ** (-f.bias - f.mantissa_bits),
                    "You are one binade too low: subnormals share the exponent of the smallest "
                    f"normal binade (2^{f.emin}), not 2^(0 - bias)."),
            Mistake(0 < x < expected,
                    "That value is too small: the format rounds it to zero or up to its "
                    "smallest value."),
        ],
    )


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
    sign, e, m = _fields(code, f)
    s = -1.0 if sign else 1.0
    frac = m / 2**f.mantissa_bits

    def gives(value: float, diagnosis: str) -> Mistake:  # the answer that mistake produces
        return Mistake(not math.isnan(x) and value == x, diagnosis)

    flipped_sign = gives(-expected, "The sign is wrong: the first bit is the sign, 1 means "
                                    "negative.")
    as_integer = gives(float(code), "That is the code read as an integer, not as a float's "
                                    "fields.")
    if e == 0 and f.has_subnormals:
        mistakes = [
            gives(s * (1 + frac) * 2.0**f.emin,
                  "Exponent field 0 means subnormal: there is no implicit leading 1."),
            gives(s * frac * 2.0**-f.bias,
                  f"Subnormals use exponent emin = 1 - bias = {f.emin}, not 0 - bias."),
            gives(s * (1 + frac) * 2.0**-f.bias,
                  "Exponent field 0 means subnormal: there is no implicit leading 1, and the "
                  f"exponent is emin = 1 - bias = {f.emin}."),
            flipped_sign,
            as_integer,
        ]
    else:
        mistakes = [
            flipped_sign,
            gives(s * frac * 2.0 ** (e - f.bias),
                  "You left out the implicit leading 1: a normal number's significand is "
                  "1.mantissa."),
            gives(s * (1 + frac) * 2.0**e, "You forgot to subtract the bias from the exponent "
                                           "field."),
            gives(s * (1 + frac) * 2.0 ** (e - f.bias + 1), "The bias is off by one."),
            gives(s * (1 + frac) * 2.0 ** (e - f.bias - 1), "The bias is off by one."),
            as_integer,
        ]
    verdict(_same(x, expected), said=f"you decoded {_bits(code, f)} as {x!r}", solution=story,
            mistakes=mistakes)


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
    verdict(
        x == expected,
        said=f"you counted {_pow2(x)} finite {f.name} values",
        solution=why,
        mistakes=[
            Mistake(x == codes,
                    "You counted every code, but inf and NaN codes are not finite numbers."),
            Mistake(f.has_negative_zero and x == expected + 1,
                    "You counted +0 and -0 as two values; they are the same number "
                    "(0.0 == -0.0)."),
            *(Mistake(x in (2**b, 2**b - special - int(f.has_negative_zero)),
                      f"You counted {b}-bit codes, but {f.name} has 1 + {f.exponent_bits} + "
                      f"{f.mantissa_bits} = {f.width} bits ({describe(f)}), so 2^{f.width} "
                      "codes.")
              for b in (8, 16, 32) if b != f.width and f.signed),
        ],
    )


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
    verdict(
        a == expected,
        right=f"the next {f.name} above {xv!r} is {xv + expected!r}; {why}.",
        said=f"you said the {f.name} spacing at {xv!r} is {_pow2(a)}",
        solution=why,
        mistakes=[
            Mistake(a == f.eps and expected != f.eps,
                    "That is eps, the spacing at 1.0; spacing grows with the binade."),
            Mistake(a == expected / 2,
                    "That is half the spacing (the largest rounding error), not the spacing."),
            Mistake(a == expected * 2 or a == expected / 4,
                    "Off by a factor of two: check which binade x is in."),
            *(Mistake(a == 2.0 ** (exp - g.mantissa_bits) and exp >= g.emin,
                      f"That is the spacing of {g.name} at {xv!r} ({g.mantissa_bits} mantissa "
                      f"bits); {f.name} has {f.mantissa_bits}.")
              for g in map(get_format, _KNOWN) if g.mantissa_bits != f.mantissa_bits),
        ],
    )
