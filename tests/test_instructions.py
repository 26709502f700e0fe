"""Models keyed by instruction, and Blackwell's block-scaled MMA.

* the instruction models (``h100:wgmma``, ``b200:tcgen05``) and the block-scaled
  MMA are bit-equal to vectors produced by MMA-Sim's own Python (microsoft/MMA-Sim
  commit c785138, ``scripts/mmasim_vectors.py``, stored in tests/data);
* every measured file of ``../shared/tensorcores`` is reproduced under the
  instruction its harness ran;
* the block-scaled MMA against an exact rational reference written here from
  the rule's text, hand-worked cases, and bad input.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp
from lowprec.identify import iter_tensorcore_files
from lowprec.matmul import get_model
from lowprec.mx import MXTensor, get_mx_format
from lowprec.nvfp4 import NVFP4Tensor

VECTORS = Path(__file__).parent / "data" / "mmasim_vectors.npz"
SHARED = Path(os.environ.get("LOWPREC_SHARED", Path(__file__).resolve().parents[2] / "shared"))
DATA = SHARED / "tensorcores"


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32).view(np.uint32)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))


# ------------------------------------------------------------- MMA-Sim vectors
@pytest.fixture(scope="module")
def vectors():
    z = np.load(VECTORS)
    assert str(z["commit"]).startswith("c785138")
    return z


@pytest.mark.parametrize("key", ["wgmma_f16_e4m3", "wgmma_f32_e5m2", "tcgen05_f32_e4m3",
                                 "tcgen05_f16_e5m2"])
def test_instruction_models_equal_mmasim(vectors, key):
    model, fmt, out, instr = (str(s) for s in vectors[f"{key}/meta"])
    a, b, c, d = (vectors[f"{key}/{x}"].astype(np.float64) for x in "abcd")
    got = lp.vecdot(a, b, c, inputs=fmt, output=out, model=model)
    same = _same(got, d)
    assert same.all(), f"{instr}: {int(same.sum())}/{len(d)}"
    assert len(d) >= 2048


def _mx_tile(codes: np.ndarray, scales: np.ndarray, fmt: str, axis: int, block: int) -> MXTensor:
    return MXTensor(np.ascontiguousarray(codes, np.uint8),
                    np.ascontiguousarray(scales, np.uint8), get_mx_format(fmt),
                    tuple(codes.shape), axis, block)


def _tiles(vectors, key):
    """(A, B, C, D, scales) per MMA call of 128 x 8 outputs."""
    a, b, sa, sb = (vectors[f"{key}/{x}"] for x in ("a", "b", "sa", "sb"))
    c, d = vectors[f"{key}/c"].astype(np.float64), vectors[f"{key}/d"].astype(np.float64)
    m, n = 128, 8
    for t in range(len(d) // (m * n)):
        rows = slice(t * m * n, (t + 1) * m * n)
        yield (a[rows][::n], b[rows][:n].T, sa[rows][::n], sb[rows][:n].T,
               c[rows].reshape(m, n), d[rows].reshape(m, n))


@pytest.mark.parametrize("key,mxfmt", [("bs_mxf8f6f4_e4m3", "mxfp8_e4m3"),
                                       ("bs_mxf8f6f4_e5m2", "mxfp8_e5m2")])
def test_mxf8f6f4_equals_mmasim(vectors, key, mxfmt):
    elem = get_mx_format(mxfmt).element
    total = 0
    for A, B, SA, SB, C, D in _tiles(vectors, key):
        qa = _mx_tile(lp.encode(A.astype(np.float64), elem), SA, mxfmt, 1, 32)
        qb = _mx_tile(lp.encode(B.astype(np.float64), elem), SB, mxfmt, 0, 32)
        got = lp.matmul(qa, qb, C, model="b200:tcgen05")
        assert _same(got, D).all(), f"{key}: {int(_same(got, D).sum())}/{D.size}"
        total += D.size
    assert total == 4096


@pytest.mark.parametrize("key", ["bs_mxf4nvf4_ue4m3_16", "bs_mxf4nvf4_e8m0_32"])
def test_mxf4nvf4_equals_mmasim(vectors, key):
    skind, block = (str(s) for s in vectors[f"{key}/meta"][4:6])
    for A, B, SA, SB, C, D in _tiles(vectors, key):
        if skind == "e8m0":
            qa = _mx_tile(A, SA, "mxfp4", 1, int(block))
            qb = _mx_tile(B, SB, "mxfp4", 0, int(block))
        else:
            qa = NVFP4Tensor(A.copy(), SA.copy(), np.float32(1), A.shape, 1, 16)
            qb = NVFP4Tensor(np.ascontiguousarray(B), np.ascontiguousarray(SB), np.float32(1),
                             B.shape, 0, 16)
        got = lp.matmul(qa, qb, C, model="rtx5090:mma.block_scale")
        assert _same(got, D).all(), f"{key}: {int(_same(got, D).sum())}/{D.size}"


# ------------------------------------------------------ measured files by instruction
# The harness of each file (model_validation/CUDA of the source): FP32-output FP8 on
# H100 ran wgmma (C = 0); everything else ran mma.sync / wmma.
def _instruction(case) -> str:
    gpu = case.gpu.lower()
    if gpu == "h100" and case.inputs.startswith("fp8") and case.output == "fp32":
        return "h100:wgmma"
    return f"{gpu}:mma.sync"


FP8_FP16_FLOOR = {("H100", "fp8_e4m3"): 3931, ("H100", "fp8_e5m2"): 4212,
                  ("B200", "fp8_e4m3"): 3929, ("B200", "fp8_e5m2"): 4241}


def test_measured_files_under_their_instruction():
    if not DATA.is_dir():
        pytest.skip(f"measured tensor-core files not found at {DATA} (set LOWPREC_SHARED)")
    n_files = 0
    for case in iter_tensorcore_files(DATA):
        got = lp.vecdot(case.a, case.b, case.c, inputs=case.inputs, output=case.output,
                        model=_instruction(case))
        n = int(_same(got, case.d).sum())
        if (case.gpu, case.inputs) in FP8_FP16_FLOOR and case.output == "fp16":
            assert n >= FP8_FP16_FLOOR[(case.gpu, case.inputs)]
        else:
            assert n == case.d.size, f"{case.gpu} {case.inputs}->{case.output}: {n}"
        n_files += 1
    assert n_files == 30


def test_instruction_rules_differ_where_the_sources_say():
    # ../shared/hardware/mma-probes.md, last two rows
    a = np.array([1.0, 2.0**-6])
    one = lp.vecdot(a, a, 2.0**-11, inputs="fp8_e4m3", output="fp16", model="h100:wgmma")
    assert float(one) == 1.0 + 2.0**-10  # one rounding of 1 + 2^-11 + 2^-12
    a = np.array([1.0])
    c = 2.0**-24 + 2.0**-30
    assert float(lp.vecdot(a, a, c, inputs="fp8_e4m3", model="b200:tcgen05")) == 1.0
    assert float(lp.vecdot(a, a, c, inputs="fp8_e4m3", model="b200")) == 1.0 + 2.0**-23
    # fp16/bf16/tf32 rules are one per chip whatever the instruction
    h = get_model("h100")
    for inst in ("h100:wgmma", "h100:mma.sync"):
        assert get_model(inst).rule("bf16") == h.rule("bf16")


def test_instruction_names_and_errors():
    assert get_model("H200:WGMMA").name == "h100:wgmma"
    assert get_model("b200:tcgen05.mma").name == "b200:tcgen05"
    assert "h100:wgmma" in lp.list_models()
    with pytest.raises(ValueError, match="no model of instruction 'h100:tcgen05'"):
        get_model("h100:tcgen05")
    with pytest.raises(ValueError, match="no fp8 tensor-core MMA with fp32 output"):
        lp.vecdot(np.ones((1, 32)), np.ones((1, 32)), inputs="fp8_e4m3", model="h100:mma.sync")


# ------------------------------------------------------------ block-scaled MMA
def _ref_block_mma(A, B, SA, SB, C, fa, fb, block, kind):
    """The rule's text in exact rationals (one instruction's k, one output)."""
    def nominal(v, fmt):
        f = lp.get_format(fmt)
        e = Fraction(abs(v)).numerator.bit_length() - Fraction(abs(v)).denominator.bit_length()
        while Fraction(2) ** (e + 1) <= abs(v):
            e += 1
        while Fraction(2) ** e > abs(v):
            e -= 1
        return max(e, f.emin)
    terms = []
    if C != 0:
        terms.append((Fraction(C), nominal(C, "fp32")))
    if kind == 0:
        for k in range(len(A)):
            if A[k] != 0 and B[k] != 0:
                s = Fraction(SA[k // block]) * Fraction(SB[k // block])  # a power of two
                terms.append((Fraction(A[k]) * Fraction(B[k]) * s,
                              nominal(A[k], fa) + nominal(B[k], fb)
                              + s.numerator.bit_length() - s.denominator.bit_length()))
        frac = 25
    else:
        for g in range(0, len(A), 16):
            s = sum(Fraction(A[k]) * Fraction(B[k]) for k in range(g, g + 16))
            sa, sb = SA[g // block], SB[g // block]
            if sa == 0 or sb == 0:
                continue
            terms.append((s * Fraction(sa) * Fraction(sb),
                          nominal(sa, "fp8_e4m3") + nominal(sb, "fp8_e4m3")))
        frac = 35
    if not terms:
        return 0.0
    lsb = Fraction(2) ** (max(e for _, e in terms) - frac)
    total = sum(int(abs(v) / lsb) * lsb * (1 if v > 0 else -1) for v, _ in terms)
    return float(lp.round_to(float(total), "fp32", "rtz")) if total else 0.0


@pytest.mark.parametrize("fa,fb", [("mxfp8_e4m3", "mxfp8_e4m3"), ("mxfp6_e2m3", "mxfp6_e3m2"),
                                   ("mxfp8_e5m2", "mxfp6_e2m3"), ("mxfp4", "mxfp8_e4m3")])
def test_mxf8f6f4_against_rational_reference(fa, fb):
    """FP6 and mixed types: the FP8 rule as the PTX ISA defines the kind (MMA-Sim lacks FP6)."""
    rng = np.random.default_rng(len(fa) * 7 + len(fb))
    A = rng.standard_normal((24, 32)) * 2.0 ** rng.integers(-6, 6, (24, 32))
    B = rng.standard_normal((32, 5)) * 2.0 ** rng.integers(-6, 6, (32, 5))
    qa, qb = lp.mx.quantize(A, fa, axis=1), lp.mx.quantize(B, fb, axis=0)
    C = lp.round_to(rng.standard_normal((24, 5)) * 2.0 ** rng.integers(-20, 4, (24, 5)), "fp32")
    got = lp.matmul(qa, qb, C, model="b200")
    ea, eb = qa.elements, qb.elements
    for i in range(24):
        for j in range(5):
            want = _ref_block_mma(ea[i], eb[:, j], qa.scales[i], qb.scales[:, j], C[i, j],
                                  qa.fmt.element.name, qb.fmt.element.name, 32, 0)
            assert got[i, j] == want, (i, j)


def test_mxf4nvf4_against_rational_reference():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((16, 128))
    B = rng.standard_normal((128, 4)) * 100
    qa, qb = lp.nvfp4.quantize(A, axis=1), lp.nvfp4.quantize(B, axis=0)
    C = lp.round_to(rng.standard_normal((16, 4)), "fp32")
    got = lp.matmul(qa, qb, C, model="b200")
    ga, gb = np.float32(qa.global_scale), np.float32(qb.global_scale)
    ea, eb = lp.decode(qa.codes, "fp4_e2m1"), lp.decode(qb.codes, "fp4_e2m1")
    for i in range(16):
        for j in range(4):
            d = C[i, j]  # two instructions of k = 64, D of the first is C of the second
            for k0 in (0, 64):
                d = _ref_block_mma(ea[i, k0:k0 + 64], eb[k0:k0 + 64, j],
                                   qa.scales[i, k0 // 16:], qb.scales[k0 // 16:, j], d,
                                   "fp4_e2m1", "fp4_e2m1", 16, 1)
            want = float(np.float32(d) * np.float32(ga * gb))
            assert got[i, j] == want, (i, j)


def test_block_mma_hand_worked():
    """Cases worked by hand from the rule (alignment, truncation, scales)."""
    e4 = get_mx_format("mxfp8_e4m3").element

    def mx(vals, scale_exp, axis):
        v = np.asarray(vals, np.float64)
        shape = (1, 32) if axis == 1 else (32, 1)
        codes = lp.encode(np.resize(np.concatenate([v, np.zeros(32 - len(v))]), shape), e4)
        sc = np.full((1, 1), 127 + scale_exp, np.uint8)
        return _mx_tile(codes, sc, "mxfp8_e4m3", axis, 32)

    # C = -256 and 16 * 16 = 256 (nominal exponents 8); 2^-9 * 2^-9 = 2^-18 lies below
    # 2^(8 - 25): truncated away, D = +0 although the exact sum is 2^-18.
    d = lp.matmul(mx([16, 2.0**-9], 0, 1), mx([16, 2.0**-9], 0, 0), [[-256.0]], model="b200")
    assert d[0, 0] == 0.0
    # 2^-8 * 2^-9 = 2^-17 sits on the last kept bit: exact.
    d = lp.matmul(mx([16, 2.0**-8], 0, 1), mx([16, 2.0**-9], 0, 0), [[-256.0]], model="b200")
    assert d[0, 0] == 2.0**-17
    # Scales move the products: 2^3 * 2^-5 on 1.5 * 1.5 + 1.0 -> 2.25 / 4 + 1 = 1.5625
    d = lp.matmul(mx([1.5], 3, 1), mx([1.5], -5, 0), [[1.0]], model="b200")
    assert d[0, 0] == 1.5625
    # mxf4nvf4: a group's nominal exponent is its scales' (2^0): the exact group
    # 16 * 6 * 6 = 576 is kept whole, a second group scaled 2^-36 (below 2^-35) is lost.
    A = np.full((1, 64), 6.0)
    A[0, 16:] = 0.5
    B = np.ones((64, 1))
    B[:16] = 6.0
    qa = _mx_tile(lp.encode(A, "fp4_e2m1"), np.array([[127, 127 - 36, 127, 127]]), "mxfp4", 1, 16)
    qb = _mx_tile(lp.encode(B, "fp4_e2m1"), np.full((4, 1), 127), "mxfp4", 0, 16)
    d = lp.matmul(qa, qb, model="b200")
    assert d[0, 0] == 576.0 + 2 * 16 * 0.5


def test_block_mma_specials_and_errors():
    qa = lp.mx.quantize(np.ones((2, 32)), "mxfp8_e4m3", axis=1)
    qb = lp.mx.quantize(np.ones((32, 3)), "mxfp8_e4m3", axis=0)
    assert np.all(lp.matmul(qa, qb, model="b200") == 32.0)
    nan_scale = MXTensor(qa.codes, np.full_like(qa.scale_codes, 0xFF), qa.fmt, qa.shape, 1, 32)
    assert np.isnan(lp.matmul(nan_scale, qb, model="b200")).all()
    assert np.isinf(lp.matmul(qa, qb, [[np.inf] * 3] * 2, model="b200")).all()
    with pytest.raises(ValueError, match="Blackwell block-scale MMA model"):
        lp.matmul(qa, qb, model="h100")
    with pytest.raises(ValueError, match="axis=0"):
        lp.matmul(qa, lp.mx.quantize(np.ones((32, 32)), "mxfp8_e4m3", axis=1), model="b200")
    with pytest.raises(TypeError, match="both operands quantized"):
        lp.matmul(qa, np.ones((32, 3)), model="b200")
    with pytest.raises(ValueError, match="one scale type"):
        lp.matmul(lp.nvfp4.quantize(np.ones((2, 32)), axis=1), qb, model="b200")
    with pytest.raises(ValueError, match="MXINT8"):
        lp.matmul(lp.mx.quantize(np.ones((2, 32)), "mxint8", axis=1),
                  lp.mx.quantize(np.ones((32, 3)), "mxint8", axis=0), model="b200")


def test_block_scaled_only_models_say_so_on_plain_arrays() -> None:
    a, b = np.ones((2, 32), np.float32), np.ones((32, 2), np.float32)
    for name in ("rtx5090", "rtx5090:mma.block_scale", "b200:tcgen05.mma.block_scale"):
        with pytest.raises(ValueError, match="takes block-scaled operands only"):
            lp.matmul(a, b, model=name)
    assert lp.matmul(a, b, model="b200:tcgen05")[0, 0] == 32.0  # also a plain model
