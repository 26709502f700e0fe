"""Per-tensor current and delayed scaling (Transformer Engine's conventions) and tile
scaling (DeepSeek-V3), checked against ml_dtypes casts and hand-written recipes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lowprec import scaling

F32 = np.float32
REF = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


def ref_codes(x: np.ndarray, scale, fmt: str) -> np.ndarray:
    """satfinite(fp8(fl32(x * scale))) with ml_dtypes."""
    prod = x.astype(F32) * np.asarray(scale, F32)
    return np.clip(prod, -MAX[fmt], MAX[fmt]).astype(REF[fmt]).view(np.uint8)


def test_current_scale_formula_and_specials():
    assert scaling.current_scale(2.0, "fp8_e4m3") == 224.0
    assert scaling.current_scale(3.0, "fp8_e4m3") == float(F32(448) / F32(3))
    assert scaling.current_scale(3.0, "fp8_e4m3", margin=2) == float(F32(448) / F32(3) / 4)
    assert scaling.current_scale(3.0, "fp8_e4m3", power_of_two=True) == 128.0
    assert scaling.current_scale(1e-3, "fp8_e5m2", power_of_two=True) == 2.0**25
    for bad in (0.0, np.inf, np.nan):
        assert scaling.current_scale(bad, "fp8_e4m3") == 1.0
    assert scaling.current_scale(1e-44, "fp8_e4m3") == float(np.finfo(F32).max)
    with pytest.raises(TypeError, match="margin"):
        scaling.current_scale(1.0, "fp8_e4m3", margin=0.5)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("pow2", [False, True])
def test_per_tensor_codes_match_ml_dtypes(fmt, pow2):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(5000) * np.exp2(rng.integers(-12, 12, 5000))).astype(F32)
    t = scaling.quantize_per_tensor(x, fmt, power_of_two=pow2)
    assert float(t.scale) == scaling.current_scale(np.abs(x).max(), fmt, power_of_two=pow2)
    assert np.array_equal(t.codes, ref_codes(x, t.scale, fmt))
    d = t.dequantize()
    vals = t.codes.view(REF[fmt]).astype(np.float64)
    assert np.array_equal(d, vals * np.float64(F32(1) / F32(t.scale)))
    if pow2:  # power-of-two scales make the round trip of the scaled values exact
        assert np.array_equal(d, vals / np.float64(t.scale))
    # a given scale clips what lies beyond max / scale
    small = scaling.quantize_per_tensor(x, fmt, scale=float(t.scale) * 4)
    assert np.array_equal(small.codes, ref_codes(x, float(t.scale) * 4, fmt))
    assert t.bits_per_value == pytest.approx(8 + 32 / 5000)


def test_nan_into_a_format_without_nan_is_an_error():
    with pytest.raises(ValueError, match="NaN"):
        scaling.quantize_per_tensor(np.array([1.0, np.nan]), "fp4_e2m1")
    t = scaling.quantize_per_tensor(np.array([1.0, np.nan, np.inf]), "fp8_e4m3")
    assert float(t.scale) == 1.0  # amax NaN keeps scale 1 (TE)
    assert np.isnan(t.dequantize()[1]) and t.dequantize()[2] == 448.0  # satfinite


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("margin", [0, 1])
def test_delayed_scaling_follows_the_recipe(algo, margin):
    """Step t quantizes with the scale from the amaxes of steps before t:
    max over the last history_len of them, or the latest; 0 keeps the old scale."""
    amaxes = [2.0, 8.0, 1.0, 0.5, 0.0, 0.25, 3.0]
    ds = scaling.DelayedScaling("fp8_e4m3", margin=margin, history_len=3, amax_compute=algo)
    seen: list[float] = []
    expect_scale = 1.0
    for a in amaxes:
        x = np.array([a, -a / 2, a / 3], F32)
        t = ds.quantize(x)
        assert float(t.scale) == expect_scale == ds.scale
        assert np.array_equal(t.codes, ref_codes(x, expect_scale, "fp8_e4m3"))
        ds.update()
        seen.append(float(F32(a)))
        window = seen[-3:] if algo == "max" else seen[-1:]
        amax = max(window)
        if amax > 0:
            expect_scale = float(F32(F32(448) / F32(amax)) / F32(2.0**margin))
        assert ds.amax_history[0] == 0 and ds.amax_history[-1] == seen[-1]


def test_delayed_scaling_history_and_errors():
    ds = scaling.DelayedScaling("fp8_e5m2", history_len=4, power_of_two=True)
    ds.quantize(np.array([3.0]))
    ds.quantize(np.array([5.0]))  # twice in a step: the larger amax is kept
    assert ds.amax_history.tolist() == [5.0, 0, 0, 0]
    ds.update()
    assert ds.scale == 8192.0  # 57344 / 5 = 11468.8 rounded down to a power of two
    with pytest.raises(ValueError, match="amax_compute"):
        scaling.DelayedScaling("fp8_e4m3", amax_compute="mean")
    with pytest.raises(ValueError, match="history_len"):
        scaling.DelayedScaling("fp8_e4m3", history_len=0)


def _hostile(rng: np.random.Generator, dtype) -> np.ndarray:
    """Normal values over 50 binades, and what sits on the edges: zeros of both
    signs, infinities, NaN, float32's extremes and subnormals."""
    x = rng.standard_normal(3000) * np.exp2(rng.integers(-30, 20, 3000))
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-45, -1e-45, 1e-40, 448.0,
             464.0, -57344.0, 61440.0]
    return np.concatenate([x, edges]).astype(dtype)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp16", "bf16", "fp4_e2m1"])
