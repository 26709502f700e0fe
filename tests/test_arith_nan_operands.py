"""NaN operands of any payload: quiet or signaling as their bits say (IEEE 754 6.2, 7.2).

A float64 NaN passed to ``lp.add(..., "fp16")`` must be treated like the same NaN held
in a float16 array: a signaling NaN (quiet bit clear) makes the operation invalid, a
quiet one does not, and the result is the format's canonical quiet NaN either way.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp

INVALID = 0x10


def f64(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).view(np.float64)


# float64 NaNs: signaling (quiet bit 51 clear, payload non-zero) and quiet, both signs,
# payloads at the bottom, the top and in the middle of the fraction.
SIGNALING = f64([0x7FF0000000000001, 0xFFF0000000000001, 0x7FF4000000000000,
                 0x7FF7FFFFFFFFFFFF, 0xFFF0000100000000])
QUIET = f64([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000001, 0x7FFFFFFFFFFFFFFF])

OPS = {
    "add": lambda a, f: lp.add(a, 1.0, f, flags=True),
    "sub": lambda a, f: lp.sub(1.0, a, f, flags=True),
    "mul": lambda a, f: lp.mul(a, 2.0, f, flags=True),
    "div": lambda a, f: lp.div(1.0, a, f, flags=True),
    "sqrt": lambda a, f: lp.sqrt(a, f, flags=True),
    "fma": lambda a, f: lp.fma(1.0, 1.0, a, f, flags=True),
}


def own_dtype_snan(fmt: str) -> np.ndarray:
    """Signaling NaNs stored in the format's own numpy/ml_dtypes dtype (its codes)."""
    f = lp.get_format(fmt)
    ones = ((1 << f.exponent_bits) - 1) << f.mantissa_bits
    codes = np.array([ones | 1, f.sign_mask | ones | 1], dtype=f.code_dtype)
    return codes.view(lp.formats.reference_dtype(f))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e5m2", "fp32", "fp8_e4m3_ieee"])
@pytest.mark.parametrize("op", list(OPS))
def test_signaling_nan_is_invalid_quiet_is_not(fmt, op):
    result, flags = OPS[op](SIGNALING, fmt)
    assert np.isnan(result).all()
    assert (flags == INVALID).all(), f"{op} on a signaling NaN in {fmt}: flags {flags}"
    result, flags = OPS[op](QUIET, fmt)
    assert np.isnan(result).all() and (flags == 0).all()


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e5m2"])
def test_same_as_the_formats_own_array(fmt):
    """float64 sNaN operands give the codes and flags of the own-dtype sNaN operands."""
    mine = own_dtype_snan(fmt)
    one = np.ones(2, dtype=mine.dtype)
    for op in ("add", "mul", "div"):
        fn = getattr(lp, op)
        a_codes, a_flags = fn(f64([0x7FF0000000000001, 0xFFF0000000000001]), 1.0, fmt,
                              flags=True)
        b_values, b_flags = fn(mine, one, fmt, flags=True)
        assert np.array_equal(lp.encode(a_codes, fmt), lp.encode(b_values.astype(np.float64),
                                                                  fmt))
        assert np.array_equal(a_flags, b_flags) and (a_flags == INVALID).all()


def test_result_is_the_canonical_quiet_nan():
    codes = lp.add(SIGNALING, 1.0, "fp16", codes=False)
    assert np.isnan(codes).all()
    as_f16 = lp.add(SIGNALING.astype(np.float16), np.float16(1.0), "fp16")
    bits = as_f16.view(np.uint16) & 0x7FFF
    assert (bits == 0x7E00).all()  # exponent all ones, quiet bit set, no payload


def test_formats_without_signaling_nans_refuse_with_the_reason():
    # OCP fn formats have one NaN code (quiet): a signaling NaN cannot be held
    with pytest.raises(ValueError, match="is a signaling NaN .* fp8_e4m3 has no signaling NaN"):
        lp.add(SIGNALING[:1], 1.0, "fp8_e4m3")
    result, flags = lp.add(QUIET, 1.0, "fp8_e4m3", flags=True)
    assert np.isnan(result).all() and (flags == 0).all()
    with pytest.raises(ValueError, match="is NaN, and fp4_e2m1 has no NaN"):
        lp.add(QUIET[:1], 1.0, "fp4_e2m1")


def test_scalar_snan_message_is_gone():
    """The issue's case: a float64 sNaN scalar into lp.add(..., 'fp16')."""
    snan = float(SIGNALING[0])
    result, flags = lp.add(snan, 1.0, "fp16", flags=True)
    assert np.isnan(result) and flags == INVALID
    assert np.isnan(lp.add(snan, 1.0, "fp16"))  # the float64 fast path takes it too
