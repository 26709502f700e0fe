"""The fast routes of lowprec.arith against its exact integer kernel.

``flags=True`` always takes the integer kernel (``_kernels.arith.op_kernel``);
without flags, bf16/tf32 sums go through float64 rounded to odd (TwoSum) and
float32 operands are checked by the bits32 kernel. Both must agree bit for bit.
"""

import numpy as np
import pytest

import lowprec as lp

MODES = [m for m in lp.MODES if m != "stochastic"]


def _values(fmt, n, seed):
    """Values of fmt spread over its whole range, with zeros, infinities, NaN,
    the extremes and many pairs that cancel or are far apart."""
    f = lp.get_format(fmt)
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << f.width, n)
    v = lp.decode(codes, f)
    v[: n // 4] = v[n // 4: n // 2] * rng.choice([-1.0, 1.0], n // 4)  # cancellations
    v[::53] = 0.0
    v[1::53] = -0.0
    v[2::97] = f.max
    v[3::97] = f.smallest_subnormal
    return v.astype(np.float32)


@pytest.mark.parametrize("fmt", ["bf16", "tf32"])
@pytest.mark.parametrize("op", ["add", "sub"])
def test_sum_rounded_to_odd_equals_integer_kernel(fmt, op):
    a = _values(fmt, 40_000, 1)
    b = _values(fmt, 40_000, 2)
    fn = getattr(lp, op)
    for mode in MODES:
        for kw in ({}, {"saturate": True}, {"subnormals": False}):
            fast = fn(a, b, fmt, mode, **kw)
            exact, _ = fn(a, b, fmt, mode, flags=True, **kw)
            same = (fast.view(np.uint32) == exact.astype(np.float32).view(np.uint32)) | (
                np.isnan(fast) & np.isnan(exact))
            assert same.all(), (
                f"{op} {fmt} {mode} {kw}: a={a[~same][0]!r} b={b[~same][0]!r}: "
                f"fast {fast[~same][0]!r}, exact {exact[~same][0]!r}")


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e4m3fnuz", "fp4_e2m1", "e8m0"])
def test_float32_operand_check_is_the_kernels(fmt):
    f = lp.get_format(fmt)
    good = _values(fmt, 5000, 3)
    if not f.signed:
        good = np.abs(good)
    good = good[~np.isnan(good)]
    if fmt == "e8m0":
        good = good[good != 0]
    np.testing.assert_array_equal(lp.mul(good, good, fmt, codes=False),
                                  lp.mul(good.astype(np.float64), good, fmt))
    bad = [np.float32(0.1), np.float32(np.inf), np.float32(-0.0), np.float32(1e30),
           np.float32(np.nan)]
    for x in bad:
        arr = np.array([1.0, x], np.float32) if f.signed or x >= 0 else None
        if arr is None:
            continue
        try:
            want = lp.mul(arr.astype(np.float64), 1.0, fmt)
        except ValueError as e:  # the float64 path refuses: so must the float32 one
            with pytest.raises(ValueError, match="operand a: element 1") as got:
                lp.mul(arr, np.float32(1.0), fmt)
            assert str(got.value) == str(e)
        else:
            np.testing.assert_array_equal(lp.mul(arr, np.float32(1.0), fmt), want)
