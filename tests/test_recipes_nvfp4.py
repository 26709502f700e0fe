"""NVIDIA's NVFP4 training recipe (lowprec.hadamard, lowprec.recipes.nvfp4) against
independent references: torchao's RHT matrices and FP4 cast on the CPU, Transformer
Engine's reference arithmetic transcribed into torch here, ml_dtypes grids, and
hand-worked cases."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lowprec import hadamard
from lowprec.recipes import nvfp4 as R

F32 = np.float32
# Transformer Engine's get_wgrad_sign_vector (reference_nvfp4.py), typed in by hand.
TE_SIGNS = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]
E2M1 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def _data(shape, spread, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
            ).astype(F32)


def _adversarial():
    """(name, float32 array) pairs the recipe's edge cases live in."""
    rng = np.random.default_rng(7)
    out = {"zeros": np.zeros((32, 32), F32), "all_equal": np.full((32, 32), -0.37, F32)}
    mixed = rng.standard_normal((32, 48)).astype(F32)
    mixed[:, :16] *= F32(1e-6)  # block scales that round to E4M3 subnormals or zero
    mixed[:16, 16:32] *= F32(1e4)
    out["scale_underflow"] = mixed
    out["tiny"] = (rng.uniform(-1, 1, (16, 32)) * 1e-30).astype(F32)  # S_enc -> FLT_MAX
    out["huge"] = (rng.uniform(-1, 1, (16, 32)) * 3e38).astype(F32)
    ties = np.tile(np.array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -2.5, -5, 0,
                             -0.0, 4, 3, 1], F32), (16, 2))
    out["ties"] = ties  # with amax 6 and global amax 2688 every scale is 1
    return out


# ------------------------------------------------------------------ the RHT
def test_rht_matrices_equal_torchao_and_transformer_engine():
    torch = pytest.importorskip("torch")
    hu = pytest.importorskip("torchao.prototype.moe_training.nvfp4_training.hadamard_utils")
    assert hadamard.SIGN_VECTOR.tolist() == TE_SIGNS
    h = hu.get_hadamard_matrix(16, "cpu", torch.float32).numpy().astype(np.float64)
    assert np.array_equal(hadamard.hadamard_matrix(16) / 4, h)
    b = hu.get_rht_matrix(tuple(TE_SIGNS), "cpu", torch.bfloat16, 16)
    assert np.array_equal(hadamard.rht_matrix(), b.float().numpy())
    r = hadamard.rht_matrix()
    assert np.array_equal(r @ r.T, np.eye(16))  # orthogonal, exactly


@pytest.mark.parametrize("spread", [0, 6, 12])
def test_rht_equals_torchaos_bf16_transform(spread):
    """torchao's reference: (A.t().reshape(-1, 16) @ B).to(bfloat16), B = get_rht_matrix."""
    torch = pytest.importorskip("torch")
    hu = pytest.importorskip("torchao.prototype.moe_training.nvfp4_training.hadamard_utils")
    a = torch.from_numpy(_data((128, 64), spread, spread)).to(torch.bfloat16)
    b = hu.get_rht_matrix(tuple(TE_SIGNS), "cpu", torch.bfloat16, 16)
    want = (a.t().reshape(-1, 16) @ b).reshape(64, 128).to(torch.bfloat16).float().numpy()
    got = hadamard.rht(a.float().numpy(), axis=0)  # along the token axis, as for wgrad
    assert np.array_equal(got.T, want)


def test_rht_is_the_exact_sum_rounded_once():
    x = _data((40, 32), 20, 3)
    exact = (x.astype(np.float64).reshape(-1, 16) @ hadamard.rht_matrix()).reshape(x.shape)
    assert np.array_equal(hadamard.rht(x, precision="float32"), exact.astype(F32))
    bf = exact.astype(F32).astype(ml_dtypes.bfloat16).astype(F32)
    assert np.array_equal(hadamard.rht(x), bf)
    assert np.array_equal(hadamard.rht(x.T, axis=0), bf.T)
    with pytest.raises(ValueError, match="multiple of the Hadamard size 16"):
        hadamard.rht(np.ones((3, 20), F32))
    with pytest.raises(ValueError, match="signs"):
        hadamard.rht(np.ones(16, F32), signs=[1] * 15)
    with pytest.raises(ValueError, match="precision"):
        hadamard.rht(np.ones(16, F32), precision="fp16")


