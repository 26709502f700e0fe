"""Every deterministic mode of every format against an exact rational reference.

The reference (tests/_reference.py) is written from the rules in
lowprec/rounding.py's docstring and the format's primary fields only:
``round_fraction`` finds the two neighbours of x among the format's values as
exact Fractions and applies the mode's rule; ``round_reference`` is the same
rules vectorised with exact float64 operations, held equal to
``round_fraction`` here, then used at volume.

Counts: every (format, mode) gets >= 10**5 float64 inputs in CI (``N_CASES``;
2 * 10**6 in the slow-marked test, ``pytest -m slow``): each value and
midpoint between neighbours (all of them for formats of <= 8 bits, a sample
for wider ones), one float64 step either side, edge cases, random bit
patterns over the format's range, both signs; checked for
the value (signed zeros and NaN included), the code and the flags, with
saturate off and on and subnormals on and off. float32 inputs (the fast
path) get the same cases that float32 holds exactly plus random float32
patterns. The Fraction cross-check covers ``N_SCALAR`` cases per (format,
mode) for formats of <= 16 bits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _reference import (
    DETERMINISTIC_MODES,
    cases,
    edge_cases,
    round_fraction,
    round_reference,
)

import lowprec as lp

FORMATS = list(lp.FORMATS)
N_CASES = 100_000
N_SCALAR = 1_500


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Equal values with equal signs (so +0 != -0); NaN equals NaN."""
    got = np.asarray(got, np.float64)
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | (
        np.isnan(got) & np.isnan(want))


def _first_bad(x, got, want, ok, what: str) -> str:
    i = int(np.flatnonzero(~ok)[0])
    return (f"{what}: {np.count_nonzero(~ok)} of {ok.size} differ; first x={float(x[i])!r} "
            f"({float(x[i]).hex()}): got {float(got[i])!r}, expected {float(want[i])!r}")


def _inputs(fmt) -> np.ndarray:
    x = cases(fmt, N_CASES, seed=sum(map(ord, fmt.name)))
    if fmt.nan == "none":
        x = x[~np.isnan(x)]
    assert x.size >= N_CASES
    return x


_CACHE: dict[str, np.ndarray] = {}


def _cached_inputs(fmt) -> np.ndarray:
    if fmt.name not in _CACHE:
        _CACHE[fmt.name] = _inputs(fmt)
    return _CACHE[fmt.name]


def _signaling(x: np.ndarray) -> np.ndarray:
    """Signaling NaNs: the quiet bit (the leading fraction bit) is clear."""
    bits = x.view(np.uint64 if x.dtype == np.float64 else np.uint32)
    quiet = np.array(1 << (51 if x.dtype == np.float64 else 22), dtype=bits.dtype)
    return np.isnan(x) & ((bits & quiet) == 0)


def _check(x: np.ndarray, fmt, mode: str, saturate: bool, subnormals: bool) -> None:
    with np.errstate(invalid="ignore"):  # casting a signaling NaN float32 -> float64
        x64 = x.astype(np.float64)
    want, want_flags = round_reference(x64, fmt, mode, saturate, subnormals, _signaling(x))
    kw = {"saturate": saturate, "subnormals": subnormals}
    got = lp.round_to(x, fmt, mode, **kw)
    assert got.dtype == (np.float32 if x.dtype == np.float32 and fmt.fits_float32
                         else np.float64)
    ok = _same(got, want)
    assert ok.all(), _first_bad(x, got, want, ok, f"round_to {fmt.name} {mode} {kw}")
    codes = lp.encode(x, fmt, mode, **kw)
    got = lp.decode(codes, fmt)
    ok = _same(got, want)
    assert ok.all(), _first_bad(x, got, want, ok, f"encode {fmt.name} {mode} {kw}")
    codes_f, flags = lp.encode(x, fmt, mode, flags=True, **kw)
    assert np.array_equal(codes_f, codes), f"encode with flags differs ({fmt.name} {mode})"
    bad = np.flatnonzero(flags != want_flags)
    assert bad.size == 0, (
        f"flags {fmt.name} {mode} {kw}: {bad.size} differ; first x={float(x[bad[0]])!r}: "
        f"got {int(flags[bad[0]]):#x}, expected {int(want_flags[bad[0]]):#x}")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("name", FORMATS)
