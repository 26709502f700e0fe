"""Properties every rounding must have (hypothesis), and fast path == generic path.

* monotonic: x <= y implies round(x) <= round(y) (with saturate, so that no
  overflow NaN of a format without inf breaks the order);
* idempotent: round(round(x)) == round(x);
* rdown(x) <= x <= rup(x); |rtz(x)| <= |x|;
* sign-symmetric: round(-x) == -round(x) for rne, rna, rtz, odd, and
  rup(-x) == -rdown(x);
* decode(encode(x)) == round_to(x), float32 and float64 inputs agree;
* ``fast.fast_kernel`` (the specialised path) gives the same codes and
  values as ``engine.encode_kernel``/``round_kernel`` (the reference path
  through ``round_pack``) on random float32 and float64 bit patterns, in every
  mode (stochastic with the same random words), saturate and flush-to-zero on
  and off.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from lowprec._kernels import engine, fast, params

FORMATS = list(lp.FORMATS)
DET_MODES = ["rne", "rna", "rtz", "rup", "rdown", "odd"]
SYMMETRIC = ["rne", "rna", "rtz", "odd"]
SETTINGS = settings(max_examples=300, deadline=None)

finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)
small64 = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64) | st.floats(
    min_value=-1e-3, max_value=1e-3, allow_nan=False, width=64)
any_float = finite64 | small64
fmt_names = st.sampled_from(FORMATS)
modes = st.sampled_from(DET_MODES)


def _r(x, fmt, mode, **kw) -> float:
    if not lp.get_format(fmt).signed and x < 0:
        x = -x  # unsigned formats: negatives are NaN, a tested rule of its own
    return float(lp.round_to(np.float64(x), fmt, mode, **kw))


@SETTINGS
@given(any_float, any_float, fmt_names, modes)
def test_monotonic(x: float, y: float, fmt: str, mode: str) -> None:
    x, y = sorted((x, y))
    if not lp.get_format(fmt).signed:
        x, y = abs(x), abs(y)
        x, y = sorted((x, y))
        if x == 0:
            return  # e8m0 has no zero: 0 -> NaN
    assert _r(x, fmt, mode, saturate=True) <= _r(y, fmt, mode, saturate=True)


@SETTINGS
@given(any_float, fmt_names, modes, st.booleans(), st.booleans())
def test_idempotent(x: float, fmt: str, mode: str, saturate: bool, subnormals: bool) -> None:
    kw = {"saturate": saturate, "subnormals": subnormals}
    once = _r(x, fmt, mode, **kw)
    if np.isnan(once) or (once == 0 and not lp.get_format(fmt).has_zero):
        return
    twice = _r(once, fmt, mode, **kw)
    assert twice == once and np.signbit(twice) == np.signbit(once)


@SETTINGS
@given(any_float, fmt_names)
def test_directed_modes_bracket_x(x: float, fmt: str) -> None:
    f = lp.get_format(fmt)
    if not f.signed:
        x = abs(x)
        if x < f.smallest_subnormal:
            return  # e8m0: tiny values go to 2**-127 in every mode (documented)
    if f.nan == "none" and abs(x) > f.max:
        return  # no inf and no NaN: overflow saturates in every mode (documented)
    down, up = _r(x, fmt, "rdown"), _r(x, fmt, "rup")
    if not np.isnan(down):
        assert down <= x
    if not np.isnan(up):
        assert x <= up
    assert abs(_r(x, fmt, "rtz")) <= abs(x)
    # Directed results are neighbours: their codes are adjacent (same sign).
    if np.isfinite(down) and np.isfinite(up) and down < up and (down > 0 or up < 0):
        cd, cu = (int(lp.encode(v, f)) & ~f.sign_mask for v in (down, up))
        assert abs(cd - cu) == 1


@SETTINGS
@given(any_float, st.sampled_from([n for n in FORMATS if lp.get_format(n).signed]),
       st.sampled_from(SYMMETRIC), st.booleans())
def test_sign_symmetric(x: float, fmt: str, mode: str, saturate: bool) -> None:
    a = _r(x, fmt, mode, saturate=saturate)
    b = _r(-x, fmt, mode, saturate=saturate)
    assert (a == -b) or (np.isnan(a) and np.isnan(b))
    up, down = _r(-x, fmt, "rup"), _r(x, fmt, "rdown")
    assert (up == -down) or (np.isnan(up) and np.isnan(down))


@SETTINGS
@given(st.floats(width=32), fmt_names, st.sampled_from(DET_MODES + ["stochastic"]),
       st.booleans(), st.booleans())
def test_encode_decode_and_dtypes_agree(x: float, fmt: str, mode: str, saturate: bool,
                                        subnormals: bool) -> None:
    f = lp.get_format(fmt)
    if np.isnan(x) and not f.has_nan:
        return
    if not f.signed:
        x = abs(x)
    kw = {"saturate": saturate, "subnormals": subnormals}
    if mode == "stochastic":
        kws = [dict(kw, rng=np.random.default_rng(1)) for _ in range(4)]
    else:
        kws = [kw] * 4
    x32 = np.array([x], np.float32)
    v32 = lp.round_to(x32, f, mode, **kws[0]).astype(np.float64)
    v64 = lp.round_to(x32.astype(np.float64), f, mode, **kws[1])
    c32 = lp.encode(x32, f, mode, **kws[2])
    c64 = lp.encode(x32.astype(np.float64), f, mode, **kws[3])
    assert np.array_equal(c32, c64)
    d = lp.decode(c32, f)
    for v in (v32, v64):
        assert np.array_equal(v, d, equal_nan=True) and np.signbit(v[0]) == np.signbit(d[0])


# ------------------------------------------------------- fast path == generic
FAST = [lp.get_format(n) for n in FORMATS
        if lp.get_format(n).signed and lp.get_format(n).has_subnormals] + [
    # No mantissa bits (regression: the fast path took an exponent bit for the
    # last significand bit in ties and round-to-odd), and float64-only ranges.
    lp.custom_format(3, 0, has_inf=False, nan="max"),
    lp.custom_format(2, 0, has_inf=False, nan="none"),
    lp.custom_format(11, 4),
    lp.custom_format(5, 26),
    lp.custom_format(4, 3, bias=20),
]


def bits_of(dtype: type) -> int:
    return np.dtype(dtype).itemsize * 8


def _fast_and_generic(fmt, bits: np.ndarray, mode: str, saturate: bool, ftz: bool, rnd):
    """Codes and values from the fast kernel and from the generic kernels."""
    P = params.format_params(fmt)
    m = params.MODE_INT[mode]
    is64 = bits.dtype == np.uint64
    n = bits.size
    ftype = np.float64 if is64 else np.float32
    codes_fast = np.empty(n, fmt.code_dtype)
    vals_fast = np.empty(n, ftype)
    no_bits, no_vals = np.empty(0, bits.dtype), np.empty(0, ftype)
    no_codes = np.empty(0, fmt.code_dtype)
    r1 = fast.fast_kernel(P, bits, is64, m, saturate, ftz, rnd, no_bits, no_vals,
                             codes_fast, 1)
    r2 = fast.fast_kernel(P, bits, is64, m, saturate, ftz, rnd, vals_fast.view(bits.dtype),
                             vals_fast, no_codes, 0)
    codes_gen = np.empty(n, fmt.code_dtype)
    vals_gen = np.empty(n, np.float64)
    r3 = engine.encode_kernel(P, bits, is64, m, saturate, ftz, rnd, codes_gen,
                               np.empty(0, np.uint8), False)
    r4 = engine.round_kernel(P, bits, is64, m, saturate, ftz, rnd, vals_gen)
    assert tuple(r1) == tuple(r2) == tuple(r3) == tuple(r4)
    return codes_fast, vals_fast.astype(np.float64), codes_gen, vals_gen


# float64 input for every format; float32 input where the format's values are float32s.
FAST_CASES = [(f, dt) for f in FAST for dt in (np.uint32, np.uint64)
              if dt == np.uint64 or f.fits_float32]


@pytest.mark.parametrize(("fmt", "dtype"), FAST_CASES,
                         ids=[f"{f.name}{f.bias}-{dt.__name__}" for f, dt in FAST_CASES])
def test_fast_path_equals_generic(fmt, dtype: type) -> None:
    name = fmt.name
    rng = np.random.default_rng([fmt.width, fmt.bias + 100, bits_of(dtype)])
    n = 20_000
    if dtype == np.uint32:
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    else:
        # Random patterns concentrated on the format's exponent range, plus any.
        bits = rng.integers(0, 2**64, n, dtype=np.uint64)
        e = rng.integers(max(0, 1023 + fmt.emin - fmt.mantissa_bits - 70),
                         min(2047, 1023 + fmt.emax + 3), n)
        near = (bits & np.uint64(0x800FFFFFFFFFFFFF)) | (e.astype(np.uint64) << np.uint64(52))
        bits = np.where(rng.random(n) < 0.8, near, bits)
    if not fmt.has_nan:
        x = bits.view(np.float64 if dtype == np.uint64 else np.float32)
        bits = bits[~np.isnan(x)]
    rnd = rng.integers(0, 2**64, bits.size, dtype=np.uint64)
    for mode in DET_MODES + ["stochastic"]:
        for saturate in (False, True):
            for ftz in (False, True):
                words = rnd if mode == "stochastic" else np.empty(0, np.uint64)
                cf, vf, cg, vg = _fast_and_generic(fmt, bits, mode, saturate, ftz, words)
                bad = np.flatnonzero(cf != cg)
                assert bad.size == 0, (
                    f"{name} {mode} sat={saturate} ftz={ftz}: fast code {cf[bad[0]]:#x} != "
                    f"generic {cg[bad[0]]:#x} for input bits {bits[bad[0]]:#x}")
                same = (vf.view(np.uint64) == vg.view(np.uint64)) | (np.isnan(vf) & np.isnan(vg))
                bad = np.flatnonzero(~same)
                assert bad.size == 0, (
                    f"{name} {mode} sat={saturate} ftz={ftz}: fast value {vf[bad[0]]!r} != "
                    f"generic {vg[bad[0]]!r} for input bits {bits[bad[0]]:#x}")


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1),
       st.sampled_from([f for f in FAST if f.fits_float32]),
       st.sampled_from(DET_MODES + ["stochastic"]), st.booleans(), st.booleans())
def test_fast_path_equals_generic_hypothesis(b: int, w: int, fmt, mode: str,
                                             saturate: bool, ftz: bool) -> None:
    bits = np.array([b], np.uint32)
    if not fmt.has_nan and np.isnan(bits.view(np.float32)[0]):
        return
    rnd = np.array([w], np.uint64) if mode == "stochastic" else np.empty(0, np.uint64)
    cf, vf, cg, vg = _fast_and_generic(fmt, bits, mode, saturate, ftz, rnd)
    assert cf[0] == cg[0]
    assert (vf[0] == vg[0] and np.signbit(vf[0]) == np.signbit(vg[0])) or (
        np.isnan(vf[0]) and np.isnan(vg[0]))
