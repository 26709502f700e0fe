"""Derived properties of every registered format, checked against the specs.

Expected values are cited from:
* IEEE 754-2019, Table 3.5 (binary16, binary32 parameters) and 3.4;
* OCP 8-bit Floating Point Specification (OFP8) rev 1.0, Table 1 (E4M3/E5M2);
* OCP Microscaling Formats (MX) v1.0, Tables 1-2 (FP6 E3M2/E2M3, FP4 E2M1, E8M0);
* the ml_dtypes README (fnuz variants, E4M3/E3M4 IEEE-style, bfloat16) and
  NVIDIA's TF32 description (8-bit exponent, 10-bit mantissa).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _reference import value_table

import lowprec as lp
from lowprec.formats import ALIASES, reference_dtype

# name: (max, smallest normal, smallest subnormal, eps, width, source)
SPEC = {
    "fp32": (float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149, 2.0**-23, 32,
             "IEEE 754 binary32: emax 127, p 24"),
    "tf32": ((2 - 2.0**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10, 19,
             "NVIDIA TF32: fp32 exponent, 10 mantissa bits"),
    "fp16": (65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 16, "IEEE 754 binary16: emax 15, p 11"),
    "bf16": ((2 - 2.0**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 16,
             "bfloat16: fp32 exponent, 7 mantissa bits"),
    "fp8_e4m3": (448.0, 2.0**-6, 2.0**-9, 2.0**-3, 8, "OCP OFP8 Table 1: E4M3 max 448"),
    "fp8_e5m2": (57344.0, 2.0**-14, 2.0**-16, 2.0**-2, 8, "OCP OFP8 Table 1: E5M2 max 57344"),
    "fp8_e4m3fnuz": (240.0, 2.0**-7, 2.0**-10, 2.0**-3, 8, "ml_dtypes float8_e4m3fnuz"),
    "fp8_e5m2fnuz": (57344.0, 2.0**-15, 2.0**-17, 2.0**-2, 8, "ml_dtypes float8_e5m2fnuz"),
    "fp8_e4m3_ieee": (240.0, 2.0**-6, 2.0**-9, 2.0**-3, 8, "ml_dtypes float8_e4m3 (IEEE)"),
    "fp8_e3m4": (15.5, 2.0**-2, 2.0**-6, 2.0**-4, 8, "ml_dtypes float8_e3m4"),
    "fp8_e4m3b11fnuz": (30.0, 2.0**-10, 2.0**-13, 2.0**-3, 8, "ml_dtypes float8_e4m3b11fnuz"),
    "fp6_e3m2": (28.0, 2.0**-2, 2.0**-4, 2.0**-2, 6, "OCP MX v1.0 Table 2: FP6 E3M2 max 28"),
    "fp6_e2m3": (7.5, 1.0, 2.0**-3, 2.0**-3, 6, "OCP MX v1.0 Table 2: FP6 E2M3 max 7.5"),
    "fp4_e2m1": (6.0, 1.0, 0.5, 0.5, 4, "OCP MX v1.0 Table 2: FP4 E2M1 max 6"),
    "e8m0": (2.0**127, 2.0**-127, 2.0**-127, 1.0, 8, "OCP MX v1.0 Table 1: E8M0 2^-127..2^127"),
    "ue5m3": (114688.0, 2.0**-14, 2.0**-17, 2.0**-3, 8,
              "NVIDIA UE5M3 (CUDA 13.4 __nv_fp8_ue5m3, PTX ISA 9.4): max 0xFE = 114688, "
              "min subnormal 0x01 = 2^-17"),
}


def test_spec_table_covers_the_registry() -> None:
    assert set(SPEC) == set(lp.FORMATS)


@pytest.mark.parametrize("name", list(SPEC))
def test_derived_properties_match_the_specs(name: str) -> None:
    fmt = lp.get_format(name)
    mx, normal, sub, eps, width, source = SPEC[name]
    assert fmt.max == mx, source
    assert fmt.smallest_normal == normal, source
    assert fmt.smallest_subnormal == sub, source
    assert fmt.eps == eps, source
    assert fmt.width == width, source
    assert fmt.code_dtype == np.dtype(np.uint8 if width <= 8 else np.uint16 if width <= 16
                                      else np.uint32)
    assert fmt.unit_roundoff == eps / 2
    assert fmt.dynamic_range_binades == pytest.approx(math.log2(mx / sub))
    assert fmt.precision == fmt.mantissa_bits + 1


def test_spec_bit_patterns() -> None:
    """Binary literals from the spec tables decode to the cited values."""
    cited = [
        ("fp8_e4m3", 0b0_1111_110, 448.0),  # OFP8 Table 1: max normal S.1111.110
        ("fp8_e4m3", 0b0_0000_001, 2.0**-9),  # min subnormal
        ("fp8_e5m2", 0b0_11110_11, 57344.0),  # max normal S.11110.11
        ("fp8_e5m2", 0b0_11111_00, math.inf),
        ("fp6_e3m2", 0b0_111_11, 28.0),  # MX Table 2
        ("fp6_e2m3", 0b0_11_111, 7.5),
        ("fp6_e2m3", 0b0_00_001, 0.125),
        ("fp4_e2m1", 0b0111, 6.0),
        ("fp4_e2m1", 0b0001, 0.5),
        ("fp4_e2m1", 0b1101, -3.0),
        ("e8m0", 0b0111_1111, 1.0),  # MX Table 1: bias 127
        ("e8m0", 0b0000_0000, 2.0**-127),
        ("e8m0", 0b1111_1110, 2.0**127),
        ("ue5m3", 0b11111_110, 114688.0),  # UE5M3: no sign, E5 bias 15, no inf
        ("ue5m3", 0b00000_001, 2.0**-17),
        ("ue5m3", 0b01111_000, 1.0),
        ("fp16", 0x7BFF, 65504.0),
        ("bf16", 0x3F80, 1.0),
    ]
    for name, code, value in cited:
        assert lp.decode(code, name) == value, (name, bin(code))
    for name, code in [("fp8_e4m3", 0x7F), ("fp8_e4m3", 0xFF), ("fp8_e5m2", 0x7D),
                       ("e8m0", 0xFF), ("fp8_e4m3fnuz", 0x80), ("fp8_e5m2fnuz", 0x80),
                       ("ue5m3", 0xFF)]:
        assert math.isnan(lp.decode(code, name)), (name, hex(code))


@pytest.mark.parametrize("name", list(SPEC))
def test_num_finite_by_counting_codes(name: str) -> None:
    """num_finite = distinct finite values (+0 and -0 once), counted by decoding."""
    fmt = lp.get_format(name)
    if fmt.width > 20:  # fp32: 2 * (2**31 - 2**23) codes, zeros counted once
        assert fmt.num_finite == 2 * (2**31 - 2**23) - 1
        return
    values = value_table(fmt)
    count = np.unique(values[np.isfinite(values)]).size
    assert fmt.num_finite == count
    # ... and lowprec's own decoder agrees on which codes are finite.
    if fmt.width <= 16:
        codes = np.arange(1 << fmt.width, dtype=fmt.code_dtype)
        assert np.unique(lp.decode(codes, fmt)[np.isfinite(values)]).size == count


@pytest.mark.parametrize("name", list(SPEC))
def test_flags_of_formats(name: str) -> None:
    fmt = lp.get_format(name)
    values = value_table(fmt) if fmt.width <= 20 else None
    if values is not None:
        assert fmt.has_nan == bool(np.isnan(values).any())
        assert fmt.has_zero == bool((values == 0).any())
        assert fmt.has_negative_zero == bool(((values == 0) & np.signbit(values)).any())
        assert fmt.has_inf == bool(np.isinf(values).any())
        assert fmt.fits_float32 == bool(
            np.array_equal(values[np.isfinite(values)].astype(np.float32).astype(np.float64),
                           values[np.isfinite(values)]))
    assert fmt.max_code_magnitude == lp.encode(fmt.max, fmt)
    assert fmt.sign_mask == (1 << (fmt.width - 1) if fmt.signed else 0)


@pytest.mark.parametrize("alias,name", sorted(ALIASES.items()))
def test_aliases(alias: str, name: str) -> None:
    assert lp.get_format(alias) is lp.FORMATS[name]
    assert lp.get_format(alias.upper()) is lp.FORMATS[name]


@pytest.mark.parametrize("name", list(SPEC))
def test_dtype_lookup(name: str) -> None:
    dt = reference_dtype(name)
    if dt is None:
        assert name in ("tf32", "ue5m3")  # no numpy/ml_dtypes dtype implements them
        return
    assert lp.get_format(dt) is lp.FORMATS[name]
    assert lp.get_format(dt.type) is lp.FORMATS[name]
    # The reference dtype has the same parameters (ml_dtypes' finfo / numpy finfo).
    import ml_dtypes

    info = ml_dtypes.finfo(dt)
    fmt = lp.FORMATS[name]
    assert float(info.max) == fmt.max
    assert float(info.smallest_normal) == fmt.smallest_normal
    assert float(info.eps) == fmt.eps


def test_get_format_passes_formats_through() -> None:
    f = lp.custom_format(3, 3)
    assert lp.get_format(f) is f


@pytest.mark.parametrize("bad", ["fp7", "float8", "", "e4m3fnuzz", "int8"])
def test_unknown_name_lists_valid_names(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        lp.get_format(bad)
    msg = str(info.value)
    assert repr(bad) in msg
    for name in lp.FORMATS:
        assert name in msg


def test_unknown_dtype_and_type() -> None:
    with pytest.raises(ValueError, match="fp8_e4m3"):
        lp.get_format(np.int8)
    with pytest.raises(TypeError):
        lp.get_format(3.5)


@pytest.mark.parametrize("kwargs,match", [
    ({"exponent_bits": 0, "mantissa_bits": 3}, "exponent_bits >= 1"),
    ({"exponent_bits": 4, "mantissa_bits": -1}, "mantissa_bits >= 0"),
    ({"exponent_bits": 10, "mantissa_bits": 25}, "at most 32 bits"),
    ({"exponent_bits": 4, "mantissa_bits": 3, "has_inf": True, "nan": "max"}, "infinities"),
    ({"exponent_bits": 4, "mantissa_bits": 3, "has_inf": False, "nan": "ieee"}, "infinities"),
    ({"exponent_bits": 4, "mantissa_bits": 3, "has_inf": False, "nan": "bogus"}, "nan must be"),
    ({"exponent_bits": 4, "mantissa_bits": 3, "signed": False, "has_inf": False, "nan": "negzero"},
     "sign bit"),
    ({"exponent_bits": 4, "mantissa_bits": 3, "has_subnormals": False}, "mantissa_bits=0"),
    ({"exponent_bits": 1, "mantissa_bits": 3}, "exponent_bits >= 2"),
    # Regression: an IEEE format with no mantissa bits has no NaN code; NaN was
    # silently encoded as infinity.
    ({"exponent_bits": 3, "mantissa_bits": 0}, "mantissa_bits >= 1"),
    ({"exponent_bits": 11, "mantissa_bits": 20, "bias": 1200}, "beyond float64"),
    ({"exponent_bits": 5, "mantissa_bits": 2, "bias": -2000}, "beyond float64"),
])
def test_custom_format_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lp.custom_format(**kwargs)


def test_custom_formats_every_width() -> None:
    """Every width up to 32 bits can be built, and its values agree with the
    independent decoder (spot check on formats small enough to enumerate)."""
    for width in range(3, 33):
        e = max(2, min(8, width - 2))
        ieee = width - 1 - e > 0
        fmt = lp.custom_format(e, width - 1 - e, has_inf=ieee, nan="ieee" if ieee else "max")
        assert fmt.width == width
        if width <= 12:
            codes = np.arange(1 << width, dtype=fmt.code_dtype)
            want, got = value_table(fmt), lp.decode(codes, fmt)
            assert np.array_equal(want, got, equal_nan=True), fmt
    assert lp.custom_format(3, 4) == lp.custom_format(3, 4)
    fn = lp.custom_format(4, 3, has_inf=False)
    assert fn.nan == "max" and fn.max == 448.0
