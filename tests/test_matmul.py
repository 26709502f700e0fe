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
from lowprec.matmul import TensorCore, blocked, get_model, promote, tensor_core


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
def _nominal(x: Fraction, emin: int) -> int:
    """The exponent a tensor core aligns by: floor(log2|x|), at least the format's emin."""
    return max(floor_log2(abs(x)), emin)


def tc_reference(a_row, b_col, c, tc: TensorCore, inputs: str, mma: str = "fp32") -> float:
    """The block-FMA rule in Fractions, written from its description (Khattak &
    Mikaitis 2025; lowprec.tensorcores): per block, the largest nominal exponent E
    (C's, or e_a + e_b per product), every term truncated toward zero to a multiple
    of 2**(E - frac_bits), an exact sum, one rounding in hw_mode into the
    accumulator. With c_late, C is added after that with one RNE addition."""
    fin, fmma = lp.get_format(inputs), lp.get_format(mma)
    bits = fmma.mantissa_bits if tc.acc_mantissa_bits is None else tc.acc_mantissa_bits
    ebits = 8 if tc.c_late else fmma.exponent_bits
    hw = Reference(lp.custom_format(ebits, bits, bias=(1 << (ebits - 1)) - 1))
    rmma = Reference(fmma)
    acc = Fraction(rounded(Fraction(float(c)), mma))
    K = len(a_row)
    for k0 in range(0, K, tc.block):
        prods = [(Fraction(a_row[k]) * Fraction(b_col[k]),
                  _nominal(Fraction(a_row[k]), fin.emin) + _nominal(Fraction(b_col[k]), fin.emin))
                 for k in range(k0, min(k0 + tc.block, K)) if a_row[k] * b_col[k] != 0]
        terms = prods if tc.c_late or acc == 0 else prods + [(acc, _nominal(acc, fmma.emin))]
        if not terms:
            continue
        q = Fraction(2) ** (max(e for _, e in terms) - tc.frac_bits)
        s = sum(((-1 if t < 0 else 1) * (abs(t) // q) * q for t, _ in terms), Fraction(0))
        part = Fraction(hw.round(s, tc.hw_mode)[0]) if s != 0 else Fraction(0)
        if tc.c_late:
            part = Fraction(rmma.round(part, "rne")[0]) if part != 0 else Fraction(0)
            total = acc + part
            acc = Fraction(rmma.round(total, "rne")[0]) if total != 0 else Fraction(0)
        else:
            acc = part
    return float(acc)


TC_CASES = [("v100", "fp16", "fp32"), ("v100", "fp16", "fp16"), ("a100", "bf16", "fp32"),
            ("a100", "tf32", "fp32"), ("ada", "fp8_e4m3", "fp32"), ("ada", "fp8_e5m2", "fp16"),
            ("h100", "fp16", "fp16"), ("h100", "fp8_e4m3", "fp32"), ("b200", "fp8_e5m2", "fp32"),
            ("b200", "fp16", "fp32"), ("what-if", "fp16", "fp32")]


@pytest.mark.parametrize("arch,inputs,out", TC_CASES)
def test_tensor_core_matches_fraction_model(arch, inputs, out):
    """Every architecture rule on K = 70 (several chained blocks, a partial last one)
    with a random C, against the Fraction re-implementation above."""
    rng = np.random.default_rng(4)
    tc = (tensor_core(3, 1, hw_mode="rne", c_late=True) if arch == "what-if"
          else get_model(arch).rule(inputs, out))
    a = rand_values(inputs, (6, 70), rng, spread=3)
    b = rand_values(inputs, (6, 70), rng, spread=3)
    c = lp.round_to(rng.standard_normal(6) * 4, "fp32")
    model = tc if arch == "what-if" else arch
    got = lp.vecdot(a, b, c, inputs=inputs, output=out, model=model)
    for i in range(6):
        assert got[i] == tc_reference(a[i], b[i], c[i], tc, inputs, out), (arch, i)
    # matmul computes the same dot products.
    mm = lp.matmul(a, b.T, np.broadcast_to(c[:, None], (6, 6)), inputs=inputs, output=out,
                   model=model)
    assert np.array_equal(np.diag(mm), got)


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
    assert lp.matmul(a, b, model="v100")[0, 0] == 1.0
    assert lp.matmul(a, b, model="sequential")[0, 0] == 1.0 + n * 2.0**-23
    assert lp.matmul(a, b, model="exact")[0, 0] == 1.0 + n * 3 * 2.0**-25
    # One extra alignment bit (A100, Khattak & Mikaitis 2025): each 0.75 ulp is kept
    # as 0.5 ulp, so 16 of them add 8 ulp.
    a8, b8 = _col([(1.0, 1.0)] + [(0.0, 0.0)] * 7 + [small] * 16)
    assert lp.matmul(a8, b8, model="a100")[0, 0] == 1.0 + 8 * 2.0**-23


def test_v100_one_plus_2_to_minus_23():
    """Fasi et al. 2021: V100 keeps no bit below 2**-23 relative to the largest
    exponent: 1 + 2**-23 + 2 * 2**-24 comes out as 1 + 2**-23, where the exact sum
    is 1 + 2**-22; with A100's extra alignment bit the two halves survive."""
    a, b = _col([(1.0, 1.0), (2.0**-12, 2.0**-11), (2.0**-12, 2.0**-12), (2.0**-12, 2.0**-12)])
    assert lp.matmul(a, b, model="v100")[0, 0] == 1 + 2.0**-23
    assert lp.matmul(a, b, model="exact")[0, 0] == 1 + 2.0**-22
    assert lp.vecdot(a[0], b[:, 0], inputs="fp16", model="a100") == 1 + 2.0**-22


def test_carry_then_truncation():
    """A carry out of the top bit (three products of 3.0625 sum past 8) moves the
    normalised result's last bit to 2**-20; the block sum is then truncated, so a
    0.75-ulp addend kept by the alignment is still lost (Fasi et al. 2021: the
    normalisation rounds toward zero)."""
    a, b = _col([(1.75, 1.75)] * 3 + [(1.5 * 2.0**-11, 2.0**-10)])
    assert lp.matmul(a, b, model="v100")[0, 0] == 9.1875
    assert lp.matmul(a, b, model="exact")[0, 0] == 9.1875 + 2.0**-20


def test_nominal_exponent_not_leading_bit():
    """The alignment uses e_a + e_b, not the product's true leading bit (Khattak &
    Mikaitis 2025): 1.5 * 1.5 = 2.25 has nominal exponent 0, so on V100 a term of
    2**-23 is kept beside it (aligned to 2**1 it would be dropped)."""
    a, b = _col([(1.5, 1.5), (2.0**-12, 2.0**-11), (0.0, 0.0), (0.0, 0.0)])
    # 2.25 + 2**-23, truncated into FP32 at exponent 1: 2.25 (ulp 2**-22)...
    assert lp.matmul(a, b, model="v100")[0, 0] == 2.25
    # ...but two of them reach 2**-22 only if both are kept by the alignment.
    a2, b2 = _col([(1.5, 1.5), (2.0**-12, 2.0**-11), (2.0**-12, 2.0**-11), (0.0, 0.0)])
    assert lp.matmul(a2, b2, model="v100")[0, 0] == 2.25 + 2.0**-22


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
    s_small = lp.matmul(*_col(smaller), model="v100")[0, 0]
    s_large = lp.matmul(*_col(larger), model="v100")[0, 0]
    assert (2.0**-11 * (1 - 2.0**-6)) * (1 + 2.0**-6) < 2.0**-11  # the addend grew
    assert s_small == 2 + 2.0**-22 and s_large == 2.0
    assert s_large < s_small  # non-monotonic
    ex_small = lp.matmul(*_col(smaller), model="exact")[0, 0]
    ex_large = lp.matmul(*_col(larger), model="exact")[0, 0]
    assert ex_small <= ex_large  # exact rounding is monotonic


def test_exceptional_cases_of_the_sources():
    """model_validation/ExceptionalCasesTest.m of Khattak & Mikaitis's MATLAB models:
    (1) C = 2**127 plus a product 2**127 overflows to +inf although the
    normalisation truncates; (2) +inf * -inf gives -inf; (3) -inf + inf gives NaN."""
    big = 2.0**127
    assert lp.vecdot([big], [1.0], big, inputs="bf16", model="a100") == np.inf
    assert lp.vecdot([np.inf], [-np.inf], inputs="bf16", model="a100") == -np.inf
    assert np.isnan(lp.vecdot([-np.inf, np.inf], [1.0, 1.0], inputs="bf16", model="a100"))
    assert np.isnan(lp.vecdot([1.0, 2.0], [1.0, 1.0], np.nan, inputs="fp16", model="h100"))


def test_b200_fp8_adds_c_after_the_products():
    """B200 FP8 (lowprec's finding on the measured files): the products' sum is
    truncated into FP32 first, then C is added with round-to-nearest. With
    C = 1 and products 3 * 2**-26 (0.375 ulp) ... 2**-24 + 2**-25 (0.75 ulp), the
    sum rounds up, where H100 (C aligned and truncated with the products) does not."""
    a = np.array([1.5 * 2.0**-8, 0.0])  # product 1.5 * 2**-8 * 2**-16 = 0.75 ulp(1)
    b = np.array([2.0**-16, 0.0])
    assert lp.vecdot(a, b, 1.0, inputs="fp8_e5m2", model="b200") == 1 + 2.0**-23
    assert lp.vecdot(a, b, 1.0, inputs="fp8_e5m2", model="h100") == 1.0


def test_promote_adds_partial_sums_in_fp32():
    rng = np.random.default_rng(8)
    a = rand_values("fp8_e4m3", (2, 300), rng, spread=2)
    b = rand_values("fp8_e4m3", (300, 2), rng, spread=2)
    got = lp.matmul(a, b, inputs="fp8_e4m3", model="deepseek_v3")
    rule = get_model("h100").rule("fp8_e4m3")
    for i in range(2):
        for j in range(2):
            total = 0.0
            for c0 in range(0, 300, 128):
                part = tc_reference(a[i, c0:c0 + 128], b[c0:c0 + 128, j], 0.0, rule, "fp8_e4m3")
                total = float(lp.add(total, part, "fp32"))
            assert got[i, j] == total
    # Promotion recovers accuracy lost by the 13-bit accumulator on long sums.
    a = lp.round_to(np.full((1, 4096), 1.0), "fp8_e4m3")
    b = lp.round_to(np.full((4096, 1), 1.125), "fp8_e4m3")
    plain = lp.matmul(a, b, inputs="fp8_e4m3", model="h100")[0, 0]
    promoted = lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128))[0, 0]
    assert abs(promoted - 4608) < abs(plain - 4608)


def test_specials_and_api():
    a = np.array([[np.inf, 1.0]])
    assert lp.matmul(a, np.array([[1.0], [1.0]]))[0, 0] == np.inf
    assert np.isnan(lp.matmul(a, np.array([[0.0], [1.0]]))[0, 0])
    for name in ("exact", "v100", "pairwise"):
        assert np.isnan(lp.matmul(np.array([[np.inf, -np.inf]]), np.ones((2, 1)), model=name)[0, 0])
    assert lp.dot([1.0, 2.0], [3.0, 4.0], model="exact") == 11.0
    models = lp.list_models()
    assert {"exact", "sequential", "pairwise", "blocked", "v100", "a100", "ada", "h100",
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
