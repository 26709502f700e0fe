"""lowprec.arith's fast stochastic kernel (``arith_fast.sr_kernel``: div, sqrt, fma)
against the integer kernel it replaces (``arith.op_kernel`` with the same
random words): equal codes, flags and error index, in every format. And the
exact integer helpers it rests on, against Python's unbounded integers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lowprec as lp
from lowprec._kernels import arith, arith_fast, engine, params, sr
from lowprec.formats import FORMATS

OPS = {"div": arith.DIV, "sqrt": arith.SQRT, "fma": arith.FMA}


def _codes(fmt, n: int, rng) -> list[np.ndarray]:
    """Uniform codes, plus operands near the first (cancellation in fma, quotients
    near 1) and the edge magnitudes (zero, subnormals, max, inf/NaN codes)."""
    codes = [rng.integers(0, 1 << fmt.width, n) for _ in range(3)]
    near = rng.random(n) < 0.3
    for k in (1, 2):
        codes[k] = np.where(near, codes[0] ^ rng.integers(0, 8, n), codes[k])
    edges = np.array([0, 1, (1 << fmt.mantissa_bits) - 1, 1 << fmt.mantissa_bits,
                      fmt.max_code_magnitude, fmt.max_code_magnitude + 1,
                      fmt.max_code_magnitude - 1])
    edges = np.concatenate([edges, edges | fmt.sign_mask]) % (1 << fmt.width)
    for k in range(3):
        idx = rng.integers(0, n, n // 20)
        codes[k][idx] = edges[rng.integers(0, edges.size, idx.size)]
    return codes


def _both(fmt, op, a, b, c, seeds, saturate=False, ftz=False):
    P = params.format_params(fmt)
    n = a.shape[0]
    out = [np.zeros(n, np.int64), np.zeros(n, np.int64)]
    fl = [np.zeros(n, np.uint8), np.zeros(n, np.uint8)]
    bad_ref = arith.op_kernel(P, op, a, b, c, params.STOCHASTIC, saturate, ftz,
                               sr.sr_expand(seeds, n), out[0], fl[0], True)
    bad = arith_fast.sr_kernel(P, op, a, b, c, saturate, ftz, seeds, out[1], fl[1], True)
    return bad_ref, bad, out, fl


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.mantissa_bits <= 23])
def test_fast_kernel_equals_integer_kernel(name, op):
    fmt = lp.get_format(name)
    rng = np.random.default_rng(abs(hash((name, op))) % 2**32)
    n = 40_000
    a, b, c = _codes(fmt, n, rng)
    if fmt.nan == "none":
        # No NaN: keep the operations valid so that every element is compared
        # (0/0 and sqrt(x < 0) stop both kernels; that stop is checked below).
        if op == "sqrt":
            a &= ~fmt.sign_mask
        b = np.where((b & ~fmt.sign_mask) == 0, int(lp.encode(1.0, fmt)), b)
    seeds = rng.integers(0, 2**63, n // sr.SR_BLOCK + 1).astype(np.uint64)
    for saturate, ftz in [(False, False), (True, False), (False, True)]:
        bad_ref, bad, out, fl = _both(fmt, OPS[op], a, b, c, seeds, saturate, ftz)
        assert bad == bad_ref == -1
        diff = np.flatnonzero((out[0] != out[1]) | (fl[0] != fl[1]))
        assert diff.size == 0, (name, op, saturate, ftz, a[diff[:3]], b[diff[:3]], c[diff[:3]])
    if fmt.nan == "none" and op != "fma":  # no inf in these formats: fma is never invalid
        a2 = a.copy()
        a2[n // 2] = 0 if op != "sqrt" else fmt.sign_mask | 1
        b2 = b.copy()
        b2[n // 2] = 0
        bad_ref, bad, out, _ = _both(fmt, OPS[op], a2, b2, c, seeds)
        assert bad == bad_ref == n // 2
        assert np.array_equal(out[0][:bad], out[1][:bad])


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_fast_sqrt_every_operand(name):
    fmt = lp.get_format(name)
    a = np.arange(1 << 16)
    seeds = np.random.default_rng(1).integers(0, 2**63, 17).astype(np.uint64)
    bad_ref, bad, out, fl = _both(fmt, arith.SQRT, a, a[:1], a[:1], seeds)
    assert bad == bad_ref == -1
    assert np.array_equal(out[0], out[1]) and np.array_equal(fl[0], fl[1])


def test_div_sig60_exact():
    rng = np.random.default_rng(2)
    for p in (3, 4, 8, 11, 24):
        lo, hi = 1 << (p - 1), (1 << p) - 1
        sigs = np.concatenate([[lo, lo + 1, hi - 1, hi], rng.integers(lo, hi + 1, 300)])
        for sa in sigs[:40]:
            for sb in sigs:
                q, sticky = arith_fast.div_sig60(int(sa), int(sb))
                want, rem = divmod(int(sa) << 60, int(sb))
                assert (q, sticky) == (want, rem != 0), (p, sa, sb)


def test_sqrt_sig60_exact():
    rng = np.random.default_rng(3)
    for p in (1, 2, 3, 8, 11, 24):
        lo, hi = 1 << (p - 1), (1 << p) - 1
        sigs = np.concatenate([[lo, hi, lo + 1], rng.integers(lo, hi + 1, 2000)])
        for sa in sigs:
            for k in (62 - p, 61 - p):  # both parities, as op_sqrt chooses
                N = int(sa) << k
                r, sticky = arith_fast.sqrt_sig60(N)
                want = math.isqrt(N << 58)
                assert (r, sticky) == (want, want * want != N << 58), (p, sa, k)


def test_public_api_uses_same_words():
    """lp.div/sqrt/fma in stochastic mode: the same results with and without
    flags, and the same as op_kernel given the words of the same seed."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(50_000).astype(np.float16)
    b = rng.standard_normal(50_000).astype(np.float16)
    got = lp.div(a, b, "fp16", "stochastic", rng=11)
    got2, _ = lp.div(a, b, "fp16", "stochastic", rng=11, flags=True)
    assert np.array_equal(got.view(np.uint16), got2.view(np.uint16))
    seeds = np.random.default_rng(11).bit_generator.random_raw(50_000 // sr.SR_BLOCK + 1)
    ca = a.view(np.uint16).astype(np.int64)
    cb = b.view(np.uint16).astype(np.int64)
    bad_ref, _, out, _ = _both(lp.get_format("fp16"), arith.DIV, ca, cb, ca[:1], seeds)
    assert bad_ref == -1
    assert np.array_equal(got.view(np.uint16), out[0].astype(np.uint16))


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e4m3fnuz", "e8m0", "fp32"])
def test_round_normal_equals_engine_at_the_threshold(name):
    """sr_round_normal against round_pack with the words that decide: just below,
    at and above the threshold (where the sticky bit matters, which random words
    hit with probability 2**-64), 0 and 2**64 - 1."""
    fmt = lp.get_format(name)
    P = params.format_params(fmt)
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(3000):
        nbits = int(rng.integers(fmt.mantissa_bits + 2, 63))
        sig = int(rng.integers(1 << (nbits - 1), 1 << nbits))
        if rng.random() < 0.2:  # a sig whose kept part is all ones: rounding up carries
            sig |= ((1 << (fmt.mantissa_bits + 1)) - 1) << (nbits - fmt.mantissa_bits - 1)
        lsb = int(rng.integers(fmt.emin - nbits, fmt.emax + 3 - nbits))
        neg = bool(rng.random() < 0.5)
        sticky = bool(rng.random() < 0.5)
        shift = nbits - 1 - fmt.mantissa_bits
        t = ((sig & ((1 << shift) - 1)) << (64 - shift)) % 2**64
        for w in {0, 2**64 - 1, t, max(t - 1, 0), min(t + 1, 2**64 - 1)}:
            ok, code, f = arith_fast.sr_round_normal(P, neg, sig, lsb, nbits, sticky, np.uint64(w))
            if not ok:
                continue
            want = engine.round_pack(P, neg, sig, lsb, sticky, params.STOCHASTIC, False,
                                      False, np.uint64(w))
            assert (code, f) == (want[0], want[1]) and want[2] == 0, (sig, lsb, sticky, w)
            checked += 1
    assert checked > 3000
