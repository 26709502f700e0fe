"""The vectorised tensor-core path of ``lp.matmul`` (``_kernels/tc_fast.py``) gives the
same bits as the scalar kernel ``lp.vecdot`` runs, on every rule it takes.

Inputs mix wide exponents, zero rows and elements, subnormal products, C of +-0,
tiny, huge and infinite, and sums that overflow, so the scalar fallbacks (subnormal
and overflowing results, an infinite C) are exercised too.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp

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
