"""Checkers for tutorial 11 (your own model), with specific feedback.

(To be moved into the ``lowprec.exercises`` package.) As in :mod:`lowprec.exercises`,
each ``check_*`` prints a line starting with ``Correct:`` or raises
:class:`~lowprec.exercises.ExerciseError` saying what the right answer is and why; the
expected values come from lowprec itself (``round_to``, ``mx.quantize``).

>>> import numpy as np
>>> check_underflow_count(np.array([0.0, 1e-9, 1.0]), "fp16", 1)  # doctest: +ELLIPSIS
Correct: 1 of the 2 non-zero values round to zero in fp16 ...
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from .. import mx
from .._blocks import to_blocks
from ..formats import FloatFormat, get_format
from ..rounding import round_to
from ._common import ExerciseError

__all__ = ["check_block_flush_share", "check_underflow_count"]


def _ok(message: str) -> None:
    print(f"Correct: {message}")


def _wrong(message: str) -> NoReturn:
    raise ExerciseError(message)


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
    if got == expected:
        _ok(why + "; values that were zero already are not underflow.")
        return
    all_zero = int(np.count_nonzero(q == 0))
    if got == all_zero:
        _wrong(f"you counted {got}: every zero after rounding, including the "
               f"{a.size - nonzero} values that were zero before. Underflow counts only "
               f"non-zero values that became zero: {why}.")
    below_normal = int(np.count_nonzero((a != 0) & (np.abs(a) < f.smallest_normal)))
    if got == below_normal:
        _wrong(f"you counted {got}, the values below the smallest normal "
               f"({f.smallest_normal:.3g}); many of those become subnormals, not zero: {why}.")
    _wrong(f"your count is {got}, but {why}.")


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
    try:
        got = float(answer)
    except (TypeError, ValueError):
        _wrong(f"the share of blocks is a number between 0 and 1, got {answer!r}")
    why = (f"{int(per_block.sum())} of the {per_block.size} blocks ({expected:.2%}) have a "
           f"value that flushed to zero under their shared {fmt} scale")
    if abs(got - expected) <= 1e-9:
        _ok(why + ".")
        return
    by_value = float(flushed.sum() / max(np.count_nonzero(xb), 1))
    if abs(got - by_value) <= 1e-9:
        _wrong(f"{got:.2%} is the share of non-zero *values* that flushed; the question is "
               f"about blocks: {why}.")
    if abs(got - expected * 100) <= 1e-6:
        _wrong(f"give a fraction, not a percentage: {why}.")
    _wrong(f"your share is {got!r}, but {why}.")
