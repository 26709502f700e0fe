"""NVFP4 against an independent float32 transcription of NVIDIA's recipe (Transformer
Engine 2.x, core_nvfp4.cuh) that converts with ml_dtypes instead of lowprec."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lowprec import nvfp4

F32 = np.float32


def reference(x: np.ndarray, block: int = 16):
    """Recipe, per 2-D row-major blocks along the last axis, numpy float32 + ml_dtypes."""
    x = x.astype(F32)
    amax = F32(np.abs(x).max())
    with np.errstate(over="ignore"):
        s_enc = F32(F32(448.0 * 6.0) / amax) if amax > 0 else F32(1.0)
    s_enc = min(s_enc, F32(np.finfo(F32).max))
    s_dec = F32(1) / s_enc
    blocks = x.reshape(x.shape[0], -1, block)
    b_amax = np.abs(blocks).max(axis=-1)
    s_b = b_amax * (s_enc * F32(1 / 6))
    # satfinite E4M3: ml_dtypes gives NaN beyond 464, so clamp first (448 either way)
    s_b8 = np.minimum(s_b, F32(448)).astype(ml_dtypes.float8_e4m3fn)
    with np.errstate(divide="ignore"):
        rcp = np.minimum(F32(1) / (s_b8.astype(F32) * s_dec), F32(np.finfo(F32).max))
    with np.errstate(over="ignore"):
        scaled = blocks * rcp[..., None]
    e = np.clip(scaled, -6, 6).astype(ml_dtypes.float4_e2m1fn)
    return e.view(np.uint8).reshape(x.shape), s_b8.view(np.uint8), s_dec


@pytest.mark.parametrize("spread", [0, 8, 40])
def test_matches_the_recipe_bit_for_bit(spread):
    rng = np.random.default_rng(spread)
    x = (rng.standard_normal((64, 128)) * np.exp2(rng.integers(-spread, spread + 1,
                                                                (64, 128)))).astype(F32)
    t = nvfp4.quantize(x)
    codes, scales, s_dec = reference(x)
    assert t.global_scale == s_dec
    assert np.array_equal(t.scale_codes, scales)
    assert np.array_equal(t.codes, codes)


@pytest.mark.parametrize("peak", [3e-37, 1e-30, 3e38])
def test_extreme_tensor_amax_matches_the_recipe(peak):
    """Tiny amax: S_enc = 2688 / amax overflows FP32 and is clamped to FLT_MAX."""
    x = (np.random.default_rng(3).uniform(-1, 1, (2, 32)) * peak).astype(F32)
    t = nvfp4.quantize(x)
    codes, scales, s_dec = reference(x)
    assert t.global_scale == s_dec
    assert np.array_equal(t.scale_codes, scales) and np.array_equal(t.codes, codes)


def test_dequantize_is_element_times_block_scale_times_global_scale():
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(F32)
    t = nvfp4.quantize(x)
    e = t.codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    s = t.scale_codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    want = e * np.repeat(s, 16, axis=1) * np.float64(t.global_scale)
    assert np.array_equal(t.dequantize(), want)


def test_given_global_scale_and_special_blocks():
    x = np.zeros((3, 16), F32)
    x[0] = np.linspace(-3, 3, 16)
    x[1, 0] = np.nan
    t = nvfp4.quantize(x, global_scale=1 / 64)
    assert t.global_scale == F32(1 / 64)
    assert t.scale_codes[1, 0] == 0x7F  # E4M3 NaN marks the non-finite block
    d = t.dequantize()
    assert np.isnan(d[1]).all() and (d[2] == 0).all()
    assert np.abs(d[0] - x[0]).max() <= 0.5
    zeros = nvfp4.quantize(np.zeros(32, F32))
    assert zeros.global_scale == 1.0 and (zeros.dequantize() == 0).all()
    with pytest.raises(ValueError, match="global_scale"):
        nvfp4.quantize(x, global_scale=-1.0)


def test_storage_and_padding():
    x = np.ones((128, 1024), F32)
    assert nvfp4.quantize(x).bits_per_value == 4.5 + 32 / x.size  # + the FP32 global scale
    y = np.random.default_rng(2).standard_normal((5, 21)).astype(F32)
    t = nvfp4.quantize(y, axis=0, block_size=4)
    assert t.scale_codes.shape == (2, 21)
    p = np.concatenate([y, np.zeros((3, 21), F32)])
    assert np.array_equal(nvfp4.quantize(p, axis=0, block_size=4).dequantize()[:5],
                          t.dequantize())


@settings(max_examples=50, deadline=None)
@given(x=hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 50)),
                    elements=st.floats(width=32, allow_nan=False, allow_infinity=False)),
       axis=st.sampled_from([0, -1]), block=st.sampled_from([1, 16, 7]))
def test_pack_unpack_is_lossless(x, axis, block):
    t = nvfp4.quantize(x, axis=axis, block_size=block)
    data = t.pack()
    assert data.size == t.nbytes
    u = nvfp4.NVFP4Tensor.from_packed(data.tobytes(), x.shape, axis=axis, block_size=block)
    assert u.global_scale == t.global_scale
    assert np.array_equal(u.codes, t.codes) and np.array_equal(u.scale_codes, t.scale_codes)
    assert np.array_equal(u.dequantize(), t.dequantize(), equal_nan=True)
