"""What a floating-point format is.

A :class:`FloatFormat` holds only the *primary* facts about a format: how many
exponent and mantissa bits it has, its exponent bias, whether it has a sign,
infinities, subnormals, and where its NaNs live. Everything else (largest
finite value, smallest subnormal, machine epsilon, ...) is derived from those
fields, never typed in as a constant.

Codes are laid out the usual way, most significant bit first::

    [sign (if signed)] [exponent field: E bits] [mantissa field: M bits]

and a code of a format narrower than 8 bits sits in the low bits of a
``uint8`` (the ``ml_dtypes`` storage convention).

Value of a code with exponent field ``E`` and mantissa field ``M``::

    normal     (E > 0, or any E when the format has no subnormals)
               (-1)**s * 2**(E - bias) * (1 + M / 2**M_bits)
    subnormal  (E == 0 and the format has subnormals)
               (-1)**s * 2**(1 - bias) * (M / 2**M_bits)

NaN encodings (the ``nan`` field), in the ml_dtypes/LLVM naming:

=========  ==================================================  ===============
``nan``    which codes are NaN                                  examples
=========  ==================================================  ===============
"ieee"     exponent all ones, mantissa non-zero (all ones      fp16, bf16,
           with mantissa zero is infinity)                      fp8_e5m2
"max"      only the all-ones magnitude, S.1111.111 ("fn":       fp8_e4m3 (fn),
           finite + NaN)                                        e8m0
"negzero"  only 1.0000.000, the code that would be -0           fp8_e4m3fnuz
           ("fnuz": finite, NaN, unsigned zero)
"none"     no NaN at all                                        fp4_e2m1, fp6
=========  ==================================================  ===============
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ._names import did_you_mean

__all__ = [
    "FloatFormat",
    "FORMATS",
    "ALIASES",
    "get_format",
    "list_formats",
    "custom_format",
]

NanEncoding = Literal["ieee", "max", "negzero", "none"]
_NAN_ENCODINGS = ("ieee", "max", "negzero", "none")


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format, described by its primary fields.

    Parameters
    ----------
    name:
        Canonical name, e.g. ``"fp8_e4m3"``.
    exponent_bits, mantissa_bits:
        Widths of the exponent and (stored) mantissa fields.
    bias:
        Exponent bias (IEEE formats: ``2**(exponent_bits-1) - 1``; `custom_format`
        fills that in when it is not given).
    signed:
        Whether the format has a sign bit (``e8m0`` does not).
    has_inf:
        Whether the all-ones exponent with zero mantissa is infinity (IEEE).
        Formats with infinities must use ``nan="ieee"``.
    nan:
        Where NaNs live: ``"ieee"``, ``"max"``, ``"negzero"`` or ``"none"``
        (see the module docstring).
    has_subnormals:
        Whether exponent field 0 holds subnormals and zero. If ``False``
        (``e8m0``), exponent field 0 is an ordinary binade and the format has
        no zero.
    description:
        One line for tables and ``explain``.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    signed: bool = True
    has_inf: bool = True
    nan: NanEncoding = "ieee"
    has_subnormals: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        e, m = self.exponent_bits, self.mantissa_bits
        if not (isinstance(e, int) and isinstance(m, int)) or e < 1 or m < 0:
            raise ValueError(
                f"format {self.name!r}: need exponent_bits >= 1 and mantissa_bits >= 0, "
                f"got exponent_bits={e!r}, mantissa_bits={m!r}"
            )
        if self.width > 32:
            raise ValueError(
                f"format {self.name!r} is {self.width} bits wide; lowprec handles formats "
                "of at most 32 bits"
            )
        if not isinstance(self.bias, int):
            raise ValueError(f"format {self.name!r}: bias must be an integer, got {self.bias!r}")
        if self.nan not in _NAN_ENCODINGS:
            raise ValueError(
                f"format {self.name!r}: nan must be one of {_NAN_ENCODINGS}, got {self.nan!r}"
            )
        if self.has_inf != (self.nan == "ieee"):
            raise ValueError(
                f"format {self.name!r}: infinities come with IEEE NaNs (has_inf=True, "
                "nan='ieee') or not at all; other combinations are not supported"
            )
        if self.nan == "negzero" and not self.signed:
            raise ValueError(f"format {self.name!r}: nan='negzero' needs a sign bit")
        if not self.has_subnormals and m != 0:
            raise ValueError(
                f"format {self.name!r}: formats without subnormals (and without zero) are "
                "supported only with mantissa_bits=0, like e8m0"
            )
        if self.nan == "ieee" and e < 2:
            raise ValueError(f"format {self.name!r}: IEEE specials need exponent_bits >= 2")
        if self.nan == "ieee" and m == 0:
            # Exponent all ones with a zero mantissa is infinity: no code is left for NaN.
            raise ValueError(
                f"format {self.name!r}: IEEE NaNs need mantissa_bits >= 1; with no mantissa "
                "bits use has_inf=False with nan='max' or nan='none'"
            )
        if self.max_code_magnitude < 0:
            raise ValueError(f"format {self.name!r} has no finite values")
        # Every value must be exactly a float64 so that lowprec can hand it back.
        if self.emax > 1023 or self.smallest_subnormal_exponent < -1074:
            raise ValueError(
                f"format {self.name!r}: its values span 2**{self.smallest_subnormal_exponent}"
                f" .. 2**{self.emax + 1}, beyond float64 (2**-1074 .. 2**1024); use fewer "
                "exponent bits or another bias"
            )

    # ------------------------------------------------------------------ layout
    @property
    def width(self) -> int:
        """Total number of bits of a code."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def precision(self) -> int:
        """Significand precision p in bits, the implicit leading bit included."""
        return self.mantissa_bits + 1

    @property
    def code_dtype(self) -> np.dtype:
        """Smallest unsigned integer dtype that holds a code."""
        for bits, dt in ((8, np.uint8), (16, np.uint16), (32, np.uint32)):
            if self.width <= bits:
                return np.dtype(dt)
        raise AssertionError("unreachable: width checked in __post_init__")

    @property
    def sign_mask(self) -> int:
        return (1 << (self.width - 1)) if self.signed else 0

    @property
    def exponent_field_max(self) -> int:
        return (1 << self.exponent_bits) - 1

    @property
    def max_code_magnitude(self) -> int:
        """Largest code (sign bit clear) of a finite value."""
        all_ones = (1 << (self.exponent_bits + self.mantissa_bits)) - 1
        if self.nan == "ieee":
            return (self.exponent_field_max << self.mantissa_bits) - 1
        if self.nan == "max":
            return all_ones - 1
        return all_ones

    # -------------------------------------------------------------- exponents
    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite binade."""
        return (self.max_code_magnitude >> self.mantissa_bits) - self.bias

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        return (1 if self.has_subnormals else 0) - self.bias

    @property
    def smallest_subnormal_exponent(self) -> int:
        """log2 of the smallest positive value."""
        return self.emin - self.mantissa_bits if self.has_subnormals else self.emin

    # ------------------------------------------------------------ key values
    @property
    def max(self) -> float:
        """Largest finite value."""
        m_field = self.max_code_magnitude & ((1 << self.mantissa_bits) - 1)
        sig = (1 << self.mantissa_bits) + m_field
        return math.ldexp(sig, self.emax - self.mantissa_bits)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value (the smallest normal if there are no subnormals)."""
        return math.ldexp(1.0, self.smallest_subnormal_exponent)

    @property
    def eps(self) -> float:
        """Machine epsilon: the gap between 1 and the next larger value, 2**-mantissa_bits."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def unit_roundoff(self) -> float:
        """Largest relative error of round-to-nearest in the normal range, eps / 2."""
        return self.eps / 2

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    @property
    def has_zero(self) -> bool:
        return self.has_subnormals

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.has_zero and self.nan != "negzero"

    @property
    def num_finite(self) -> int:
        """How many distinct finite values the format has (+0 and -0 count as one)."""
        per_sign = self.max_code_magnitude + 1  # codes 0 .. max, all finite
        if not self.signed:
            return per_sign
        # Positive and negative halves share zero, if the format has one.
        return 2 * per_sign - (1 if self.has_zero else 0)

    @property
    def dynamic_range_binades(self) -> float:
        """log2(max / smallest positive value)."""
        return math.log2(self.max) - self.smallest_subnormal_exponent

    @property
    def fits_float32(self) -> bool:
        """Whether every value of the format is exactly a float32."""
        return (
            self.emax <= 127
            and self.smallest_subnormal_exponent >= -149
            and self.mantissa_bits <= 23
        )

    # -------------------------------------------------------------- exactly
    def exact_value(self, code: int) -> Fraction | float:
        """Value of one code as an exact ``Fraction`` (or ``nan``/``±inf`` floats).

        A slow, obviously-correct scalar reference used by ``explain`` and tests.
        """
        code = int(code)
        if not 0 <= code < (1 << self.width):
            raise ValueError(f"code {code:#x} is out of range for {self.width}-bit {self.name}")
        negative = bool(code & self.sign_mask)
        mag = code & ~self.sign_mask & ((1 << self.width) - 1)
        m_bits = self.mantissa_bits
        e_field, m_field = mag >> m_bits, mag & ((1 << m_bits) - 1)
        if self.nan == "negzero" and negative and mag == 0:
            return math.nan
        if self.nan == "max" and mag == (1 << (self.exponent_bits + m_bits)) - 1:
            return math.nan
        if self.nan == "ieee" and e_field == self.exponent_field_max:
            if m_field:
                return math.nan
            return -math.inf if negative else math.inf
        if e_field == 0 and self.has_subnormals:
            value = Fraction(m_field, 1 << m_bits) * Fraction(2) ** self.emin
        else:
            value = Fraction((1 << m_bits) + m_field, 1 << m_bits) * Fraction(2) ** (
                e_field - self.bias
            )
        return -value if negative else value

    def __str__(self) -> str:
        return self.name


# ---------------------------------------------------------------- registry
def ieee_bias(exponent_bits: int) -> int:
    """The IEEE 754 exponent bias of a format with ``exponent_bits`` exponent bits.

    >>> ieee_bias(5), ieee_bias(8)
    (15, 127)
    """
    return 2 ** (exponent_bits - 1) - 1


def _fmt(name: str, e: int, m: int, desc: str, **kw: Any) -> FloatFormat:
    kw.setdefault("bias", ieee_bias(e))
    return FloatFormat(name=name, exponent_bits=e, mantissa_bits=m, description=desc, **kw)


_OCP = dict(has_inf=False, nan="max")  # OCP "fn": no infinity, NaN only at S.1111.111
_FNUZ = dict(has_inf=False, nan="negzero")
_FINITE = dict(has_inf=False, nan="none")

FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in [
        _fmt("fp32", 8, 23, "IEEE 754 binary32"),
        _fmt("tf32", 8, 10, "NVIDIA TensorFloat-32: fp32 range, fp16 precision (19 bits)"),
        _fmt("fp16", 5, 10, "IEEE 754 binary16 (half)"),
        _fmt("bf16", 8, 7, "bfloat16: fp32 range, 8-bit precision"),
        _fmt("fp8_e4m3", 4, 3, "OCP FP8 E4M3 (fn): no inf, NaN = S.1111.111", **_OCP),
        _fmt("fp8_e5m2", 5, 2, "OCP FP8 E5M2: IEEE-like with inf and NaN"),
        _fmt("fp8_e4m3fnuz", 4, 3, "E4M3 fnuz (AMD/Graphcore): bias 8, NaN = 0x80",
             bias=8, **_FNUZ),
        _fmt("fp8_e5m2fnuz", 5, 2, "E5M2 fnuz (AMD/Graphcore): bias 16, NaN = 0x80",
             bias=16, **_FNUZ),
        _fmt("fp8_e4m3_ieee", 4, 3, "IEEE-style E4M3 with inf and NaN (ml_dtypes float8_e4m3)"),
        _fmt("fp8_e3m4", 3, 4, "IEEE-style E3M4 (ml_dtypes float8_e3m4)"),
        _fmt("fp8_e4m3b11fnuz", 4, 3, "E4M3 fnuz with bias 11 (Graphcore)", bias=11, **_FNUZ),
        _fmt("fp6_e3m2", 3, 2, "OCP MX FP6 E3M2: no inf, no NaN", **_FINITE),
        _fmt("fp6_e2m3", 2, 3, "OCP MX FP6 E2M3: no inf, no NaN", **_FINITE),
        _fmt("fp4_e2m1", 2, 1, "OCP MX FP4 E2M1: no inf, no NaN", **_FINITE),
        _fmt("e8m0", 8, 0, "OCP MX scale: unsigned powers of two 2**-127..2**127, NaN = 0xFF",
             signed=False, has_inf=False, nan="max", has_subnormals=False),
        _fmt("ue5m3", 5, 3, "NVIDIA UE5M3 block scale (PTX ISA 9.4): unsigned, bias 15, "
             "subnormals, no inf, NaN = 0xFF, max 114688", signed=False, **_OCP),
    ]
}

# Other names people use for the same formats: ml_dtypes/LLVM, numpy, PyTorch.
ALIASES: dict[str, str] = {
    "float32": "fp32", "single": "fp32", "binary32": "fp32",
    "tensorfloat32": "tf32",
    "float16": "fp16", "half": "fp16", "binary16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3", "e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "float8_e4m3fnuz": "fp8_e4m3fnuz", "e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz", "e5m2fnuz": "fp8_e5m2fnuz",
    "float8_e4m3": "fp8_e4m3_ieee",
    "float8_e3m4": "fp8_e3m4", "e3m4": "fp8_e3m4",
    "float8_e4m3b11fnuz": "fp8_e4m3b11fnuz",
    "float6_e3m2fn": "fp6_e3m2", "e3m2": "fp6_e3m2", "fp6": "fp6_e3m2",
    "float6_e2m3fn": "fp6_e2m3", "e2m3": "fp6_e2m3",
    "float4_e2m1fn": "fp4_e2m1", "e2m1": "fp4_e2m1", "fp4": "fp4_e2m1",
    "float8_e8m0fnu": "e8m0", "e8m0fnu": "e8m0",
    "e5m3u": "ue5m3", "float8_ue5m3": "ue5m3",
}

# Formats that numpy or ml_dtypes implement, by canonical name (used by tests
# and benchmarks as the independent reference). Resolved lazily.
_REFERENCE_DTYPES = {
    "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "fp8_e4m3fnuz": "float8_e4m3fnuz", "fp8_e5m2fnuz": "float8_e5m2fnuz",
    "fp8_e4m3_ieee": "float8_e4m3", "fp8_e3m4": "float8_e3m4",
    "fp8_e4m3b11fnuz": "float8_e4m3b11fnuz",
    "fp6_e3m2": "float6_e3m2fn", "fp6_e2m3": "float6_e2m3fn",
    "fp4_e2m1": "float4_e2m1fn", "e8m0": "float8_e8m0fnu",
}


def reference_dtype_name(fmt: FloatFormat | str) -> str | None:
    """The name of the numpy/ml_dtypes dtype implementing ``fmt``, or ``None``,
    without importing ml_dtypes (about half a second).

    >>> reference_dtype_name("fp8_e4m3"), reference_dtype_name("tf32")
    ('float8_e4m3fn', None)
    """
    return _REFERENCE_DTYPES.get(get_format(fmt).name)


def reference_dtype(fmt: FloatFormat | str) -> np.dtype | None:
    """The numpy/ml_dtypes dtype implementing ``fmt``, or ``None``."""
    dt_name = reference_dtype_name(fmt)
    if dt_name is None:
        return None
    if dt_name in ("float32", "float16"):
        return np.dtype(dt_name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, dt_name))


def list_formats() -> list[FloatFormat]:
    """All registered formats, in registry order: fp32, tf32, the 16-bit formats, then
    the 8-, 6- and 4-bit ones, and the scale formats (e8m0, ue5m3) last."""
    return list(FORMATS.values())


def custom_format(
    exponent_bits: int,
    mantissa_bits: int,
    *,
    bias: int | None = None,
    signed: bool = True,
    has_inf: bool = True,
    nan: NanEncoding | None = None,
    has_subnormals: bool = True,
    name: str | None = None,
) -> FloatFormat:
    """A format of your own, e.g. ``custom_format(3, 4)`` for an IEEE-style E3M4.

    By default it is IEEE-like (infinities and IEEE NaNs); pass
    ``has_inf=False, nan="max"`` for an OCP "fn"-style format.
    """
    if nan is None:
        nan = "ieee" if has_inf else "max"
    if name is None:
        name = f"e{exponent_bits}m{mantissa_bits}" + ("" if signed else "u")
    return FloatFormat(
        name=name,
        exponent_bits=exponent_bits,
        mantissa_bits=mantissa_bits,
        bias=ieee_bias(exponent_bits) if bias is None else bias,
        signed=signed,
        has_inf=has_inf,
        nan=nan,
        has_subnormals=has_subnormals,
        description="custom format",
    )


def get_format(fmt: FloatFormat | str | np.dtype | type) -> FloatFormat:
    """Look up a format by canonical name, alias, or numpy/ml_dtypes dtype.

    >>> get_format("bfloat16").name
    'bf16'
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str):
        key = fmt.strip().lower().replace("-", "_")
        key = ALIASES.get(key, key)
        if key in FORMATS:
            return FORMATS[key]
        hint = did_you_mean(key, [*FORMATS, *ALIASES])
        if key.startswith(("mx", "nvfp")):  # a block format, one layer up
            hint += " (block-scaled MX and NVFP4 formats are in lowprec.mx and lowprec.nvfp4)"
        raise ValueError(
            f"unknown format {fmt!r}{hint}; valid names: "
            f"{', '.join(FORMATS)}; aliases such as float16, bfloat16, e4m3, e5m2 work too "
            "(lowprec.formats.ALIASES lists them), or make a FloatFormat with custom_format()"
        )
    try:
        dt = np.dtype(fmt)
    except TypeError:
        raise TypeError(
            f"expected a format name, FloatFormat or dtype, got {type(fmt).__name__}"
        ) from None
    if dt.name in ALIASES:
        return FORMATS[ALIASES[dt.name]]
    raise ValueError(
        f"dtype {dt} is not a floating-point format lowprec knows; valid names: "
        f"{', '.join(FORMATS)}"
    )
