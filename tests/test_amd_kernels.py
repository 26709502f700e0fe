"""The compiled AMD mfma kernels (lowprec/_kernels/amd.py) against the readable
reference (lowprec.amd.mfma_dot), bit for bit, on every architecture x input type:
random and adversarial inputs (cancellation, carries, tiny addends, subnormals,
NaN/inf, the largest values, products beyond 2**128, zeros of both signs, C at its
extremes), whole groups and short last groups; and on MMA-Sim's stored CDNA3 vectors."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp
from lowprec import amd
from lowprec._kernels import amd as K
from lowprec._kernels import route

DATA = Path(__file__).parent / "data" / "mmasim_amd"
# (arch, mfma input name, lowprec format of the values)
CASES = [("mi100", "fp16", "fp16"), ("mi100", "bf16", "bf16"),
         ("mi250", "fp16", "fp16"), ("mi250", "bf16_1k", "bf16"),
         ("mi300", "fp16", "fp16"), ("mi300", "bf16", "bf16"), ("mi300", "xf32", "fp32"),
         ("mi300", "fp8_e4m3fnuz", "fp8_e4m3fnuz"), ("mi300", "fp8_e5m2fnuz", "fp8_e5m2fnuz")]


def _same(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bit-equal FP32 values, any NaN equal to any NaN."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))


def _rows(rng: np.random.Generator, fmt: str, n: int, k: int, side: int) -> np.ndarray:
    """n rows of k values of ``fmt``, one adversarial kind per row (side 0: A, 1: B)."""
    f = lp.get_format(fmt)
    top = float(f.max)
    lo, hi = f.emin - f.mantissa_bits, f.emax
    out = np.empty((n, k))
    for r in range(n):
        kind = r % 10
        sig = rng.uniform(1, 2, k) * rng.choice([-1.0, 1.0], k)
        if kind == 0:    # random, moderate spread
            x = sig * np.exp2(rng.integers(-6, 7, k))
        elif kind == 1:  # pairs that cancel: A repeats, B changes sign (a0 b0 = -a1 b1)
            x = np.repeat(sig[: (k + 1) // 2] * np.exp2(rng.integers(-4, 5, (k + 1) // 2)),
                          2)[:k]
            if side:
                x[1::2] = -x[0::2][: k // 2]
        elif kind == 2:  # carries: every significand at its largest, one exponent
            x = np.full(k, 2.0 - 2.0 ** -f.mantissa_bits) * (1 - 2 * (side & (r // 10 % 2)))
        elif kind == 3:  # one big product, the rest 2**-20..2**-30 of it
            x = sig * np.exp2(-rng.integers(10, 16, k).astype(float))
            x[rng.integers(k)] = 1.5
        elif kind == 4:  # subnormals of the format and zeros of both signs
            x = rng.integers(-(2 ** f.mantissa_bits) + 1, 2 ** f.mantissa_bits, k) \
                * 2.0 ** (f.emin - f.mantissa_bits)
            x[rng.random(k) < 0.2] = -0.0
        elif kind == 5:  # the largest values (BF16/xf32: products past 2**128)
            x = sig * top / 2 ** rng.integers(0, 3, k)
        elif kind == 6:  # every exponent of the format
            x = sig * np.exp2(rng.integers(lo, hi + 1, k).astype(float))
        elif kind == 7:  # zeros only, signed
            x = np.where(rng.random(k) < 0.5, 0.0, -0.0)
        elif kind == 8:  # specials: NaN, and inf where the format has it
            x = sig.copy()
            x[rng.integers(k)] = np.inf * (1 - 2 * (r // 10 % 2)) if f.has_inf else np.nan
            if r // 10 % 3 == 2:
                x[rng.integers(k)] = np.nan
        else:            # a wide spread, some zeros
            x = sig * np.exp2(rng.integers(max(lo, -40), min(hi, 40) + 1, k).astype(float))
            x[rng.random(k) < 0.25] = 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            out[r] = lp.round_to(x, fmt) if fmt != "fp32" else x.astype(np.float32)
    return out


def _c_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """FP32 C values: random, zeros of both signs, subnormals, the extremes, inf, NaN."""
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    pick = rng.integers(0, 12, n)
    extremes = np.array([0.0, -0.0, 2.0 ** -149, -(2.0 ** -130), 2.0 ** -126, 3.4e38, -3.4e38,
                         np.inf, -np.inf, np.nan, 1.0, -1.0], np.float32)
    c = np.where(rng.random(n) < 0.35, extremes[pick], c)
    return c.astype(np.float64)


def _reference(a, b, c, arch, inputs, ia, ib):
    return np.array([amd.mfma_dot(a[i], b[j], float(c[n]), arch, inputs)
                     for n, (i, j) in enumerate(zip(ia, ib))], np.float32)


def _compiled(a, b, c, arch, inputs, pairs):
    """The kernel itself (auto=False: compiled here if need be, never the reference)."""
    key = amd._arch(arch)
    gen = amd.AMD_MODELS[key][0]
    if inputs == "xf32":
        a, b = amd._truncate_xf32(a), amd._truncate_xf32(b)
    return K.mfma_values(a, b, c, gen, inputs, amd._EMIN[inputs], amd._group(gen, inputs),
                         pairs, auto=False)


@pytest.mark.parametrize(("arch", "inputs", "fmt"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_kernels_equal_the_reference_on_adversarial_inputs(arch, inputs, fmt):
    rng = np.random.default_rng(zlib.crc32(f"{arch}-{inputs}".encode()))
    group = amd._group(amd.AMD_MODELS[arch][0], inputs)
    for k in (1, group - 1, 2 * group, 2 * group + group // 2 + 1):
        a, b = _rows(rng, fmt, 30, k, 0), _rows(rng, fmt, 30, k, 1)
        m, n = len(a), len(b)
        c = _c_values(rng, m * n)
        ia, ib = np.repeat(np.arange(m), n), np.tile(np.arange(n), m)
        want = _reference(a, b, c, arch, inputs, ia, ib)
        assert np.isnan(want).any() and np.isinf(want).any() and (want == 0).any()
        # the full grid: specials present, so CDNA3 takes its pairs kernel here ...
        got = _compiled(a, b, c, arch, inputs, None)
        assert _same(got, want).all(), (arch, inputs, k, np.flatnonzero(~_same(got, want))[:5])
        # ... and the grid kernel proper on the rows without NaN/inf
        fa, fb = np.isfinite(a).all(axis=1), np.isfinite(b).all(axis=1)
        sub = fa[ia] & fb[ib]
        got = _compiled(a[fa], b[fb], c[sub], arch, inputs, None)
        assert _same(got, want[sub]).all(), (arch, inputs, k)
        # the pairs kernel (lp.vecdot's), pairs in a shuffled order
        order = rng.permutation(m * n)[:300]
        got = _compiled(a, b, c[order], arch, inputs, (ia[order], ib[order]))
        want_p = _reference(a, b, c[order], arch, inputs, ia[order], ib[order])
        assert _same(got, want_p).all(), (arch, inputs, k)


def test_grid_kernel_handles_products_past_2_128():
    # BF16 rows with one huge value at a row-dependent place: products of 2**127 and
    # beyond where two meet (inf; NaN where both signs meet), products of exactly
    # 2**127 (a group exponent of 127, not past 2**128), and groups of products
    # just below 2**128 whose sums overflow FP32 without any big product.
    rng = np.random.default_rng(5)
    a = rng.uniform(1, 2, (16, 16)) * np.exp2(rng.integers(-20, 20, (16, 16)))
    b = rng.uniform(1, 2, (18, 16)) * np.exp2(rng.integers(-20, 20, (18, 16)))
    for r in range(12):
        a[r, r % 8] = a[r, (r + 3) % 8] = rng.choice([1.5, 1.0]) * 2.0 ** 64
        b[r, r % 8] = rng.choice([-1.5, 1.5, 1.0]) * 2.0 ** 63
        b[r, (r + 3) % 8] = -(2.0 ** 64)
    a[12:, :] = 1.875 * 2.0 ** 63
    b[12:, :] = 1.875 * 2.0 ** 63 * rng.choice([-1, 1], (6, 16))
    a, b = lp.round_to(a, "bf16"), lp.round_to(b, "bf16")
    c = np.zeros(16 * 18)
    ia, ib = np.repeat(np.arange(16), 18), np.tile(np.arange(18), 16)
    want = _reference(a, b, c, "mi300", "bf16", ia, ib)
    assert np.isinf(want).sum() > 10 and np.isnan(want).any() and np.isfinite(want).sum() > 100
    assert K.kernel_for("CDNA3", True, False) is K.cdna3_grid
    assert _same(_compiled(a, b, c, "mi300", "bf16", None), want).all()


@pytest.mark.parametrize("inputs", ["fp16", "bf16", "xf32", "fp8_e4m3fnuz", "fp8_e5m2fnuz"])
def test_kernels_reproduce_mmasim_cdna3_vectors(inputs):
    z = np.load(DATA / f"cdna3_{inputs}.npz")
    a, b = z["a"].astype(np.float64), z["b"].astype(np.float64)
    c, d = z["c"].astype(np.float64), z["d"]
    idx = np.arange(len(d))
    got = _compiled(a, b, c, "mi300", inputs, (idx, idx))  # the pairs kernel
    assert _same(got, d).all(), np.flatnonzero(~_same(got, d))[:5]
    fin = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    assert fin.sum() > 300
    af, bf = a[fin], b[fin]
    n = len(af)
    cc = np.zeros(n * n)
    cc[idx[:n] * (n + 1)] = c[fin]
    grid = _compiled(af, bf, cc, "mi300", inputs, None).reshape(n, n)  # the grid kernel
    assert _same(np.diag(grid), d[fin]).all()


def test_matmul_and_vecdot_run_the_kernels():
    rng = np.random.default_rng(2)
    a = lp.round_to(rng.standard_normal((9, 21)), "fp16")
    b = lp.round_to(rng.standard_normal((21, 11)), "fp16")
    for model in ("mi100", "mi250", "mi300"):
        got = lp.matmul(a, b, inputs="fp16", model=model)
        assert np.array_equal(got, amd.mfma_matmul(a, b, 0.0, model, "fp16"))
        v = lp.vecdot(a[:5], b[:, :5].T, inputs="fp16", model=model)
        want = [float(amd.mfma_dot(a[i], b[:, i], 0.0, model, "fp16")) for i in range(5)]
        assert np.array_equal(v, want)
    assert K.cdna3_grid.overloads and K.cdna12_grid.overloads and K.cdna12_pairs.overloads
    assert route.serving_mfma("CDNA3", True, False) == ("amd.cdna3_grid",)


def _every_fp8_pair(fmt: str, c: float) -> None:
    """Every finite (a, b) pair of ``fmt`` as the even product of a group, beside an
    odd product 1 * (-2**-9) or 2**-9 (its own half-group, aligned apart), from C."""
    v = lp.decode(np.arange(256, dtype=np.uint8), fmt)
    v = np.unique(v[np.isfinite(v)])
    a = np.stack([v, np.ones_like(v)], axis=1)
    b = np.stack([v, np.where(np.arange(len(v)) % 2, 2.0 ** -9, -(2.0 ** -9))], axis=1)
    n = len(v)
    cc = np.full(n * n, c)
    ia, ib = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    got = _compiled(a, b, cc, "mi300", fmt, None)
    assert K.kernel_for("CDNA3", True, False) is K.cdna3_grid
    want = _reference(a, b, cc, "mi300", fmt, ia, ib)
    assert _same(got, want).all(), np.flatnonzero(~_same(got, want))[:5]


@pytest.mark.parametrize("c", [-1.0, 0.0, 2.0 ** -20, -(2.0 ** 17), 3.0e38])
@pytest.mark.parametrize("fmt", ["fp8_e4m3fnuz", "fp8_e5m2fnuz"])
def test_every_fp8_product_beside_a_small_one(fmt, c):
    # exhaustive over each format's 255 finite values, every pair, the grid kernel
    # against the reference
    _every_fp8_pair(fmt, c)


@pytest.mark.parametrize("arch", ["mi100", "mi250"])
def test_every_fp16_value_in_a_cdna12_tree(arch):
    # every FP16 code (subnormals, zeros, inf, NaN included) in each place of a group
    # of 4, against B rows that make subnormal products, ties and cancellation
    x = lp.decode(np.arange(1 << 16, dtype=np.uint16), "fp16")
    a = np.stack([x, np.roll(x, 1), -x, np.full_like(x, 2.0 ** -14)], axis=1)
    b = np.array([[1.0, 2.0 ** -10, 1.0, -(2.0 ** -10)],
                  [2.0 ** -14, -1.0, 2.0 ** -24, 1.0],
                  [-(2.0 ** 15), 2.0 ** -1, 65504.0, 2.0 ** -24]])
    c = np.tile(np.array([1.0, -(2.0 ** -130), 2.0 ** -126]), len(x))
    ia, ib = np.repeat(np.arange(len(x)), 3), np.tile(np.arange(3), len(x))
    want = _reference(a, b, c, arch, "fp16", ia, ib)
    got = _compiled(a, b, c, arch, "fp16", None)
    assert _same(got, want).all(), np.flatnonzero(~_same(got, want))[:5]
