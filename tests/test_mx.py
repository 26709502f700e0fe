"""OCP MX block formats: element codes against ml_dtypes, scale rules against exact
Fraction arithmetic, worked examples from the sources, properties (hypothesis)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowprec as lp
from lowprec import mx
from lowprec._blocks import pack_bits, unpack_bits

FORMATS = list(mx.MX_FORMATS)
FLOAT_FORMATS = [f for f in FORMATS if f != "mxint8"]
ML_DTYPES = {
    "mxfp8_e4m3": ml_dtypes.float8_e4m3fn, "mxfp8_e5m2": ml_dtypes.float8_e5m2,
    "mxfp6_e3m2": ml_dtypes.float6_e3m2fn, "mxfp6_e2m3": ml_dtypes.float6_e2m3fn,
    "mxfp4": ml_dtypes.float4_e2m1fn,
}
RULES = list(mx.SCALE_RULES)


def wide_float32(rng: np.random.Generator, shape) -> np.ndarray:
    """Normal values times 2**U(-30, 30): blocks with a wide spread of exponents."""
    mant = rng.standard_normal(shape)
    return (mant * np.exp2(rng.integers(-30, 31, shape))).astype(np.float32)


def scaled_inputs(t: mx.MXTensor, x: np.ndarray) -> np.ndarray:
    """x / X per element (exact in float64), from the tensor's own scales."""
    per_elem = np.repeat(t.scales, t.block_size, axis=-1)[..., : x.shape[-1]]
    return x.astype(np.float64) / per_elem


# ----------------------------------------------------------- element codes
@pytest.mark.parametrize("name", FLOAT_FORMATS)
@pytest.mark.parametrize("rule", RULES)
def test_element_codes_match_ml_dtypes(name, rule):
    """Every unclipped element's code is ml_dtypes' cast of x / X; clipped ones are ±max."""
    x = wide_float32(np.random.default_rng(1), (64, 96))
    t = mx.quantize(x, name, scale_rule=rule)
    s = scaled_inputs(t, x)
    fmt = t.fmt.element
    clipped = np.abs(s) > fmt.max
    ref = s.astype(ML_DTYPES[name]).view(np.uint8)
    assert np.array_equal(t.codes[~clipped], ref[~clipped])
    max_code = lp.encode(fmt.max, fmt)
    expect_clip = np.where(s[clipped] < 0, max_code | fmt.sign_mask, max_code)
    assert np.array_equal(t.codes[clipped], expect_clip)
    if rule in ("ceil", "rceil"):
        assert not clipped.any(), f"{rule} must never clip"


@pytest.mark.parametrize("rule", RULES)
def test_mxint8_codes_match_numpy_integer_rounding(rule):
    """MXINT8 element q = round-half-even(64 * x / X) clamped to ±127, two's complement."""
    x = wide_float32(np.random.default_rng(2), (32, 64))
    t = mx.quantize(x, "mxint8", scale_rule=rule)
    q = np.clip(np.round(scaled_inputs(t, x) * 64), -127, 127).astype(np.int8)
    assert np.array_equal(t.codes.view(np.int8), q)


@pytest.mark.parametrize("name", FORMATS)
def test_every_element_code_round_trips(name):
    """A block holding every element value (max included, so X = 1 under floor)
    gives back exactly those codes."""
    mxf = mx.get_mx_format(name)
    table = mx._element_values(mxf)
    codes = np.arange(table.size, dtype=np.uint8)
    keep = np.isfinite(table) & (table != -2.0)  # MXINT8's -128 is never produced
    vals, codes = table[keep], codes[keep]
    t = mx.quantize(vals, name, block_size=vals.size)
    assert t.scales.tolist() == [1.0]
    assert np.array_equal(t.dequantize(), vals)
    # -0.0 and +0.0 both decode to 0; compare codes away from zero
    nz = vals != 0
    assert np.array_equal(t.codes[nz], codes[nz])


