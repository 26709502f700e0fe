"""lowprec.arith: bf16/tf32/fp32 random operands against the Fraction reference,
stochastic rounding statistics, numpy float16 cross-check, API behaviour."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arith_reference import Reference
from test_arith_exhaustive import check

import lowprec as lp


def random_operands(fmt, n: int, arity: int, seed: int) -> list[np.ndarray]:
    """Random values of fmt: uniform codes, near-equal pairs (cancellation, tiny
    exponent gaps), and the edge values (zeros, subnormals, max, inf, NaN)."""
    f = lp.get_format(fmt)
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << f.width, size=(arity, n), dtype=np.uint64)
    # A third of the later operands are close to the first (same exponent or a few off).
    close = rng.random(n) < 0.35
    for k in range(1, arity):
        delta = rng.integers(-(1 << (f.mantissa_bits + 2)), 1 << (f.mantissa_bits + 2), n)
        sign = codes[0] & np.uint64(f.sign_mask)
        flip = (rng.random(n) < 0.5) * np.uint64(f.sign_mask)
        near = ((codes[0] ^ sign).astype(np.int64) + delta).clip(0, (1 << (f.width - 1)) - 1)
        codes[k] = np.where(close, near.astype(np.uint64) | (sign ^ flip), codes[k])
    edge_mags = [0, 1, 2, (1 << f.mantissa_bits) - 1, 1 << f.mantissa_bits,
                 f.max_code_magnitude, f.max_code_magnitude - 1, f.max_code_magnitude + 1,
                 f.max_code_magnitude + 2, int(lp.encode(1.0, f))]
    edges = np.array([m | s for m in edge_mags for s in (0, f.sign_mask)], dtype=np.uint64)
    for k in range(arity):
        idx = rng.integers(0, n, size=n // 20)
        codes[k, idx] = edges[rng.integers(0, len(edges), idx.size)]
    return [lp.decode(c.astype(f.code_dtype), f) for c in codes]


def _run(fmt, op, n, seed):
    arity = {"sqrt": 1, "fma": 3}.get(op, 2)
    ops = random_operands(fmt, n, arity, seed)
    check(op, fmt, ops, Reference(lp.get_format(fmt)))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt", "fma"])
@pytest.mark.parametrize("fmt", ["bf16", "tf32", "fp32"])
def test_random_against_reference(fmt, op):
    _run(fmt, op, 1500, seed=hash((fmt, op)) % 2**32)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt", "fma"])
@pytest.mark.parametrize("fmt", ["bf16", "tf32"])
def test_random_against_reference_1e5(fmt, op):
    _run(fmt, op, 100_000, seed=7)


def test_fp16_matches_numpy_float16():
    """numpy's float16 ops round a float32 result (exact enough: 24 >= 2*11 + 2)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 16, 200_000, dtype=np.uint64).astype(np.uint16).view(np.float16)
    b = rng.integers(0, 1 << 16, 200_000, dtype=np.uint64).astype(np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        for fn, ref in [(lp.add, np.add), (lp.sub, np.subtract), (lp.mul, np.multiply),
                        (lp.div, np.divide)]:
            got, want = fn(a, b, "fp16"), ref(a, b)
            assert got.dtype == np.float16
            ok = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
            assert ok.all(), (fn.__name__, a[~ok][:3], b[~ok][:3])
        got, want = lp.sqrt(a, "fp16"), np.sqrt(a)
        ok = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
        assert ok.all()


# ------------------------------------------------------------------ stochastic
STOCH_CASES = [  # (op, operands, fmt): inexact results at various distances
    ("add", (1.0, 2.0**-13), "fp16"),
    ("add", (1.0, -3 * 2.0**-14), "fp16"),
    ("sub", (3.0, 2.0**-40), "bf16"),
    ("mul", (1.25, 1.375), "fp8_e4m3"),
    ("div", (1.0, 3.0), "fp16"),
    ("sqrt", (2.0,), "bf16"),
    ("fma", (1.5, 1.25, 2.0**-9), "fp8_e5m2"),
    ("mul", (2.0**-20, 0.5009765625), "fp16"),  # subnormal neighbours, P(up) = 1/64
]


@pytest.mark.parametrize("op,args,fmt", STOCH_CASES)
def test_stochastic_neighbours_and_frequencies(op, args, fmt):
    f = lp.get_format(fmt)
    from fractions import Fraction
    exact = {"add": lambda a, b: Fraction(a) + Fraction(b),
             "sub": lambda a, b: Fraction(a) - Fraction(b),
             "mul": lambda a, b: Fraction(a) * Fraction(b),
             "div": lambda a, b: Fraction(a) / Fraction(b),
             "fma": lambda a, b, c: Fraction(a) * Fraction(b) + Fraction(c)}
    n = 40_000
    arrays = [np.full(n, x) for x in args]
    got = getattr(lp, op)(*arrays, fmt, "stochastic", rng=1234)
    if op == "sqrt":
        lo = lp.sqrt(args[0], fmt, "rtz")
        hi = lp.sqrt(args[0], fmt, "rup")
        ref = Reference(f)
        # P(up) = (sqrt(a) - lo) / (hi - lo), from a 60-bit bracket of the root.
        xf = ref.exact_sqrt(args[0])
        p_up = float((xf - Fraction(float(lo))) / (Fraction(float(hi)) - Fraction(float(lo))))
    else:
        x = exact[op](*args)
        lo = lp.__dict__[op](*args, fmt, "rdown")
        hi = lp.__dict__[op](*args, fmt, "rup")
        p_up = float((x - Fraction(float(lo))) / (Fraction(float(hi)) - Fraction(float(lo))))
    assert lo < hi
    values = np.unique(got)
    assert set(values.tolist()) <= {float(lo), float(hi)}, values
    k = int(np.sum(got == hi))
    sigma = math.sqrt(n * p_up * (1 - p_up))
    assert abs(k - n * p_up) < 5 * sigma + 1, (k, n * p_up)
    # Same seed, same result; another seed, (almost surely) another result.
    again = getattr(lp, op)(*arrays, fmt, "stochastic", rng=1234)
    assert np.array_equal(got, again)


def test_stochastic_exact_results_are_not_perturbed():
    a = lp.round_to(np.linspace(-4, 4, 1001), "fp16")
    got = lp.add(a, a, "fp16", "stochastic", rng=0)
    assert np.array_equal(got, 2 * a)


# ------------------------------------------------------------------- the API
def test_signed_zero_rules():
    assert math.copysign(1, lp.add(1.0, -1.0, "fp16")) == 1
    assert math.copysign(1, lp.add(1.0, -1.0, "fp16", "rdown")) == -1
    assert math.copysign(1, lp.add(-0.0, -0.0, "fp16")) == -1
    assert math.copysign(1, lp.sqrt(-0.0, "fp16")) == -1
    assert math.copysign(1, lp.fma(0.0, -1.0, 0.0, "fp16")) == 1
    assert math.copysign(1, lp.fma(0.0, -1.0, -0.0, "fp16")) == -1
    assert math.copysign(1, lp.fma(1.0, -1.0, 1.0, "fp16", "rdown")) == -1
    # fnuz formats have no -0.
    assert math.copysign(1, lp.mul(-1.0, 0.0, "fp8_e4m3fnuz")) == 1


def test_special_values_and_flags():
    nan_flag = [(lp.sub, (np.inf, np.inf)), (lp.mul, (0.0, np.inf)), (lp.div, (0.0, 0.0)),
                (lp.div, (np.inf, -np.inf)), (lp.sqrt, (-1.0,))]
    for fn, args in nan_flag:
        v, f = fn(*args, "fp16", flags=True)
        assert np.isnan(v) and f == 0x10, fn.__name__
    v, f = lp.div(-1.0, 0.0, "fp16", flags=True)
    assert v == -np.inf and f == 0x08
    v, f = lp.mul(256.0, 256.0, "fp16", flags=True)
    assert v == np.inf and f == 0x05
    v, f = lp.mul(256.0, 256.0, "fp16", "rtz", flags=True)
    assert v == 65504.0 and f == 0x05
    assert lp.mul(256.0, 256.0, "fp16", saturate=True) == 65504.0
    v, f = lp.mul(2.0**-14, 0.75, "fp16", flags=True)  # exact subnormal: no flags
    assert v == 0.75 * 2.0**-14 and f == 0
    assert lp.mul(2.0**-14, 0.75, "fp16", subnormals=False) == 0.0
    # OCP E4M3 has no inf: overflow is NaN (saturate: max); fp4 saturates.
    assert np.isnan(lp.mul(448.0, 2.0, "fp8_e4m3"))
    assert lp.mul(448.0, 2.0, "fp8_e4m3", saturate=True) == 448.0
    assert lp.mul(6.0, 6.0, "fp4_e2m1") == 6.0


def test_formats_without_nan_refuse_invalid_operations():
    with pytest.raises(ValueError, match="no NaN"):
        lp.div([1.0, 0.0], [1.0, 0.0], "fp4_e2m1")
    with pytest.raises(ValueError, match="no NaN"):
        lp.sqrt(-1.0, "fp6_e3m2")
    assert lp.div(1.0, 0.0, "fp4_e2m1", flags=True) == (6.0, 0x08)


def test_operands_must_be_values_of_the_format():
    with pytest.raises(ValueError, match=r"operand b: element 1 \(0.1\)"):
        lp.add([1.0, 1.0], [1.0, 0.1], "fp16")
    with pytest.raises(ValueError, match="operand a"):
        lp.mul(500.0, 1.0, "fp8_e4m3")
    with pytest.raises(ValueError, match="operand a"):
        lp.add(np.inf, 1.0, "fp8_e4m3")
    with pytest.raises(ValueError, match="rounding mode"):
        lp.add(1.0, 1.0, "fp16", "nearest_odd")
    with pytest.raises(ValueError, match="rng"):
        lp.add(1.0, 1.0, "fp16", rng=1)


def test_broadcasting_dtypes_and_codes():
    a = lp.round_to(np.arange(3.0).reshape(3, 1), "bf16")
    b = lp.round_to(np.linspace(0, 1, 4), "bf16")
    out = lp.add(a, b, "bf16")
    assert out.shape == (3, 4) and out.dtype == np.float64
    assert np.array_equal(out, lp.round_to(a + b, "bf16"))
    assert lp.add(np.float32([1, 2]), np.float32(1), "bf16").dtype == np.float32
    assert isinstance(lp.add(1.0, 2.0, "fp16"), np.floating)
    codes = lp.mul(np.uint8([0x38]), np.uint8([0x40]), "fp8_e4m3", codes=True)
    assert codes.dtype == np.uint8 and codes[0] == lp.encode(2.0, "fp8_e4m3")
    ml = pytest.importorskip("ml_dtypes")
    x = np.array([1.5, 2.0], dtype=ml.float8_e4m3fn)
    r = lp.mul(x, x, "fp8_e4m3")
    assert r.dtype == ml.float8_e4m3fn and np.array_equal(r.astype(float), [2.25, 4.0])


def test_e8m0_powers_of_two():
    assert lp.mul(2.0**10, 2.0**-3, "e8m0") == 2.0**7
    assert lp.div(2.0**10, 2.0**-3, "e8m0") == 2.0**13
    assert lp.sqrt(2.0**10, "e8m0") == 2.0**5
    assert np.isnan(lp.sub(1.0, 2.0, "e8m0"))  # negative: unsigned format


def test_docstring_examples_run():
    import doctest
    import importlib

    for name in ("lowprec.arith", "lowprec.matmul"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.failed == 0 and result.attempted > 0, name


def test_stochastic_results_do_not_depend_on_threads(monkeypatch):
    a = lp.round_to(np.random.default_rng(1).standard_normal(100_000), "bf16")
    monkeypatch.setenv("LOWPREC_NUM_THREADS", "1")
    one = lp.mul(a, a, "bf16", "stochastic", rng=5)
    monkeypatch.setenv("LOWPREC_NUM_THREADS", "3")
    three = lp.mul(a, a, "bf16", "stochastic", rng=5)
    assert np.array_equal(one, three)
    assert not np.array_equal(one, lp.mul(a, a, "bf16", "stochastic", rng=6))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt", "fma"])
def test_float64_path_equals_integer_kernel(op):
    """add/sub/mul without flags compute in float64 where that is exact (fp16 here),
    div/sqrt round to odd in float64, and the engine's fast path rounds once;
    flags=True takes the integer kernel.
    Both must agree bit for bit in every mode, stochastic included (same words)."""
    rng = np.random.default_rng(9)
    a = rng.integers(0, 1 << 16, 300_000, dtype=np.uint64).astype(np.uint16).view(np.float16)
    b = rng.integers(0, 1 << 16, 300_000, dtype=np.uint64).astype(np.uint16).view(np.float16)
    fn = getattr(lp, op)
    c = rng.integers(0, 1 << 16, 300_000, dtype=np.uint64).astype(np.uint16).view(np.float16)
    args = {"sqrt": (a,), "fma": (a, b, c)}.get(op, (a, b))
    for mode in lp.MODES:
        seed = 3 if mode == "stochastic" else None
        with np.errstate(all="ignore"):
            fast = fn(*args, "fp16", mode, rng=seed)
        slow, _ = fn(*args, "fp16", mode, rng=seed, flags=True)
        ok = (fast.view(np.uint16) == slow.view(np.uint16)) | (np.isnan(fast) & np.isnan(slow))
        assert ok.all(), (op, mode, a[~ok][:3], b[~ok][:3])
    for kw in ({"saturate": True}, {"subnormals": False}):
        fast = fn(*args, "fp16", "rtz", **kw)
        slow, _ = fn(*args, "fp16", "rtz", flags=True, **kw)
        ok = (fast.view(np.uint16) == slow.view(np.uint16)) | (np.isnan(fast) & np.isnan(slow))
        assert ok.all(), kw
