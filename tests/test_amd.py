"""AMD CDNA mfma models (lowprec.amd): MMA-Sim's CDNA3 vectors bit for bit, and each
distinguishing rule on hand-worked examples checked with exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp
from lowprec.amd import get_mfma, mfma_dot, mfma_matmul

DATA = Path(__file__).parent / "data" / "mmasim_amd"
CDNA3_INPUTS = ["fp16", "bf16", "xf32", "fp8_e4m3fnuz", "fp8_e5m2fnuz"]


def _rne32(x: Fraction) -> float:
    """Fraction -> nearest-even FP32 (x has few enough bits to be exact in float64)."""
    f = float(x)
    assert Fraction(f) == x
    return float(np.float32(f))


def _floor(x: Fraction, bits: int) -> Fraction:
    return Fraction(math.floor(x * 2 ** bits), 2 ** bits)


def _trunc(x: Fraction, bits: int) -> Fraction:
    return Fraction(math.trunc(x * 2 ** bits), 2 ** bits)


@pytest.mark.parametrize("inputs", CDNA3_INPUTS)
def test_mmasim_cdna3_vectors(inputs):
    z = np.load(DATA / f"cdna3_{inputs}.npz")
    assert str(z["commit"]).startswith("c785138")
    a, b, c, d = z["a"], z["b"], z["c"], z["d"]
    got = np.array([mfma_dot(a[i].astype(np.float64), b[i].astype(np.float64), float(c[i]),
                             "mi300", inputs) for i in range(len(d))], dtype=np.float32)
    same = (got.view(np.uint32) == d.view(np.uint32)) | (np.isnan(got) & np.isnan(d))
    assert len(d) == 512
    assert np.isnan(d).any() and (d == 0).any()  # the special cases are there
    assert same.sum() == len(d), f"{inputs}: {same.sum()}/{len(d)}; first bad {np.argmin(same)}"


def test_matmul_route_equals_reference():
    z = np.load(DATA / "cdna3_fp16.npz")
    a, b, c = z["a"][:24].astype(np.float64), z["b"][:24].astype(np.float64), z["c"][:24]
    fin = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    a, b, c = a[fin], b[fin], c[fin].astype(np.float64)
    got = lp.vecdot(a, b, c, inputs="fp16", model="mi300x:mfma")
    ref = [float(mfma_dot(a[i], b[i], c[i], "mi300", "fp16")) for i in range(len(a))]
    assert np.array_equal(got, ref)
    full = lp.matmul(a, b.T, inputs="fp16", model="mi300:mfma")
    assert np.array_equal(full, mfma_matmul(a, b.T, 0.0, "mi300", "fp16"))


def test_cdna3_rounds_down_not_toward_zero_on_a_negative_sum():
    # c = -1, one product -(2**-24)(1 + 2**-9): the sum is negative.
    a, b, c = -(2.0 ** -12) * (1 + 2.0 ** -9), 2.0 ** -12, -1.0
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    down = _rne32(Fraction(c) + _floor(Fraction(a) * Fraction(b), 31))
    toward_zero = _rne32(Fraction(c) + _trunc(Fraction(a) * Fraction(b), 31))
    assert down != toward_zero  # -1 - 2**-23 (past the tie) vs -1 (the tie, to even)
    assert down == -1.0 - 2.0 ** -23 and toward_zero == -1.0
    assert float(mfma_dot(np.array([a]), np.array([b]), c, "mi300", "fp16")) == down
    assert _rne32(exact) == down  # here the exactly rounded sum agrees; truncation does not


def test_cdna3_fp8_sums_odd_and_even_products_apart():
    # e5m2fnuz: product 0 = 1 (even group), product 1 = -2**-30 (odd group), rest zero.
    a = np.zeros(16)
    b = np.zeros(16)
    a[0], b[0], a[1], b[1] = 1.0, 1.0, -(2.0 ** -15), 2.0 ** -15
    p1 = Fraction(a[1]) * Fraction(b[1])
    split = _rne32(1 + _floor(p1, 24))         # odd sum aligned to 2**0, rounded down
    joint = _rne32(1 + _trunc(p1, 24))          # one group, truncated toward zero
    assert (split, joint) == (1.0 - 2.0 ** -24, 1.0)
    assert float(mfma_dot(a, b, 0.0, "mi300", "fp8_e5m2fnuz")) == split
    # the same products as BF16 (one group of 8) give the joint rule
    assert float(mfma_dot(a[:8], b[:8], 0.0, "mi300", "bf16")) == joint


def test_cdna2_flushes_subnormals_cdna1_does_not():
    a, b = np.array([2.0 ** -20]), np.array([2.0 ** 10])  # fp16 subnormal input
    assert float(mfma_dot(a, b, 1.0, "mi100", "fp16")) == 1.0 + 2.0 ** -10
    assert float(mfma_dot(a, b, 1.0, "mi250", "fp16")) == 1.0
    # a BF16 product below FP32's normal range: flushed to a zero of its sign
    a, b = np.array([-(2.0 ** -100)]), np.array([2.0 ** -30])
    assert float(mfma_dot(a, b, -0.0, "mi100", "bf16")) == -(2.0 ** -130)
    r = mfma_dot(a, b, -0.0, "mi250", "bf16")
    assert r == 0 and math.copysign(1.0, float(r)) == -1.0
    # a subnormal FP32 C is flushed to +0
    r = mfma_dot(np.zeros(4), np.zeros(4), -(2.0 ** -130), "mi250", "fp16")
    assert r == 0 and math.copysign(1.0, float(r)) == 1.0
    assert float(mfma_dot(np.zeros(4), np.zeros(4), -(2.0 ** -130), "mi100", "fp16")) \
        == -(2.0 ** -130)


@pytest.mark.parametrize("arch", ["mi100", "mi250"])
def test_cdna12_pairwise_tree(arch):
    # products 1, 2**-24, 2**-24, 2**-24 (fp16 2**-12 squared)
    a = np.array([1.0, 2.0 ** -12, 2.0 ** -12, 2.0 ** -12])
    p = [Fraction(x) * Fraction(x) for x in a]
    tree = _rne32(Fraction(_rne32(p[0] + p[1])) + Fraction(_rne32(p[2] + p[3])))
    seq = Fraction(0)
    for q in p:
        seq = Fraction(_rne32(seq + q))
    assert tree == 1.0 + 2.0 ** -23
    assert len({tree, float(seq), _rne32(sum(p))}) == 3  # tree, sequential, exact differ
    assert float(mfma_dot(a, a, 0.0, arch, "fp16")) == tree


def test_cdna3_xf32_truncates_inputs():
    x = 1.0 + 2.0 ** -11  # below TF32's 10 fraction bits: truncated away
    assert float(mfma_dot(np.array([x]), np.array([1.0]), 0.0, "mi300", "xf32")) == 1.0
    y = np.float32(-(1.0 + 2.0 ** -10 + 2.0 ** -11))
    assert float(mfma_dot(np.array([y]), np.array([1.0]), 0.0, "mi300", "xf32")) == \
        -(1.0 + 2.0 ** -10)


def test_names_and_bad_input():
    assert get_mfma("MI325:mfma").name == "mi300:mfma"
    assert get_mfma("mi250x").name == "mi250:mfma"
    assert get_mfma("h100:wgmma") is None
    assert "mi100:mfma" in lp.list_models()
    with pytest.raises(ValueError, match="takes inputs"):
        lp.matmul(np.ones((1, 4)), np.ones((4, 1)), inputs="tf32", model="mi250:mfma")
    with pytest.raises(ValueError, match="accumulates in fp32"):
        lp.matmul(np.ones((1, 4)), np.ones((4, 1)), accumulate="fp16", model="mi100:mfma")
    with pytest.raises(ValueError, match="unknown AMD architecture"):
        mfma_dot(np.ones(2), np.ones(2), 0.0, "mi999", "fp16")
    with pytest.raises(ValueError, match="has no 'xf32'"):
        mfma_dot(np.ones(2), np.ones(2), 0.0, "mi100", "xf32")
    with pytest.raises(ValueError, match="same length"):
        mfma_dot(np.ones(2), np.ones(3), 0.0, "mi300", "fp16")
    with pytest.raises(ValueError, match="instruction 'mfma'"):
        get_mfma("mi300:wgmma")
