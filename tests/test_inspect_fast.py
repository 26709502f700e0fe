"""The compiled helpers of ``lowprec.inspect`` against plain numpy: the exponent
histogram (subnormals included), the finite amax, and the worst-block selection."""

from __future__ import annotations

import numpy as np
import pytest

from lowprec.inspect.report import _finite_amax
from lowprec.inspect.stats import _smallest, exponent_histogram


def _numpy_histogram(v: np.ndarray) -> dict[int, int]:
    """floor(log2 |v|) of every finite non-zero value, through numpy's frexp."""
    v = v[np.isfinite(v) & (v != 0)].astype(np.float64)
    exps, counts = np.unique(np.frexp(v)[1] - 1, return_counts=True)
    return {int(k): int(c) for k, c in zip(exps, counts)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exponent_histogram_of_random_bit_patterns(dtype):
    rng = np.random.default_rng(0)
    if dtype == np.float32:
        bits = rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32)
        subn = rng.integers(1, 1 << 23, 3000, dtype=np.uint32)  # every subnormal binade
        v = np.concatenate([bits, subn, subn | np.uint32(1 << 31)]).view(np.float32)
    else:
        bits = rng.integers(0, 1 << 63, 100_000, dtype=np.uint64)
        subn = rng.integers(1, 1 << 52, 3000, dtype=np.uint64) >> rng.integers(0, 52, 3000,
                                                                                dtype=np.uint64)
        v = np.concatenate([bits, np.maximum(subn, 1)]).view(np.float64)
    v = np.concatenate([v, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)])
    hist = exponent_histogram(v)
    assert hist == _numpy_histogram(v)
    assert list(hist) == sorted(hist)


def test_finite_amax_leaves_out_nan_and_inf():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64, np.float16):
        v = (rng.standard_normal(1000) * 100).astype(dtype)
        v[[3, 9, 20]] = [np.nan, np.inf, -np.inf]
        assert _finite_amax(v) == float(np.max(np.abs(v[np.isfinite(v)])))
    assert _finite_amax(np.array([np.nan, -np.inf])) == 0.0
    assert _finite_amax(np.zeros(0, np.float32)) == 0.0


def test_smallest_is_the_head_of_a_stable_argsort():
    rng = np.random.default_rng(2)
    for n in (0, 1, 7, 300):
        for k in (0, 1, 5, 400):
            key = rng.integers(-3, 3, n).astype(float)
            key[rng.random(n) < 0.2] = -np.inf
            assert np.array_equal(_smallest(key, k), np.argsort(key, kind="stable")[:k])


def test_loss_scale_in_float32_gives_the_exact_products_rounding():
    """fp16 under a power-of-two loss scale: x * scale formed in float32 rounds to the
    same fp16 values as the exact float64 product, overflow and underflow included."""
    from lowprec import get_format, round_to
    from lowprec.inspect.recipes import _cast, _scale_in_float32

    rng = np.random.default_rng(3)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520], np.float32)])
    fp16 = get_format("fp16")
    for scale in (2.0 ** -125, 2.0 ** -30, 0.5, 2.0, 2.0 ** 16, 2.0 ** 100, 2.0 ** 127):
        assert _scale_in_float32(x, fp16, scale)
        got = _cast(x, fp16, scale)
        with np.errstate(invalid="ignore"):  # the random bits hold signalling NaNs
            exact = np.asarray(round_to(x.astype(np.float64) * scale, fp16), np.float64)
        assert got.elements.tobytes() == exact.tobytes()
        assert got.q.tobytes() == (exact / scale).tobytes()
    assert not _scale_in_float32(x, fp16, 1000.0)  # not a power of two: float64 it is
    assert not _scale_in_float32(x, get_format("bf16"), 2.0)  # float32 subnormals matter
