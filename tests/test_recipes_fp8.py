"""MXFP8 and DeepSeek-V3 FP8 training operands (lowprec.recipes.fp8) against torchao's
CPU code (to_mx, blockwise_fp8_training's torch_* quantizers), hand-worked Transformer
Engine cases and lowprec.matmul's promote model."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import lowprec as lp
from lowprec.recipes import fp8

F32 = np.float32


def _layer(seed, m=256, k=384, n=128, spread=8):
    rng = np.random.default_rng(seed)

    def make(shape):
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
                ).astype(F32)

    x, w, dy = make((m, k)), make((n, k)), make((m, n))
    x[:32, :32] = 0  # an all-zero block (MX) / part of a tile
    x[32:64, :128] = F32(0.3)  # all-equal blocks and tiles
    w[:128, 128:256] = 0  # an all-zero 128x128 tile
    return x, w, dy


# ------------------------------------------------------------------ MXFP8
@pytest.mark.parametrize("rule", ["rceil", "floor"])
def test_mxfp8_operands_equal_torchaos_to_mx(rule):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    x, w, dy = _layer(1)
    ops = fp8.mxfp8_operands(x, w, dy, scale_rule=rule, grad_fmt="mxfp8_e5m2")
    tensors = {"x": x, "w": w, "dy": dy}
    for gemm, pair in fp8.GEMM_AXES.items():
        for (name, axis), t in zip(pair, ops[gemm]):
            src = tensors[name] if axis == 1 else np.ascontiguousarray(tensors[name].T)
            elem = torch.float8_e5m2 if name == "dy" else torch.float8_e4m3fn
            scale, data = to_mx(torch.from_numpy(src), elem, 32,
                                getattr(ScaleCalculationMode, rule.upper()))
            codes, scales = t.codes, t.scale_codes
            if axis == 0:
                codes, scales = codes.T, scales.T
            assert np.array_equal(data.view(torch.uint8).numpy(), codes), (gemm, name)
            assert np.array_equal(scale.view(torch.uint8).numpy().reshape(scales.shape),
                                  scales), (gemm, name)


def test_mxfp8_rceil_hand_worked():
    """Transformer Engine's MXFP8 scale: amax / 448 rounded up to a power of two.
    amax 672: 672/448 = 1.5 -> 2 (E8M0 code 128); 672/2 = 336 is a tie between the
    E4M3 values 320 and 352 and goes to 320 (even significand)."""
    blk = np.zeros((1, 32), F32)
    blk[0, 0], blk[0, 1] = 672, -1.0
    t = lp.mx.quantize(blk, "mxfp8_e4m3", scale_rule="rceil")
    assert t.scale_codes.tolist() == [[128]]
    assert t.dequantize()[0, :2].tolist() == [640.0, -1.0]
    x = np.ones((32, 32), F32)
    x[:, 0] = 672
    ops = fp8.mxfp8_operands(x, x, x)
    assert ops["fprop"][0].scale_codes[:, 0].tolist() == [128] * 32  # along K: every row
    # along M: column 0 (amax 672) gets 2**1, the others (amax 1) 2**-8 = 1/448 rounded up
    assert ops["wgrad"][1].scale_codes[0].tolist() == [128] + [119] * 31
    with pytest.raises(ValueError, match="linear layer"):
        fp8.mxfp8_operands(x, x[:, :16], x)


# ------------------------------------------------------------ DeepSeek-V3
def test_deepseek_operands_equal_torchaos_blockwise_quantizers():
    torch = pytest.importorskip("torch")
    kernels = pytest.importorskip("torchao.prototype.blockwise_fp8_training.kernels")
    x, w, dy = _layer(2)
    ops = fp8.deepseek_operands(x, w, dy, pow2=False)

    def lhs(a):
        q, s = kernels.torch_blockwise_scale_act_quant_lhs(torch.from_numpy(a), 128)
        return q.view(torch.uint8).numpy(), s.numpy()

    cases = {
        ("fprop", 0): lhs(x), ("dgrad", 0): lhs(dy),
        ("wgrad", 0): lhs(np.ascontiguousarray(dy.T)),
    }
    q, s = kernels.torch_blockwise_scale_weight_quant(torch.from_numpy(w), 128)
    cases[("fprop", 1)] = (q.view(torch.uint8).numpy(), s.numpy())
    q, s = kernels.torch_blockwise_scale_weight_quant(torch.from_numpy(
        np.ascontiguousarray(w.T)), 128)
    cases[("dgrad", 1)] = (q.view(torch.uint8).numpy(), s.numpy())
    q, s = kernels.torch_blockwise_scale_act_quant_rhs(torch.from_numpy(x), 128)  # 128x1
    cases[("wgrad", 1)] = (q.view(torch.uint8).numpy().T, s.numpy().T)
    for (gemm, i), (codes, scale_inv) in cases.items():
        t = ops[gemm][i]
        assert np.array_equal(t.codes, codes), (gemm, i)
        inv = (F32(1) / t.scale).astype(F32)
        zero = np.isclose(scale_inv, F32(1) / F32(448e12))  # torchao's amax floor of 1e-12
        assert np.array_equal(inv[~zero], scale_inv[~zero]), (gemm, i)
        assert (t.scale[zero] == 1).all()  # lowprec: an all-zero tile keeps scale 1


def test_deepseek_pow2_scales():
    x, w, dy = _layer(3)
    for a, b in fp8.deepseek_operands(x, w, dy).values():
        for t in (a, b):
            m, e = np.frexp(t.scale)
            assert (m == 0.5).all()  # powers of two
    t = fp8.deepseek_operands(x, w, dy)["fprop"][0]
    amax = np.abs(x).reshape(256, 3, 128).max(-1)
    ok = amax > 0
    assert (t.scale[ok] * amax[ok] <= 448).all() and (t.scale[ok] * amax[ok] > 224).all()


def _unit_scale(rng, shape):
    """E4M3 values whose every 1x128 (and 128x128) tile holds +-448: pow2 scale 1."""
    v = rng.standard_normal(shape).astype(F32).astype(ml_dtypes.float8_e4m3fn).astype(F32)
    v[:, ::128] = 448
    return v


def test_deepseek_gemm_with_unit_scales_is_the_promote_model():
    rng = np.random.default_rng(4)
    a, b = _unit_scale(rng, (8, 256)), _unit_scale(rng, (128, 256))
    ta = lp.scaling.quantize_tiles(a, "fp8_e4m3", (1, 128), power_of_two=True)
    tb = lp.scaling.quantize_tiles(b, "fp8_e4m3", (128, 128), power_of_two=True)
    assert (ta.scale == 1).all() and (tb.scale == 1).all()
    want = lp.matmul(a, b.T, inputs="fp8_e4m3", model="deepseek_v3")
    assert np.array_equal(fp8.deepseek_gemm(ta, tb), want.astype(F32))


def test_deepseek_gemm_scales_each_partial_sum_once():
    rng = np.random.default_rng(5)
    a, b = _unit_scale(rng, (4, 256)), _unit_scale(rng, (128, 256))
    a[:, 128:] *= F32(2.0 ** -20)  # the second chunk of A gets scale 2**20
    ta = lp.scaling.quantize_tiles(a, "fp8_e4m3", (1, 128), power_of_two=True)
    tb = lp.scaling.quantize_tiles(b, "fp8_e4m3", (128, 128), power_of_two=True)
    assert (ta.scale[:, 1] == 2.0 ** 20).all()
    got = fp8.deepseek_gemm(ta, tb)
    p0 = lp.matmul(a[:, :128], b[:, :128].T, inputs="fp8_e4m3", model="h100")
    p1 = lp.matmul(a[:, 128:] * 2.0 ** 20, b[:, 128:].T, inputs="fp8_e4m3", model="h100")
    want = (p0.astype(F32).astype(np.float64) + 2.0 ** -20 * p1).astype(F32)  # one rounding
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="tile-quantized"):
        fp8.deepseek_gemm(lp.scaling.quantize_per_tensor(a), tb)


def _te_mxfp4_reference(x: np.ndarray):
    """Transformer Engine's reference_nvfp4.py in its pow_2_scales mode (MXFP4, 1x32):
    decode scale 2**clamp(ceil(log2(amax / 6)), -127, 127), elements x / scale clamped to
    +-6 and cast by torchao's f32_to_f4_unpacked."""
    torch = pytest.importorskip("torch")
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    xt = torch.from_numpy(x).view(x.shape[0], -1, 32)
    e = torch.clamp(torch.ceil(torch.log2(xt.abs().amax(-1, keepdim=True) / 6.0)), -127, 127)
    enc = 1.0 / (2.0 ** e)
    codes = kernels.f32_to_f4_unpacked(torch.clamp(xt * enc, -6, 6).reshape(x.shape)
                                       .contiguous()).numpy()
    return codes, (e.squeeze(-1).numpy() + 127).astype(np.uint8)


