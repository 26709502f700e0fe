"""Tutorial 11, your own model: underflow counted by hand, MXFP4 blocks that flush.

As everywhere in :mod:`lowprec.exercises`, each ``check_*`` prints a line starting with
``Correct:`` or raises :class:`~lowprec.exercises.ExerciseError` (through
:func:`~lowprec.exercises._verdict.verdict`, so the diagnosis, the hint and the solution
are kept apart); the expected values come from lowprec itself (``round_to``,
``mx.quantize``).

>>> import numpy as np
>>> check_underflow_count(np.array([0.0, 1e-9, 1.0]), "fp16", 1)  # doctest: +ELLIPSIS
Correct: 1 of the 2 non-zero values round to zero in fp16 ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import mx
from .._blocks import to_blocks
from ..formats import FloatFormat, get_format
from ..rounding import round_to
from ._common import _number, _wrong
from ._verdict import Mistake, verdict

__all__ = ["check_block_flush_share", "check_underflow_count"]


def _int(answer: Any, what: str) -> int:
    if answer is None or answer is Ellipsis or isinstance(answer, (bool, np.bool_)):
        _wrong(f"{what}: no answer yet (got {answer!r}); replace it with a whole number")
    try:
        v = float(answer)
    except (TypeError, ValueError):
        _wrong(f"{what} must be a number, got {answer!r}")
    if v != int(v):
        _wrong(f"{what} is a count of values, a whole number; got {answer!r}")
    return int(v)


def check_underflow_count(x: Any, fmt: FloatFormat | str, answer: Any) -> None:
    """How many finite non-zero values of ``x`` become ±0 when rounded to ``fmt``."""
    f = get_format(fmt)
    a = np.asarray(x, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    with np.errstate(over="ignore"):
        q = round_to(a, f)
    nonzero = int(np.count_nonzero(a))
    expected = int(np.count_nonzero((a != 0) & (q == 0)))
    got = _int(answer, "underflow count")
    why = (f"{expected} of the {nonzero} non-zero values round to zero in {f.name} (values "
           f"below half its smallest subnormal, {f.smallest_subnormal / 2:.3g})")
    below_normal = int(np.count_nonzero((a != 0) & (np.abs(a) < f.smallest_normal)))
    verdict(
        got == expected,
        right=why + "; values that were zero already are not underflow.",
        said=f"your count is {got}",
        solution=why,
        mistakes=[
            Mistake(got == int(np.count_nonzero(q == 0)),
                    f"That is every zero after rounding, including the {a.size - nonzero} "
                    "values that were zero before.",
                    "Underflow counts only non-zero values that became zero."),
            Mistake(got == below_normal,
                    f"That is the values below the smallest normal ({f.smallest_normal:.3g}); "
                    "many of those become subnormals, not zero."),
        ],
    )


def check_block_flush_share(x: Any, answer: Any, fmt: str = "mxfp4") -> None:
    """The share of ``fmt``'s blocks of 32 (along the last axis) in which at least one
    non-zero value of ``x`` became zero."""
    arr = np.asarray(x, dtype=np.float32)
    q = mx.quantize(arr, fmt).dequantize()
    xb = to_blocks(arr.reshape(-1, arr.shape[-1]), -1, 32)
    qb = to_blocks(q.reshape(-1, arr.shape[-1]), -1, 32)
    flushed = (xb != 0) & (qb == 0)
    per_block = flushed.any(-1)
    expected = float(per_block.mean())
    got = _number(answer, "share of blocks (a number between 0 and 1)")
    why = (f"{int(per_block.sum())} of the {per_block.size} blocks ({expected:.2%}) have a "
           f"value that flushed to zero under their shared {fmt} scale")
    by_value = float(flushed.sum() / max(np.count_nonzero(xb), 1))
    verdict(
        abs(got - expected) <= 1e-9,
        right=why + ".",
        said=f"your share is {got!r}",
        solution=why,
        mistakes=[
            Mistake(abs(got - by_value) <= 1e-9,
                    "That is the share of non-zero *values* that flushed; the question is "
                    "about blocks."),
            Mistake(abs(got - expected * 100) <= 1e-6,
                    "Give a fraction between 0 and 1, not a percentage."),
        ],
    )
