"""Numbers the compiled kernels share: rounding modes, exception flags, status
codes, NaN encodings, and the format parameters as a tuple of ints (one
compiled kernel serves every format)."""

from __future__ import annotations

# Rounding modes, as ints for the kernels. The public names live in rounding.py.
RNE, RNA, RTZ, RUP, RDOWN, ODD, STOCHASTIC = range(7)

# TestFloat/SoftFloat exception flag bits.
FLAG_INEXACT = 0x01
FLAG_UNDERFLOW = 0x02
FLAG_OVERFLOW = 0x04
FLAG_INFINITE = 0x08  # divide by zero
FLAG_INVALID = 0x10

# Status of a conversion that cannot produce a code (Python raises ValueError).
INVALID_NAN = 1  # NaN into a format without NaN
INVALID_NEGATIVE = 2  # negative value into an unsigned format without NaN

# NaN encodings (FloatFormat.nan) as ints.
NAN_IEEE, NAN_MAX, NAN_NEGZERO, NAN_NONE = range(4)
_NAN_KIND = {"ieee": NAN_IEEE, "max": NAN_MAX, "negzero": NAN_NEGZERO, "none": NAN_NONE}

# Index of each field in the params tuple.
P_M, P_EMIN, P_BIAS, P_MAXMAG, P_SIGNBIT, P_HASINF, P_NAN, P_SUBN, P_EBITS = range(9)


def format_params(fmt) -> tuple:
    """Pack a FloatFormat into the int tuple the kernels take."""
    return (
        fmt.mantissa_bits,
        fmt.emin,
        fmt.bias,
        fmt.max_code_magnitude,
        fmt.sign_mask,
        int(fmt.has_inf),
        _NAN_KIND[fmt.nan],
        int(fmt.has_subnormals),
        fmt.exponent_bits,
    )