# -------------------------------------------------------------- scale rules
def _ref_scale_exponent(amax: float, mxf: mx.MXFormat, rule: str) -> int | None:
    """The scale exponent from exact rational arithmetic (None: NaN scale)."""
    a = Fraction(amax)
    emax, m = mxf.emax_elem, mxf.element.mantissa_bits
    if amax == 0:
        return -127

    def floor_log2(v: Fraction) -> int:
        k = v.numerator.bit_length() - v.denominator.bit_length()
        while Fraction(2) ** k > v:
            k -= 1
        while Fraction(2) ** (k + 1) <= v:
            k += 1
        return k

    if rule == "floor":
        k = floor_log2(a) - emax
    elif rule == "trn":  # AWS nki.isa.quantize_mx: twice the OCP (floor) scale
        k = floor_log2(a) - emax + 1
    elif rule == "ceil":
        e = floor_log2(a)
        k = (e if Fraction(2) ** e == a else e + 1) - emax
    elif rule == "even":
        e = floor_log2(a)
        ulp = Fraction(2) ** (e - m)
        r = (a / ulp + Fraction(1, 2)).__floor__() * ulp  # half away from zero (a > 0)
        k = floor_log2(r) - emax
    else:
        assert rule == "rceil", rule  # a new rule needs its reference here
        # rceil: float32 quotient amax * fl32(1/max), then the least 2**k >= it
        d = Fraction(float(np.float32(amax) * np.float32(1.0 / mxf.element_max)))
        if d == 0:  # the float32 quotient underflowed: smallest scale
            return -127
        e = floor_log2(d)
        k = e if Fraction(2) ** e == d else e + 1
        return None if k > 127 else max(k, -127)
    if k > 127:
        return None
    return max(k, -127)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("rule", RULES)
def test_scale_rules_against_fractions(name, rule):
    mxf = mx.get_mx_format(name)
    rng = np.random.default_rng(3)
    # powers of two, their float32 neighbours, the element-max boundaries, random
    pows = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    edges = np.concatenate([
        pows, np.nextafter(pows, np.float32(np.inf)), np.nextafter(pows, np.float32(0)),
        (np.float32(mxf.element_max) * pows[100:220]).astype(np.float32),
        np.nextafter((np.float32(mxf.element_max) * pows[100:220]).astype(np.float32),
                     np.float32(np.inf)),
        wide_float32(rng, 500).__abs__(), np.float32([0.0, np.finfo(np.float32).max]),
    ]).astype(np.float32)
    edges = edges[np.isfinite(edges)]
    with np.errstate(over="ignore"):
        t = mx.quantize(edges[:, None], name, block_size=1, scale_rule=rule)
    got = t.scale_codes[:, 0].astype(int)
    for a, code in zip(edges.tolist(), got.tolist()):
        k = _ref_scale_exponent(a, mxf, rule)
        want = 0xFF if k is None else k + 127
        assert code == want, f"{name} {rule}: amax={a!r} gave scale code {code}, want {want}"


# --------------------------------------------------- worked examples (sources)
def test_e2m1_amax_7_floor_vs_rceil():
    """OCP MX v1.0 section 6.3: X = 2**(floor(log2(7)) - emax_elem) = 2**(2 - 2) = 1 and
    7 / X = 7 exceeds E2M1's max 6, so it is clamped to 6. cuBLAS / TE RCEIL:
    7 / 6 rounded up to a power of two is 2; 7 / 2 = 3.5 is a tie between 3 and 4
    and rounds to even (4 = 0b0110), so 7 dequantizes to 8; the price of the larger
    scale: 0.5 / 2 = 0.25 is a tie between 0 and 0.5 and flushes to 0."""
    x = np.array([7.0, 1.0, 0.5, -3.0])
    floor = mx.quantize(x, "mxfp4", block_size=4, scale_rule="floor")
    assert floor.scale_codes.tolist() == [127]  # 2**0
    assert floor.codes.tolist() == [0b0111, 0b0010, 0b0001, 0b1101]  # 6, 1, 0.5, -3
    assert floor.dequantize().tolist() == [6.0, 1.0, 0.5, -3.0]
    rceil = mx.quantize(x, "mxfp4", block_size=4, scale_rule="rceil")
    assert rceil.scale_codes.tolist() == [128]  # 2**1
    assert rceil.codes[0] == 0b0110  # 3.5 -> 4
    assert rceil.dequantize().tolist() == [8.0, 1.0, 0.0, -3.0]