def test_every_mode_against_exact_reference(name: str, mode: str) -> None:
    fmt = lp.get_format(name)
    x = _cached_inputs(fmt)
    for saturate, subnormals in ((False, True), (True, True), (False, False)):
        _check(x, fmt, mode, saturate, subnormals)


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("name", [n for n in FORMATS if lp.get_format(n).fits_float32])
def test_float32_inputs_against_exact_reference(name: str, mode: str) -> None:
    """float32 in, float32 out (the fast path): the cases float32 holds exactly,
    plus random float32 bit patterns."""
    fmt = lp.get_format(name)
    x64 = _cached_inputs(fmt)
    with np.errstate(over="ignore"):
        x32 = x64.astype(np.float32)
    exact = (x32.astype(np.float64) == x64) | np.isnan(x64)
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    if fmt.nan == "none":
        rand = rand[~np.isnan(rand)]
    x = np.concatenate([x32[exact], rand])
    for saturate, subnormals in ((False, True), (True, False)):
        _check(x, fmt, mode, saturate, subnormals)


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("name", [n for n in FORMATS if lp.get_format(n).width <= 16])
def test_vectorised_reference_equals_fraction_reference(name: str, mode: str) -> None:
    """The fast reference is the Fraction reference (neighbours found by bisection
    among the exact values), on edge cases and a sample of the test inputs."""
    fmt = lp.get_format(name)
    x = _cached_inputs(fmt)
    rng = np.random.default_rng(3)
    edges = edge_cases(fmt)
    edges = np.concatenate([edges, -edges])
    sample = np.concatenate([edges, rng.choice(x, N_SCALAR, replace=False)])
    sample = sample[np.isfinite(sample) & (sample != 0)]
    for saturate, subnormals in ((False, True), (True, False)):
        fast, _ = round_reference(sample, fmt, mode, saturate, subnormals)
        slow = np.array([round_fraction(float(v), fmt, mode, saturate, subnormals)
                         for v in sample])
        ok = _same(fast, slow)
        assert ok.all(), _first_bad(sample, fast, slow, ok, f"reference {name} {mode}")


def test_documented_examples() -> None:
    """A few results worked by hand (cited from the specs' value tables)."""
    # OCP FP8 E4M3: max 448; 464 is the tie between 448 and 480 (even: 448);
    # beyond it overflow gives NaN, and saturate gives 448.
    assert lp.round_to(464.0, "fp8_e4m3") == 448.0
    assert math.isnan(lp.round_to(464.5, "fp8_e4m3"))
    assert lp.round_to(1e6, "fp8_e4m3", saturate=True) == 448.0
    # IEEE binary16: 65520 is the tie between 65504 and 65536 -> inf (rne); rtz -> 65504.
    assert lp.round_to(65520.0, "fp16") == math.inf
    assert lp.round_to(65520.0, "fp16", "rtz") == 65504.0
    # FP4 E2M1 (OCP MX v1.0): 2.5 is the tie between 2 and 3 -> 2 (even code 0b0100).
    assert lp.round_to(2.5, "fp4_e2m1") == 2.0
    assert lp.round_to(5.0, "fp4_e2m1") == 4.0  # tie 4/6 -> 4 (0b0110 even)
    assert lp.round_to(1e9, "fp4_e2m1") == 6.0  # no inf, no NaN: saturates
    # Half the smallest fp16 subnormal (2**-25) ties to 0; a hair above goes up.
    assert lp.round_to(2.0**-25, "fp16") == 0.0
    assert lp.round_to(np.nextafter(2.0**-25, 1), "fp16") == 2.0**-24


CUSTOM = [
    {"exponent_bits": 2, "mantissa_bits": 0, "has_inf": False, "nan": "none"},  # {0, 1, 2, 4}
    {"exponent_bits": 3, "mantissa_bits": 0, "has_inf": False, "nan": "max"},
    {"exponent_bits": 3, "mantissa_bits": 2},  # IEEE-style fp6
    {"exponent_bits": 4, "mantissa_bits": 3, "bias": 20},  # tiny values only
    # nothing small: the smallest value is 8
    {"exponent_bits": 5, "mantissa_bits": 1, "bias": -3, "has_inf": False, "nan": "none"},
    {"exponent_bits": 6, "mantissa_bits": 1, "has_inf": False, "nan": "negzero", "bias": 33},
    {"exponent_bits": 5, "mantissa_bits": 0, "signed": False, "has_inf": False, "nan": "max",
         "has_subnormals": False},  # an e8m0-like unsigned scale format
    {"exponent_bits": 11, "mantissa_bits": 4},  # float64's exponent range: no float32 path
    {"exponent_bits": 10, "mantissa_bits": 9, "bias": 400},  # beyond float32 both ways
    {"exponent_bits": 3, "mantissa_bits": 12},  # more precision than range
    {"exponent_bits": 8, "mantissa_bits": 16},  # 25 bits, float32 range
    {"exponent_bits": 5, "mantissa_bits": 26},  # 32 bits, more precision than float32
    {"exponent_bits": 10, "mantissa_bits": 21, "has_inf": False, "nan": "max"},  # 32 bits, wide
]


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("spec", CUSTOM, ids=lambda s: lp.custom_format(**s).name + (
    f"_b{s['bias']}" if "bias" in s else "") + ("" if s.get("has_inf", True) else
                                                 "_" + s.get("nan", "max")))
