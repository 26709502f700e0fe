"""The one-pass add/sub/mul kernel (``lowprec._kernels.arith32``) against the
integer kernel, bit for bit.

``flags=True`` always takes the integer kernel (``_kernels.arith.op_kernel``),
whose results the Fraction oracle of test_arith_exhaustive.py checks; without
flags, add/sub/mul in the deterministic modes take the fused kernel
(``lowprec.arith._fused``, asserted to have run). Results are compared as bit
patterns: float32 bits for float32 operands, codes for the format's own dtype.

Compiled kernels are few on purpose (each costs about a second): float32
operands in every mode, own-dtype operands (whose decoding does not depend on
the mode) in rne, which has its own sum path, and rdown, the mode with its own
zero signs.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec import arith as arith_mod
from lowprec._kernels import arith as int_kernel
from lowprec._kernels import arith32, bits32_direct, params
from lowprec.formats import reference_dtype

MODES = [m for m in lp.MODES if m != "stochastic"]
OWN_MODES = ["rne", "rdown"]
OPS = {"add": int_kernel.ADD, "sub": int_kernel.SUB, "mul": int_kernel.MUL}
SMALL = [name for name, f in lp.FORMATS.items() if f.width <= 8 and arith32.supports(f)]
KWARGS = [{}, {"saturate": True}, {"subnormals": False}]


def test_the_formats_are_covered():
    assert len(SMALL) == 10 and "e8m0" not in SMALL
    assert all(arith32.supports(lp.get_format(f)) for f in ("fp16", "bf16", "tf32"))
    assert not arith32.supports(lp.get_format("fp32"))


def bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint32) if x.dtype == np.float32 else x.view(f"u{x.dtype.itemsize}")


def fused(op: str, a, b, fmt, mode, **kw):
    """The fused route itself (it must not fall back), and lowprec.<op> agreeing."""
    f = lp.get_format(fmt)
    got = arith_mod._fused(OPS[op], (a, b), f, mode, kw.get("saturate", False),
                           kw.get("subnormals", True), None)
    assert got is not None, f"{op} {fmt} {mode} {kw}: the fused kernel refused valid operands"
    public = getattr(lp, op)(a, b, fmt, mode, **kw)
    assert public.dtype == got.dtype and np.array_equal(bits(public), bits(got))
    return got


def check(op: str, a, b, fmt, mode, **kw):
    got = fused(op, a, b, fmt, mode, **kw)
    want, _ = getattr(lp, op)(a, b, fmt, mode, flags=True, **kw)
    assert got.dtype == want.dtype, (op, fmt, mode, got.dtype, want.dtype)
    bad = np.flatnonzero(bits(got) != bits(want))
    if bad.size:
        i = bad[0]
        raise AssertionError(
            f"{op} {fmt} {mode} {kw}: {bad.size}/{got.size} differ; first: "
            f"{float(np.float64(a[i]))!r} {op} {float(np.float64(b[i]))!r} -> fused "
            f"{float(np.float64(got[i]))!r} ({int(bits(got)[i]):#x}), integer kernel "
            f"{float(np.float64(want[i]))!r} ({int(bits(want)[i]):#x})")


def own_and_float32(fmt, codes_a, codes_b):
    """The operand pairs as the format's own dtype and as float32 values."""
    f = lp.get_format(fmt)
    own = reference_dtype(f)
    a = codes_a.astype(f.code_dtype)
    b = codes_b.astype(f.code_dtype)
    with np.errstate(invalid="ignore"):
        a32 = lp.decode(a, f).astype(np.float32)
        b32 = lp.decode(b, f).astype(np.float32)
    return (None if own is None else (a.view(own), b.view(own))), (a32, b32)


@pytest.mark.parametrize("fmt", SMALL)
def test_every_pair_of_every_small_format(fmt):
    f = lp.get_format(fmt)
    codes = np.arange(1 << f.width)
    ca, cb = (x.reshape(-1) for x in np.meshgrid(codes, codes, indexing="ij"))
    own, f32 = own_and_float32(fmt, ca, cb)
    for op in OPS:
        for mode in MODES:
            for kw in KWARGS:
                check(op, *f32, fmt, mode, **kw)
                if mode in OWN_MODES:
                    check(op, *own, fmt, mode, **kw)


