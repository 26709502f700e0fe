"""Stochastic rounding: the two neighbours only, with the right frequencies.

Statistical checks use Bernstein's inequality, a rigorous bound that needs no
normal approximation: for k successes in N independent trials of probability
p, P(|k - N p| >= s) <= 2 exp(-s**2 / (2 (N p (1-p) + s/3))). Each check
allows a false-failure probability of ``DELTA`` = 1e-7, so the whole file
(fewer than 10 such checks) fails by chance with probability below 1e-6; the
seeds are fixed, so in practice the outcome is deterministic anyway.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import lowprec as lp

DELTA = 1e-7
FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp6_e2m3", "fp4_e2m1",
           "e8m0", "tf32", "fp32"]


def _bernstein(n: int, p: float, delta: float = DELTA) -> float:
    """s such that P(|k - n p| >= s) <= delta."""
    L = math.log(2 / delta)
    var = n * p * (1 - p)
    return L / 3 + math.sqrt((L / 3) ** 2 + 2 * var * L)


def _random_inputs(fmt, n: int, seed: int) -> np.ndarray:
    """float64 values over the format's range, subnormals and overflow included."""
    rng = np.random.default_rng(seed)
    lo = math.log2(fmt.smallest_subnormal) - 2
    hi = math.log2(fmt.max) + 1
    x = np.exp2(rng.uniform(lo, hi, n))
    x = x * np.where(rng.random(n) < 0.5, -1, 1) if fmt.signed else x
    return x


@pytest.mark.parametrize("kw", [{}, {"saturate": True}, {"subnormals": False}])
@pytest.mark.parametrize("name", FORMATS)
def test_only_the_two_neighbours(name: str, kw: dict) -> None:
    fmt = lp.get_format(name)
    x = _random_inputs(fmt, 200_000, seed=1)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    for xx in (x, x32) if fmt.fits_float32 else (x,):
        got = lp.round_to(xx, fmt, "stochastic", rng=np.random.default_rng(2), **kw)
        down = lp.round_to(xx, fmt, "rdown", **kw)
        up = lp.round_to(xx, fmt, "rup", **kw)
        ok = (got == down) | (got == up) | (np.isnan(got) & (np.isnan(down) | np.isnan(up)))
        assert ok.all(), (name, kw, xx[~ok][:3], got[~ok][:3], down[~ok][:3], up[~ok][:3])
        exact = down == up
        assert np.array_equal(got[exact], down[exact])  # representable: never moves
        if not exact.all():  # both neighbours do occur (fp32 from float32 is exact)
            assert (got != down).any() and (got != up).any()


@pytest.mark.parametrize("name,x", [
    ("fp8_e4m3", 1.0 + 1 / 3 * 0.125),  # p = 1/3 (to 2**-52)
    ("fp8_e4m3", 1.0 + 2.0**-10),  # p = 1/128
    ("fp8_e4m3", 2.0**-9 * 0.75),  # below the smallest subnormal: 0 or 2**-9
    ("fp16", 1.0 + 0.3 * 2.0**-10),
    ("bf16", -(1.0 + 0.9 * 2.0**-7)),
    ("fp4_e2m1", 5.5),  # between 4 and 6: p = 3/4
    ("e8m0", 3.0),  # between 2 and 4: p = 1/2
])
def test_frequencies_match_the_distances(name: str, x: float) -> None:
    n = 1_000_000
    fmt = lp.get_format(name)
    lo = float(lp.round_to(x, fmt, "rdown"))
    hi = float(lp.round_to(x, fmt, "rup"))
    p = (x - lo) / (hi - lo)  # exact enough: the fraction of the gap
    got = lp.round_to(np.full(n, x), fmt, "stochastic", rng=np.random.default_rng(11))
    assert set(np.unique(got).tolist()) <= {lo, hi}
    k = int(np.count_nonzero(got == hi))
    s = _bernstein(n, p)
    assert abs(k - n * p) < s, f"{name} x={x}: {k} of {n} up, expected {n * p:.0f} +- {s:.0f}"


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_mean_is_unbiased(name: str) -> None:
    """E[SR(x)] = x: the errors, in units of each x's gap, have mean zero.
    Each term (SR(x) - x) / gap lies in [-1, 1] with mean 0, so Hoeffding's
    bound P(|mean| >= t) <= 2 exp(-n t**2 / 2) gives the tolerance."""
    fmt = lp.get_format(name)
    rng = np.random.default_rng(21)
    x = _random_inputs(fmt, 1 << 20, seed=22)
    x = x[np.abs(x) < fmt.max]  # no overflow
    lo = lp.round_to(x, fmt, "rdown")
    hi = lp.round_to(x, fmt, "rup")
    inexact = lo != hi
    x, lo, hi = x[inexact], lo[inexact], hi[inexact]
    got = lp.round_to(x, fmt, "stochastic", rng=rng)
    err = (got - x) / (hi - lo)
    n = err.size
    t = math.sqrt(2 * math.log(2 / DELTA) / n)
    assert abs(err.mean()) < t, (name, err.mean(), t)
    # And it is not trivially unbiased: the errors are large individually.
    assert np.abs(err).mean() > 0.2


