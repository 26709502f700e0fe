"""Tutorial 08, MX and NVFP4: shared block scales and bits per value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import _number
from ._verdict import Mistake, verdict

__all__ = [
    "check_bits_per_value",
    "check_mx_scale",
]


def check_mx_scale(block: Any, fmt: str, answer: Any, *, scale_rule: str = "floor") -> None:
    """The shared power-of-two scale of one MX block (``lowprec.mx.quantize``)."""
    from .. import mx

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
    def rule_scale(rule: str) -> float:
        return float(mx.quantize(values, fmt, block_size=values.size,
                                 scale_rule=rule).scales.ravel()[0])

    verdict(
        s == expected,
        said=f"you said {s:g}",
        solution=why,
        mistakes=[Mistake(s == rule_scale(rule), f"That is the {rule!r} rule's scale.")
                  for rule in ("floor", "ceil", "rceil", "even") if rule != scale_rule] + [
            Mistake(s == amax / mxf.element_max,
                    "MX scales are powers of two (E8M0 stores only an exponent)."),
            Mistake(s > 0 and amax > 0 and s == 2.0 ** (math.floor(math.log2(amax))),
                    f"Subtract the element format's largest exponent ({emax})."),
        ],
    )


def check_bits_per_value(fmt: str, answer: Any, *, block_size: int = 32) -> None:
    """Storage bits per value of an MX format (elements plus the shared E8M0 scale)."""
    from .. import mx

    mxf = mx.get_mx_format(fmt)
    t = mx.quantize(np.zeros(block_size * 4), fmt, block_size=block_size)
    expected = float(t.bits_per_value)
    b = _number(answer, "bits per value")
    why = (f"each value stores a {mxf.element_bits}-bit element and shares one 8-bit E8M0 scale "
           f"with the {block_size - 1} others of its block: {mxf.element_bits} + 8/{block_size} "
           f"= {expected:g} bits")
    verdict(
        abs(b - expected) <= 1e-12,
        said=f"you said {b:g}",
        solution=why,
        mistakes=[
            Mistake(b == mxf.element_bits, "Do not forget the scale's share."),
            Mistake(b == mxf.element_bits + 32 / block_size, "MX scales are 8-bit E8M0, not fp32."),
        ],
    )