def test_custom_formats_against_exact_reference(spec: dict, mode: str) -> None:
    """Formats outside the registry take paths the built-in ones do not (no
    mantissa bits, values beyond float32, unsigned, odd biases)."""
    fmt = lp.custom_format(**spec)
    x = cases(fmt, 20_000, seed=fmt.width)
    if fmt.nan == "none":
        x = x[~np.isnan(x)]
    for saturate, subnormals in ((False, True), (True, True), (False, False)):
        _check(x, fmt, mode, saturate, subnormals)
        if fmt.fits_float32:
            with np.errstate(over="ignore", under="ignore"):
                x32 = x.astype(np.float32)
            _check(x32[x32.astype(np.float64) == x], fmt, mode, saturate, subnormals)


@pytest.mark.slow
@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("name", FORMATS)
def test_every_mode_against_exact_reference_large(name: str, mode: str) -> None:
    """Slow: 2 * 10**6 inputs per (format, mode), other seeds (pytest -m slow)."""
    fmt = lp.get_format(name)
    x = cases(fmt, 2_000_000, seed=1000 + sum(map(ord, fmt.name)))
    if fmt.nan == "none":
        x = x[~np.isnan(x)]
    for saturate, subnormals in ((False, True), (True, True), (False, False)):
        _check(x, fmt, mode, saturate, subnormals)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz",
                                  "fp6_e3m2", "fp4_e2m1", "e8m0"])
def test_round_pack_wide_significands_and_sticky(name: str) -> None:
    """The engine's entry point for arithmetic, ``round_pack``, takes exact
    results wider than any float (up to 62 bits) plus a sticky bit meaning "a
    little more than this". Checked against the Fraction reference, with the
    sticky bit standing for 2**-64 of the last unit of ``sig`` (far below half
    a quantum of the format: "a little more", as round_pack documents)."""
    from fractions import Fraction

    from lowprec._kernels import engine, params

    fmt = lp.get_format(name)
    P = params.format_params(fmt)
    rng = np.random.default_rng(sum(map(ord, name)))
    e_lo = fmt.emin - fmt.mantissa_bits - 4
    e_hi = fmt.emax + 2
    for _ in range(300):
        nbits = int(rng.integers(1, 63))
        sig = int(rng.integers(1 << (nbits - 1), 1 << nbits, dtype=np.int64)) if nbits > 1 else 1
        top = int(rng.integers(e_lo, e_hi + 1))  # exponent of the leading bit
        lsb_exp = top - (nbits - 1)
        sticky = bool(rng.integers(0, 2))
        negative = bool(rng.integers(0, 2)) and fmt.signed
        x = (Fraction(sig) + (Fraction(1, 2**64) if sticky else 0)) * Fraction(2) ** lsb_exp
        x = -x if negative else x
        for mode in DETERMINISTIC_MODES:
            for saturate, ftz in ((False, False), (True, False), (False, True)):
                code, _, status = engine.round_pack(P, negative, np.int64(sig), lsb_exp, sticky,
                                                     params.MODE_INT[mode], saturate, ftz,
                                                     np.uint64(0))
                assert status == 0
                got = float(lp.decode(int(code), fmt))
                want = round_fraction(x, fmt, mode, saturate, not ftz)
                assert (got == want and math.copysign(1, got) == math.copysign(1, want)) or (
                    math.isnan(got) and math.isnan(want)), (
                    f"{name} {mode} sat={saturate} ftz={ftz}: sig={sig:#x} lsb_exp={lsb_exp} "
                    f"sticky={sticky} negative={negative}: got {got!r}, expected {want!r}")