def test_mxfp8_e4m3_957_clips_to_896_under_floor():
    """OCP MX v1.0 section 6.3 with E4M3 (emax_elem = 8, max 448): floor(log2(957)) = 9,
    so X = 2**(9 - 8) = 2; 957 / 2 = 478.5 > 448 is clamped to 448 (code 0x7E) and
    dequantizes to 896. Under rceil, 957 / 448 = 2.14 rounds up to X = 4 and
    957 / 4 = 239.25 rounds to 240 (E4M3 spacing 16 in [128, 256)): 960."""
    x = np.zeros(32, dtype=np.float32)
    x[0], x[1] = 957.0, 1.0
    t = mx.quantize(x, "mxfp8_e4m3")
    assert t.scale_codes.tolist() == [128]
    assert t.codes[0] == 0x7E and float(t.dequantize()[0]) == 896.0
    assert float(t.dequantize()[1]) == 1.0
    r = mx.quantize(x, "mxfp8_e4m3", scale_rule="rceil")
    assert r.scale_codes.tolist() == [129] and float(r.dequantize()[0]) == 960.0


def test_mxint8_example():
    """MXINT8 (OCP MX v1.0 section 5, INT8 elements): 8-bit two's complement with an implicit 2**-6, emax 0.
    Block amax 1.5: X = 2**0; 1.5 -> 96, -0.25 -> -16 (0xF0), 1/128 is a tie -> 0."""
    t = mx.quantize(np.array([1.5, -0.25, 1 / 128, 0.0]), "mxint8", block_size=4)
    assert t.scale_codes.tolist() == [127]
    assert t.codes.tolist() == [96, 0xF0, 0, 0]
    # decoding -128 (0x80) gives -2, as the spec defines the code
    packed = np.array([127, 0x80, 0, 0, 0], dtype=np.uint8)
    u = mx.MXTensor.from_packed(packed, "mxint8", (4,), block_size=4)
    assert u.dequantize().tolist() == [-2.0, 0.0, 0.0, 0.0]


# ------------------------------------------------------------ special cases
def test_nan_and_inf_blocks_get_nan_scale_and_others_are_untouched():
    x = np.random.default_rng(4).standard_normal((3, 64)).astype(np.float32)
    clean = mx.quantize(x, "mxfp8_e4m3")
    x[0, 5], x[2, 40] = np.nan, -np.inf
    t = mx.quantize(x, "mxfp8_e4m3")
    assert t.scale_codes[0, 0] == 0xFF and t.scale_codes[2, 1] == 0xFF
    d = t.dequantize()
    assert np.isnan(d[0, :32]).all() and np.isnan(d[2, 32:]).all()
    same = np.ones(t.scale_codes.shape, bool)
    same[0, 0] = same[2, 1] = False
    assert np.array_equal(t.scale_codes[same], clean.scale_codes[same])
    assert np.array_equal(np.isnan(d), np.repeat(~same, 32, axis=1))


def test_zero_block_tiny_block_and_huge_float64_block():
    x = np.zeros((3, 32))
    x[1, 0] = 2.0**-140  # floor: -140 - 8 < -127, clamped to 2**-127
    x[2, 0] = 2.0**200  # beyond E8M0: NaN scale (microxcaling)
    t = mx.quantize(x, "mxfp8_e4m3")
    assert t.scale_codes[:, 0].tolist() == [0, 0, 0xFF]
    d = t.dequantize()
    assert (d[0] == 0).all() and d[1, 0] == 0.0  # 2**-140 / 2**-127 = 2**-13 flushes
    assert np.isnan(d[2]).all()


