"""Tutorial 06, bf16 against fp16: the unit roundoff."""

from __future__ import annotations

from typing import Any

from ..formats import FloatFormat, get_format
from ._common import _number
from ._verdict import Mistake, verdict

__all__ = [
    "check_unit_roundoff",
]


def check_unit_roundoff(fmt: FloatFormat | str, answer: Any) -> None:
    """The largest relative error of round-to-nearest in ``fmt``'s normal range, eps / 2."""
    f = get_format(fmt)
    u = _number(answer, f"unit roundoff of {f.name}")
    expected = f.unit_roundoff
    why = (f"{f.name} keeps {f.mantissa_bits} mantissa bits, so the gap between 1 and the next "
           f"value is eps = 2^-{f.mantissa_bits}; rounding to nearest errs by at most half a gap, "
           f"and relative to the value that is at most eps / 2 = 2^-{f.mantissa_bits + 1} = "
           f"{expected:g}")
    verdict(
        u == expected,
        said=f"you said {u:g}",
        solution=why,
        mistakes=[
            Mistake(u == f.eps, "That is eps itself, the gap; round to nearest never errs by more "
                                "than half of it."),
            Mistake(u == 2.0 ** -(f.mantissa_bits + 2),
                    "Too small by half: the implicit leading bit is not stored, so eps is "
                    "2^-(mantissa bits), not 2^-(mantissa bits + 1)."),
        ],
    )