@pytest.mark.parametrize("spread", [0, 8, 30])
def test_te_mxfp4_reference_is_mx_rceil(spread):
    x, _, _ = _layer(10 + spread, m=64, k=256, spread=spread)
    codes, scales = _te_mxfp4_reference(x)
    t = lp.mx.quantize(x, "mxfp4", scale_rule="rceil")
    assert np.array_equal(t.scale_codes, scales) and np.array_equal(t.codes, codes)


def test_te_mxfp4_reference_loses_the_log2_increment():
    """amax one float32 ulp above 6 * 2**-20: TE's Python reference takes
    ceil(log2(amax / 6)) in float32, where log2 of 2**-20 * (1 + 2**-23) rounds to -20
    exactly, so its scale is 2**-20 and the maximum is clamped (code 7, value 6);
    lowprec's rceil (the GPU kernels' rule) rounds up to 2**-19 and nothing clips
    (3.0000002 -> code 5, value 3). docs/recipes.md lists it."""
    x = np.zeros((1, 32), F32)
    x[0, 0] = np.nextafter(F32(6 * 2.0 ** -20), F32(1))
    codes, scales = _te_mxfp4_reference(x)
    t = lp.mx.quantize(x, "mxfp4", scale_rule="rceil")
    assert scales.tolist() == [[127 - 20]] and codes[0, 0] == 7
    assert t.scale_codes.tolist() == [[127 - 19]] and t.codes[0, 0] == 5