def test_padding_equals_explicit_zero_padding():
    x = wide_float32(np.random.default_rng(5), (4, 37))
    t = mx.quantize(x, "mxfp6_e2m3", block_size=16)
    padded = np.concatenate([x, np.zeros((4, 11), np.float32)], axis=1)
    p = mx.quantize(padded, "mxfp6_e2m3", block_size=16)
    assert t.scale_codes.shape == (4, 3)
    assert np.array_equal(t.scale_codes, p.scale_codes)
    assert np.array_equal(t.codes, p.codes[:, :37])
    assert np.array_equal(t.dequantize(), p.dequantize()[:, :37])


@pytest.mark.parametrize("axis", [0, 1, -3])
def test_axis_is_a_transpose(axis):
    x = wide_float32(np.random.default_rng(6), (40, 24, 3))
    t = mx.quantize(x, "mxfp4", axis=axis, block_size=8)
    m = mx.quantize(np.moveaxis(x, axis, -1), "mxfp4", block_size=8)
    assert np.array_equal(t.codes, np.moveaxis(m.codes, -1, axis))
    assert np.array_equal(t.scale_codes, np.moveaxis(m.scale_codes, -1, axis))
    assert np.array_equal(t.dequantize(), np.moveaxis(m.dequantize(), -1, axis))


def test_stochastic_rounding_picks_a_neighbour_and_is_seeded():
    x = wide_float32(np.random.default_rng(7), (16, 64))
    a = mx.quantize(x, "mxfp4", mode="stochastic", rng=np.random.default_rng(11))
    b = mx.quantize(x, "mxfp4", mode="stochastic", rng=np.random.default_rng(11))
    assert np.array_equal(a.codes, b.codes)
    toward = mx.quantize(x, "mxfp4", mode="rtz").dequantize()
    away = np.where(x >= 0, mx.quantize(x, "mxfp4", mode="rup").dequantize(),
                    mx.quantize(x, "mxfp4", mode="rdown").dequantize())
    d = a.dequantize()
    assert ((d == toward) | (d == away)).all()
    assert (d != toward).any() and (d != away).any()


def test_storage_sizes():
    x = np.ones((4, 64), np.float32)
    assert mx.quantize(x, "mxfp4").bits_per_value == 4.25
    assert mx.quantize(x, "mxfp6_e3m2").bits_per_value == 6.25
    assert mx.quantize(x, "mxfp8_e5m2").bits_per_value == 8.25
    assert mx.quantize(x, "mxint8").nbytes == 8 + 256


def test_bit_packing_layout():
    """Documented layout: FP4 low nibble first; FP6 four codes in three bytes."""
    assert pack_bits(np.array([0x1, 0x2, 0xF]), 4).tolist() == [0x21, 0x0F]
    six = np.array([0b000001, 0b000010, 0b000011, 0b111111])
    # stream: e0 bits 0-5, e1 bits 6-11, e2 bits 12-17, e3 bits 18-23
    word = 1 | (2 << 6) | (3 << 12) | (63 << 18)
    assert pack_bits(six, 6).tolist() == [word & 0xFF, (word >> 8) & 0xFF, word >> 16]
    codes = np.random.default_rng(8).integers(0, 64, 101).astype(np.uint8)
    for w in range(1, 9):
        c = codes & ((1 << w) - 1)
        assert np.array_equal(unpack_bits(pack_bits(c, w), w, c.size), c)


