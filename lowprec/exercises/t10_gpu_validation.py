"""Tutorial 10, GPU validation: ulp distances and a device's rounding mode."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import MODES, check_mode, decode, encode
from ._common import ExerciseError, _bits, _number, _wrong
from ._verdict import Mistake, verdict

__all__ = [
    "check_device_mode",
    "check_ulp_distance",
]


def _ordinal_code(code: int, f: FloatFormat) -> int:
    """An integer that orders codes like their values (neighbours differ by 1)."""
    if not f.signed:
        return code
    mag = code & (f.sign_mask - 1)
    return -mag if code & f.sign_mask else mag


def check_ulp_distance(code_a: int, code_b: int, fmt: FloatFormat | str, answer: Any) -> None:
    """How many representable steps (ulps) lie between two codes of ``fmt`` (as a
    validation report counts a mismatch: from ``code_b`` to ``code_a``, signed)."""
    f = get_format(fmt)
    a, b = int(code_a), int(code_b)
    for c in (a, b):
        if not 0 <= c < 1 << f.width:
            raise ValueError(f"code {c} is not a {f.width}-bit {f.name} code")
    expected = _ordinal_code(a, f) - _ordinal_code(b, f)
    d = _number(answer, "ulp distance")
    va = float(decode(np.uint32(a), f))
    vb = float(decode(np.uint32(b), f))
    why = (f"{_bits(a, f)} is {va!r} and {_bits(b, f)} is {vb!r}; counting representable "
           f"values from the second to the first gives {expected:+d} step(s)")
    if (a & f.sign_mask) != (b & f.sign_mask):
        why += " (across zero: +0 and -0 are the same point, so the count passes zero once)"
    verdict(
        d == expected,
        said=f"you said {d:g}",
        solution=why,
        mistakes=[
            Mistake(d == -expected, "The sign is the other way round: the distance goes from the "
                                    "second code to the first."),
            Mistake(d == a - b and a - b != expected,
                    "Subtracting the codes as integers only works when both have the same sign: "
                    "the sign bit is not part of the magnitude's order."),
        ],
    )


def check_device_mode(x: float, fmt: FloatFormat | str, device_code: int, answer: Any) -> None:
    """Which rounding mode explains the code a device returned for ``x``?"""
    f = get_format(fmt)
    xv = float(x)
    code = int(device_code)
    fits = [m for m in MODES if m != "stochastic" and int(encode(xv, f, m)) == code]
    if not fits:
        raise ValueError(f"no deterministic mode rounds {xv!r} to code {code:#x} in {f.name}")
    if not isinstance(answer, str):
        _wrong(f"give the mode's name as a string, one of {', '.join(repr(m) for m in MODES)}")
    try:
        mode = check_mode(answer)
    except ValueError as exc:
        raise ExerciseError(str(exc)) from None
    table = ", ".join(f"{m} -> {_bits(int(encode(xv, f, m)), f)}" for m in MODES
                      if m != "stochastic")
    why = (f"{xv!r} rounds in {f.name} as: {table}; the device's {_bits(code, f)} matches "
           f"{' and '.join(repr(m) for m in fits)}")
    verdict(mode in fits,
            said=f"{mode!r} gives {_bits(int(encode(xv, f, mode)), f)}, not the device's code",
            but=": ", solution=why)
