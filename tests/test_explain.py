"""explain() and range_stats(): checked against round_to/encode and against
references written here with exact Fractions and the sorted table of a format's values."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp

SMALL = ["fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e3m2", "fp6_e2m3",
         "fp4_e2m1", "e8m0"]
MODES = list(lp.MODES)


def _values(fmt):
    """Sorted distinct non-NaN values of a format, infinities included (as floats)."""
    f = lp.get_format(fmt)
    v = lp.decode(np.arange(1 << f.width), f)
    return np.unique(v[~np.isnan(v)])


def _reference_round(x: Fraction, fmt, mode):
    """Round exact x to the format by searching its value table (finite results only)."""
    f = lp.get_format(fmt)
    table = [Fraction(v) for v in _values(f) if math.isfinite(v)]
    below = max((v for v in table if v <= x), default=None)
    above = min((v for v in table if v >= x), default=None)
    if below == above:
        return below
    if mode == "rdown" or (mode == "rtz" and x > 0):
        return below
    if mode == "rup" or (mode == "rtz" and x < 0):
        return above
    if below is None or above is None:
        return None
    if x - below != above - x:
        return below if x - below < above - x else above
    if mode == "rna":
        return above if x > 0 else below
    # rne: the one whose code is even
    code_b = int(lp.encode(float(below), f))
    return below if code_b % 2 == 0 else above


@pytest.mark.parametrize("fmt", SMALL)
def test_every_value_explains_itself_with_its_neighbours(fmt):
    f = lp.get_format(fmt)
    table = list(_values(f))
    for k, v in enumerate(table):
        if v == 0 and not f.has_zero:
            continue
        e = lp.explain(float(v), f)
        assert e.result == v and e.flags == () and (e.abs_error in (None, 0))
        assert e.next_down == (table[k - 1] if k > 0 else None), (fmt, v)
        assert e.next_up == (table[k + 1] if k + 1 < len(table) else None), (fmt, v)
        assert lp.decode(e.code, f) == v or (v == 0)
        assert e.kind == ("inf" if math.isinf(v) else "zero" if v == 0 else
                          "subnormal" if abs(v) < f.smallest_normal else "normal")


@pytest.mark.parametrize("fmt", SMALL + ["fp16", "bf16"])
@pytest.mark.parametrize("mode", [m for m in MODES if m != "stochastic"])
def test_matches_encode_and_exact_errors(fmt, mode):
    f = lp.get_format(fmt)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(150) * f.max / 8
    x = np.concatenate([x, x * 1e-3, rng.standard_normal(50) * f.smallest_subnormal * 4])
    if not f.signed:
        x = np.abs(x) + f.smallest_subnormal / 3
    codes, flags = lp.encode(x, f, mode, flags=True)
    for xi, c, fl in zip(x, codes, flags):
        e = lp.explain(float(xi), f, mode)
        assert e.code == int(c), (fmt, mode, xi)
        assert ("inexact" in e.flags) == bool(fl & 1)
        assert ("underflow" in e.flags) == bool(fl & 2)
        assert ("overflow" in e.flags) == bool(fl & 4)
        if e.abs_error is not None:
            assert e.abs_error == Fraction(e.result) - Fraction(float(xi))
            if xi != 0:
                assert e.rel_error == e.abs_error / Fraction(float(xi))
                assert e.ulp_error == e.abs_error / e.ulp
                if not f.has_zero and abs(xi) < f.smallest_normal:
                    pass  # e8m0 has no zero: tiny values become 2**-127
                elif mode in ("rne", "rna"):
                    assert abs(e.ulp_error) <= Fraction(1, 2)
                else:
                    assert abs(e.ulp_error) < 1


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"])
@pytest.mark.parametrize("mode", ["rne", "rna", "rtz", "rup", "rdown"])
def test_decimal_strings_are_rounded_exactly(fmt, mode):
    # Values given as decimals (never floats) against the table reference.
    f = lp.get_format(fmt)
    texts = ["0.1", "-0.1", "1/3", "-2/3", "0.3", "1.0625", "2.5", "-2.5", "5", "0.0078125"]
    for t in texts:
        x = Fraction(t)
        if abs(x) > f.max:
            continue
        want = _reference_round(x, f, mode)
        for value in (t, x, Decimal(t) if "/" not in t else x):
            e = lp.explain(value, f, mode)
            assert Fraction(e.result) == want, (fmt, mode, t, e.result, want)
            assert e.input == x
            assert e.abs_error == want - x


def test_spot_checks_and_text():
    # 0.1 = 1.6 * 2**-4: biased exponent 127 - 4 = 123 = 0b01111011; 0.6 * 128 = 76.8
    # rounds to 77 = 0b1001101, so bf16(0.1) = 0x3DCD.
    e = lp.explain(0.1, "bf16")
    assert (e.code_hex, e.code_bits, e.exponent_field, e.exponent) == (
        "0x3dcd", "0|01111011|1001101", 123, -4)
    text = str(e)
    for piece in ("0x3dcd = 0|01111011|1001101", "normal", "0.10009765625", "inexact",
                  "ulp"):
        assert piece in text
    sub = lp.explain(2.0**-20, "fp16")  # fp16 subnormals are multiples of 2**-24
    assert sub.kind == "subnormal" and sub.exponent == -14 and sub.mantissa_field == 16
    assert sub.flags == () and sub.abs_error == 0
    tiny = lp.explain(1e-9, "fp16")
    assert tiny.kind == "zero" and tiny.flags == ("inexact", "underflow")
    big = lp.explain(500, "fp8_e4m3")
    assert big.kind == "nan" and "overflow" in big.flags and "overflow" in str(big)
    assert lp.explain(500, "fp8_e4m3", saturate=True).result == 448.0
    assert lp.explain(float("inf"), "fp8_e5m2").kind == "inf"
    assert lp.explain("nan", "bf16").kind == "nan"
    negzero = lp.explain(-0.0, "fp16")
    assert negzero.sign == 1 and negzero.kind == "zero"
    assert lp.explain(-0.0, "fp8_e4m3fnuz").code == 0  # fnuz has no -0


def test_stochastic_matches_round_to_and_is_reproducible():
    seen = set()
    for seed in range(40):
        e = lp.explain(0.1, "fp8_e4m3", "stochastic", rng=seed)
        r = lp.round_to(np.array([0.1]), "fp8_e4m3", "stochastic", rng=seed)[0]
        assert e.result == r
        assert e == lp.explain(0.1, "fp8_e4m3", "stochastic", rng=seed)
        seen.add(e.result)
    assert seen == {0.09375, 0.1015625}  # the two neighbours of 0.1, P(up) = 0.8


def test_bad_input():
    with pytest.raises(TypeError, match="one real number"):
        lp.explain([1.0, 2.0], "fp16")
    with pytest.raises(ValueError):
        lp.explain("zero point one", "fp16")
    with pytest.raises(ValueError, match="unknown format"):
        lp.explain(1.0, "fp7")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        lp.explain(1.0, "fp16", "nearest-ish")
    with pytest.raises(ValueError, match="only used by mode='stochastic'"):
        lp.explain(1.0, "fp16", rng=1)
    with pytest.raises(TypeError):
        lp.range_stats(np.array([1 + 2j]), "fp16")


def _stats_reference(x, fmt, mode, saturate=False, rng=None):
    """Counts from round_to results and comparisons (an independent route)."""
    f = lp.get_format(fmt)
    nan, inf = np.isnan(x), np.isinf(x)
    fin = ~(nan | inf)
    xs = np.where(nan, 0, x) if not f.has_nan else x
    r = lp.round_to(xs, f, mode, saturate=saturate, rng=rng).astype(np.float64)
    with np.errstate(invalid="ignore"):
        sub = (fin & (r != 0) & (np.abs(r) < f.smallest_normal)).sum() if f.has_zero else 0
        return {
            "total": x.size, "nan_in": int(nan.sum()), "inf_in": int(inf.sum()),
            "exact": int((fin & (r == x)).sum()), "inexact": int((fin & (r != x)).sum()),
            "underflow_to_zero": int((fin & (x != 0) & (r == 0)).sum()), "subnormal": int(sub),
        }


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3",
                                 "fp4_e2m1", "fp8_e4m3fnuz"])
@pytest.mark.parametrize("mode", ["rne", "rtz", "rup", "stochastic"])
def test_range_stats_matches_round_to(fmt, mode):
    f = lp.get_format(fmt)
    rng = np.random.default_rng(5)
    x = np.exp(rng.uniform(-30, 14, 20000)) * rng.choice([-1, 1], 20000)
    x = np.concatenate([x, [0.0, -0.0, np.nan, np.inf, -np.inf, f.max, f.smallest_subnormal]])
    x = x.astype(np.float32)
    seed = 3 if mode == "stochastic" else None
    s = lp.range_stats(x, f, mode, rng=seed)
    want = _stats_reference(x, f, mode, rng=seed)
    got = {k: getattr(s, k) for k in want}
    assert got == want
    assert s.exact + s.inexact + s.nan_in + s.inf_in == s.total
    if mode == "rne" and (f.has_inf or f.has_nan):
        # Non-saturating round-to-nearest: overflow is exactly a non-finite result.
        with np.errstate(invalid="ignore"):
            r = lp.round_to(np.where(np.isnan(x), 0, x), f)
        assert s.overflow == int((np.isfinite(x) & ~np.isfinite(r)).sum())
        sat = lp.range_stats(x, f, mode, saturate=True)
        assert sat.overflow == s.overflow  # saturated values still count as overflow
    assert abs(sum(s.fractions[k] for k in ("exact", "inexact", "nan_in", "inf_in")) - 1) < 1e-12
    text = str(s)
    assert f.name in text and f"{s.inexact:,}" in text


def test_range_stats_small_cases():
    s = lp.range_stats([1.0, 0.1, 1e-9, 1e9, float("nan"), 6e-5], "fp16")
    assert (s.total, s.exact, s.inexact, s.underflow_to_zero, s.overflow, s.nan_in,
            s.subnormal) == (6, 1, 4, 1, 1, 1, 1)
    empty = lp.range_stats(np.zeros(0), "bf16")
    assert empty.total == 0 and empty.fraction("exact") == 0.0
    nan_fp4 = lp.range_stats([np.nan, 1.0], "fp4")  # fp4 has no NaN: counted, not an error
    assert nan_fp4.nan_in == 1 and nan_fp4.exact == 1
