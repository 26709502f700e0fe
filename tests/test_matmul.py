"""lowprec.matmul: each accumulation model against an independent computation.

* exact      == Fraction sum of Fraction products, rounded by the Fraction reference;
* sequential == a scalar loop over lowprec.fma; pairwise/blocked == loops over add/mul;
* tensor_core == a Fraction re-implementation of the block-FMA model written here,
  and the phenomena Fasi et al. 2021 report (truncated small addends, non-monotonic
  sums) appear on inputs constructed for them;
* promote == tensor-core partial sums added with lowprec.add in FP32.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from arith_reference import Reference, floor_log2

import lowprec as lp
from lowprec.matmul import A100, H100, H100_FP8, V100, TensorCore, blocked, promote, tensor_core


def rand_values(fmt, shape, rng, spread=4.0):
    """Random values of fmt with a spread of exponents (and some exact zeros)."""
    x = rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape))
    x[rng.random(shape) < 0.05] = 0.0
    return lp.round_to(x, fmt)


def rounded(x: Fraction, fmt, mode="rne") -> float:
    if x == 0:
        return 0.0
    return Reference(lp.get_format(fmt)).round(x, mode)[0]


# ----------------------------------------------------------------------- exact
@pytest.mark.parametrize("inputs,output", [("fp16", "fp32"), ("bf16", "fp16"),
                                           ("fp8_e4m3", "bf16"), ("fp8_e5m2", "fp8_e4m3")])
@pytest.mark.parametrize("mode", ["rne", "rtz", "rup", "rdown", "odd"])
def test_exact_is_the_rounded_fraction_sum(inputs, output, mode):
    rng = np.random.default_rng(5)
    a = rand_values(inputs, (4, 33), rng, spread=12 if inputs == "bf16" else 3)
    b = rand_values(inputs, (33, 3), rng, spread=12 if inputs == "bf16" else 3)
    got = lp.matmul(a, b, inputs=inputs, accumulate=output, model="exact", mode=mode)
    for i in range(4):
        for j in range(3):
            s = sum((Fraction(a[i, k]) * Fraction(b[k, j]) for k in range(33)), Fraction(0))
            want = rounded(s, output, mode)
            assert got[i, j] == want or (math.isnan(got[i, j]) and math.isnan(want)), (i, j)


def test_exact_cancellation_keeps_tiny_terms():
    a = np.array([[2.0**15, 2.0**-24, -(2.0**15)]])
    assert lp.matmul(a, np.ones((3, 1)), model="exact")[0, 0] == 2.0**-24
    # In FP32, 2**15 + 2**-24 rounds back to 2**15: the sequential loop loses it.
    assert lp.matmul(a, np.ones((3, 1)), model="sequential")[0, 0] == 0.0


# ------------------------------------------------------------------ sequential
@pytest.mark.parametrize("inputs,acc", [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"),
                                        ("fp8_e4m3", "fp16")])
@pytest.mark.parametrize("mode", ["rne", "rtz", "rup", "odd"])
def test_sequential_is_a_loop_of_fma(inputs, acc, mode):
    rng = np.random.default_rng(11)
    a = rand_values(inputs, (3, 20), rng)
    b = rand_values(inputs, (20, 4), rng)
    got = lp.matmul(a, b, inputs=inputs, accumulate=acc, model="sequential", mode=mode)
    for i in range(3):
        for j in range(4):
            s = 0.0
            for k in range(20):
                s = float(lp.fma(a[i, k], b[k, j], s, acc, mode))
            assert got[i, j] == s, (i, j)


def test_pairwise_and_blocked_are_loops_of_add():
    rng = np.random.default_rng(2)
    a = rand_values("fp16", (2, 13), rng)
    b = rand_values("fp16", (13, 2), rng)
    pw = lp.matmul(a, b, accumulate="fp16", model="pairwise")
    bl = lp.matmul(a, b, accumulate="fp16", model=blocked(4))
    for i in range(2):
        for j in range(2):
            terms = [float(lp.mul(a[i, k], b[k, j], "fp16")) for k in range(13)]
            while len(terms) > 1:
                nxt = [float(lp.add(terms[t], terms[t + 1], "fp16"))
                       for t in range(0, len(terms) - 1, 2)]
                terms = nxt + ([terms[-1]] if len(terms) % 2 else [])
            assert pw[i, j] == terms[0]
            total = 0.0
            for k0 in range(0, 13, 4):
                part = 0.0
                for k in range(k0, min(k0 + 4, 13)):
                    part = float(lp.fma(a[i, k], b[k, j], part, "fp16"))
                total = float(lp.add(total, part, "fp16"))
            assert bl[i, j] == total


# ---------------------------------------------------------------- tensor cores
def tc_reference(a_row, b_col, model: TensorCore, acc="fp32") -> float:
    """The block-FMA model in Fractions: for each block, align the accumulator and
    the exact products to the largest exponent, truncate each magnitude below
    2**(emax - mantissa_bits - align_bits), sum, round in hw_mode."""
    f = lp.get_format(acc)
    m = f.mantissa_bits if model.acc_mantissa_bits is None else model.acc_mantissa_bits
    hw = lp.custom_format(f.exponent_bits, m, bias=f.bias)
    ref = Reference(hw)
    c = Fraction(0)
    K = len(a_row)
    for k0 in range(0, K, model.block):
        terms = [c] + [Fraction(a_row[k]) * Fraction(b_col[k])
                       for k in range(k0, min(k0 + model.block, K))]
        nz = [t for t in terms if t != 0]
        if not nz:
            c = Fraction(0)
            continue
        emax = max(floor_log2(abs(t)) for t in nz)
        q = Fraction(2) ** (emax - m - model.align_bits)
        s = sum(((-1 if t < 0 else 1) * (abs(t) // q) * q for t in nz), Fraction(0))
        c = Fraction(ref.round(s, model.hw_mode)[0]) if s != 0 else Fraction(0)
    return float(c)


@pytest.mark.parametrize("model", [V100, A100, H100, H100_FP8,
                                   tensor_core(3, 1, hw_mode="rne")])
def test_tensor_core_matches_fraction_model(model):
    rng = np.random.default_rng(4)
    inputs = "fp8_e4m3" if model is H100_FP8 else "fp16"
    a = rand_values(inputs, (3, 70), rng, spread=3)
    b = rand_values(inputs, (70, 3), rng, spread=3)
    got = lp.matmul(a, b, inputs=inputs, model=model)
    for i in range(3):
        for j in range(3):
            assert got[i, j] == tc_reference(a[i], b[:, j], model), (model.name, i, j)


def _col(products):
    """Inputs a (1 x K) and b (K x 1) of fp16 values whose products are the given pairs."""
    a = np.array([[x for x, _ in products]])
    b = np.array([[y] for _, y in products])
    return a, b


def test_v100_truncates_small_addends():
    """Fasi et al. 2021 (Sec. on rounding and normalisation): the V100 block FMA
    truncates the bits of smaller addends below the FP32 precision of the largest
    term, so many addends of 3/4 ulp never change the sum, while the IEEE
    sequential FMA loop rounds each one up to a whole ulp."""
    small = (3 * 2.0**-12, 2.0**-13)  # product 3 * 2**-25 = 0.75 ulp(1) in FP32
    a, b = _col([(1.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)] + [small] * 16)
    n = 16
    assert lp.matmul(a, b, model=V100)[0, 0] == 1.0
    assert lp.matmul(a, b, model="sequential")[0, 0] == 1.0 + n * 2.0**-23
    assert lp.matmul(a, b, model="exact")[0, 0] == 1.0 + n * 3 * 2.0**-25
    # Three extra alignment bits (A100) keep 3/4 ulp: 8 per block add 6 ulp exactly.
    a8, b8 = _col([(1.0, 1.0)] + [(0.0, 0.0)] * 7 + [small] * 16)
    assert lp.matmul(a8, b8, model=A100)[0, 0] == 1.0 + 12 * 2.0**-23


def test_v100_sum_is_not_monotonic():
    """Fasi et al. 2021 and Mikaitis, 'Monotonicity of multi-term floating-point
    adders' (IEEE TC 2024): without normalisation between terms, increasing one
    addend can decrease the sum. Block 1 gives the accumulator 2 - 2**-23 or,
    with a larger third product, exactly 2; block 2 adds four products of
    1.5 * 2**-23. Aligned to 2**0 they truncate to 2**-23 each; aligned to 2**1
    they vanish."""
    tail = [(3 * 2.0**-12, 2.0**-12)] * 4  # products 3 * 2**-24
    smaller = [(1.0, 1.0), (1 - 2.0**-11, 1.0), (2.0**-11 * (1 - 2.0**-6), 1 + 2.0**-6),
               (0.0, 0.0)] + tail
    larger = [(1.0, 1.0), (1 - 2.0**-11, 1.0), (2.0**-11, 1.0), (0.0, 0.0)] + tail
    s_small = lp.matmul(*_col(smaller), model=V100)[0, 0]
    s_large = lp.matmul(*_col(larger), model=V100)[0, 0]
    assert (2.0**-11 * (1 - 2.0**-6)) * (1 + 2.0**-6) < 2.0**-11  # the addend grew
    assert s_small == 2 + 2.0**-22 and s_large == 2.0
    assert s_large < s_small  # non-monotonic
    ex_small = lp.matmul(*_col(smaller), model="exact")[0, 0]
    ex_large = lp.matmul(*_col(larger), model="exact")[0, 0]
    assert ex_small <= ex_large  # exact rounding is monotonic


def test_promote_adds_partial_sums_in_fp32():
    rng = np.random.default_rng(8)
    a = rand_values("fp8_e4m3", (2, 300), rng, spread=2)
    b = rand_values("fp8_e4m3", (300, 2), rng, spread=2)
    got = lp.matmul(a, b, inputs="fp8_e4m3", model="deepseek_v3")
    for i in range(2):
        for j in range(2):
            total = 0.0
            for c0 in range(0, 300, 128):
                part = tc_reference(a[i, c0:c0 + 128], b[c0:c0 + 128, j], H100_FP8)
                total = float(lp.add(total, part, "fp32"))
            assert got[i, j] == total
    # Promotion recovers accuracy lost by the 13-bit accumulator on long sums.
    a = lp.round_to(np.full((1, 4096), 1.0), "fp8_e4m3")
    b = lp.round_to(np.full((4096, 1), 1.125), "fp8_e4m3")
    plain = lp.matmul(a, b, inputs="fp8_e4m3", model=H100_FP8)[0, 0]
    promoted = lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128))[0, 0]
    assert abs(promoted - 4608) <= abs(plain - 4608)


def test_specials_and_api():
    a = np.array([[np.inf, 1.0]])
    assert lp.matmul(a, np.array([[1.0], [1.0]]))[0, 0] == np.inf
    assert np.isnan(lp.matmul(a, np.array([[0.0], [1.0]]))[0, 0])
    for name in ("exact", "v100", "pairwise"):
        assert np.isnan(lp.matmul(np.array([[np.inf, -np.inf]]), np.ones((2, 1)), model=name)[0, 0])
    assert lp.dot([1.0, 2.0], [3.0, 4.0], model="exact") == 11.0
    models = lp.list_models()
    assert {"exact", "sequential", "pairwise", "blocked", "v100", "a100", "h100", "h100_fp8",
            "b200", "deepseek_v3"} <= set(models)
    assert all(isinstance(d, str) and d for d in models.values())
    assert "Fasi" in models["v100"] and "Khattak" in models["h100"]
    with pytest.raises(ValueError, match="unknown accumulation model"):
        lp.matmul(np.ones((1, 1)), np.ones((1, 1)), model="tpu")
    with pytest.raises(ValueError, match="shapes"):
        lp.matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="stochastic"):
        lp.matmul(np.ones((1, 1)), np.ones((1, 1)), mode="stochastic")


def test_readme_section_example_runs():
    """The code block of docs/arithmetic.md runs as written."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "arithmetic.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "arith.md", "exec"), {})  # noqa: S102 (our own README example)