# ------------------------------------------------- Transformer Engine's arithmetic
def _te_reference(x: np.ndarray, tile_rows: int, global_amax=None):
    """TE's default NVFP4 path (core_nvfp4.cuh as torchao's nvfp4_reference.py
    transcribes it) in torch; the FP4 cast is torchao's f32_to_f4_unpacked."""
    torch = pytest.importorskip("torch")
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    xf = torch.from_numpy(x)
    amax = xf.abs().max() if global_amax is None else torch.tensor(global_amax, dtype=torch.float32)
    cand = (torch.tensor(2688.0) / amax).clamp(max=torch.finfo(torch.float32).max)
    s_enc = torch.where((amax == 0) | (cand == 0), torch.ones_like(cand), cand)
    r, c = x.shape
    tiles = xf.abs().reshape(r // tile_rows, tile_rows, c // 16, 16).amax(dim=(1, 3))
    bs = (tiles * (s_enc * (1.0 / 6.0))).clamp(max=448.0).to(torch.float8_e4m3fn)
    enc = (1.0 / (bs.to(torch.float32) * (1.0 / s_enc))).clamp(max=torch.finfo(torch.float32).max)
    full = enc.repeat_interleave(tile_rows, 0).repeat_interleave(16, 1)
    codes = kernels.f32_to_f4_unpacked((xf * full).clamp(-6.0, 6.0).contiguous())
    return (codes.numpy(), bs.view(torch.uint8).repeat_interleave(tile_rows, 0).numpy(),
            (1.0 / s_enc).numpy())


@pytest.mark.parametrize("tile_rows", [1, 16])
@pytest.mark.parametrize("spread", [0, 10, 40])
def test_rne_equals_transformer_engines_arithmetic(tile_rows, spread):
    x = _data((64, 96), spread, 100 + spread)
    codes, scales, s_dec = _te_reference(x, tile_rows)
    t = R.quantize(x, (tile_rows, 16))
    assert np.array_equal(t.codes, codes) and np.array_equal(t.scale_codes, scales)
    assert t.global_scale == s_dec


@pytest.mark.parametrize("name", sorted(_adversarial()))
@pytest.mark.parametrize("tile_rows", [1, 16])
def test_rne_adversarial_tensors(name, tile_rows):
    x = _adversarial()[name]
    g = 2688.0 if name == "ties" else None
    codes, scales, s_dec = _te_reference(x, tile_rows, g)
    t = R.quantize(x, (tile_rows, 16), global_amax=g)
    assert np.array_equal(t.scale_codes, scales)
    assert t.global_scale == s_dec
    # -0.0 and negatives that round to zero: lowprec keeps the sign (code 8), as
    # torchao's cast and the hardware do; TE's Python reference writes code 0 for -0.0.
    assert np.array_equal(t.codes, codes)


def test_2d_blocks_make_w_and_w_transposed_the_same_numbers():
    w = _data((48, 64), 8, 5)
    a, b = R.quantize(w, (16, 16)), R.quantize(w.T, (16, 16))
    assert np.array_equal(a.dequantize(), b.dequantize().T)
    assert a.n_blocks == 3 * 4 and a.nbytes == 4 + 12 + 48 * 64 // 2


def test_nan_and_inf_blocks_and_bad_input():
    x = _data((32, 32), 4, 9)
    x[3, 20] = np.nan
    x[20, 2] = np.inf
    t = R.quantize(x, (16, 16))
    assert (t.scale_codes[:16, 1] == 0x7F).all() and (t.scale_codes[16:, 0] == 0x7F).all()
    assert (t.codes[:16, 16:] == 0).all() and np.isnan(t.dequantize()[:16, 16:]).all()
    clean = R.quantize(np.where(np.isfinite(x), x, 0), (16, 16))  # amax leaves them out
    assert np.array_equal(t.codes[16:, 16:], clean.codes[16:, 16:])
    with pytest.raises(ValueError, match="block_shape"):
        R.quantize(x, (16, 32))
    with pytest.raises(ValueError, match="rounding"):
        R.quantize(x, rounding="nearest")
    with pytest.raises(ValueError, match="rbits must be a uint8"):
        R.quantize(x, rounding="stochastic", rbits=np.zeros(5, np.uint8))
    with pytest.raises(ValueError, match="stochastic"):
        R.quantize(x, rbits=np.zeros(x.size, np.uint8))
    with pytest.raises(ValueError, match="role"):
        R.quantize_operand(x, "fprop")


# ------------------------------------------------- stochastic rounding, 8 random bits
def _sr_reference(v: np.ndarray, r: np.ndarray) -> np.ndarray:
    """E2M1 values: neighbours from the ml_dtypes grid, up iff r + floor(256 frac) >= 256."""
    grid = np.unique(np.abs(E2M1))
    a = np.abs(v.astype(np.float64))
    i = np.searchsorted(grid, a, side="right") - 1
    lo = grid[i]
    hi = grid[np.minimum(i + 1, grid.size - 1)]
    gap = np.where(hi > lo, hi - lo, 1.0)
    t = np.floor((a - lo) / gap * 256)
    return np.copysign(np.where(r.astype(np.int64) + t >= 256, hi, lo), v)


def _unit_scale_block(values):
    """A (1, 16) row whose scale is exactly 1 under global_amax 2688 (it holds 6)."""
    row = np.zeros((1, 16), F32)
    row[0, 0] = 6
    row[0, 1:1 + len(values)] = values
    return row


@pytest.mark.parametrize("v, r, want", [
    (0.75, 127, 0.5), (0.75, 128, 1.0), (2.9, 25, 2.0), (2.9, 26, 3.0),
    (-5.0, 127, -4.0), (-5.0, 128, -6.0), (0.1, 204, 0.0), (0.1, 205, 0.5), (6.0, 255, 6.0),
    (-0.1, 0, -0.0),
])
def test_sr_hand_worked(v, r, want):
    x = _unit_scale_block([v])
    bits = np.zeros(16, np.uint8)
    bits[1] = r
    t = R.quantize(x, rounding="stochastic", rbits=bits, global_amax=2688.0)
    assert t.scale_codes[0, 0] == 0x38 and t.global_scale == 1  # E4M3 1.0
    got = E2M1[t.codes[0, 1]]
    assert got == want and np.signbit(got) == np.signbit(want)


def test_sr_equals_the_byte_rule_on_every_byte():
    rng = np.random.default_rng(11)
    v = rng.uniform(-6, 6, 15).astype(F32)
    x = np.repeat(_unit_scale_block(v), 256, axis=0)
    bits = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 16, axis=1)
    t = R.quantize(x, rounding="stochastic", rbits=bits, global_amax=2688.0)
    got = E2M1[t.codes[:, 1:]]
    assert np.array_equal(got, _sr_reference(np.broadcast_to(v, (256, 15)), bits[:, 1:]))
    # over all 256 bytes the mean is v truncated to 8 bits of its gap: unbiased to 2**-8
    grid_mean = got.mean(axis=0)
    gap = np.where(np.abs(v) < 2, 0.5, np.where(np.abs(v) < 4, 1.0, 2.0))
    assert (np.abs(grid_mean - v) <= gap / 256).all()


