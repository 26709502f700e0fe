"""What every checker shares: the error type, reading an answer, writing numbers and codes."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from ..formats import FloatFormat


class ExerciseError(AssertionError):
    """A wrong answer to an exercise; the message says what is wrong and why.

    Besides the whole message (``str(error)``, what a student running the tutorial sees),
    the parts are kept apart for an autograder that should teach without giving the answer
    away (:mod:`lowprec.grading`): ``diagnosis`` (what the answer was), ``hint`` (the
    mistake it matches, if one is recognised) and ``solution`` (the right answer and why).
    Checkers fill them through :func:`lowprec.exercises._verdict.verdict`.

    >>> err = ExerciseError("you said 3, but it is 4.", diagnosis="you said 3", solution="it is 4")
    >>> err.feedback()
    'you said 3: that is not right.'
    """

    __module__ = "lowprec.exercises"  # its public home, also in tracebacks

    def __init__(self, message: str, *, diagnosis: str | None = None, hint: str = "",
                 solution: str = "") -> None:
        super().__init__(message)
        self.diagnosis = message if diagnosis is None else diagnosis
        self.hint = hint.strip()
        self.solution = solution

    def feedback(self, reveal: bool = False) -> str:
        """The diagnosis and the hint; with ``reveal=True`` the whole message (solution too)."""
        if reveal or not self.solution:
            return str(self)
        return f"{self.diagnosis}: that is not right." + (f" {self.hint}" if self.hint else "")


# ------------------------------------------------------------------ helpers
def _ok(message: str) -> None:
    print(f"Correct: {message}")


def _wrong(message: str) -> NoReturn:
    """A wrong answer whose message gives no solution away (all of it is the diagnosis)."""
    raise ExerciseError(message)


def _number(answer: Any, what: str) -> float:
    """The answer as a float, or an ExerciseError saying why it is not a number."""
    if answer is Ellipsis or answer is None:
        _wrong(f"{what}: no answer yet (got {answer!r}); replace it with a number")
    if isinstance(answer, (bool, np.bool_)):
        _wrong(f"{what}: got the boolean {answer!r}; give a number")
    if isinstance(answer, Fraction):
        return float(answer)
    if isinstance(answer, np.ndarray) and answer.ndim == 0:
        answer = answer[()]
    if isinstance(answer, (numbers.Real, np.floating, np.integer)):
        return float(answer)
    _wrong(f"{what}: expected a single number, got {type(answer).__name__} {answer!r}")


def _pow2(v: float) -> str:
    """``v`` written for a reader: powers of two as 2^k, others as short decimals."""
    if v == 0 or not math.isfinite(v):
        return repr(v)
    m, e = math.frexp(abs(v))
    sign = "-" if v < 0 else ""
    if m == 0.5 and abs(e - 1) >= 8:
        return f"{sign}2^{e - 1} (= {v:.6g})"
    if v == int(v) and abs(v) < 2**53:
        return f"{int(v)}"
    return f"{v!r}"


def _bits(code: int, fmt: FloatFormat) -> str:
    """``0b0_1010_101``: the code with sign, exponent and mantissa fields separated."""
    s = format(code, f"0{fmt.width}b")
    parts = []
    k = 0
    if fmt.signed:
        parts.append(s[0])
        k = 1
    parts.append(s[k:k + fmt.exponent_bits])
    if fmt.mantissa_bits:
        parts.append(s[k + fmt.exponent_bits:])
    return "0b" + "_".join(parts)


def _same(a: float, b: float) -> bool:
    """Equal as numbers, NaN equal to NaN, and -0.0 distinct from +0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
