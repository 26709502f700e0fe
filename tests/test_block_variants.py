"""The E2M1 block variants of NVFP4 and the UE5M3 scale format (issue #36 item 4).

* UE5M3 (``lowprec.get_format("ue5m3")``) against a decode written here from NVIDIA's
  definition (CUDA 13.4 ``__nv_fp8_ue5m3``: no sign, 5 exponent bits, 3 mantissa bits,
  no infinity, NaN only 0xFF; bias 15 as its landmarks 0x01 = 2^-17 and 0xFE = 114688
  say), over all 256 codes, and its rounding against exact rationals.
* ``lowprec.nvfp4.quantize`` with ``block_size=32`` (NVFP4 with blocks of 32), with
  ``global_scale=1`` (no tensor scale: "MXFP4 with UE4M3 scales" at block 32) and with
  ``scale_format="ue5m3"``: every block scale and every element code equal to the recipe
  computed here in exact rational arithmetic (each FP32 step rounded to nearest even by
  :func:`_round_grid`, each scale and element rounded to its format's grid the same way),
  on random and adversarial blocks; pack/unpack round trips; the compiled path equal to
  the numpy reference.
* The schemes (``nvfp4_b32``, ``mxfp4_ue4m3``, ``mxfp4_ue5m3``, ``nvfp4_ue5m3``) in the
  name table, ``compare_schemes``, ``inspect``'s recipes, the trainer's rounders,
  ``lowprec info`` and the explorer's data.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from lowprec import nvfp4

F32_MAX = Fraction(float(np.finfo(np.float32).max))
INF = math.inf


# ------------------------------------------------------------------ exact references
def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def _round_grid(v: Fraction, p: int, emin: int, vmax: Fraction | None,
                saturate: bool) -> Fraction | float:
    """``v >= 0`` rounded to nearest (ties to even) on the binary grid of precision ``p``,
    smallest normal exponent ``emin`` (subnormals below), largest value ``vmax``: past it
    ``vmax`` when saturating, else inf (float32's overflow: at or past max + ulp/2)."""
    assert v >= 0
    if v == 0:
        return Fraction(0)
    e = max(_floor_log2(v), emin)
    q = Fraction(2) ** (e - p + 1)
    r = round(v / q) * q  # Fraction.__round__: half to even
    if vmax is not None and r > vmax:
        return vmax if saturate else INF
    return r


def fl32(v: Fraction) -> Fraction | float:
    """The float32 nearest ``v`` (ties to even), inf past float32's range; signed."""
    r = _round_grid(abs(v), 24, -126, F32_MAX, False)
    return r if v >= 0 else -r


def decode_ue5m3(c: int) -> float:
    """UE5M3 from its fields, written from NVIDIA's definition (see the module docstring)."""
    if c == 0xFF:
        return math.nan
    e, m = c >> 3, c & 7
    if e == 0:
        return math.ldexp(m, 1 - 15 - 3)
    return math.ldexp(8 + m, e - 15 - 3)


def decode_e4m3(c: int) -> float:
    """OCP FP8 E4M3 (the NVFP4 block scale, UE4M3 when the sign bit is 0)."""
    if c & 0x7F == 0x7F:
        return math.nan
    s = -1.0 if c & 0x80 else 1.0
    e, m = (c >> 3) & 0xF, c & 7
    return s * (math.ldexp(m, -9) if e == 0 else math.ldexp(8 + m, e - 10))


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # OCP MX v1.0 Table 2, codes 0..7
SCALES = {  # name: (p, emin, max, value -> code, NaN code)
    "ue4m3": (4, -6, Fraction(448), {Fraction(decode_e4m3(c)): c for c in range(0x7F)}, 0x7F),
    "ue5m3": (4, -14, Fraction(114688),
              {Fraction(decode_ue5m3(c)): c for c in range(0xFF)}, 0xFF),
}


def reference(x: np.ndarray, block: int, scale_format: str, tensor_scale: bool):
    """NVFP4's recipe (lowprec.nvfp4 docstring) along the last axis of float32 ``x``, in
    exact rationals: (element codes, scale codes, s_tensor)."""
    p, emin, smax, code_of, nan_code = SCALES[scale_format]
    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[1]
    nb = -(-n // block)
    blocks = []
    for r in rows:
        vals = [float(v) for v in r] + [0.0] * (nb * block - n)
        blocks += [vals[k * block:(k + 1) * block] for k in range(nb)]
    bad = [any(not math.isfinite(v) for v in b) for b in blocks]
    bamax = [max((abs(Fraction(v)) for v in b if math.isfinite(v)), default=Fraction(0))
             for b in blocks]
    if tensor_scale:
        amax = max(bamax, default=Fraction(0))
        s_enc = Fraction(1) if amax == 0 else fl32(Fraction(448 * 6) / amax)
        s_enc = F32_MAX if s_enc == INF else s_enc
        s_dec = fl32(1 / s_enc)
    else:
        s_enc = s_dec = Fraction(1)
    factor = fl32(s_enc * fl32(Fraction(1, 6)))
    codes, scodes = [], []
    for b, a, is_bad in zip(blocks, bamax, bad):
        sb = fl32(a * factor)
        sb = F32_MAX if sb == INF else sb
        sval = _round_grid(sb, p, emin, smax, True)
        sc = code_of[sval]
        denom = fl32(sval * s_dec)
        rcp = F32_MAX if denom == 0 else fl32(1 / denom)
        rcp = F32_MAX if rcp == INF else rcp
        for v in b:
            if is_bad:
                codes.append(0)
                continue
            e = fl32(Fraction(v) * rcp)
            mag = _round_grid(abs(Fraction(6) if e in (INF, -INF) else e), 2, 0,
                              Fraction(6), True)
            neg = math.copysign(1.0, v) < 0
            codes.append(E2M1.index(float(mag)) | (8 if neg else 0))
        scodes.append(nan_code if is_bad else sc)
    shape = x.shape[:-1]
    ecodes = np.array(codes, np.uint8).reshape(shape + (nb * block,))[..., :n]
    return ecodes, np.array(scodes, np.uint8).reshape(shape + (nb,)), float(s_dec)


VARIANTS = [  # (block, scale format, tensor scale): the schemes' variants and more
    (32, "ue4m3", True),    # nvfp4_b32
    (32, "ue4m3", False),   # mxfp4_ue4m3
    (32, "ue5m3", False),   # mxfp4_ue5m3
    (16, "ue5m3", False),   # nvfp4_ue5m3
    (16, "ue4m3", False),
]


def _quantize(x, block, sf, ts, **kw):
    return nvfp4.quantize(x, block_size=block, scale_format=sf,
                          global_scale=None if ts else 1.0, **kw)


def _check_exact(x: np.ndarray, block: int, sf: str, ts: bool) -> None:
    t = _quantize(x, block, sf, ts)
    codes, scodes, s_dec = reference(x, block, sf, ts)
    assert np.array_equal(t.scale_codes, scodes), (t.scale_codes, scodes)
    assert np.array_equal(t.codes, codes)
    assert float(t.global_scale) == s_dec
    assert t.scale_format == sf and t.block_size == block


# ------------------------------------------------------------------ UE5M3 the format
def test_ue5m3_every_code_decodes_as_written_here() -> None:
    f = lp.get_format("ue5m3")
    assert (f.width, f.signed, f.has_inf, f.bias) == (8, False, False, 15)
    got = lp.decode(np.arange(256, dtype=np.uint8), f)
    want = np.array([decode_ue5m3(c) for c in range(256)])
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(got).sum() == 1 and np.isnan(got[0xFF])
    assert f.max == 114688.0 and f.smallest_subnormal == 2.0**-17


def test_ue5m3_encode_round_trips_and_rounds_to_nearest_even() -> None:
    f = lp.get_format("ue5m3")
    vals = np.array([decode_ue5m3(c) for c in range(0xFF)])
    assert np.array_equal(lp.encode(vals, f), np.arange(0xFF, dtype=np.uint8))
    # midpoints between neighbours, and a quarter either side of them
    lo, hi = vals[:-1], vals[1:]
    probes = np.concatenate([(lo + hi) / 2, lo + (hi - lo) / 4, hi - (hi - lo) / 4,
                             [114688.0 * 1.03, 114688.0 * 1.1, 2.0**-19, 2.0**-18]])
    for mode_sat in (False, True):
        got = lp.encode(probes, f, "rne", saturate=mode_sat)
        for v, c in zip(probes, got):
            r = _round_grid(Fraction(float(v)), 4, -14, Fraction(114688), True)
            over = Fraction(float(v)) >= Fraction(114688) + Fraction(2**12)  # max + ulp/2
            want = 0xFF if (over and not mode_sat) else SCALES["ue5m3"][3][r]
            assert c == want, (v, c, want)


def test_ue5m3_in_lowprec_info(capsys) -> None:
    from lowprec.cli import main

    assert main(["info", "ue5m3"]) == 0
    out = capsys.readouterr().out
    assert "114688" in out and "no sign bit" in out and "bias    15" in out


# ------------------------------------------------------------------ exact quantization
@pytest.mark.parametrize("block,sf,ts", VARIANTS)
def test_random_tensors_equal_the_exact_recipe(block: int, sf: str, ts: bool) -> None:
    rng = np.random.default_rng(block + len(sf) + ts)
    # rows whose magnitudes span many binades (subnormal and saturated scales included)
    x = (rng.standard_normal((12, 96)) * 2.0 ** rng.integers(-30, 30, (12, 1))).astype(np.float32)
    _check_exact(x, block, sf, ts)
    _check_exact(x[:, :77], block, sf, ts)  # a ragged last block


ADVERSARIAL = {
    "zeros": [0.0] * 32,
    "negative zeros": [-0.0] * 32,
    "all equal": [3.25] * 32,
    "all equal tiny": [1e-7] * 32,
    "inf": [1.0, math.inf] + [2.0] * 30,
    "nan": [math.nan] + [0.5] * 31,
    "-inf and nan": [-math.inf, math.nan] + [0.0] * 30,
    "scale saturates": [1e6, -1e6] + [1.0] * 30,
    "float32 max": [3.4e38, 1.0] + [0.0] * 30,
    "subnormal e4m3 scale": [0.01, -0.004, 0.0025] + [0.001] * 29,
    "scale rounds to zero": [1e-4, 3e-5] + [0.0] * 30,
    "ue5m3 subnormal scale": [3e-5, 1e-6] + [5e-6] * 30,
    "element ties": [6.0, 5.0, 2.5, 1.25, 0.75, 0.25] * 5 + [-5.0, -0.25],
    "float32 subnormals": [1e-40, -3e-42] + [0.0] * 30,
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
@pytest.mark.parametrize("block,sf,ts", VARIANTS)
def test_adversarial_blocks_equal_the_exact_recipe(name, block, sf, ts) -> None:
    v = np.array(ADVERSARIAL[name], dtype=np.float32)
    # alone, and next to an ordinary block (the tensor scale then comes from that)
    _check_exact(v.reshape(1, -1), block, sf, ts)
    _check_exact(np.stack([v, np.linspace(-2, 2, 32, dtype=np.float32)]), block, sf, ts)


def test_the_scale_rule_on_cited_cases() -> None:
    """Worked cases of the rule ``s_block = fmt(amax / 6)`` with no tensor scale."""
    one = np.array([6.0] + [1.0] * 31, np.float32)
    assert _quantize(one, 32, "ue4m3", False).scales.tolist() == [1.0]      # 6/6
    big = np.array([6.0 * 1000] + [0.0] * 31, np.float32)
    t = _quantize(big, 32, "ue4m3", False)                                   # 1000 > 448
    assert t.scales.tolist() == [448.0] and t.dequantize()[0] == 6 * 448.0   # saturated
    assert _quantize(big, 32, "ue5m3", False).scales.tolist() == [1024.0]   # 1000 -> 1024
    tiny = np.array([6.0 * 2.0**-12] + [0.0] * 31, np.float32)
    assert _quantize(tiny, 32, "ue4m3", False).scales.tolist() == [0.0]     # below 2^-10
    assert _quantize(tiny, 32, "ue5m3", False).scales.tolist() == [2.0**-12]
    t = _quantize(np.array([np.nan] + [1.0] * 31, np.float32), 32, "ue5m3", False)
    assert t.scale_codes.tolist() == [0xFF] and np.isnan(t.dequantize()).all()


@pytest.mark.parametrize("block,sf,ts", VARIANTS)
def test_pack_unpack_round_trip(block: int, sf: str, ts: bool) -> None:
    x = np.random.default_rng(7).standard_normal((5, 70)).astype(np.float32)
    t = _quantize(x, block, sf, ts, axis=0)
    back = nvfp4.NVFP4Tensor.from_packed(t.pack(), x.shape, axis=0, block_size=block,
                                         scale_format=sf)
    assert np.array_equal(back.codes, t.codes) and np.array_equal(back.scale_codes,
                                                                  t.scale_codes)
    assert np.array_equal(back.dequantize(), t.dequantize())
    assert t.nbytes == 4 + t.n_blocks + -(-t.n_blocks * block * 4 // 8)


@pytest.mark.parametrize("mode", ["rne", "rtz", "rup", "rdown", "rna", "odd"])
@pytest.mark.parametrize("block,sf,ts", VARIANTS)
def test_compiled_path_equals_the_numpy_reference(block, sf, ts, mode) -> None:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((9, 64)) * 2.0 ** rng.integers(-25, 25, (9, 1))).astype(np.float32)
    x[2, 5], x[4, 40] = np.inf, np.nan
    gs = None if ts else 1.0
    fast = nvfp4._quantize_fast(x, 1, block, mode, gs, None, sf)
    ref = nvfp4._quantize_reference(x, 1, block, mode, gs, scale_format=sf)
    assert fast is not None
    assert np.array_equal(fast.codes, ref.codes)
    assert np.array_equal(fast.scale_codes, ref.scale_codes)
    assert fast.global_scale == ref.global_scale


def test_stochastic_rounding_lands_on_a_neighbour() -> None:
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    up = _quantize(x, 32, "ue5m3", False, mode="rup").dequantize()
    dn = _quantize(x, 32, "ue5m3", False, mode="rdown").dequantize()
    sr = _quantize(x, 32, "ue5m3", False, mode="stochastic",
                   rng=np.random.default_rng(2)).dequantize()
    assert np.all((sr == up) | (sr == dn)) and np.any(sr != up) and np.any(sr != dn)


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="scale_format must be one of ue4m3, ue5m3"):
        nvfp4.quantize(np.ones(4), scale_format="e8m0")
    with pytest.raises(ValueError, match="scale_format"):
        nvfp4.NVFP4Tensor.from_packed(np.zeros(6, np.uint8), (4,), scale_format="ue6m2")
    q = nvfp4.quantize(np.ones((2, 32)), axis=1, scale_format="ue5m3")
    with pytest.raises(ValueError, match="UE5M3"):
        q._block_mma_operand()
    a = nvfp4.quantize(np.ones((2, 64)), axis=1, block_size=32)
    b = nvfp4.quantize(np.ones((64, 2)), axis=0, block_size=32)
    with pytest.raises(ValueError, match="UE4M3 block 16"):  # no MMA takes UE4M3 at 32
        lp.matmul(a, b, model="b200")


def test_ue5m3_default_is_no_tensor_scale_and_a_given_one_is_used() -> None:
    x = np.linspace(-100, 100, 64, dtype=np.float32)
    assert float(nvfp4.quantize(x, scale_format="ue5m3").global_scale) == 1.0
    t = nvfp4.quantize(x, scale_format="ue5m3", global_scale=0.5)
    assert float(t.global_scale) == 0.5
    # the given tensor scale: S_enc = 1 / 0.5 = 2, scales = fmt(amax * 2/6)
    blocks = np.abs(x.reshape(4, 16)).max(axis=1)
    want = lp.encode((blocks.astype(np.float32) * np.float32(np.float32(2) * np.float32(1 / 6))),
                     "ue5m3", "rne", saturate=True)
    assert np.array_equal(t.scale_codes, want)


# ------------------------------------------------------------------ the rest of lowprec
NAMES = {"nvfp4_b32": (32, "ue4m3", True), "mxfp4_ue4m3": (32, "ue4m3", False),
         "mxfp4_ue5m3": (32, "ue5m3", False), "nvfp4_ue5m3": (16, "ue5m3", False)}


@pytest.mark.parametrize("name", list(NAMES))
def test_schemes_run_the_variant_everywhere(name: str) -> None:
    from lowprec.inspect.recipes import apply
    from lowprec.quant_error import compare_schemes
    from lowprec.schemes import get_scheme
    from lowprec.train import Quant
    from lowprec.train.memory import tensor_bytes
    from lowprec.train.quant import make_rounder

    block, sf, ts = NAMES[name]
    s = get_scheme(name)
    assert (s.block_size, s.bits, s.element.name) == (block, 4 + 8 / block, "fp4_e2m1")
    x = (np.random.default_rng(5).standard_normal((4, 64)) * 10).astype(np.float32)
    want = _quantize(x, block, sf, ts).dequantize()
    # the trainer's rounder (Quant from the scheme), as float32 of the exact values
    q = Quant.from_scheme(name)
    assert q.scheme == name and str(q) == name
    got = make_rounder(q, np.random.default_rng(0))(x)
    assert np.array_equal(got, want.astype(np.float32))
    # compare_schemes: the same values, error statistics from them
    row = compare_schemes(x, [name])[0]
    err = want - x
    sqnr = 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(err ** 2))
    assert row.scheme == name and row.sqnr_db == pytest.approx(sqnr, rel=1e-12)
    # inspect's recipe: the same codes and scales
    out = apply(get_scheme(name), x)
    assert np.array_equal(out.codes, _quantize(x, block, sf, ts).codes)
    assert out.block_size == block
    # stochastic variant exists
    assert get_scheme(name + "_sr").mode == "stochastic"
    # storage: E2M1 nibbles, one scale byte per block, FP32 tensor scale or none
    assert tensor_bytes((64, 10), q, axis=0) == (4 if ts else 0) + 10 * 64 // block + 320


def test_variants_are_listed_by_info_and_offered_by_the_explorer(capsys) -> None:
    from lowprec.cli import main
    from lowprec.explorer import explorer_data

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "Block formats" in out
    for name in ["mxfp4", "nvfp4", *NAMES]:
        assert f"\n{name} " in out or f"\n  {name} " in out, name
    entries = {e["name"]: e for e in explorer_data()["mx"]}
    for name, (block, sf, ts) in NAMES.items():
        e = entries[name]
        assert (e["block"], e["scale"], e["tensor_scale"]) == (
            block, {"ue4m3": "fp8_e4m3", "ue5m3": "ue5m3"}[sf], ts)


# ------------------------------------------------------------------ Trainium's MX scale
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2"])
def test_trn_scale_is_twice_the_ocp_scale_and_nothing_clips(fmt: str) -> None:
    """AWS nki.isa.quantize_mx: "a block scale that is two times larger" than the OCP
    sample conversion (the floor rule), so no element of a block saturates."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((64, 128)) * 2.0 ** rng.integers(-40, 40, (64, 1))).astype(
        np.float32)
    ocp = lp.mx.quantize(x, fmt, scale_rule="floor")
    trn = lp.mx.quantize(x, fmt, scale_rule="trn")
    assert np.array_equal(trn.scales, 2 * ocp.scales)
    assert not np.any(np.abs(x) >= trn.clip_threshold())
    # amax < 2**(e+1) and the scale is 2**(e + 1 - emax_elem): every scaled value is
    # below 2**emax_elem, so no element goes past it (the top binade stays unused)
    emax = lp.mx.get_mx_format(fmt).emax_elem
    assert np.nanmax(np.abs(trn.elements)) <= 2.0**emax < lp.mx.get_mx_format(fmt).element_max
    assert np.any(np.abs(x) >= ocp.clip_threshold())  # the OCP rule does clip some
    assert "mxfp8_e4m3_trn" in lp.schemes.SCHEMES and "mxfp4_trn" not in lp.schemes.SCHEMES