def test_same_seed_same_result() -> None:
    x = _random_inputs(lp.get_format("fp8_e4m3"), 100_000, seed=3)
    a = lp.round_to(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(7))
    b = lp.round_to(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(7))
    c = lp.round_to(x, "fp8_e4m3", "stochastic", rng=7)
    d = lp.round_to(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(8))
    assert np.array_equal(a, b, equal_nan=True) and np.array_equal(a, c, equal_nan=True)
    assert not np.array_equal(a, d, equal_nan=True)
    # encode and round_to draw the same words: the same choices.
    codes = lp.encode(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(7))
    assert np.array_equal(lp.decode(codes, "fp8_e4m3"), a, equal_nan=True)
    # A Generator is consumed: two calls in a row differ.
    g = np.random.default_rng(7)
    assert not np.array_equal(lp.round_to(x, "fp8_e4m3", "stochastic", rng=g),
                              lp.round_to(x, "fp8_e4m3", "stochastic", rng=g), equal_nan=True)


def test_float32_and_float64_inputs_agree() -> None:
    """The float32 fast path and the float64 path make the same choices from the
    same random words (both round up iff the top bits of the word are below the
    dropped fraction)."""
    x32 = _random_inputs(lp.get_format("fp8_e5m2"), 100_000, seed=4).astype(np.float32)
    for name in ("fp8_e5m2", "bf16", "fp16"):
        a = lp.round_to(x32, name, "stochastic", rng=5)
        b = lp.round_to(x32.astype(np.float64), name, "stochastic", rng=5)
        assert np.array_equal(a.astype(np.float64), b, equal_nan=True), name


@pytest.mark.parametrize("name", ["fp8_e4m3", "bf16"])
def test_independent_of_thread_count(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = (1 << 21) + 12_345  # several chunks, split across threads
    x = _random_inputs(lp.get_format(name), n, seed=6)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("LOWPREC_NUM_THREADS", threads)
        results.append(lp.encode(x, name, "stochastic", rng=np.random.default_rng(9)))
        with np.errstate(over="ignore"):
            x32 = x.astype(np.float32)
        results.append(lp.encode(x32, name, "stochastic", rng=np.random.default_rng(9)))
    assert np.array_equal(results[0], results[2]) and np.array_equal(results[0], results[4])
    assert np.array_equal(results[1], results[3]) and np.array_equal(results[1], results[5])


def test_rng_is_only_for_stochastic() -> None:
    with pytest.raises(ValueError, match="stochastic"):
        lp.round_to(1.0, "fp16", "rne", rng=1)
    with pytest.raises(TypeError, match="Generator"):
        lp.round_to(1.0, "fp16", "stochastic", rng="seed")


@pytest.mark.parametrize("name", ["fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_flags_describe_the_result(name: str) -> None:
    """Stochastic flags follow the value actually chosen: inexact iff it differs
    from x, overflow iff x rounded beyond max, underflow only for tiny results."""
    fmt = lp.get_format(name)
    x = _random_inputs(fmt, 200_000, seed=31)
    codes, flags = lp.encode(x, fmt, "stochastic", rng=np.random.default_rng(32), flags=True)
    got = lp.decode(codes, fmt)
    over = np.abs(x) > fmt.max
    assert ((flags & 0x01) != 0).tolist() == ((got != x) | over).tolist()
    assert not (flags[np.abs(x) <= fmt.max] & 0x04).any()
    # Beyond max + one step every draw overflows; just above max some do not.
    assert (flags[np.abs(x) >= 2 * fmt.max] & 0x04).all()
    tiny = (flags & 0x02) != 0
    assert (np.abs(x[tiny]) < fmt.smallest_normal).all()
    assert (np.abs(got[tiny]) <= fmt.smallest_normal).all()