def test_bad_input_is_rejected_clearly():
    x = np.ones(32)
    with pytest.raises(ValueError, match="unknown MX format"):
        mx.quantize(x, "mxfp5")
    with pytest.raises(ValueError, match="scale_rule"):
        mx.quantize(x, "mxfp4", scale_rule="round")
    with pytest.raises(ValueError, match="block_size"):
        mx.quantize(x, "mxfp4", block_size=0)
    with pytest.raises(ValueError, match="axis"):
        mx.quantize(x, "mxfp4", axis=1)
    with pytest.raises(ValueError, match="rounding mode"):
        mx.quantize(x, "mxfp4", mode="nearest_odd")
    with pytest.raises(TypeError):
        mx.quantize(np.array(["a"]), "mxfp4")
    with pytest.raises(ValueError, match="bytes"):
        mx.MXTensor.from_packed(np.zeros(3, np.uint8), "mxfp4", (32,))


# --------------------------------------------------------------- properties
finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
arrays = hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 70)),
                    elements=finite_f32)


@settings(max_examples=60, deadline=None)
@given(x=arrays, name=st.sampled_from(FORMATS), rule=st.sampled_from(RULES),
       block=st.sampled_from([1, 4, 16, 32]))
def test_rne_error_is_at_most_half_an_element_ulp_times_the_scale(x, name, rule, block):
    t = mx.quantize(x, name, block_size=block, scale_rule=rule)
    s = scaled_inputs(t, x)
    fmt = t.fmt.element
    threshold = fmt.max + 2.0 ** (fmt.emax - fmt.mantissa_bits) / 2
    scale = np.repeat(t.scales, block, axis=-1)[..., : x.shape[-1]]
    ok = np.abs(s) < threshold  # not clipped (and not in a NaN-scale block)
    clipped = np.abs(s) >= threshold
    err = np.abs(t.dequantize() - x.astype(np.float64))
    mag = np.where(ok & (s != 0), np.abs(s), 1.0)
    ulp = np.exp2(np.maximum(np.floor(np.log2(mag)), fmt.emin) - fmt.mantissa_bits)
    assert (err[ok] <= ulp[ok] / 2 * scale[ok]).all()
    # clipped values land on the largest magnitude
    assert (np.abs(t.elements[clipped]) == fmt.max).all()


@settings(max_examples=60, deadline=None)
@given(x=arrays, name=st.sampled_from(FORMATS), rule=st.sampled_from(RULES),
       block=st.sampled_from([1, 3, 16, 32]), axis=st.sampled_from([0, -1]))
def test_pack_unpack_is_lossless(x, name, rule, block, axis):
    t = mx.quantize(x, name, axis=axis, block_size=block, scale_rule=rule)
    data = t.pack()
    assert data.dtype == np.uint8 and data.size == t.nbytes
    u = mx.MXTensor.from_packed(data.tobytes(), name, x.shape, axis=axis, block_size=block)
    assert np.array_equal(u.codes, t.codes) and np.array_equal(u.scale_codes, t.scale_codes)
    assert np.array_equal(u.dequantize(), t.dequantize(), equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float32, st.integers(1, 100), elements=finite_f32),
       name=st.sampled_from(FORMATS), rule=st.sampled_from(RULES),
       block=st.sampled_from([1, 5, 32]), seed=st.integers(0, 2**32 - 1))
def test_a_block_depends_only_on_itself(x, name, rule, block, seed):
    """Each block quantized alone gives the same scale and codes; changing the
    other blocks changes nothing in it."""
    t = mx.quantize(x, name, block_size=block, scale_rule=rule)
    other = x.copy()
    j = np.random.default_rng(seed).integers(0, t.n_blocks)
    lo, hi = j * block, min((j + 1) * block, x.size)
    mask = np.ones(x.size, bool)
    mask[lo:hi] = False
    other[mask] = wide_float32(np.random.default_rng(seed), int(mask.sum()))
    u = mx.quantize(other, name, block_size=block, scale_rule=rule)
    alone = mx.quantize(x[lo:hi], name, block_size=block, scale_rule=rule)
    assert t.scale_codes[j] == u.scale_codes[j] == alone.scale_codes[0]
    assert np.array_equal(t.codes[lo:hi], u.codes[lo:hi])
    assert np.array_equal(t.codes[lo:hi], alone.codes)