def test_sr_is_unbiased_with_the_default_generator():
    """4000 independent draws of 15 values (each row its own random bytes): every mean
    lies within 5 standard errors of lo + gap * floor(256 frac) / 256, and so within
    gap / 256 + 5 se of the value itself (a false failure: probability below 1e-5)."""
    v = np.random.default_rng(3).uniform(-6, 6, 15).astype(F32)
    n = 4000
    x = np.repeat(_unit_scale_block(v), n, axis=0)
    t = R.quantize(x, rounding="stochastic", rng=12345, global_amax=2688.0)
    draws = E2M1[t.codes[:, 1:]]
    grid = np.unique(np.abs(E2M1))
    a = np.abs(v.astype(np.float64))
    i = np.searchsorted(grid, a, side="right") - 1
    lo, gap = grid[i], np.diff(grid)[np.minimum(i, grid.size - 2)]
    want = np.sign(v) * (lo + gap * np.floor((a - lo) / gap * 256) / 256)
    se = gap / 2 / np.sqrt(n)  # the largest standard deviation of a two-point draw
    assert (np.abs(draws.mean(axis=0) - want) <= 5 * se).all()
    assert (np.abs(draws.mean(axis=0) - v) <= gap / 256 + 5 * se).all()
    again = R.quantize(x[:4], rounding="stochastic", rng=7)
    assert np.array_equal(again.codes, R.quantize(x[:4], rounding="stochastic", rng=7).codes)
    assert np.array_equal(  # the documented default generator
        again.codes, R.quantize(x[:4], rounding="stochastic", rbits=R.random_bytes(64, 7)).codes)


