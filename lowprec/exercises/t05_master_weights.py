"""Tutorial 05, master weights: updates lost to rounding (also used in tutorial 02)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import decode, encode, round_to
from ._common import _number, _pow2
from ._verdict import Mistake, verdict

__all__ = [
    "check_largest_lost_increment",
    "check_steps_until_visible",
]


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
    gap_above = float(decode(np.uint32(code + 1), f)) - s
    verdict(
        d == expected,
        said=f"you said {_pow2(d)}",
        solution=why,
        mistakes=[
            Mistake(d == gap, f"{s!r} {sign} {_pow2(d)} = {other!r} is itself representable, "
                              "so that update survives."),
            Mistake(not up and (d == gap_above or d == gap_above / 2),
                    f"You used the gap *above* {s!r}; going down from a power of two you enter "
                    "the binade below, where the gap is half as large."),
            Mistake(0 < d < expected, "Larger changes are lost too."),
            Mistake(expected < d < gap,
                    f"{s!r} {sign} {d!r} is nearer {other!r} than {s!r}, so it rounds to "
                    f"{other!r}."),
        ],
    )


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
    verdict(
        a == expected,
        said=f"you said {a:g} steps",
        solution=why,
        mistakes=[
            Mistake(a == expected - 1,
                    "One step early: at that point the master is still within half a gap."),
            Mistake(abs(a - 2 * half / abs(u)) < 1.5 or abs(a - math.ceil(2 * half / abs(u))) < 1,
                    "You waited for a whole gap; half a gap is enough to round to the neighbour."),
        ],
    )
