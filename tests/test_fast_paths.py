"""The fast paths (vectorised float32 kernels, stochastic words made in the
kernels) against the reference kernels built on round_pack.

``encode`` and ``round_to`` take ``_kernels.convert``'s fast path; the tests
call its ``path="reference"`` (convert_one -> round_pack for every element)
with the same stochastic-rounding seeds, so both must agree bit for bit, in
every mode, stochastic included.
"""

import numpy as np
import pytest

import lowprec as lp
from lowprec._kernels import bits32, convert, params, sr
from lowprec._runtime import _CHUNK, _SPLIT_MIN

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


def _reference(x, fmt, mode, rng=None, values=False):
    """Codes (or values) of ``x`` through the reference path of ``_kernels.convert``,
    with the stochastic-rounding seeds that encode and round_to draw from ``rng``."""
    f = lp.get_format(fmt)
    bits = x.view(np.uint64 if x.dtype == np.float64 else np.uint32)
    assert bits.size <= _CHUNK  # one chunk: encode draws all its seeds at once
    seeds = (np.random.default_rng(rng).bit_generator.random_raw(-(-bits.size // sr.SR_BLOCK))
             if mode == "stochastic" else np.empty(0, np.uint64))
    if values:
        out = np.empty(bits.size, np.float32 if x.dtype == np.float32 else np.float64)
        res = convert.to_values(f, bits, params.MODE_INT[mode], out, seeds=seeds,
                                path="reference")
    else:
        out = np.empty(bits.size, f.code_dtype)
        res = convert.to_codes(f, bits, params.MODE_INT[mode], out, seeds=seeds,
                               path="reference")
    assert res == (-1, 0)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_fast_equals_reference_every_mode_float32(fmt):
    f = lp.get_format(fmt)
    x = _inputs(f)
    # The fast side really takes a fast kernel: the branch-free bits32 one for
    # every format it supports, the vectorised one for fp32.
    assert convert.fast_path(f, False, True, False) == ("bits32" if bits32.supports(f)
                                                        else "vec32")
    for mode in lp.MODES:
        kw = {"rng": 12} if mode == "stochastic" else {}
        ref = _reference(x, f, mode, **kw)
        fast = lp.encode(x, f, mode, **kw)
        bad = np.flatnonzero(fast != ref)
        assert bad.size == 0, (
            f"{fmt} {mode}: first mismatch x={x[bad[0]]!r} (bits {x.view(np.uint32)[bad[0]]:#x})"
            f" fast {int(fast[bad[0]]):#x} reference {int(ref[bad[0]]):#x}")
        vals = lp.round_to(x, f, mode, **kw)
        want = lp.decode(ref, f).astype(np.float32)
        same = (vals.view(np.uint32) == want.view(np.uint32)) | (np.isnan(vals) & np.isnan(want))
        assert same.all(), f"{fmt} {mode}: round_to differs at x={x[~same][0]!r}"
        ref_vals = _reference(x, f, mode, values=True, **kw)
        assert np.array_equal(vals.view(np.uint32), ref_vals.view(np.uint32))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e5m2", "fp4_e2m1"])
def test_fast_equals_reference_float64(fmt):
    x = _inputs(fmt, is64=True)
    x = np.concatenate([x, x * (1 + 2.0**-40)])  # bits below float32's precision
    # float64 through float32 rounded to odd (odd64), stochastic on the scalar kernel.
    assert convert.fast_path(lp.get_format(fmt), True, True, False) == "odd64"
    for mode in lp.MODES:
        kw = {"rng": 5} if mode == "stochastic" else {}
        np.testing.assert_array_equal(lp.encode(x, fmt, mode, **kw), _reference(x, fmt, mode, **kw))


def test_stochastic_is_independent_of_threads_and_chunks(monkeypatch):
    # Long enough to be split across threads (_runtime._run_split).
    x = np.random.default_rng(0).standard_normal(2 * _SPLIT_MIN + 12_345).astype(np.float32)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("LOWPREC_NUM_THREADS", threads)
        runs.append(lp.round_to(x, "fp8_e4m3", "stochastic", rng=np.random.default_rng(9)))
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    # A prefix of whole blocks gets the same words as the whole array.
    n = 3 * sr.SR_BLOCK
    np.testing.assert_array_equal(lp.round_to(x[:n], "fp8_e4m3", "stochastic", rng=9),
                                  runs[0][:n])
    assert not np.array_equal(lp.round_to(x, "fp8_e4m3", "stochastic", rng=10), runs[0])


def test_sr_word_is_the_documented_generator():
    # sr.py's generator written out in Python integers: a Weyl sequence in the low
    # half of the block seed, hashed with the high half by lowbias32 (Wellons).
    m32 = (1 << 32) - 1

    def lowbias32(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & m32
        x ^= x >> 15
        x = (x * 0x846CA68B) & m32
        return x ^ (x >> 16)

    def words(seed, count):
        k0, k1 = seed & m32, seed >> 32
        out = []
        for j in range(count):
            z = (k0 + (j + 1) * 0x9E3779B9) & m32
            hi = lowbias32(z ^ k1)
            out.append(hi << 32 | lowbias32((k1 + hi) & m32))
        return out

    for seed in (0, 1, 0xDEADBEEF, 0x0123456789ABCDEF, (1 << 64) - 1):
        want = words(seed, 50)
        assert [int(sr.sr_word(np.uint64(seed), j)) for j in range(50)] == want
        got = np.empty(50, np.uint64)
        sr.sr_fill(np.uint64(seed), got, 50)
        assert got.tolist() == want
    # The loops keep the Weyl state; a block's last words wrap it past 2**32.
    seed = 0xFFFFFFFF_FFFFF000
    assert sr.sr_expand(np.array([seed], np.uint64), sr.SR_BLOCK)[-3:].tolist() == \
        words(seed, sr.SR_BLOCK)[-3:]


def test_sr_words_are_uniform_and_uncorrelated():
    # 2**20 words of 256 blocks: every byte of the top half and of the bottom half
    # equally often (chi-square, 255 degrees of freedom, p > 1e-6 bounds), and the
    # top halves of neighbours uncorrelated (|r| < 6 sigma).
    seeds = np.random.default_rng(5).integers(0, 2**64, 256, dtype=np.uint64)
    w = sr.sr_expand(seeds, 256 * sr.SR_BLOCK)
    for half in (w >> np.uint64(32), w & np.uint64(0xFFFFFFFF)):
        for shift in (0, 8, 16, 24):
            counts = np.bincount(((half >> np.uint64(shift)) & np.uint64(255)).astype(np.int64),
                                 minlength=256)
            expected = w.size / 256
            assert ((counts - expected) ** 2 / expected).sum() < 380
    hi = (w >> np.uint64(32)).astype(np.float64)
    r = np.corrcoef(hi[:-1], hi[1:])[0, 1]
    assert abs(r) < 6 / np.sqrt(w.size)


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
        assert convert.fast_path(f, is64, True, False) == ("odd64" if is64 else "bits32")
        np.testing.assert_array_equal(lp.encode(x, f), _reference(x, f, "rne"))
        np.testing.assert_array_equal(lp.round_to(x, f), [4, 8, 16, 1, -4, 2, 2])


def test_entry_points_refuse_what_they_cannot_do():
    f = lp.get_format("fp8_e4m3")
    bits = np.ones(3, np.float32).view(np.uint32)
    codes = np.empty(3, np.uint8)
    with pytest.raises(ValueError, match="path must be one of"):
        convert.to_codes(f, bits, params.RNE, codes, path="quick")
    with pytest.raises(ValueError, match="flags come from path='reference'"):
        convert.to_codes(f, bits, params.RNE, codes, flags=np.empty(3, np.uint8), path="fast")
    with pytest.raises(ValueError, match="seed per"):
        convert.to_codes(f, bits, params.STOCHASTIC, codes, path="reference")
    with pytest.raises(TypeError, match="uint32/uint64"):
        convert.to_codes(f, bits.view(np.int32), params.RNE, codes)
    # bits32 flushes to zero and takes e8m0; vec32 (fp32) does not flush.
    assert convert.fast_path(f, False, True, True) == "bits32"
    assert convert.fast_path(lp.get_format("fp32"), False, True, True) == "scalar"
    assert convert.fast_path(lp.get_format("e8m0"), False, True, False) == "bits32"
    assert convert.fast_path(f, False, False, False) == "reference"
