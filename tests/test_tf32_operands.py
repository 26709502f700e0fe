"""The hardware's TF32 operand conversion: ``lp.matmul(..., operand_rounding="rtz")``.

A TF32 tensor core fed FP32 data ignores the low 13 fraction bits of every operand (PTX
ISA; MMA-Sim's ``truncate_to_tf32``). The reference here is independent of lowprec's
rounding code: the FP32 bit pattern masked with ``0xFFFFE000``.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp


def _truncate_bits(x: np.ndarray) -> np.ndarray:
    """TF32 truncation of float32 values by masking their bits (sign-magnitude)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32).astype(np.float64)


def _fp32_operands(rng, shape):
    """float32 values with random low bits, a wide exponent range and both signs."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
    x = x.astype(np.float32)
    x.flat[:4] = [np.float32(3.4e38), np.float32(-3.4e38), np.float32(1e-40),
                  np.float32(-1.5e-39)][: x.size]
    return x


@pytest.mark.parametrize("model", ["a100", "h100", "exact", "sequential"])
def test_rtz_operands_equal_pretruncated(model):
    rng = np.random.default_rng(37)
    a, b = _fp32_operands(rng, (12, 40)), _fp32_operands(rng, (40, 9))
    a[0, :4] = b[:4, 0] = 0  # keep the huge values out of products that overflow
    got = lp.matmul(a, b, inputs="tf32", model=model, operand_rounding="rtz")
    want = lp.matmul(_truncate_bits(a), _truncate_bits(b), inputs="tf32", model=model)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    also = lp.matmul(lp.round_to(a, "tf32", mode="rtz"), lp.round_to(b, "tf32", mode="rtz"),
                     inputs="tf32", model=model)
    np.testing.assert_array_equal(got.view(np.uint64), also.view(np.uint64))


def test_rtz_differs_from_rne_where_rounding_differs():
    rng = np.random.default_rng(1)
    a, b = _fp32_operands(rng, (16, 32)), _fp32_operands(rng, (32, 16))
    a[0, :4] = b[:4, 0] = 0
    assert (_truncate_bits(a) != lp.round_to(a.astype(np.float64), "tf32")).any()
    rtz = lp.matmul(a, b, inputs="tf32", model="a100", operand_rounding="rtz")
    rne = lp.matmul(a, b, inputs="tf32", model="a100")
    assert (rtz != rne).mean() > 0.5
    # Operands already TF32: both conversions leave them alone.
    ta, tb = _truncate_bits(a), _truncate_bits(b)
    np.testing.assert_array_equal(
        lp.matmul(ta, tb, inputs="tf32", model="a100", operand_rounding="rtz"),
        lp.matmul(ta, tb, inputs="tf32", model="a100"))


def test_one_value_between_tf32_neighbours():
    x = np.array([[1 + 2.0**-10 + 2.0**-11]])  # above the midpoint of two TF32 values
    assert lp.matmul(x, [[1.0]], inputs="tf32", model="h100")[0, 0] == 1 + 2.0**-9
    assert lp.matmul(x, [[1.0]], inputs="tf32", model="h100",
                     operand_rounding="rtz")[0, 0] == 1 + 2.0**-10
    top = np.finfo(np.float32).max  # RNE rounds it up past TF32's largest value; RTZ does not
    big = np.array([[top]], dtype=np.float64)
    assert np.isinf(lp.matmul(big, [[1.0]], inputs="tf32", model="exact")[0, 0])
    assert lp.matmul(big, [[1.0]], inputs="tf32", model="exact",
                     operand_rounding="rtz")[0, 0] == _truncate_bits(top)


def test_default_unchanged_and_bad_values():
    a = np.array([[1 + 2.0**-11 + 2.0**-12]])
    assert lp.matmul(a, [[1.0]], inputs="tf32") == lp.matmul(a, [[1.0]], inputs="tf32",
                                                              operand_rounding="rne")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        lp.matmul(a, [[1.0]], inputs="tf32", operand_rounding="truncate-ish")
    with pytest.raises(ValueError, match="deterministic"):
        lp.matmul(a, [[1.0]], inputs="tf32", operand_rounding="stochastic")
    with pytest.raises(TypeError, match="operand_rounding"):
        lp.matmul(a, [[1.0]], inputs="tf32", operand_rounding=3)
