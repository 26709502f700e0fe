"""The library GEMMs under their own names (lowprec.matmul.LIBRARY_GEMMS), on synthetic data
generated from the stated rules, plus the measured facts of the H200 record
(docs/hardware/h200-2026-12-04.md), and the identification validate --gpu runs on them."""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec import _validate_gemm as G
from lowprec.formats import get_format
from lowprec.matmul import promote


def _operands(k: int, seed: int, fmt: str = "fp8_e4m3", m: int = 32, n: int = 32):
    """validate --gpu's operands: exponents -6..3, both signs, 10% zeros."""
    rng = np.random.default_rng(seed)
    f = get_format(fmt)
    return lp.decode(G.operands(f, (m, k), rng), f), lp.decode(G.operands(f, (k, n), rng), f)


def _split_sum(a, b, every: int, inner: str = "h100") -> np.ndarray:
    """The stated rule written out: the tensor-core chain over each slice of `every`
    products, slice sums added in order into a float32 accumulator (numpy RNE adds)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], every):
        part = lp.matmul(a[:, k0:k0 + every], b[k0:k0 + every], inputs="fp8_e4m3", model=inner)
        acc = acc + part.astype(np.float32)
    return acc.astype(np.float64)


@pytest.mark.parametrize("k", [128, 512, 4096])
def test_cublaslt_fp8_is_the_h100_chain_promoted_every_128(k):
    a, b = _operands(k, k)
    got = lp.matmul(a, b, inputs="fp8_e4m3", model="cublaslt_fp8")
    assert np.array_equal(got, _split_sum(a, b, 128))
    assert np.array_equal(got, lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128, "h100")))


def test_cublaslt_fp8_fast_is_the_h100_chain():
    a, b = _operands(1024, 3)
    assert np.array_equal(lp.matmul(a, b, inputs="fp8_e4m3", model="cublaslt_fp8_fast"),
                          lp.matmul(a, b, inputs="fp8_e4m3", model="h100"))


def test_the_measured_facts():
    """H200, torch._scaled_mm E4M3: the default equalled the fast (h100) chain on every
    output at K <= 128, on 94/1024 at K = 256 and on 0/1024 at K = 4096; the two library
    models show the same pattern on the same kind of operands."""
    def same(k: int) -> float:
        a, b = _operands(k, 100 + k)
        d = lp.matmul(a, b, inputs="fp8_e4m3", model="cublaslt_fp8")
        f = lp.matmul(a, b, inputs="fp8_e4m3", model="cublaslt_fp8_fast")
        return float((d == f).mean())
    assert same(64) == 1.0 and same(128) == 1.0
    assert same(256) < 0.3
    assert same(4096) < 0.02


def test_cublas_is_h100_then_one_rounding():
    a, b = _operands(1024, 5, "fp16")
    d32 = lp.matmul(a, b, inputs="fp16", model="cublas")
    assert np.array_equal(d32, lp.matmul(a, b, inputs="fp16", model="h100"))
    # torch.matmul's fp16 output: the fp32 result rounded once (RNE).
    match = G.match_models(a, b, lp.round_to(d32, "fp16"), inputs="fp16", output="fp16",
                           models={"cublas": "cublas"})
    assert match["cublas, then RNE to fp16"] == 32 * 32


def test_validate_names_the_library_model_and_split_k():
    a, b = _operands(2048, 7)
    gpu = _split_sum(a, b, 128)  # what torch._scaled_mm gave by default on the H200
    match = G.match_models(a, b, gpu, inputs="fp8_e4m3")
    assert match["cublaslt_fp8"] == 1024 and match["h100"] < 1024
    assert G.behaves_like(match, 1024) == "cublaslt_fp8 on 1024/1024 outputs"
    split = _split_sum(a, b, 1024)  # two K slices added in fp32: split-K 2
    match = G.match_models(a, b, split, inputs="fp8_e4m3")
    assert match["promote(1024, h100) [split-K 2]"] == 1024
    assert G.behaves_like(match, 1024).startswith("promote(1024, h100) [split-K 2] on 1024/")


def test_library_models_are_listed_with_where_they_were_measured():
    models = lp.list_models()
    for name in ("cublaslt_fp8", "cublaslt_fp8_fast", "cublas"):
        assert "H200" in models[name] and "driver 580.159.04" in models[name]


def test_split_k_changes_as_few_outputs_as_measured_at_k_4096():
    """H200: torch.matmul fp16 / bf16 at K = 4096 matched 'h100, then one rounding' on
    1019/1024 and 1022/1024 outputs. Split-K (promote(K/s) then one rounding) differs from
    it on a handful of outputs of the same size: consistent with the measurement (the
    next run's library section names s, if split-K it is)."""
    for fmt, lo in (("fp16", 1000), ("bf16", 1015)):
        a, b = _operands(4096, 1, fmt)
        chain = lp.round_to(lp.matmul(a, b, inputs=fmt, model="h100"), fmt)
        split = lp.round_to(lp.matmul(a, b, inputs=fmt, model=promote(2048, "h100")), fmt)
        assert lo <= int((split == chain).sum()) < 1024, fmt


def test_mma_rows_search_finds_a_planted_tensor_core():
    """validate --gpu's search on the mma.sync FP8 rows (whose model is unknown): a GEMM
    made by a 20-bit accumulator, outside identify_dot's own grid, is named exactly."""
    from lowprec.matmul import tensor_core

    a, b = _operands(32, 3, m=16, n=8)
    got = lp.matmul(a, b, inputs="fp8_e4m3", model=tensor_core(16, 1, acc_mantissa_bits=20))
    text = G._search(a, b, got, "fp8_e4m3")
    assert text.endswith("wider grid: tensor_core(16, 1, acc_mantissa_bits=20, hw_mode=rtz) "
                         "on 128/128 outputs")