@pytest.mark.parametrize("mode", ["rne", "rtz", "stochastic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fake_quantize_is_quantize_then_dequantize(fmt, mode, dtype):
    """The values without the codes: the same float64 bits as ``dequantize()``,
    NaNs included, and the same random words drawn in stochastic rounding."""
    x = _hostile(np.random.default_rng(7), dtype)
    if fmt == "fp4_e2m1":  # no NaN encoding: an error either way
        x = x[~np.isnan(x)]
    kw = [{}, {"power_of_two": True}, {"margin": 3}, {"scale": 0.375}]
    for i, k in enumerate(kw):
        rng = np.random.default_rng(i) if mode == "stochastic" else None
        rng2 = np.random.default_rng(i) if mode == "stochastic" else None
        want = scaling.quantize_per_tensor(x, fmt, mode=mode, rng=rng, **k).dequantize()
        got = scaling.fake_quantize_per_tensor(x, fmt, mode=mode, rng=rng2, **k)
        assert got.dtype == np.float64 and got.shape == x.shape
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), (fmt, mode, k)
    with pytest.raises(ValueError, match="NaN"):
        scaling.fake_quantize_per_tensor(np.array([1.0, np.nan]), "fp4_e2m1")
    with pytest.raises(ValueError, match="scale"):
        scaling.fake_quantize_per_tensor(x, fmt, scale=-1.0)


def test_delayed_fake_quantize_is_quantize_then_dequantize():
    """Step for step over a run whose amax jumps, holds NaN and then recovers."""
    rng = np.random.default_rng(3)
    a = scaling.DelayedScaling("fp8_e4m3", history_len=4)
    b = scaling.DelayedScaling("fp8_e4m3", history_len=4)
    for step in range(12):
        x = (rng.standard_normal(500) * 10.0 ** rng.integers(-6, 4)).astype(F32)
        if step == 5:
            x[3] = np.nan
        want = a.quantize(x, mode="stochastic", rng=np.random.default_rng(step)).dequantize()
        got = b.fake_quantize(x, mode="stochastic", rng=np.random.default_rng(step))
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
        assert np.array_equal(a.amax_history, b.amax_history, equal_nan=True)
        a.update()
        b.update()
        assert a.scale == b.scale


@pytest.mark.parametrize("tile", [(1, 128), (128, 128), (3, 5)])
def test_tiles_are_per_tensor_quantization_of_each_tile(tile):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((130, 300)) * np.exp2(rng.integers(-6, 6, (130, 1)))).astype(F32)
    t = scaling.quantize_tiles(x, "fp8_e4m3", tile)
    tr, tc = tile
    nr, nc = -(-130 // tr), -(-300 // tc)
    assert t.scale.shape == (nr, nc)
    d = t.dequantize()
    for i in range(nr):
        for j in range(nc):
            sl = np.s_[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc]
            alone = scaling.quantize_per_tensor(x[sl], "fp8_e4m3")
            assert t.scale[i, j] == alone.scale
            assert np.array_equal(t.codes[sl], alone.codes)
            assert np.array_equal(d[sl], alone.dequantize())
    assert t.nbytes == 130 * 300 + 4 * nr * nc


def test_tiles_of_a_batch_and_of_a_vector():
    x = np.random.default_rng(2).standard_normal((2, 4, 256)).astype(F32)
    t = scaling.quantize_tiles(x, "fp8_e4m3", (1, 128), power_of_two=True)
    assert t.scale.shape == (2, 4, 2)
    assert np.array_equal(t.codes[1], scaling.quantize_tiles(x[1], "fp8_e4m3",
                                                             power_of_two=True).codes)
    v = scaling.quantize_tiles(x[0, 0], "fp8_e4m3")
    assert v.scale.shape == (1, 2) and v.dequantize().shape == (256,)
    with pytest.raises(ValueError, match="tile"):
        scaling.quantize_tiles(x, "fp8_e4m3", (0, 128))
