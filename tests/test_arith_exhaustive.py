"""lowprec.arith on every operand pair of every 8-, 6- and 4-bit format, in every
deterministic mode, against the exact Fraction reference in arith_reference.py.

Results are compared as values (NaN matches NaN, zeros compared with their
sign) and the IEEE flags byte exactly. fma is checked on random triples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from arith_reference import Reference

import lowprec as lp

SMALL = ["fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp8_e4m3_ieee", "fp8_e3m4",
         "fp8_e4m3b11fnuz", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1"]


def all_values(fmt) -> np.ndarray:
    """Every value of the format once (one NaN, both zeros where they exist)."""
    f = lp.get_format(fmt)
    vals = lp.decode(np.arange(1 << f.width, dtype=np.uint32), f)
    keep, seen = [], set()
    for v in vals:
        key = "nan" if math.isnan(v) else (float(v), math.copysign(1, v))
        if key not in seen:
            seen.add(key)
            keep.append(v)
    return np.array(keep)


def same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(got) & np.isnan(want)
    eq = (got == want) & (np.signbit(got) == np.signbit(want))
    return both_nan | eq


def check(op, fmt, operands, ref):
    """Run lowprec on the operand arrays in every mode and compare with the reference."""
    for mode, want in ref.evaluate(op, operands).items():
        check_mode(op, fmt, operands, mode, want)


def check_mode(op, fmt, operands, mode, want):
    fn = getattr(lp, op)
    ok = np.array([w[0] is not None for w in want])
    if not ok.all():
        # An invalid operation in a format without NaN: lowprec must refuse it.
        i = int(np.flatnonzero(~ok)[0])
        with pytest.raises(ValueError, match="no NaN"):
            fn(*(x[i:i + 1] for x in operands), fmt, mode)
    args = [x[ok] for x in operands]
    got, flags = fn(*args, fmt, mode, flags=True)
    want_v = np.array([w[0] for w, k in zip(want, ok) if k], dtype=np.float64)
    want_f = np.array([w[1] for w, k in zip(want, ok) if k], dtype=np.uint8)
    # Without flags, add/sub/mul may take the float64 path: it must agree.
    plain = np.asarray(fn(*args, fmt, mode), dtype=np.float64)
    bad = np.flatnonzero(~same(plain, np.asarray(got, dtype=np.float64)))
    assert bad.size == 0, (op, fmt, mode, [float(x[bad[0]]) for x in args], plain[bad[0]])
    bad = np.flatnonzero(~same(np.asarray(got, dtype=np.float64), want_v) | (flags != want_f))
    if bad.size:
        i = bad[0]
        raise AssertionError(
            f"{op} {fmt} {mode}: {bad.size}/{len(want_v)} differ; first: operands "
            f"{[float(a[i]) for a in args]} -> got {float(got[i])!r} flags {flags[i]:#04x}, "
            f"want {want_v[i]!r} flags {want_f[i]:#04x}")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("fmt", SMALL)
def test_all_pairs(fmt, op):
    v = all_values(fmt)
    a, b = (x.reshape(-1) for x in np.meshgrid(v, v, indexing="ij"))
    ref = Reference(lp.get_format(fmt))
    check(op, fmt, [a, b], ref)


@pytest.mark.parametrize("fmt", SMALL)
def test_sqrt_every_value(fmt):
    v = all_values(fmt)
    ref = Reference(lp.get_format(fmt))
    check("sqrt", fmt, [v], ref)


@pytest.mark.parametrize("fmt", SMALL)
def test_fma_random_triples(fmt):
    v = all_values(fmt)
    rng = np.random.default_rng(3)
    n = 4000
    a, b, c = (v[rng.integers(0, len(v), n)] for _ in range(3))
    ref = Reference(lp.get_format(fmt))
    check("fma", fmt, [a, b, c], ref)
