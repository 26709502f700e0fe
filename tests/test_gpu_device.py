"""lowprec.gpu on a real GPU (marked ``gpu``; skipped without CuPy and a device).

Each test states a property of a real run: kernels against the emulator, a
GEMM against exact dot products, an exhaustive sweep slice.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec.gpu as lg
from lowprec import decode, encode, get_format

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not lg.available(), reason=f"no GPU: {lg.unavailable_reason()}"),
]


def test_without_gpu_require_explains():
    # Runs only when a GPU is present (module skip); the CPU-side twin is in
    # test_gpu_validate.py. Here: require() passes and device_info() is complete.
    lg.require()
    info = lg.device_info()
    assert info["name"] and info["cupy_version"] and info["driver_cuda_version"]


@pytest.mark.parametrize("name", sorted(lg.CONVERSIONS))
def test_conversion_kernels_match_emulator_on_sample(name):
    import cupy

    from lowprec.gpu import _runtime as rt

    conv = lg.CONVERSIONS[name]
    rng = np.random.default_rng(7)
    dt, ut = (np.float32, np.uint32) if conv.source == "float32" else (np.float64, np.uint64)
    x = rng.integers(0, np.iinfo(ut).max, size=1 << 16, dtype=ut).view(dt)
    x = np.concatenate([x, rng.normal(size=1 << 14).astype(dt), np.array([0, -0.0, np.inf], dt)])
    from lowprec import validate as V

    got = cupy.asnumpy(rt.convert_bits(conv, x.view(ut)))
    want = conv.emulate(x, hardware_nan=True)  # NaNs too: the conversion's NaN rule
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} mismatches, first x={x[bad[0]]!r}: "
                           f"GPU {got[bad[0]]:#x}, emulator {want[bad[0]]:#x}")
    row = V.sample_accounting(conv, x, got)
    assert row["value_mismatches"] == 0 and row["nan_codes_outside_rule"] == 0


@pytest.mark.parametrize("name", ["f32_fp16_rn", "f32_e4m3_sat", "f32_e2m1_rz",
                                  "f32_e5m2_nosat", "f32_e4m3_nosat"])
@pytest.mark.parametrize("start", [0x3F000000, 0x7F800000])  # ordinary inputs; the NaNs
def test_sweep_slice_counts_every_input(name, start):
    from lowprec import validate as V
    from lowprec.gpu import _runtime as rt
    from lowprec.gpu._tables import build_table

    conv = lg.CONVERSIONS[name]
    table = build_table(conv.emulate, 32, 1 << conv.format.width)
    lo, hi = table.lo_hi()
    nan_hw, nan_default = V.nan_expectations(conv)
    counters, first = rt.sweep_conversion(conv, lo, hi, nan_hw, V._is_nan_codes(conv.format),
                                          start, 1 << 24, nan_default=nan_default)
    assert int(counters[0]) == 1 << 24
    assert int(counters[1]) == 0, [hex(int(k)) for k in first[:4]]


def test_fp16_add_matches_correct_rounding():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << 16, size=1 << 18, dtype=np.uint16)
    b = rng.integers(0, 1 << 16, size=1 << 18, dtype=np.uint16)
    import cupy

    got = cupy.asnumpy(lg.arith("add", "fp16", a, b))
    with np.errstate(all="ignore"):
        exact = decode(a, "fp16").astype(np.float64) + decode(b, "fp16").astype(np.float64)
    want = encode(exact, "fp16", "rne")  # fp16 sums are exact in float64
    nan = np.isnan(exact)
    assert np.array_equal(got[~nan], want[~nan])


@pytest.mark.parametrize(("fmt", "engine"), [
    ("fp8_e4m3", "mma"), ("fp8_e5m2", "mma"), ("fp16", "mma"), ("bf16", "mma"),
    pytest.param("fp8_e4m3", "wgmma", marks=pytest.mark.skipif(
        lg.available() and __import__("cupy").cuda.Device().compute_capability != "90",
        reason="wgmma needs sm_90a (Hopper)")),
    pytest.param("fp8_e5m2", "wgmma", marks=pytest.mark.skipif(
        lg.available() and __import__("cupy").cuda.Device().compute_capability != "90",
        reason="wgmma needs sm_90a (Hopper)")),
])
def test_matmul_close_to_exact(fmt, engine):
    """Checks the fragment layout / cuBLAS call: error within fp32 accumulation bounds."""
    import cupy

    from lowprec import validate as V

    f = get_format(fmt)
    rng = np.random.default_rng(5)
    a, ai, s = V._gemm_operands(f, (48, 96), rng)
    b, bi, _ = V._gemm_operands(f, (96, 24), rng)
    kw = {"engine": engine} if fmt.startswith("fp8") else {}
    got = cupy.asnumpy(lg.matmul(a, b, fmt, **kw)).astype(np.float64)
    exact = (ai @ bi) * 2.0 ** (-2 * s)
    scale = np.abs(ai) @ np.abs(bi) * 2.0 ** (-2 * s)
    # A wrong fragment layout gives errors of the size of `scale`; any accumulator of
    # 10 or more bits stays far below this bound.
    assert np.all(np.abs(got - exact) <= 2.0 ** -8 * scale)


def test_widen_every_e4m3_code():
    import cupy

    codes = np.arange(256, dtype=np.uint8)
    bits, wide = lg.widen(codes, "fp8_e4m3")
    assert wide == "fp16"
    got = cupy.asnumpy(bits).view(np.float16).astype(np.float64)
    want = decode(codes, "fp8_e4m3").astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