# -------------------------------------------------------------------- 4over6
def _te_4over6(x: np.ndarray, tile_rows: int, mode: str, e4m3_max: int):
    """TE's _quantize_blockwise_4over6_reference (default error path) in torch."""
    torch = pytest.importorskip("torch")
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    xf = torch.from_numpy(x)
    m, n = x.shape
    amax = xf.abs().max()
    tiles = xf.abs().reshape(m // tile_rows, tile_rows, n // 16, 16).amax(dim=(1, 3))
    vec_max = tiles.repeat_interleave(tile_rows, 0).unsqueeze(-1)
    s_enc = torch.min(torch.tensor(float(e4m3_max * 6)) / amax,
                      torch.tensor(torch.finfo(torch.float32).max))
    s_enc = torch.where(s_enc == 0, torch.ones_like(s_enc), s_enc)
    s_dec = 1.0 / s_enc
    base = (vec_max / 6.0) * s_enc
    e2m1 = torch.tensor(E2M1, dtype=torch.float32)
    xb = xf.view(m, n // 16, 16)
    res = []
    for mult in (1.5, 1.0):
        sc = (base * mult).clamp(-448, 448).to(torch.float8_e4m3fn)
        enc = torch.min(1.0 / (sc.float() * s_dec), torch.tensor(torch.finfo(torch.float32).max))
        q = kernels.f32_to_f4_unpacked((xb * enc).clamp(-6, 6).reshape(m, n).contiguous())
        fq = e2m1[q.long()].view(m, n // 16, 16)
        err = torch.zeros_like(vec_max)
        for i in range(16):
            d = ((fq[:, :, i] * sc.float().squeeze(-1)) * amax) / float(6 * e4m3_max) - xb[:, :, i]
            err = err + (d * d if mode == "mse" else d.abs()).unsqueeze(-1)
        if tile_rows == 16:
            rows = err.view(m // 16, 16, n // 16)
            for h in (8, 4, 2, 1):
                rows = rows[:, :h] + rows[:, h:2 * h]
            err = rows.repeat_interleave(16, 0).view(m, n // 16, 1)
        res.append((sc, q, err))
    (s4, q4, e4), (s6, q6, e6) = res
    pick = e4 < e6
    codes = torch.where(pick.expand(-1, -1, 16).reshape(m, n), q4, q6)
    scales = torch.where(pick, s4, s6).squeeze(-1)
    return codes.numpy(), scales.view(torch.uint8).numpy()


@pytest.mark.parametrize("tile_rows", [1, 16])
@pytest.mark.parametrize("mode", ["mae", "mse"])
@pytest.mark.parametrize("e4m3_max", [448, 256])
def test_four_over_six_equals_transformer_engines_reference(tile_rows, mode, e4m3_max):
    x = _data((32, 64), 6, 20 + tile_rows)
    x[:16, :16] = F32(1.0)  # an all-equal block
    codes, scales = _te_4over6(x, tile_rows, mode, e4m3_max)
    t = R.quantize(x, (tile_rows, 16), four_over_six=True, error=mode, e4m3_max=e4m3_max)
    assert np.array_equal(t.codes, codes) and np.array_equal(t.scale_codes, scales)
    top = np.abs(E2M1[t.codes]).reshape(32, 4, 16).max(axis=-1)  # 4: mapped to 4; 6: to 6
    assert (top == 4).any() and (top == 6).any()  # both candidates occur


def test_four_over_six_never_worse_than_six_per_block():
    x = _data((64, 64), 3, 31)
    t = R.quantize(x, four_over_six=True, e4m3_max=256)
    six = R.quantize(x, e4m3_max=256, four_over_six=True)  # same call: deterministic
    assert np.array_equal(t.codes, six.codes)
    err4o6 = np.abs(t.dequantize() - x).reshape(64, 4, 16).sum(-1)
    err6 = np.abs(R.quantize(x).dequantize() - x).reshape(64, 4, 16).sum(-1)
    assert err4o6.mean() < err6.mean()


# ---------------------------------------------------------------- roles
def test_operand_roles():
    x, dy = _data((64, 32), 4, 1), _data((64, 48), 4, 2)
    rb = np.random.default_rng(0).integers(0, 256, dy.size, dtype=np.uint8)
    wg = R.quantize_operand(dy, "wgrad_grad", rbits=rb)
    want = R.quantize(np.ascontiguousarray(hadamard.rht(dy, axis=0).T), rounding="stochastic",
                      rbits=rb)
    assert wg.shape == (48, 64) and np.array_equal(wg.codes, want.codes)
    xi = R.quantize_operand(x, "wgrad_input")
    assert np.array_equal(xi.codes, R.quantize(hadamard.rht(x, axis=0).T).codes)
    w = R.quantize_operand(x.T, "weight")
    assert w.block_rows == 16 and np.array_equal(w.codes, R.quantize(x.T, (16, 16)).codes)
    assert R.quantize_operand(x, "fprop_input").block_rows == 1


@pytest.mark.parametrize("shape, tile_rows", [((48, 64), 16), ((20, 40), 16), ((5, 3, 32), 1),
                                              ((16,), 1), ((0, 16), 16), ((2, 0), 16)])
def test_pack_is_nbytes_and_round_trips(shape, tile_rows):
    x = _data(shape, 6, 8)
    t = R.quantize(x, (tile_rows, 16))
    assert t.dequantize().shape == shape
    data = t.pack()
    assert data.size == t.nbytes
    u = R.RecipeNVFP4Tensor.from_packed(data.tobytes(), shape, block_rows=tile_rows)
    assert u.global_scale == t.global_scale and u.block_rows == tile_rows
    assert np.array_equal(u.codes, t.codes) and np.array_equal(u.scale_codes, t.scale_codes)
    with pytest.raises(ValueError, match="bytes"):
        R.RecipeNVFP4Tensor.from_packed(data[:-1], shape, block_rows=tile_rows)
