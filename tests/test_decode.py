"""Every code of every format of 16 bits or fewer (like numpy's test_half.py).

* decode matches a formula written here from the sign/exponent/mantissa fields
  (exact Fractions for formats of <= 8 bits, the vectorised formula with
  ``np.ldexp`` for all);
* decode matches numpy/ml_dtypes wherever they implement the format;
* encode(decode(c)) == c for every non-NaN code (fnuz formats have no -0 code
  and e8m0 no zero, so every non-NaN code is the unique code of its value), in
  every deterministic mode (exact values need no rounding), from float64 and
  from float32;
* lowprec's ``FloatFormat.exact_value`` agrees too.

Failures name the first bad code in hex.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _reference import DETERMINISTIC_MODES, decode_fraction, value_table

import lowprec as lp
from lowprec.formats import reference_dtype

SMALL = [n for n, f in lp.FORMATS.items() if f.width <= 16]


def _all_codes(fmt) -> np.ndarray:
    return np.arange(1 << fmt.width, dtype=fmt.code_dtype)


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal as float64 bit patterns, except that any NaN equals any NaN."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def _first_bad(ok: np.ndarray, codes: np.ndarray, got, want, what: str) -> str:
    i = int(np.flatnonzero(~ok)[0])
    return (f"{what}: {np.count_nonzero(~ok)} codes differ; first code {int(codes[i]):#x}: "
            f"got {got[i]!r}, expected {want[i]!r}")


def test_small_formats_cover_the_registry() -> None:
    assert set(SMALL) == set(lp.FORMATS) - {"fp32", "tf32"}


@pytest.mark.parametrize("name", SMALL)
def test_decode_matches_field_formula(name: str) -> None:
    fmt = lp.get_format(name)
    codes = _all_codes(fmt)
    got = lp.decode(codes, fmt)
    assert got.dtype == np.float64 and got.shape == codes.shape
    want = value_table(fmt)
    ok = _same_bits(got, want)
    assert ok.all(), _first_bad(ok, codes, got, want, f"{name} vs ldexp formula")
    if fmt.width <= 8:  # exact Fractions, one code at a time
        exact = [decode_fraction(fmt, int(c)) for c in codes]
        # Fractions have no -0: take the sign from the code.
        want = np.array([float(v) if v != 0 else (-0.0 if int(c) & fmt.sign_mask else 0.0)
                         for c, v in zip(codes, exact)])
        ok = _same_bits(got, want)
        assert ok.all(), _first_bad(ok, codes, got, want, f"{name} vs Fraction formula")
        for c, v in zip(codes, exact):
            mine = fmt.exact_value(int(c))
            assert (mine == v) or (isinstance(v, float) and math.isnan(v) and math.isnan(mine)), (
                f"{name} exact_value({int(c):#x}) = {mine}, expected {v}")


@pytest.mark.parametrize("name", [n for n in SMALL if reference_dtype(n) is not None])
def test_decode_matches_numpy_and_ml_dtypes(name: str) -> None:
    fmt = lp.get_format(name)
    codes = _all_codes(fmt)
    dt = reference_dtype(fmt)
    with np.errstate(invalid="ignore"):  # signaling NaNs warn when cast
        want = codes.view(dt).astype(np.float64)
    got = lp.decode(codes, fmt)
    ok = _same_bits(got, want)
    assert ok.all(), _first_bad(ok, codes, got, want, f"{name} vs {dt}")


@pytest.mark.parametrize("name", SMALL)
def test_encode_decode_round_trip(name: str) -> None:
    fmt = lp.get_format(name)
    codes = _all_codes(fmt)
    values = lp.decode(codes, fmt)
    keep = ~np.isnan(values)
    codes, values = codes[keep], values[keep]
    for mode in DETERMINISTIC_MODES:
        for x in (values, values.astype(np.float32) if fmt.fits_float32 else values):
            for kw in ({}, {"saturate": True}):
                again = lp.encode(x, fmt, mode, **kw)
                if kw and fmt.has_inf:  # saturate maps +-inf to +-max
                    inf = np.isinf(values)
                    assert (again[inf] == (codes[inf] & fmt.sign_mask | fmt.max_code_magnitude)
                            ).all()
                    keep = ~inf
                else:
                    keep = np.ones(codes.shape, bool)
                ok = again[keep] == codes[keep]
                assert ok.all(), _first_bad(ok, codes[keep], again[keep], codes[keep],
                                            f"{name} {mode} {x.dtype} {kw} encode(decode(c))")


@pytest.mark.parametrize("name", SMALL)
def test_nan_codes(name: str) -> None:
    """Which codes are NaN, counted from the encoding rule in the format's docs."""
    fmt = lp.get_format(name)
    n_nan = int(np.isnan(lp.decode(_all_codes(fmt), fmt)).sum())
    want = {
        "ieee": 2 * ((1 << fmt.mantissa_bits) - 1),  # both signs, non-zero mantissa
        "max": 2 if fmt.signed else 1,  # S.111..1
        "negzero": 1,  # 1.000..0
        "none": 0,
    }[fmt.nan]
    assert n_nan == want
    if fmt.has_nan:  # encode(nan) gives a NaN code
        assert math.isnan(lp.decode(lp.encode(np.nan, fmt), fmt))


def test_decode_wide_formats_spot_checks() -> None:
    """fp32 and tf32 decode through the compiled kernel, not a table."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):  # signaling NaNs warn when cast
        want = codes.view(np.float32).astype(np.float64)
    got = lp.decode(codes, "fp32")
    ok = _same_bits(got, want)
    assert ok.all(), _first_bad(ok, codes, got, want, "fp32 vs float32")
    tf32 = lp.get_format("tf32")
    codes = np.arange(1 << 19, dtype=np.uint32)
    got = lp.decode(codes, tf32)
    want = value_table(tf32)
    ok = _same_bits(got, want)
    assert ok.all(), _first_bad(ok, codes, got, want, "tf32 vs formula")
    # tf32 is the top 19 bits of a float32
    with np.errstate(invalid="ignore"):
        want32 = (codes << 13).view(np.float32).astype(np.float64)
    assert _same_bits(got, want32).all()
