"""The fast paths (vectorised float32 kernels, stochastic words made in the
kernels) against the reference kernels built on round_pack.

``encode(..., flags=True)`` always takes the reference path (convert_one ->
round_pack), ``encode`` and ``round_to`` without flags take the fast ones, and
both draw the same stochastic-rounding words, so they must agree bit for bit,
in every mode, stochastic included.
"""

import numpy as np
import pytest

import lowprec as lp
from lowprec._kernels import engine as _engine

FORMATS = ["fp32", "fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e3m4",
           "fp6_e3m2", "fp6_e2m3", "fp4_e2m1"]


def _inputs(fmt, is64=False):
    """Bit patterns spread over the whole float32 range, specials, and every
    midpoint between neighbours of the format with one nextafter step each side."""
    f = lp.get_format(fmt)
    pat = (np.arange(1 << 17, dtype=np.uint64) * 32771 + 7) % (1 << 32)
    x = pat.astype(np.uint32).view(np.float32)
    v = np.unique(lp.decode(np.arange(min(1 << f.width, 1 << 16)), f))
    v = v[np.isfinite(v)]
    mids = ((v[1:] + v[:-1]) / 2).astype(np.float32)
    with np.errstate(over="ignore"):  # max * 4 is inf in float32 for bf16
        near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)),
                               np.nextafter(mids, np.float32(-np.inf)),
                               v.astype(np.float32), [f.max * 1.01, -f.max * 4,
                               f.smallest_subnormal / 4, -f.smallest_subnormal / 2]]
                              ).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38],
                       np.float32)
    x = np.concatenate([x, near, special])
    if not f.has_nan:
        x = x[~np.isnan(x)]
    if is64:
        with np.errstate(invalid="ignore"):  # signalling NaN patterns
            return x.astype(np.float64)
    return x


@pytest.mark.parametrize("fmt", FORMATS)
def test_fast_equals_reference_every_mode_float32(fmt):
    f = lp.get_format(fmt)
    x = _inputs(f)
    for mode in lp.MODES:
        kw = {"rng": 12} if mode == "stochastic" else {}
        ref, _ = lp.encode(x, f, mode, flags=True, **kw)
        fast = lp.encode(x, f, mode, **kw)
        bad = np.flatnonzero(fast != ref)
        assert bad.size == 0, (
            f"{fmt} {mode}: first mismatch x={x[bad[0]]!r} (bits {x.view(np.uint32)[bad[0]]:#x})"
            f" fast {int(fast[bad[0]]):#x} reference {int(ref[bad[0]]):#x}")
        vals = lp.round_to(x, f, mode, **kw)
        want = lp.decode(ref, f).astype(np.float32)
        same = (vals.view(np.uint32) == want.view(np.uint32)) | (np.isnan(vals) & np.isnan(want))
        assert same.all(), f"{fmt} {mode}: round_to differs at x={x[~same][0]!r}"


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e5m2", "fp4_e2m1"])
def test_fast_equals_reference_float64(fmt):
    x = _inputs(fmt, is64=True)
    x = np.concatenate([x, x * (1 + 2.0**-40)])  # bits below float32's precision
    for mode in lp.MODES:
        kw = {"rng": 5} if mode == "stochastic" else {}
        ref, _ = lp.encode(x, fmt, mode, flags=True, **kw)
        np.testing.assert_array_equal(lp.encode(x, fmt, mode, **kw), ref)


def test_stochastic_is_independent_of_threads_and_chunks(monkeypatch):
    x = np.random.default_rng(0).standard_normal(300_000).astype(np.float32)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("LOWPREC_NUM_THREADS", threads)
        runs.append(lp.round_to(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(9)))
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    # A prefix of whole blocks gets the same words as the whole array.
    n = 3 * _engine.SR_BLOCK
    np.testing.assert_array_equal(lp.round_to(x[:n], "fp8_e4m3", "stochastic", rng=9),
                                  runs[0][:n])
    assert not np.array_equal(lp.round_to(x, "fp8_e4m3", "stochastic", rng=10), runs[0])


def test_sr_word_is_splitmix64():
    # SplitMix64 written out in Python integers (Steele, Lea & Flood 2014):
    # state += golden; z = state; z = (z ^ z >> 30) * c1; z = (z ^ z >> 27) * c2; z ^ z >> 31.
    mask = (1 << 64) - 1

    def splitmix(state, count):
        out = []
        for _ in range(count):
            state = (state + 0x9E3779B97F4A7C15) & mask
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            out.append(z ^ (z >> 31))
        return out

    for seed in (0, 1, 0xDEADBEEF, mask):
        want = splitmix(seed, 50)
        got = [int(_engine.sr_word(np.uint64(seed), j)) for j in range(50)]
        assert got == want


def test_stochastic_frequencies_match_distances():
    # 0.1 in float32 lies between fp8_e4m3 values 0.09375 and 0.1015625; it rounds up
    # with probability p = (x - lo) / (hi - lo). n = 400,000 draws: a 6-sigma band
    # gives a false-failure rate below 2e-9.
    x32 = np.float32(0.1)
    lo, hi = 0.09375, 0.1015625
    p = (float(x32) - lo) / (hi - lo)
    n = 400_000
    r = lp.round_to(np.full(n, x32), "fp8_e4m3", "stochastic", rng=2024)
    assert set(np.unique(r)) == {np.float32(lo), np.float32(hi)}
    freq = np.mean(r == np.float32(hi))
    assert abs(freq - p) < 6 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("is64", [False, True])
def test_formats_without_mantissa_bits_round_ties_up(is64):
    # With m = 0 every significand is 1 (odd), so a tie goes to the larger
    # power of two, as ml_dtypes does for e8m0 (3 -> 4, 6 -> 8, 1.5 -> 2).
    from lowprec.formats import custom_format

    dt = np.float64 if is64 else np.float32
    x = np.array([3.0, 6.0, 12.0, 0.75, -3.0, 1.5, 2.9], dt)
    for f in (custom_format(4, 0, has_inf=False, nan="max"),
              custom_format(3, 0, has_inf=False, nan="none")):
        ref, _ = lp.encode(x, f, flags=True)
        np.testing.assert_array_equal(lp.encode(x, f), ref)
        np.testing.assert_array_equal(lp.round_to(x, f), [4, 8, 16, 1, -4, 2, 2])