def adversarial(fmt, rng) -> tuple[np.ndarray, np.ndarray]:
    """Codes of operand pairs where roundings go wrong: ties and near-ties at
    every exponent difference 0..60, x + (-x), sums and products around the
    overflow threshold, in and below the subnormal range, signed zeros,
    infinities and NaN, then random pairs."""
    f = lp.get_format(fmt)
    m = f.mantissa_bits
    specials = [0.0, -0.0, f.smallest_subnormal, 2 * f.smallest_subnormal, f.smallest_normal,
                f.smallest_normal - f.smallest_subnormal, f.max, 1.0, 1.5, 1 + 2.0**-m,
                2 - 2.0**-m, 2.0**-m, 2.0**-(m + 1), 3 * 2.0**-(m + 1), np.inf, np.nan]
    specials = [s for s in specials if not np.isnan(s) or f.has_nan]
    specials = [s for s in specials if np.isfinite(s) or np.isnan(s) or f.has_inf]
    sv = np.array(specials + [-s for s in specials])
    pairs_a, pairs_b = [np.repeat(sv, sv.size)], [np.tile(sv, sv.size)]
    n = 4000
    sig = lambda k: 1 + rng.integers(0, 1 << m, k) * 2.0**-m  # noqa: E731
    sign = lambda k: rng.choice([-1.0, 1.0], k)  # noqa: E731
    lo, hi = f.emin, f.emax
    for d in range(61):  # exponent differences, b a half-ulp multiple away from ties
        e = rng.integers(lo + min(d, hi - lo), hi + 1, n // 8)
        a = sign(e.size) * sig(e.size) * 2.0**e
        b = sign(e.size) * sig(e.size) * 2.0 ** (e - d)
        pairs_a.append(a)
        pairs_b.append(b)
        pairs_a.append(a)  # exact ties in the format: a +- half an ulp of a
        pairs_b.append(sign(e.size) * 2.0 ** (e - m - 1) * (1 + 2.0 ** -rng.integers(0, 3, e.size)
                                                             * (d > 0)))
    # products near the overflow threshold and in, around and below the subnormal range
    for target in (hi, hi + 1, lo, lo - 1, lo - m // 2, lo - m, lo - m - 1, lo - m - 2, lo - 2 * m):
        ea = rng.integers(lo, hi + 1, n // 4)
        eb = np.clip(target - ea, lo, hi)
        pairs_a.append(sign(ea.size) * sig(ea.size) * 2.0**ea)
        pairs_b.append(sign(ea.size) * sig(ea.size) * 2.0**eb)
    a = np.concatenate(pairs_a)
    b = np.concatenate(pairs_b)
    with np.errstate(over="ignore"):
        # ties and near-ties need every value to be one of the format: round them in
        a = np.asarray(lp.round_to(a, f, "rtz"))
        b = np.asarray(lp.round_to(b, f, "rtz"))
    ca = np.concatenate([lp.encode(a, f), rng.integers(0, 1 << f.width, 60_000)])
    cb = np.concatenate([lp.encode(b, f), rng.integers(0, 1 << f.width, 60_000)])
    return ca, cb


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32"])
def test_sixteen_bit_formats_and_tf32_on_adversarial_pairs(fmt):
    rng = np.random.default_rng(13)
    ca, cb = adversarial(fmt, rng)
    own, f32 = own_and_float32(fmt, ca, cb)
    for op in OPS:
        for mode in MODES:
            for kw in KWARGS:
                check(op, *f32, fmt, mode, **kw)
                if own is not None and mode in OWN_MODES:
                    check(op, *own, fmt, mode, **kw)


def test_every_code_of_fp16_and_bf16_as_an_operand():
    rng = np.random.default_rng(5)
    for fmt in ("fp16", "bf16"):
        ca = np.arange(1 << 16)
        cb = rng.permutation(ca)
        own, f32 = own_and_float32(fmt, ca, cb)
        for op in OPS:
            check(op, *own, fmt, "rne")
            check(op, *f32, fmt, "rne")


def test_large_arrays_split_across_threads():
    rng = np.random.default_rng(2)
    n = 1_200_000  # above _run_split's two-part threshold
    ca, cb = rng.integers(0, 1 << 16, n), rng.integers(0, 1 << 16, n)
    own, f32 = own_and_float32("bf16", ca, cb)
    check("add", *own, "bf16", "rne")
    check("mul", *f32, "bf16", "rne")


def test_result_types_broadcasting_and_out():
    f = lp.get_format("bf16")
    own = reference_dtype(f)
    x32 = np.array([[1.0, -2.5, 3.0], [0.0, -0.0, 1e-40]], np.float32)
    x32 = lp.round_to(x32, f)
    x_own = x32.astype(own)
    y32 = lp.round_to(np.array([0.75, 1e30, -3.0], np.float32), f)
    cases = [(x32, y32), (x_own, y32.astype(own)), (x32, y32.astype(own)), (x_own, 2.0),
             (x32, np.float32(2.0)), (x32, 0.5), (x_own[:, :1], y32.astype(own)),
             (np.float32(1.5), np.float32(-0.25)), (x32[:, ::2], y32[::2])]
    for op in OPS:
        for a, b in cases:
            got = getattr(lp, op)(a, b, f)
            want, _ = getattr(lp, op)(a, b, f, flags=True)
            assert type(got) is type(want) and got.dtype == want.dtype, (a, b)
            assert got.shape == want.shape and np.array_equal(bits(got), bits(want))
    # out=: written in place and returned, also when it is an operand or strided
    a, b = x32.copy(), np.broadcast_to(y32, x32.shape).copy()
    want = lp.mul(a, b, f, flags=True)[0]
    for out in (np.empty_like(a), a, b, np.empty((2, 6), np.float32)[:, ::2]):
        aa, bb = (a.copy(), b.copy()) if out is a or out is b else (a, b)
        target = aa if out is a else bb if out is b else out
        assert lp.mul(aa, bb, f, out=target) is target
        assert np.array_equal(bits(target), bits(want))
    for bad_out in (np.empty(a.shape, np.float64), np.empty((3, 2), np.float32), [0.0]):
        with pytest.raises((TypeError, ValueError)) as got:
            lp.mul(a, b, f, out=bad_out)
        with pytest.raises((TypeError, ValueError)) as want_error:
            lp.mul(a, b, f, out=bad_out, flags=True)
        assert str(got.value) == str(want_error.value)
    with pytest.raises(ValueError, match="operand a: element 0"):  # operands checked first
        lp.mul(a + np.float32(0.1), b, f, out=np.empty(a.shape, np.float64))


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp4_e2m1", "bf16", "fp16"])
def test_bad_operands_give_the_integer_routes_error(fmt):
    f = lp.get_format(fmt)
    ok = np.float32(1.0)
    for bad in (np.float32(0.1), np.float32(1e30), np.float32(np.inf), np.float32(np.nan),
                np.float32(3e-39)):
        for a, b in ((np.array([ok, bad, bad]), np.array([ok, ok, ok])),
                     (np.array([ok, ok]), np.array([ok, bad]))):
            try:
                lp.add(a, b, f, flags=True)
            except ValueError as e:
                want = str(e)
            else:
                want = None
            if want is None:  # a value of the format: both routes take it
                lp.add(a, b, f)
                continue
            for kw in ({}, {"out": a.copy()}):
                with pytest.raises(ValueError) as got:
                    lp.add(a, b, f, **kw)
                assert str(got.value) == want, (fmt, bad)
            aa = a.copy()  # in place: the bad element is still reported
            with pytest.raises(ValueError) as got:
                lp.add(aa, b, f, out=aa)
            assert str(got.value) == want


def test_kernel_reports_a_bad_operand():
    """The kernel's status (the caller then takes the route that raises)."""
    f = lp.get_format("fp4_e2m1")
    kernel = arith32.kernel_for(int_kernel.ADD, f, params.RNE)
    q = bits32_direct.params_array(f, params.RNE, False, False)
    qc = bits32_direct.params_array(f, params.RTZ, False, False)
    a = np.array([1.0, 0.1], np.float32).view(np.uint32)
    b = np.array([0.5, 1.0], np.float32).view(np.uint32)
    out = np.empty(2, np.uint32)
    assert kernel(q, qc, arith32.decode_params(f), 0, a, b, out) == arith32.BAD_OPERAND
    assert kernel(q, qc, arith32.decode_params(f), 0, a[:1], b[:1], out[:1]) == 0
    assert out[:1].view(np.float32)[0] == 1.5