# ------------------------------------------------------- torchao cross-check
@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4"])
@pytest.mark.parametrize("rule", RULES)
def test_torchao_to_mx_agrees(name, rule):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    elem = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
            "mxfp4": torch.float4_e2m1fn_x2}[name]
    scaling_mode = getattr(ScaleCalculationMode, rule.upper(), None)
    if scaling_mode is None:
        pytest.skip(f"this torchao has no ScaleCalculationMode.{rule.upper()}")
    x = wide_float32(np.random.default_rng(9), (64, 128))
    scale, data = to_mx(torch.from_numpy(x), elem, 32, scaling_mode)
    t = mx.quantize(x, name, scale_rule=rule)
    assert np.array_equal(scale.view(torch.uint8).numpy().reshape(t.scale_codes.shape),
                          t.scale_codes)
    if name == "mxfp4":
        from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4

        values = f4_unpacked_to_f32(unpack_uint4(data.view(torch.uint8))).numpy()
        assert np.array_equal(values.reshape(x.shape), t.elements)
    else:
        assert np.array_equal(data.view(torch.uint8).numpy(), t.codes)


def test_e8m0_scale_codes_are_the_engines():
    """Scale codes decode through lowprec.decode('e8m0') to 2**(code - 127)."""
    codes = np.arange(255, dtype=np.uint8)
    assert np.array_equal(lp.decode(codes, "e8m0"), np.ldexp(1.0, codes.astype(int) - 127))
    assert math.isnan(lp.decode(np.uint8(255), "e8m0"))


@pytest.mark.parametrize("shape", [(0, 32), (3, 0), (5,), ()])
def test_empty_and_small_shapes(shape):
    x = np.ones(shape, np.float32)
    t = mx.quantize(x, "mxfp6_e3m2")
    out_shape = shape or (1,)  # a scalar becomes one value
    assert t.dequantize().shape == out_shape and (t.dequantize() == 1).all()
    u = mx.MXTensor.from_packed(t.pack(), "mxfp6_e3m2", out_shape)
    assert np.array_equal(u.codes, t.codes)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_float_input_is_worked_on_in_float32(dtype):
    """bf16/fp16 values are float32 exactly; results equal the float32 input's
    (the rceil quotient and per-tensor products are FP32, as on the GPU)."""
    from lowprec import nvfp4, scaling

    x = (wide_float32(np.random.default_rng(12), (8, 64)) * 2.0**-16).astype(dtype)
    x32 = x.astype(np.float32)
    for rule in RULES:
        a, b = mx.quantize(x, "mxfp4", scale_rule=rule), mx.quantize(x32, "mxfp4",
                                                                      scale_rule=rule)
        assert np.array_equal(a.scale_codes, b.scale_codes)
        assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(nvfp4.quantize(x).codes, nvfp4.quantize(x32).codes)
    p, q = scaling.quantize_per_tensor(x, "fp8_e4m3"), scaling.quantize_per_tensor(x32,
                                                                                   "fp8_e4m3")
    assert p.scale == q.scale and np.array_equal(p.codes, q.codes)


@pytest.mark.parametrize("mode", ["rne", "rna", "rtz"])
@pytest.mark.parametrize("name", FORMATS)
def test_float32_scaling_path_equals_exact_float64_path(mode, name):
    """Float32 input in rne/rna/rtz is scaled in float32; with blocks spanning up to
    2**200 (so quotients fall deep into float32 subnormals) it equals the float64 path."""
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((64, 64)) * np.exp2(rng.integers(-100, 100, (64, 64))))
    x = x.astype(np.float32)
    a = mx.quantize(x, name, mode=mode)
    b = mx.quantize(x.astype(np.float64), name, mode=mode)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scale_codes, b.scale_codes)
