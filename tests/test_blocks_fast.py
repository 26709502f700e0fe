"""The compiled block quantizers (``lowprec._kernels.blocks``) against the numpy
reference they replace, bit for bit: MX codes, E8M0 scale codes and dequantized values
for every element format, scale rule and deterministic rounding mode; NVFP4 codes,
E4M3 scale codes and tensor scale in every mode, stochastic included.

The data is built to sit on the edges: block amax at and one ulp either side of powers
of two (where floor, ceil and rceil change their scale) and of the even rule's rounding
threshold, elements at the midpoints of the element format after scaling (where the
rounding decides), zero, NaN and infinite blocks, float32 subnormals (scales clamped at
2**-127, rceil quotients that underflow), the float32 maximum (scales past 2**127), and
rows whose length the block size does not divide.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lowprec import mx, nvfp4
from lowprec.rounding import decode

F32 = np.float32
TOP = float(np.finfo(F32).max)  # nextafter toward it never overflows
DETERMINISTIC = ("rne", "rna", "rtz", "rup", "rdown", "odd")


def _next(v: np.ndarray, toward: float) -> np.ndarray:
    return np.nextafter(v.astype(F32), F32(toward)).astype(F32)


def edge_magnitudes() -> np.ndarray:
    """Positive float32 magnitudes where a scale rule changes its answer: every power of
    two and its neighbours, the even rule's thresholds (``2 - 2**-(m+1)`` times a power
    of two, m = 1, 2, 3, 6) and theirs, the float32 maximum, subnormals."""
    e = np.arange(-149, 128)
    pow2 = np.ldexp(F32(1), e).astype(F32)
    mants = [F32(1.5), F32(1.25), F32(1.75)]
    mants += [F32(2 - 2.0 ** -(m + 1)) for m in (1, 2, 3, 6)]
    vals = [pow2, _next(pow2, 0), _next(pow2, TOP)]
    for mant in mants:
        v = np.ldexp(mant, e[e <= 127]).astype(F32)
        v = v[np.isfinite(v) & (v > 0)]
        vals += [v, _next(v, 0), _next(v, TOP)]
    top = np.finfo(F32).max
    vals.append(np.array([top, _next(np.array([top]), 0)[0], 2.0 ** -149, 3 * 2.0 ** -149],
                         F32))
    out = np.concatenate(vals)
    return np.unique(out[np.isfinite(out) & (out > 0)]).astype(F32)


def adversarial(bs: int, cols: int, seed: int = 0) -> np.ndarray:
    """Rows of ``cols`` float32 values cut into blocks of ``bs``: each block scaled to
    one edge magnitude, holding that amax, element-midpoint values below it and a few
    special blocks (zeros, -0, NaN, inf, -inf, subnormals only)."""
    rng = np.random.default_rng(seed)
    amaxes = edge_magnitudes()
    nb = -(-cols // bs)
    rows = -(-amaxes.size // nb) + 1
    x = np.empty((rows, nb * bs), F32)
    blocks = x.reshape(rows * nb, bs)
    for i in range(blocks.shape[0]):
        a = amaxes[i % amaxes.size].astype(np.float64)
        # Midpoints of a fine binary grid below amax (every element format's midpoints
        # after scaling are among them), their neighbours, and random signs.
        grid = a * rng.integers(0, 129, bs) / 128.0
        v = grid.astype(F32)
        v = np.where(rng.random(bs) < 0.3, _next(v, 0), v)
        v = np.where(rng.random(bs) < 0.3, _next(v, TOP), v)
        v[0] = F32(a)
        v = v * np.where(rng.random(bs) < 0.5, F32(-1), F32(1))
        blocks[i] = rng.permutation(v)
    specials = {0: 0.0, 1: -0.0}
    for b, val in specials.items():
        blocks[b] = val
    blocks[2, min(1, bs - 1)] = np.nan
    blocks[3, -1] = np.inf
    blocks[4, 0] = -np.inf
    blocks[5] = F32(2.0 ** -149) * rng.integers(-3, 4, bs)
    return np.ascontiguousarray(x[:, :cols])


def midpoint_blocks(fmt: str, bs: int = 32) -> np.ndarray:
    """Blocks whose floor-rule scale is ``2**k`` (their first value is the element
    maximum times ``2**k``) holding the midpoints between neighbouring element values
    times ``2**k`` and the float32 values either side of them, for k from -127 up."""
    mxf = mx.get_mx_format(fmt)
    vals = np.unique(np.abs(mx._element_values(mxf)))
    vals = vals[np.isfinite(vals)]
    mids = (vals[:-1] + vals[1:]) / 2
    rows = []
    for k in (-127, -126, -120, -60, -1, 0, 1, 5, 60, 120, 127 - mxf.emax_elem):
        if mxf.element_max * 2.0 ** k > TOP:
            continue
        m = (mids * 2.0 ** k).astype(F32)
        cand = np.concatenate([m, _next(m, 0), _next(m, TOP)])
        cand = cand[cand <= mxf.element_max * 2.0 ** k]
        for start in range(0, cand.size, bs - 1):
            row = np.zeros(bs, F32)
            part = cand[start:start + bs - 1]
            row[0] = F32(mxf.element_max * 2.0 ** k)
            row[1:1 + part.size] = part
            row[1::2] *= -1
            rows.append(row)
    return np.array(rows)


def assert_same_mx(a: mx.MXTensor, b: mx.MXTensor) -> None:
    assert a.shape == b.shape and a.axis == b.axis
    bad = np.flatnonzero(a.scale_codes.reshape(-1) != b.scale_codes.reshape(-1))
    assert bad.size == 0, f"scale codes differ at block {bad[0]}"
    bad = np.flatnonzero(a.codes.reshape(-1) != b.codes.reshape(-1))
    assert bad.size == 0, f"codes differ at element {bad[0]}"


def fast_mx(x, fmt, axis=-1, bs=32, rule="floor", mode="rne") -> mx.MXTensor:
    arr = np.asarray(x)
    out = mx._quantize_fast(arr, mx.get_mx_format(fmt), axis % arr.ndim, bs, rule, mode)
    assert out is not None, "the block kernel did not take this case"
    return out


def ref_mx(x, fmt, axis=-1, bs=32, rule="floor", mode="rne") -> mx.MXTensor:
    arr = np.asarray(x)
    return mx._quantize_reference(arr, mx.get_mx_format(fmt), axis % arr.ndim, bs, rule, mode)


@pytest.mark.parametrize("fmt", list(mx.MX_FORMATS))
@pytest.mark.parametrize("rule", list(mx.SCALE_RULES))
def test_mx_scale_codes_every_edge_amax(fmt, rule):
    """Blocks of one value: the scale code of every edge magnitude, both signs."""
    a = edge_magnitudes()
    x = np.concatenate([a, -a, np.array([0.0, -0.0, np.nan, np.inf, -np.inf], F32)])
    assert_same_mx(fast_mx(x, fmt, bs=1, rule=rule), ref_mx(x, fmt, bs=1, rule=rule))


@pytest.mark.parametrize("fmt", list(mx.MX_FORMATS))
@pytest.mark.parametrize("rule", list(mx.SCALE_RULES))
@pytest.mark.parametrize("cols", [256, 100])  # whole blocks, and a ragged last block
def test_mx_adversarial_blocks_rne(fmt, rule, cols):
    x = adversarial(32, cols)
    assert_same_mx(fast_mx(x, fmt, rule=rule), ref_mx(x, fmt, rule=rule))
    mids = midpoint_blocks(fmt)
    for mode in DETERMINISTIC:
        assert_same_mx(fast_mx(mids, fmt, rule=rule, mode=mode),
                       ref_mx(mids, fmt, rule=rule, mode=mode))


@pytest.mark.parametrize("fmt", list(mx.MX_FORMATS))
@pytest.mark.parametrize("mode", DETERMINISTIC[1:])
def test_mx_every_deterministic_mode(fmt, mode):
    x = adversarial(32, 96, seed=1)
    for rule in mx.SCALE_RULES:
        assert_same_mx(fast_mx(x, fmt, rule=rule, mode=mode),
                       ref_mx(x, fmt, rule=rule, mode=mode))


@pytest.mark.parametrize("bs", [1, 7, 16, 33])
def test_mx_other_block_sizes_and_axes(bs):
    x = adversarial(bs, 70, seed=2)
    for axis in (0, 1):
        for rule in mx.SCALE_RULES:
            assert_same_mx(fast_mx(x, "mxfp4", axis, bs, rule), ref_mx(x, "mxfp4", axis, bs, rule))
    x3 = adversarial(bs, 60, seed=3)[:12].reshape(3, 4, 60)
    for axis in (0, 1, 2):
        assert_same_mx(fast_mx(x3, "mxfp6_e2m3", axis, bs), ref_mx(x3, "mxfp6_e2m3", axis, bs))


def test_mx_public_quantize_is_the_fast_path_for_narrow_floats():
    """float16 and bfloat16 go through float32 into the kernel; float64 input, stochastic
    rounding and empty arrays keep the reference, with the same results as before."""
    x = adversarial(32, 64, seed=4)
    for dt in (np.float16, ml_dtypes.bfloat16):
        with np.errstate(over="ignore"):
            narrow = x.astype(dt)
        assert_same_mx(mx.quantize(narrow, "mxfp8_e4m3"), fast_mx(narrow.astype(F32), "mxfp8_e4m3"))
        assert_same_mx(mx.quantize(narrow, "mxfp8_e4m3"), ref_mx(narrow.astype(F32), "mxfp8_e4m3"))
    x64 = x.astype(np.float64)
    assert_same_mx(mx.quantize(x64, "mxfp4", scale_rule="rceil"), ref_mx(x64, "mxfp4", rule="rceil"))
    s = mx.quantize(x, "mxfp4", mode="stochastic", rng=3)
    assert_same_mx(s, mx._quantize_reference(x, mx.MX_FORMATS["mxfp4"], 1, 32, "floor",
                                             "stochastic", rng=3))
    assert mx.quantize(np.zeros((0, 5), F32), "mxfp4").codes.shape == (0, 5)


@pytest.mark.parametrize("fmt", list(mx.MX_FORMATS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mx_dequantize_matches_reference(fmt, dtype):
    x = adversarial(32, 100, seed=5)
    for rule in ("floor", "rceil"):
        t = mx.quantize(x, fmt, scale_rule=rule)
        with np.errstate(over="ignore"):  # rceil can round the float32 maximum up past it
            fast, ref = t.dequantize(dtype), t._dequantize_reference(dtype)
        assert fast.dtype == ref.dtype == dtype and fast.shape == ref.shape
        assert fast.tobytes() == ref.tobytes()  # NaNs included, bit for bit
    t = mx.quantize(x, fmt, axis=0)
    assert t.dequantize().tobytes() == t._dequantize_reference().tobytes()


def test_mx_dequantize_bad_codes_still_raise():
    t = mx.quantize(np.ones(32, F32), "mxfp4")
    broken = mx.MXTensor(np.full(32, 200, np.uint8), t.scale_codes, t.fmt, t.shape, 0, 32)
    with pytest.raises(IndexError):
        broken.dequantize()


# ------------------------------------------------------------------------ NVFP4
def assert_same_nvfp4(a: nvfp4.NVFP4Tensor, b: nvfp4.NVFP4Tensor) -> None:
    assert a.global_scale.tobytes() == b.global_scale.tobytes()
    assert np.array_equal(a.scale_codes, b.scale_codes)
    bad = np.flatnonzero(a.codes.reshape(-1) != b.codes.reshape(-1))
    assert bad.size == 0, f"codes differ at element {bad[0]}"


def fast_nv(x, axis=-1, bs=16, mode="rne", gs=None, rng=None) -> nvfp4.NVFP4Tensor:
    out = nvfp4._quantize_fast(x, axis % x.ndim, bs, mode, gs, rng)
    assert out is not None, "the block kernels did not take this case"
    return out


def ref_nv(x, axis=-1, bs=16, mode="rne", gs=None, rng=None) -> nvfp4.NVFP4Tensor:
    return nvfp4._quantize_reference(x, axis % x.ndim, bs, mode, gs, rng=rng)


@pytest.mark.parametrize("mode", DETERMINISTIC)
@pytest.mark.parametrize("cols", [128, 90])
def test_nvfp4_adversarial_every_mode(mode, cols):
    x = adversarial(16, cols, seed=6)
    # Rows whose own amax is moderate: the tensor scale then puts the small blocks'
    # scales on E4M3 subnormals, zero and its rounding edges.
    parts = [x, x[:40] * F32(2.0 ** -100), x[:40] / F32(2.0 ** 30)]
    for part in parts:
        part = np.where(np.isfinite(part), part, F32(1))
        assert_same_nvfp4(fast_nv(part, mode=mode), ref_nv(part, mode=mode))
    assert_same_nvfp4(fast_nv(x, mode=mode), ref_nv(x, mode=mode))
    for gs in (1.0, 2.0 ** -20, 3e-5):
        with np.errstate(over="ignore"):  # a given tensor scale can overflow block scales
            assert_same_nvfp4(fast_nv(x, mode=mode, gs=gs), ref_nv(x, mode=mode, gs=gs))


def test_nvfp4_axes_block_sizes_and_stochastic():
    x = adversarial(16, 64, seed=7)
    for axis in (0, 1):
        for bs in (16, 5, 32):
            assert_same_nvfp4(fast_nv(x, axis, bs), ref_nv(x, axis, bs))
    for seed in (0, 1):
        a = fast_nv(x, mode="stochastic", rng=np.random.default_rng(seed))
        b = ref_nv(x, mode="stochastic", rng=np.random.default_rng(seed))
        assert_same_nvfp4(a, b)
    assert_same_nvfp4(nvfp4.quantize(x, mode="stochastic", rng=9),
                      ref_nv(x, mode="stochastic", rng=9))
    # The reference's seeds run over zero-padded blocks: ragged rows keep the reference.
    assert nvfp4._quantize_fast(x[:, :60], 1, 16, "stochastic", None, 1) is None


def test_nvfp4_nan_scaled_elements_raise_as_before():
    """A tensor scale so small that S_enc is inf makes 0 * inf = NaN block scales: the
    reference raises (E2M1 has no NaN), so must the public quantize."""
    x = np.zeros((2, 16), F32)
    x[0, 0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):  # 1 / 1e-45 overflows float32
        with pytest.raises(ValueError, match="NaN"):
            ref_nv(x, gs=1e-45)
        assert nvfp4._quantize_fast(x, 1, 16, "rne", 1e-45, None) is None
        with pytest.raises(ValueError, match="NaN"):
            nvfp4.quantize(x, global_scale=1e-45)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nvfp4_dequantize_matches_reference(dtype):
    x = adversarial(16, 90, seed=8)
    for axis in (0, 1):
        t = nvfp4.quantize(x, axis=axis)
        with np.errstate(over="ignore"):
            fast, ref = t.dequantize(dtype), t._dequantize_reference(dtype)
        assert fast.dtype == ref.dtype == dtype
        assert fast.tobytes() == ref.tobytes()


def test_nvfp4_scale_table_is_e4m3():
    table = nvfp4._scale_table()
    assert table.dtype == F32 and table.shape == (256,)
    expected = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32)
    assert table.tobytes() == expected.tobytes() or np.array_equal(table, expected,
                                                                   equal_nan=True)
    assert np.array_equal(decode(np.arange(16, dtype=np.uint8), "fp4_e2m1"),
                          nvfp4._element_table())


@pytest.mark.slow
@pytest.mark.parametrize("rule", list(mx.SCALE_RULES))
def test_mx_scale_codes_every_float32_of_some_binades(rule):
    """Every float32 of the subnormal range and of the binades around 1 and the float32
    maximum, as blocks of one, for every MX format."""
    frac = np.arange(1 << 23, dtype=np.uint32)
    fields = [0, 1, 126, 127, 254]
    x = np.concatenate([((np.uint32(f) << 23) | frac).view(F32) for f in fields])
    for fmt in mx.MX_FORMATS:
        assert_same_mx(fast_mx(x, fmt, bs=1, rule=rule), ref_mx(x, fmt, bs=1, rule=rule))


def test_nvfp4_block_scale_codes_equal_encode():
    """The E4M3 block-scale codes, taken from the float32 kernel directly, are
    ``encode(..., "rne", saturate=True)``'s for any block amax and tensor scale."""
    from lowprec import encode

    rng = np.random.default_rng(10)
    amax = np.abs(rng.integers(0, 1 << 32, 50_000, dtype=np.uint64).astype(np.uint32)
                  .view(F32))
    amax = np.concatenate([amax, edge_magnitudes(), np.array([0.0, np.inf, np.nan], F32)])
    for s_enc in (F32(1.0), F32(448 * 6 / 3.5), F32(2.0 ** 100), np.float32(np.inf)):
        with np.errstate(over="ignore", invalid="ignore"):
            got = nvfp4._block_scale_codes(amax, s_enc)
            want = encode(np.minimum(amax * (s_enc * F32(1 / 6)), F32(TOP)), "fp8_e4m3",
                          saturate=True)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4), (1, 5, 1, 2)])
def test_move_axis_is_numpys_moveaxis(shape: tuple[int, ...]) -> None:
    """The block formats' short cut for np.moveaxis: the same view (shape, strides,
    memory) for every axis pair, numpy's error for an axis out of range, numpy's
    answer for numpy integers."""
    from lowprec._kernels.blocks import move_axis

    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    nd = a.ndim
    for src in range(-nd - 1, nd + 1):
        for dst in range(-nd - 1, nd + 1):
            if -nd <= src < nd and -nd <= dst < nd:
                for s, d in ((src, dst), (np.int64(src), np.int64(dst))):
                    got, want = move_axis(a, s, d), np.moveaxis(a, s, d)
                    assert got.shape == want.shape and got.strides == want.strides
                    assert np.shares_memory(got, a) and np.array_equal(got, want)
            else:
                with pytest.raises(np.exceptions.AxisError):
                    move_axis(a, src, dst)
