"""Tutorial 02, rounding: modes, stochastic rounding, double rounding."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import MODES, check_mode, encode, round_to
from ._common import _number, _same, _wrong
from ._verdict import Mistake, verdict

__all__ = [
    "check_double_rounding",
    "check_rounding",
    "check_stochastic_probability",
]


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
    others = [repr(m) for m in MODES if m not in ("stochastic", mode)
              and _same(float(round_to(xv, f, m)), a)]
    listed = ", ".join(others[:-1]) + " and " + others[-1] if len(others) > 1 else "".join(others)
    verdict(
        _same(a, expected),
        said=f"you rounded {xv!r} to {a!r}",
        solution=story,
        mistakes=[
            Mistake(bool(others),
                    f"Your answer is what {listed} give{'s' if len(others) == 1 else ''}."),
            Mistake(not math.isnan(a) and (not lo <= a <= hi
                                           or float(round_to(a, f, "rne")) != a),
                    f"A rounded result is always one of the two neighbours {lo!r} and {hi!r}."),
        ],
    )


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
    verdict(
        abs(p - expected) <= 1e-9,
        said=f"you said x rounds up with probability {p:.6g}",
        solution=why,
        mistakes=[
            Mistake(abs(p - (1 - expected)) <= 1e-9, "That is the probability of rounding *down*."),
            Mistake(not 0 <= p <= 1, "A probability lies between 0 and 1."),
        ],
    )


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
    lo, hi = _neighbours(xv, f)
    verdict(
        direct != twice,
        right=f"{xv!r} rounds directly to {f.name} as {direct!r}, but through {v.name} it first "
              f"becomes {mid_value!r} and then {twice!r}: the first rounding moved it onto a "
              f"{f.name} midpoint (or across one), and the second rounding broke the tie.",
        said=f"{xv!r} gives {direct!r} both directly and through {v.name}",
        mistakes=[
            Mistake(lo == hi, f"{xv!r} is a {f.name} value; no rounding happens at all."),
            Mistake(mid_value == xv,
                    f"{xv!r} is already a {v.name} value, so rounding to {v.name} changes nothing.",
                    f"Add a tiny amount that {v.name} cannot hold, e.g. 2^-40 relative."),
            Mistake(True,
                    f"Its {f.name} neighbours are {lo!r} and {hi!r} (midpoint {(lo + hi) / 2!r}); "
                    f"choose x just beside that midpoint, closer to it than half a {v.name} ulp, "
                    f"so that rounding to {v.name} lands exactly on the midpoint."),
        ],
    )
