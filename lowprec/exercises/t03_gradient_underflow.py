"""Tutorial 03, gradient underflow: what is flushed to zero, and how much."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import round_to
from ._common import _number, _pow2
from ._verdict import Mistake, verdict

__all__ = [
    "check_largest_flushed",
    "check_underflow_fraction",
]


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
    verdict(
        x == expected,
        said=f"you said {_pow2(x)}",
        solution=why,
        mistakes=[
            Mistake(x == tiny, f"{_pow2(tiny)} is itself representable; it does not round to zero."),
            Mistake(x == f.smallest_normal,
                    "That is the smallest normal number; subnormals fill the range below it."),
            Mistake(x == f.smallest_normal / 2 or x == f.smallest_normal / 4,
                    "Subnormals continue down to the smallest subnormal, not just one binade."),
            Mistake(expected < x < tiny,
                    f"{x!r} is nearer {_pow2(tiny)} than 0, so it rounds up to the smallest "
                    "subnormal."),
            Mistake(0 < x < expected, "Larger numbers round to zero too."),
        ],
    )


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
    below_sub = float(np.mean(a < f.smallest_subnormal))
    below_normal = float(np.mean(a < f.smallest_normal))
    was_zero = float(np.mean(np.asarray(x).ravel() == 0))
    verdict(
        abs(p - expected) <= 1e-9,
        said=f"you said {p:.6g}",
        solution=why,
        mistakes=[
            Mistake(abs(p - 100 * expected) <= 1e-7 and expected > 0,
                    "Give a fraction between 0 and 1, not a percentage."),
            Mistake(abs(p - below_sub) <= 1e-9 and below_sub != expected,
                    "You counted the values below the smallest subnormal "
                    f"{_pow2(f.smallest_subnormal)}; those between "
                    f"{_pow2(f.smallest_subnormal / 2)} and it round *up* to it."),
            Mistake(abs(p - below_normal) <= 1e-9 and below_normal != expected,
                    "You counted the values below the smallest normal number; subnormals are "
                    "small but not zero."),
            Mistake(abs(p - was_zero) <= 1e-9,
                    "Count the values that *become* zero, among those that were not zero before."),
        ],
    )
