"""What the compiled kernels take besides numbers: the format, as a tuple of
ints, and the ints that stand for rounding modes, exception flags and statuses.

``FormatParams`` is a ``typing.NamedTuple`` of nine ints. numba types it as one
tuple type whatever the values, so one compiled kernel serves every format,
and the kernels read it by name (``P.max_mag``).

Every int the kernels use for a mode, a flag or a status is defined here, once,
next to its name and meaning in :data:`MODE_TABLE`, :data:`FLAG_TABLE` and
:data:`STATUS_TABLE`; the maps the Python side uses are built from those tables.

>>> from lowprec.formats import get_format
>>> P = format_params(get_format("fp8_e4m3"))
>>> P.m, P.emin, P.max_mag, P.nan_kind == NAN_MAX
(3, -6, 126, True)
>>> MODE_INT["odd"] == ODD
True
"""

from __future__ import annotations

from typing import Any, NamedTuple

# ------------------------------------------------------------ rounding modes
RNE, RNA, RTZ, RUP, RDOWN, ODD, STOCHASTIC = range(7)

#: (name, kernel int, meaning) of every rounding mode; ``lowprec.MODES`` is made from it.
MODE_TABLE: tuple[tuple[str, int, str], ...] = (
    ("rne", RNE, "to nearest, ties to even (IEEE default)"),
    ("rna", RNA, "to nearest, ties away from zero"),
    ("rtz", RTZ, "toward zero (truncation)"),
    ("rup", RUP, "toward +infinity"),
    ("rdown", RDOWN, "toward -infinity"),
    ("odd", ODD, "to odd: truncate, then set the last bit if inexact (no double rounding)"),
    ("stochastic", STOCHASTIC,
     "up with probability proportional to the distance from the lower neighbour"),
)
#: Kernel int of each mode name.
MODE_INT: dict[str, int] = {name: code for name, code, _ in MODE_TABLE}

# ---------------------------------------------------- exception flags (bits)
FLAG_INEXACT = 0x01
FLAG_UNDERFLOW = 0x02
FLAG_OVERFLOW = 0x04
FLAG_INFINITE = 0x08
FLAG_INVALID = 0x10

#: (bit, name, meaning) of the TestFloat/SoftFloat exception flags.
FLAG_TABLE: tuple[tuple[int, str, str], ...] = (
    (FLAG_INEXACT, "inexact", "the result differs from the exact value"),
    (FLAG_UNDERFLOW, "underflow", "tiny (after rounding) and inexact"),
    (FLAG_OVERFLOW, "overflow", "beyond the largest finite value"),
    (FLAG_INFINITE, "infinite", "an exact infinity from finite operands (x / 0)"),
    (FLAG_INVALID, "invalid", "no meaningful result (0/0, inf - inf, a signaling NaN)"),
)

# ------------------------------------------------ statuses (0: a code exists)
INVALID_NAN = 1
INVALID_NEGATIVE = 2

#: (status, meaning) of a conversion that cannot produce a code (Python raises ValueError).
STATUS_TABLE: tuple[tuple[int, str], ...] = (
    (INVALID_NAN, "NaN into a format without NaN"),
    (INVALID_NEGATIVE, "a negative number into an unsigned format without NaN"),
)

# ------------------------------------------- NaN encodings (FloatFormat.nan)
NAN_IEEE, NAN_MAX, NAN_NEGZERO, NAN_NONE = range(4)
NAN_KIND: dict[str, int] = {"ieee": NAN_IEEE, "max": NAN_MAX, "negzero": NAN_NEGZERO,
                            "none": NAN_NONE}


class FormatParams(NamedTuple):
    """A format as the kernels see it (all ints; flags are 0 or 1)."""

    m: int  # mantissa (fraction) bits
    emin: int  # exponent of the smallest normal binade
    bias: int
    max_mag: int  # largest code magnitude (sign bit clear) of a finite value
    sign_bit: int  # the sign bit's mask; 0 in unsigned formats
    has_inf: int
    nan_kind: int  # NAN_IEEE, NAN_MAX, NAN_NEGZERO or NAN_NONE
    subnormals: int
    exp_bits: int


def format_params(fmt: Any) -> FormatParams:
    """The :class:`FormatParams` of a :class:`~lowprec.FloatFormat`.

    >>> from lowprec.formats import get_format
    >>> format_params(get_format("bf16")).max_mag == 0x7F7F
    True
    """
    return FormatParams(
        m=fmt.mantissa_bits,
        emin=fmt.emin,
        bias=fmt.bias,
        max_mag=fmt.max_code_magnitude,
        sign_bit=fmt.sign_mask,
        has_inf=int(fmt.has_inf),
        nan_kind=NAN_KIND[fmt.nan],
        subnormals=int(fmt.has_subnormals),
        exp_bits=fmt.exponent_bits,
    )
