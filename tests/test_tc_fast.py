"""The vectorised tensor-core path of ``lp.matmul`` (``_kernels/tc_fast.py``) gives the
same bits as the scalar kernel ``lp.vecdot`` runs, on every rule it takes.

Inputs mix wide exponents, zero rows and elements, subnormal products, C of +-0,
tiny, huge and infinite, and sums that overflow, so the scalar fallbacks (subnormal
and overflowing results, an infinite C) are exercised too.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import lowprec as lp
from lowprec.matmul import promote
from lowprec.tensorcores import TensorCore

CASES = [("h100", "fp8_e4m3", "fp32"), ("h100", "fp16", "fp32"), ("h100", "bf16", "fp32"),
         ("a100", "fp16", "fp16"), ("v100", "fp16", "fp32"), ("ada", "fp8_e5m2", "fp16"),
         ("h100:wgmma", "fp8_e4m3", "fp16"), ("b200:tcgen05", "fp8_e5m2", "fp32"),
         ("h100", "tf32", "fp32"), ("deepseek_v3", "fp8_e4m3", "fp32"),
         ("b200", "fp8_e4m3", "fp32")]  # the last: C late, the scalar kernel itself


def _scalar(a, b, c, **kw):
    A = np.asarray(lp.round_to(a, kw["inputs"]))
    B = np.asarray(lp.round_to(b, kw["inputs"]))
    return lp.vecdot(A[:, None, :], B.T[None, :, :], c, **kw)


@pytest.mark.parametrize("model,inputs,out", CASES)
@pytest.mark.parametrize("scale", [1.0, 2.0**-60, 2.0**60])
def test_fast_path_equals_scalar_kernel(model, inputs, out, scale):
    rng = np.random.default_rng(CASES.index((model, inputs, out)) * 200 + int(np.log2(scale)) + 64)
    a = rng.standard_normal((7, 100)) * 2.0 ** rng.integers(-8, 8, (7, 100))
    a[0, :5] = 0
    a[1] = 0
    b = rng.standard_normal((100, 9)) * 2.0 ** rng.integers(-8, 8, (100, 9))
    if inputs == "fp16":
        a *= 1e-3  # subnormal products and results
    if inputs.startswith("fp8"):
        a[4, :40] = 400.0  # sums past FP16's range
        b[:40, 5] = 400.0
    c = rng.standard_normal((7, 9)) * scale
    c[2, 3], c[3, 3], c[4, 4] = 0.0, -0.0, np.inf
    kw = dict(inputs=inputs, output=out, model=model)
    fast, slow = lp.matmul(a, b, c, **kw), _scalar(a, b, c, **kw)
    same = (fast.view(np.uint64) == slow.view(np.uint64)) | (np.isnan(fast) & np.isnan(slow))
    assert same.all(), (fast[~same][:4], slow[~same][:4])


# ---------------------------------------------- the float64 lanes (tc_float.tcf_rows)
def _same(fast, slow):
    same = (fast.view(np.uint64) == slow.view(np.uint64)) | (np.isnan(fast) & np.isnan(slow))
    assert same.all(), (np.flatnonzero(~same)[:4], fast[~same][:4], slow[~same][:4])


def _long_case(rng, inputs, kind, K=1024, M=11, N=70):
    """(a, b, c): M x K, K x N, M x N (11 rows: a group of 8 and a part; 70 columns: a
    tile of 64 and a part)."""
    a = rng.standard_normal((M, K)) * 2.0 ** rng.integers(-6, 6, (M, K))
    b = rng.standard_normal((K, N)) * 2.0 ** rng.integers(-6, 6, (K, N))
    c = rng.standard_normal((M, N))
    if kind == "cancel":  # the second half of K undoes the first: sums of 0 and tiny
        a[:, K // 2:] = a[:, :K // 2]
        b[K // 2:] = -b[:K // 2]
        b[K // 2 + 7, 3] *= 1.5
        c[:, :4] = 0.0
    elif kind == "subnormal":  # subnormal products and results (fp16 C/D)
        a *= 2.0 ** -12
        b *= 2.0 ** -6
        c *= 2.0 ** -30
    elif kind == "overflow":  # partial sums past the C/D format's range
        big = 400.0 if inputs.startswith("fp8") else 60000.0
        a[0], b[:, 1] = big, big
        a[1, :200], b[:200, 2] = big, -big
    return a, b, c


@pytest.mark.parametrize("model", ["h100", "b200:tcgen05"])
@pytest.mark.parametrize("inputs", ["fp16", "fp8_e4m3"])
@pytest.mark.parametrize("out", ["fp32", "fp16"])
@pytest.mark.parametrize("kind", ["random", "cancel", "subnormal", "overflow"])
def test_long_sums_equal_scalar_kernel(model, inputs, out, kind):
    rng = np.random.default_rng(zlib.crc32(f"{model} {inputs} {out} {kind}".encode()))
    a, b, c = _long_case(rng, inputs, kind)
    kw = dict(inputs=inputs, output=out, model=model)
    _same(lp.matmul(a, b, c, **kw), _scalar(a, b, c, **kw))
    _same(lp.matmul(a, b, **kw), _scalar(a, b, np.zeros((a.shape[0], b.shape[1])), **kw))


@pytest.mark.parametrize("mode", ["rne", "rtz", "rup"])  # rne: float32 adds; else the engine's
@pytest.mark.parametrize("inputs", ["fp8_e4m3", "fp16"])
@pytest.mark.parametrize("kind", ["random", "cancel", "overflow"])
def test_promotion_every_128_equals_scalar_kernel(mode, inputs, kind):
    rng = np.random.default_rng(["rne", "rtz", "rup"].index(mode) * 10 + len(inputs) + len(kind))
    a, b, c = _long_case(rng, inputs, kind)
    c[0, 5], c[2, 6] = np.inf, -0.0
    for model in (promote(128), "deepseek_v3", promote(100, "b200:tcgen05")):
        for out in ("fp32", "bf16"):
            kw = dict(inputs=inputs, output=out, model=model, mode=mode)
            _same(lp.matmul(a, b, c, **kw), _scalar(a, b, c, **kw))


def test_every_chip_rule_fits_and_the_fallback_is_the_int64_path():
    from lowprec._kernels import tc_float
    from lowprec.formats import get_format
    from lowprec.matmul import get_model

    for name in ("h100", "b200:tcgen05", "a100", "v100", "ada", "h100:wgmma", "b200"):
        for inputs in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "tf32"):
            for out in ("fp32", "fp16"):
                try:
                    tc = get_model(name).rule(inputs, out)
                except ValueError:
                    continue
                f, c = get_format(inputs), get_format(out)
                assert tc_float.fits(f.mantissa_bits, f.emin, f.emax, c.emin, c.emax, tc.block,
                                     tc.frac_bits), (name, inputs, out)
    # A rule whose block sums may pass 2**53: the int64 kernel (tc_rows) takes it.
    wide = TensorCore(block=1024, align_bits=21)
    f, c = get_format("bf16"), get_format("fp32")
    assert not tc_float.fits(f.mantissa_bits, f.emin, f.emax, c.emin, c.emax, wide.block,
                             wide.frac_bits)
    rng = np.random.default_rng(5)
    a, b, cc = _long_case(rng, "bf16", "cancel", K=2048, N=9)
    kw = dict(inputs="bf16", output="fp32", model=wide)
    _same(lp.matmul(a, b, cc, **kw), _scalar(a, b, cc, **kw))
    assert not tc_float.fits(10, -14, 15, -126, 127, 4, 52)
    # float32 block maxima for fp16/fp8 (the long-sum tests), float64 for bf16/tf32
    # (CASES above): both kinds run.
    for name, narrow in (("fp16", True), ("fp8_e4m3", True), ("fp8_e5m2", True),
                         ("bf16", False), ("tf32", False)):
        f = get_format(name)
        assert tc_float.narrow_powers(f.emin, f.emax, -126, 127) == narrow, name
    assert not tc_float.fits(10, -1022, 1023, -126, 127, 4, 25)  # float64's range


def test_the_float32_promotion_adds_know_fp32() -> None:
    # tc_grid adds promoted partial sums in float32 only where the wide format is this
    # FP32; a copy that drifted from the registry would silently take the slow adds.
    from lowprec._kernels import tc_fast
    from lowprec._kernels.params import format_params
    from lowprec.formats import get_format

    assert tc_fast._FP32 == format_params(get_format("fp32"))
