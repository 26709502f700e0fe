"""Tutorial 09, accumulation: stagnating sums and accumulator spacing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import round_to
from ._common import _number
from ._verdict import Mistake, verdict

__all__ = [
    "check_accumulator_spacing",
    "check_sequential_sum",
]


def check_sequential_sum(value: float, count: int, fmt: FloatFormat | str, answer: Any) -> None:
    """The result of adding ``value`` ``count`` times into a ``fmt`` accumulator that
    rounds (rne) after every addition, starting from 0 (``lowprec.matmul``, sequential)."""
    from ..matmul import matmul

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
    verdict(
        s == expected,
        said=f"you said {s:g}",
        solution=why,
        mistakes=[
            Mistake(s == exact and expected != exact,
                    "That is the exact sum; the accumulator rounds after every addition."),
            Mistake(s == 2 * expected,
                    "One binade too far: at that point the spacing is 2 × value and ties go to "
                    "even."),
        ],
    )


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
    verdict(
        s == expected,
        said=f"you said {s:g}",
        solution=why,
        mistakes=[
            Mistake(s == expected * 2 or s == expected / 2,
                    "Off by a factor of two: check the binade of the value."),
            Mistake(s == 2.0 ** -int(fraction_bits),
                    "That is the spacing at 1; the spacing scales with the value's binade."),
        ],
    )
