"""Tutorial 13, the NVFP4 training recipe: its stochastic rounding and its Hadamard transform."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import _number
from ._verdict import Mistake, verdict

__all__ = ["check_rht_amax", "check_sr8_probability"]


def check_sr8_probability(v: float, answer: Any) -> None:
    """The probability that the recipe's 8-bit stochastic rounding sends the magnitude of
    the E2M1-domain value ``v`` (0 < |v| < 6, not an E2M1 value) up, found by running
    :func:`lowprec.recipes.nvfp4.quantize` over all 256 random bytes."""
    from ..recipes import nvfp4 as recipe

    v = float(v)
    # A block holding v and 6, quantized with a tensor amax of 6 * 448: every scale is 1,
    # so the element v is rounded as it is, once per random byte.
    block = np.zeros((256, 16), np.float32)
    block[:, 0], block[:, 1] = v, 6.0
    if not 0 < abs(v) < 6 or float(np.float32(v)) != v:
        raise ValueError(f"v must be a float32 value with 0 < |v| < 6, got {v!r}")
    rbits = np.zeros((256, 16), np.uint8)
    rbits[:, 0] = np.arange(256)
    out = recipe.quantize(block, rounding="stochastic", rbits=rbits, global_amax=2688.0)
    mags = np.abs(out.dequantize()[:, 0])
    lo, hi = float(mags.min()), float(mags.max())
    if lo == hi:
        raise ValueError(f"{v!r} is an E2M1 value: it is never rounded")
    expected = float(np.count_nonzero(mags == hi)) / 256  # |v| rounded up, away from 0
    frac = (abs(v) - lo) / (hi - lo)
    p = _number(answer, "probability of rounding up")
    why = (f"|v| = {abs(v)!r} lies between {lo!r} and {hi!r}, "
           f"a fraction {frac:.6g} of the gap; the recipe keeps 8 bits of that fraction, "
           f"t = floor(256 * {frac:.6g}) = {round(expected * 256)}, and rounds up when the "
           f"random byte plus t reaches 256: probability t/256 = {expected:.6g}")
    verdict(
        abs(p - expected) <= 1e-12,
        said=f"you said {p:.6g}",
        solution=why,
        mistakes=[
            Mistake(abs(p - frac) <= 1e-9 and abs(frac - expected) > 1e-12,
                    "That is the probability of exact stochastic rounding; the recipe "
                    "keeps only 8 bits of the fraction (floor, then /256)."),
            Mistake(abs(p - (1 - expected)) <= 1e-9,
                    "That is the probability of rounding *down*."),
        ],
    )


def check_rht_amax(x: Any, answer: Any) -> None:
    """The largest magnitude of the 16 values ``x`` after the recipe's random Hadamard
    transform (:func:`lowprec.hadamard.rht`, float32 results)."""
    from ..hadamard import rht

    block = np.asarray(x, np.float32).reshape(1, 16)
    expected = float(np.abs(rht(block, precision="float32")).max())
    a = _number(answer, "amax after the transform")
    amax = float(np.abs(block).max())
    why = (f"every output of the transform is (sum of the 16 inputs, each with a sign) / 4 "
           f"(R = diag(s) H / 4, orthogonal): here the largest is {expected:g}")
    verdict(
        abs(a - expected) <= 1e-6 * max(1.0, expected),
        said=f"you said {a:g}",
        solution=why,
        mistakes=[
            Mistake(abs(a - amax / 16) <= 1e-9 * max(1.0, amax),
                    "The transform divides by sqrt(16) = 4, not by 16 (it is orthogonal)."),
            Mistake(abs(a - amax) <= 1e-9 * max(1.0, amax) and expected != amax,
                    "An orthogonal transform keeps the length of the block, not its largest "
                    "value: an outlier is spread over all 16 outputs."),
        ],
    )
