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
