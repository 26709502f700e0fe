"""The checking functions accept right answers and explain wrong ones.

Right answers here come from independent sources (ml_dtypes' finfo, numpy's
float16, formulas written out with Fraction), never from the function under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from lowprec import exercises as ex
from lowprec.exercises import ExerciseError

FINFO = {
    "fp16": np.finfo(np.float16),
    "bf16": ml_dtypes.finfo(ml_dtypes.bfloat16),
    "fp8_e4m3": ml_dtypes.finfo(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": ml_dtypes.finfo(ml_dtypes.float8_e5m2),
    "fp8_e4m3fnuz": ml_dtypes.finfo(ml_dtypes.float8_e4m3fnuz),
    "fp6_e3m2": ml_dtypes.finfo(ml_dtypes.float6_e3m2fn),
    "fp4_e2m1": ml_dtypes.finfo(ml_dtypes.float4_e2m1fn),
}
DTYPES = {
    "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
    "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "fp4_e2m1": ml_dtypes.float4_e2m1fn,
}


def wrong(func, *args, **kwargs) -> str:
    with pytest.raises(ExerciseError) as info:
        func(*args, **kwargs)
    assert isinstance(info.value, AssertionError)
    return str(info.value)


def right(capsys, func, *args, **kwargs) -> str:
    assert func(*args, **kwargs) is None
    out = capsys.readouterr().out
    assert out.startswith("Correct: ")
    return out


# ------------------------------------------------------------------ max
@pytest.mark.parametrize("name", list(FINFO))
def test_max_right_for_every_format(capsys, name):
    right(capsys, ex.check_max, name, float(FINFO[name].max))
    assert "max" in wrong(ex.check_max, name, float(FINFO[name].max) * 0.5)


def test_fp16_max_feedback(capsys):
    msg = right(capsys, ex.check_fp16_max, 65504)
    assert "reserved for inf/NaN" in msg and "1.1111111111b" in msg
    msg = wrong(ex.check_fp16_max, 65535)
    assert msg.startswith("your fp16 max is 65535, but the largest finite fp16 is 65504 because")
    assert "unsigned integer" in msg and "all-ones exponent field (31) is reserved" in msg
    assert "one binade too high" in wrong(ex.check_fp16_max, (2 - 2**-10) * 2.0**16)
    assert "not finite" in wrong(ex.check_fp16_max, math.inf)
    assert "midpoint" in wrong(ex.check_fp16_max, 65520)
    assert "smallest* number of the top binade" in wrong(ex.check_fp16_max, 32768)
    assert "first power of two beyond" in wrong(ex.check_fp16_max, 65536)
    # Integers, numpy scalars, 0-d arrays and Fractions are all numbers.
    for answer in (np.float16(65504), np.array(65504.0), Fraction(65504), np.int64(65504)):
        right(capsys, ex.check_fp16_max, answer)


def test_e4m3_max_feedback():
    msg = wrong(ex.check_max, "fp8_e4m3", 480)
    assert "NaN" in msg and "448" in msg and "1.110b" in msg
    assert "no inf and no NaN" in wrong(ex.check_max, "fp4_e2m1", 7)


@pytest.mark.parametrize("answer, message", [
    (..., "no answer yet"), (None, "no answer yet"), ("65504", "expected a single number"),
    ([65504], "expected a single number"), (True, "boolean"),
])
def test_non_answers(answer, message):
    assert message in wrong(ex.check_fp16_max, answer)


# ------------------------------------------------------------ small values
@pytest.mark.parametrize("name", list(FINFO))
def test_smallest_values(capsys, name):
    fi = FINFO[name]
    right(capsys, ex.check_smallest_subnormal, name, float(fi.smallest_subnormal))
    right(capsys, ex.check_smallest_normal, name, float(fi.smallest_normal))
    if fi.smallest_subnormal != fi.smallest_normal:
        assert "*normal*" in wrong(ex.check_smallest_subnormal, name, float(fi.smallest_normal))
        assert "*subnormal*" in wrong(ex.check_smallest_normal, name,
                                      float(fi.smallest_subnormal))


def test_smallest_subnormal_one_binade_low():
    assert "one binade too low" in wrong(ex.check_smallest_subnormal, "fp16", 2.0**-25)
    assert "exponent field 0" in wrong(ex.check_smallest_normal, "fp16", 2.0**-15)


# --------------------------------------------------------------- decode
@pytest.mark.parametrize("name", list(DTYPES))
def test_decode_every_code(capsys, name):
    width = 4 if name == "fp4_e2m1" else 8
    codes = np.arange(1 << width, dtype=np.uint8)
    values = codes.view(DTYPES[name]).astype(np.float64)
    for code, value in zip(codes, values):
        right(capsys, ex.check_decode, int(code), name, float(value))
        if math.isfinite(value) and value != 0:
            wrong(ex.check_decode, int(code), name, float(value) * 3)


def test_decode_hints():
    # 0b0_1010_101 in E4M3 is (1 + 5/8) * 2^3 = 13.
    assert "(1 + 5/8) * 2^(10-7) = 13.0" in wrong(ex.check_decode, 0b01010101, "fp8_e4m3", 12)
    assert "implicit leading 1" in wrong(ex.check_decode, 0b01010101, "fp8_e4m3", 5 / 8 * 8)
    assert "bias" in wrong(ex.check_decode, 0b01010101, "fp8_e4m3", 1.625 * 2**10)
    assert "sign" in wrong(ex.check_decode, 0b11010101, "fp8_e4m3", 13.0)
    assert "no implicit leading 1" in wrong(ex.check_decode, 0b00000011, "fp8_e4m3",
                                            1.375 * 2**-6)
    assert "emin" in wrong(ex.check_decode, 0b00000011, "fp8_e4m3", 3 / 8 * 2**-7)
    with pytest.raises(ValueError, match="not a 8-bit"):
        ex.check_decode(256, "fp8_e4m3", 0.0)


def test_decode_signed_zero(capsys):
    right(capsys, ex.check_decode, 0x80, "fp8_e5m2", -0.0)
    assert "sign" in wrong(ex.check_decode, 0x80, "fp8_e5m2", 0.0)


# ----------------------------------------------------------- counting
@pytest.mark.parametrize("name", list(DTYPES) + ["fp16", "bf16"])
def test_num_finite(capsys, name):
    dt = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}.get(name, DTYPES.get(name))
    width = {"fp4_e2m1": 4, "fp16": 16, "bf16": 16}.get(name, 8)
    codes = np.arange(1 << width, dtype=np.uint16 if width == 16 else np.uint8)
    with np.errstate(invalid="ignore"):  # NaN codes
        values = codes.view(dt).astype(np.float64)
    count = np.unique(values[np.isfinite(values)]).size  # +0 and -0 are one value
    right(capsys, ex.check_num_finite, name, count)
    wrong(ex.check_num_finite, name, count - 1)


def test_num_finite_hints():
    assert "every code" in wrong(ex.check_num_finite, "fp8_e4m3", 256)
    assert "+0 and -0" in wrong(ex.check_num_finite, "fp8_e4m3", 254)


# ------------------------------------------------------------- spacing
@pytest.mark.parametrize("x", [2.0**-24, 2.0**-14, 0.1 * 0 + 0.5, 1.0, 3.0, 1024.0, 60000.0])
def test_spacing_fp16_against_nextafter(capsys, x):
    h = np.float16(x)
    assert float(h) == x or x == 0.5
    gap = float(np.nextafter(h, np.float16(np.inf))) - float(h)
    right(capsys, ex.check_spacing, "fp16", float(h), gap)
    wrong(ex.check_spacing, "fp16", float(h), gap * 3)


def test_spacing_hints_and_bad_x():
    assert "eps" in wrong(ex.check_spacing, "fp16", 1024.0, 2.0**-10)
    assert "half the spacing" in wrong(ex.check_spacing, "bf16", 256.0, 1.0)
    for bad in (0.1, -1.0, 0.0, 65504.0, math.inf):
        with pytest.raises(ValueError):
            ex.check_spacing("fp16", bad, 1.0)


# ------------------------------------------------------------ rounding
# Worked by hand: E4M3 between 1 and 2 has spacing 1/8. 1.0625 is the tie between
# 1.0 (mantissa 000, even) and 1.125 (001); 1.1875 the tie between 1.125 and 1.25 (010).
ROUNDING_CASES = [
    (1.0625, {"rne": 1.0, "rna": 1.125, "rtz": 1.0, "rup": 1.125, "rdown": 1.0, "odd": 1.125}),
    (1.1875, {"rne": 1.25, "rna": 1.25, "rtz": 1.125, "rup": 1.25, "rdown": 1.125,
              "odd": 1.125}),
    (-1.0625, {"rne": -1.0, "rna": -1.125, "rtz": -1.0, "rup": -1.0, "rdown": -1.125,
               "odd": -1.125}),
    (1.07, {"rne": 1.125, "rna": 1.125, "rtz": 1.0, "rup": 1.125, "rdown": 1.0, "odd": 1.125}),
    (1.5, {m: 1.5 for m in ("rne", "rna", "rtz", "rup", "rdown", "odd")}),
]


@pytest.mark.parametrize("x, answers", ROUNDING_CASES)
def test_rounding_by_hand(capsys, x, answers):
    for mode, answer in answers.items():
        right(capsys, ex.check_rounding, x, "fp8_e4m3", mode, answer)
    # rne agrees with ml_dtypes (float64 1.0625 etc. are float32 values, no double rounding)
    assert answers["rne"] == float(np.float64(x).astype(ml_dtypes.float8_e4m3fn))


def test_rounding_hints():
    msg = wrong(ex.check_rounding, 1.0625, "fp8_e4m3", "rne", 1.125)
    assert "tie" in msg and "'rna', 'rup' and 'odd' give" in msg
    msg = wrong(ex.check_rounding, 1.07, "fp8_e4m3", "rtz", 1.125)
    assert "'rne'" in msg and "nearer the upper" in msg
    assert "one of the two neighbours" in wrong(ex.check_rounding, 1.07, "fp8_e4m3", "rne", 1.1)
    with pytest.raises(ValueError, match="deterministic"):
        ex.check_rounding(1.07, "fp8_e4m3", "stochastic", 1.0)
    with pytest.raises(ValueError, match="unknown rounding mode"):
        ex.check_rounding(1.07, "fp8_e4m3", "nearest-ish", 1.0)


def test_stochastic_probability(capsys):
    # 1.03125 = 1 + 1/32 lies a quarter of the way from 1.0 to 1.125 in E4M3.
    right(capsys, ex.check_stochastic_probability, 1.03125, "fp8_e4m3", 0.25)
    right(capsys, ex.check_stochastic_probability, 1.03125, "fp8_e4m3", Fraction(1, 4))
    assert "*down*" in wrong(ex.check_stochastic_probability, 1.03125, "fp8_e4m3", 0.75)
    assert "between 0 and 1" in wrong(ex.check_stochastic_probability, 1.03125, "fp8_e4m3", 25)
    with pytest.raises(ValueError, match="unchanged"):
        ex.check_stochastic_probability(1.0, "fp8_e4m3", 0.5)


def test_double_rounding(capsys):
    # 1 + 2^-8 + 2^-40: just above the bf16 midpoint 1 + 2^-8. Directly it rounds up to
    # 1 + 2^-7; float32 drops the 2^-40 and leaves the exact tie, which rne sends to 1.0.
    x = 1 + 2.0**-8 + 2.0**-40
    assert float(np.float32(x).astype(ml_dtypes.bfloat16)) == 1.0
    right(capsys, ex.check_double_rounding, x)
    assert "already a fp32 value" in wrong(ex.check_double_rounding, 1 + 2.0**-8)
    assert "midpoint" in wrong(ex.check_double_rounding, 1.3)
    assert "no rounding happens" in wrong(ex.check_double_rounding, 1.5)
    assert "not finite" in wrong(ex.check_double_rounding, math.inf)


def test_largest_lost_increment(capsys):
    # fp16 spacing at 1024 is 1, so 1024 + 0.5 is a tie that rne rounds to the even 1024.
    assert float(np.float16(1024 + 0.5)) == 1024.0
    assert float(np.float16(1024 + 0.5 + 2.0**-20)) == 1025.0
    right(capsys, ex.check_largest_lost_increment, 1024.0, "fp16", 0.5)
    assert "itself representable" in wrong(ex.check_largest_lost_increment, 1024.0, "fp16", 1)
    assert "Larger changes are lost too" in wrong(
        ex.check_largest_lost_increment, 1024.0, "fp16", 0.25)
    assert "so it rounds to 1025.0" in wrong(ex.check_largest_lost_increment, 1024.0, "fp16", 0.75)
    # Going down from a power of two enters the binade below, where the gap is half as large:
    # fp16 below 256 is spaced 0.125 (numpy: 256 - 0.0625 is the tie that stays at 256).
    assert float(np.float16(256 - 0.0625)) == 256.0
    assert float(np.float16(256 - 0.0625 - 2.0**-20)) == 255.875
    right(capsys, ex.check_largest_lost_increment, 256.0, "fp16", 0.0625, direction="down")
    assert "gap *above*" in wrong(ex.check_largest_lost_increment, 256.0, "fp16", 0.125 * 2,
                                  direction="down")
    assert "itself representable" in wrong(ex.check_largest_lost_increment, 256.0, "fp16",
                                           0.125, direction="down")
    with pytest.raises(ValueError, match="direction"):
        ex.check_largest_lost_increment(256.0, "fp16", 0.1, direction="sideways")


def test_steps_until_visible(capsys):
    # Worked by hand: below 256 the fp16 gap is 0.125; the fp16 copy moves once the fp32
    # master is more than 0.0625 below 256: 7 steps of 0.009 (0.063), not 6 (0.054).
    master = np.float32(256.0)
    steps = 0
    while np.float16(master) == np.float16(256.0):
        master = np.float32(master + np.float32(-0.009))
        steps += 1
    assert steps == 7
    right(capsys, ex.check_steps_until_visible, 256.0, -0.009, "fp16", 7)
    assert "One step early" in wrong(ex.check_steps_until_visible, 256.0, -0.009, "fp16", 6)
    assert "whole gap" in wrong(ex.check_steps_until_visible, 256.0, -0.009, "fp16", 14)
    with pytest.raises(ValueError):
        ex.check_steps_until_visible(256.1, -0.009, "fp16", 7)


def test_largest_flushed(capsys):
    # fp16: 2^-25 is the tie between 0 and 2^-24 (numpy rounds it to 0), just above goes up.
    assert float(np.float16(2.0**-25)) == 0.0
    assert float(np.float16(2.0**-25 * (1 + 2.0**-20))) == 2.0**-24
    right(capsys, ex.check_largest_flushed, "fp16", 2.0**-25)
    right(capsys, ex.check_largest_flushed, "bf16",
          float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal) / 2)
    assert "itself representable" in wrong(ex.check_largest_flushed, "fp16", 2.0**-24)
    assert "smallest normal" in wrong(ex.check_largest_flushed, "fp16", 2.0**-14)
    assert "rounds up" in wrong(ex.check_largest_flushed, "fp16", 1.5 * 2.0**-25)


def test_underflow_fraction(capsys):
    rng = np.random.default_rng(0)
    g = rng.standard_normal(5000) * 2.0**-25
    g[:100] = 0.0
    nz = g[g != 0]
    truth = float(np.mean(nz.astype(np.float16) == 0))  # numpy float16 as the reference
    right(capsys, ex.check_underflow_fraction, g, "fp16", truth)
    assert "round *up*" in wrong(ex.check_underflow_fraction, g, "fp16",
                                 float(np.mean(np.abs(nz) < 2.0**-24)))
    assert "not a percentage" in wrong(ex.check_underflow_fraction, g, "fp16", 100 * truth)
    scaled = float(np.mean((nz * 2.0**10).astype(np.float16) == 0))
    right(capsys, ex.check_underflow_fraction, g, "fp16", scaled, loss_scale=2.0**10)
    with pytest.raises(ValueError, match="odd last mantissa bit"):
        ex.check_largest_lost_increment(1025.0, "fp16", 0.5)


# ------------------------------------------------- tutorials 04 to 10
def test_smallest_loss_scale(capsys):
    rng = np.random.default_rng(1)
    g = rng.standard_normal(4000) * 2.0**-28
    # Reference with numpy's float16: the smallest 2^k with <= 1% zeros and no inf.
    nz = g[g != 0]
    k = next(k for k in range(60)
             if np.mean((nz * 2.0**k).astype(np.float16) == 0) <= 0.01
             and np.all(np.isfinite((nz * 2.0**k).astype(np.float16))))
    right(capsys, ex.check_smallest_loss_scale, g, "fp16", 2.0**k)
    assert "not the smallest" in wrong(ex.check_smallest_loss_scale, g, "fp16", 2.0 ** (k + 3))
    assert "still round to zero" in wrong(ex.check_smallest_loss_scale, g, "fp16", 2.0 ** (k - 1))
    with np.errstate(over="ignore"):
        assert "overflow" in wrong(ex.check_smallest_loss_scale, g, "fp16", 2.0**60)


def test_grad_scaler_scale(capsys):
    # PyTorch's rule written out: halve and reset on inf, double after `interval` good steps.
    events = [False, False, True, False, False, False, False, False, False, True, False]
    scale, good, interval = 2.0**16, 0, 3
    for bad in events:
        if bad:
            scale, good = scale / 2, 0
        else:
            good += 1
            if good == interval:
                scale, good = scale * 2, 0
    right(capsys, ex.check_grad_scaler_scale, events, scale, growth_interval=interval)
    assert "restarts the count" in wrong(ex.check_grad_scaler_scale, events, 2.0**16 * 2**3,
                                         growth_interval=interval)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"])
def test_unit_roundoff(capsys, name):
    fi = {"fp16": np.finfo(np.float16)}.get(name) or FINFO[name]
    right(capsys, ex.check_unit_roundoff, name, float(fi.eps) / 2)
    assert "eps itself" in wrong(ex.check_unit_roundoff, name, float(fi.eps))
    assert "Too small by half" in wrong(ex.check_unit_roundoff, name, float(fi.eps) / 4)


def test_current_and_delayed_scale(capsys):
    right(capsys, ex.check_current_scale, 3.5, "fp8_e4m3", 128.0)  # 448 / 3.5
    assert "scale_inv" in wrong(ex.check_current_scale, 3.5, "fp8_e4m3", 1 / 128)
    assert "fp8_e5m2's max" in wrong(ex.check_current_scale, 3.5, "fp8_e4m3", 57344 / 3.5)
    right(capsys, ex.check_current_scale, 3.0, "fp8_e5m2", 16384.0, power_of_two=True)
    assert "power of two" in wrong(ex.check_current_scale, 3.0, "fp8_e5m2", 57344 / 3,
                                   power_of_two=True)
    # History of 4, max over the window: amaxes 1, 2, 8, 4, 2 -> window 2, 8, 4, 2 -> 448/8.
    right(capsys, ex.check_delayed_scale, [1, 2, 8, 4, 2], "fp8_e4m3", 56.0, history_len=4)
    assert "most recent" in wrong(ex.check_delayed_scale, [1, 2, 8, 4, 2], "fp8_e4m3", 224.0,
                                  history_len=4)
    # With a window of 3 the 8 has left: 448 / 2.
    assert "left it" in wrong(ex.check_delayed_scale, [8, 4, 2, 2, 2], "fp8_e4m3", 56.0,
                              history_len=3)
    right(capsys, ex.check_delayed_scale, [1, 8, 2], "fp8_e4m3", 224.0, history_len=4,
          amax_compute="most_recent")


def test_mx_scale_and_bits(capsys):
    # OCP MX v1.0 scale rule, worked: E2M1 amax 7: floor -> 2^(2-2) = 1 (7 clips to 6);
    # rceil -> 2 (7/2 = 3.5 fits). E4M3 amax 957: 2^(9-8) = 2, 957/2 clips to 448 -> 896.
    msg = right(capsys, ex.check_mx_scale, [7.0, 1.0, -2.0, 0.0], "mxfp4", 1.0)
    assert "7 clips to 6" in msg
    right(capsys, ex.check_mx_scale, [7.0, 1.0, -2.0, 0.0], "mxfp4", 2.0, scale_rule="rceil")
    assert "'floor' rule" in wrong(ex.check_mx_scale, [7.0, 1.0, -2.0, 0.0], "mxfp4", 1.0,
                                   scale_rule="rceil")
    assert "957 clips to 896" in right(capsys, ex.check_mx_scale, [957.0, 1.0], "mxfp8_e4m3", 2.0)
    assert "powers of two" in wrong(ex.check_mx_scale, [957.0, 1.0], "mxfp8_e4m3", 957 / 448)
    assert "largest exponent" in wrong(ex.check_mx_scale, [957.0, 1.0], "mxfp8_e4m3", 512.0)
    for fmt, bits in [("mxfp4", 4.25), ("mxfp6_e3m2", 6.25), ("mxfp8_e4m3", 8.25)]:
        right(capsys, ex.check_bits_per_value, fmt, bits)
    assert "not fp32" in wrong(ex.check_bits_per_value, "mxfp4", 5.0)
    assert "scale's share" in wrong(ex.check_bits_per_value, "mxfp4", 4)
    right(capsys, ex.check_bits_per_value, "mxfp4", 4.5, block_size=16)


def test_sequential_sum(capsys):
    for value, count in [(0.5, 10_000), (1.0, 4096), (0.25, 100), (3.0, 5000)]:
        s = np.float16(0)
        for _ in range(count):  # numpy float16 addition rounds to nearest even each time
            s = np.float16(s + np.float16(value))
        right(capsys, ex.check_sequential_sum, value, count, "fp16", float(s))
    assert "exact sum" in wrong(ex.check_sequential_sum, 0.5, 10_000, "fp16", 5000.0)
    assert "One binade too far" in wrong(ex.check_sequential_sum, 0.5, 10_000, "fp16", 2048.0)


def test_accumulator_spacing(capsys):
    right(capsys, ex.check_accumulator_spacing, 3000.0, 13, 0.25)  # [2^11, 2^12): 2^(11-13)
    right(capsys, ex.check_accumulator_spacing, 1.0, 23, float(np.finfo(np.float32).eps))
    assert "factor of two" in wrong(ex.check_accumulator_spacing, 3000.0, 13, 0.5)
    assert "spacing at 1" in wrong(ex.check_accumulator_spacing, 3000.0, 13, 2.0**-13)


def test_ulp_distance(capsys):
    # Count np.nextafter steps in float16 as the reference.
    def steps(a, b):
        x, y = np.uint16(a).view(np.float16), np.uint16(b).view(np.float16)
        n, direction = 0, np.float16(np.inf) if x > y else np.float16(-np.inf)
        while y != x:
            y = np.nextafter(y, direction)
            n += 1
        return n if np.uint16(a).view(np.float16) > np.uint16(b).view(np.float16) else -n
    for a, b in [(0x3C03, 0x3C00), (0x0001, 0x8001), (0x8002, 0x0001), (0x3C00, 0x3BFF)]:
        right(capsys, ex.check_ulp_distance, a, b, "fp16", steps(a, b))
    assert "other way round" in wrong(ex.check_ulp_distance, 0x3C03, 0x3C00, "fp16", -3)
    assert "as integers" in wrong(ex.check_ulp_distance, 0x0001, 0x8001, "fp16", 1 - 0x8001)


def test_device_mode(capsys):
    x = 1 + 2.0**-11 + 2.0**-20  # above the fp16 midpoint of 1 and 1 + 2^-10
    assert float(np.float16(x)) == 1 + 2.0**-10
    right(capsys, ex.check_device_mode, x, "fp16", 0x3C00, "rtz")
    right(capsys, ex.check_device_mode, x, "fp16", 0x3C00, "rdown")
    assert "not the device's code" in wrong(ex.check_device_mode, x, "fp16", 0x3C00, "rne")
    assert "unknown rounding mode" in wrong(ex.check_device_mode, x, "fp16", 0x3C00, "nearest-ish")
    assert "as a string" in wrong(ex.check_device_mode, x, "fp16", 0x3C00, 3)
    with pytest.raises(ValueError, match="no deterministic mode"):
        ex.check_device_mode(x, "fp16", 0x4000, "rne")


def test_module_docstring_example():
    import doctest

    import lowprec.exercises

    result = doctest.testmod(lowprec.exercises, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0


# ------------------------------------------------------------------ feedback without the answer
# One classic mistake per tutorial: the diagnosis and the hint name the mistake, the right
# answer (written here from the format's fields, not taken from the checker) is left out
# unless reveal=True. The hint substrings are the mistakes' names in the checkers' tables.
_HIDDEN = [
    (ex.check_max, ("fp16", 65535), "unsigned integer", "65504"),
    (ex.check_max, ("fp8_e4m3", 480), "NaN", "448"),
    (ex.check_smallest_normal, ("fp16", 2.0**-24), "smallest *subnormal*", "2^-14"),
    (ex.check_smallest_subnormal, ("bf16", 2.0**-126), "smallest *normal*", "2^-133"),
    (ex.check_smallest_subnormal, ("bf16", 2.0**-140), "too small", "2^-133"),
    (ex.check_decode, (0b0_1010_101, "fp8_e4m3", 1.625 * 2.0**10), "subtract the bias", "13.0"),
    (ex.check_num_finite, ("fp8_e5m2", 256), "counted every code", "247"),
    (ex.check_spacing, ("fp16", 256.0, 2.0**-10), "eps", "0.25"),
    (ex.check_stochastic_probability, (1 + 2.0**-12, "fp16", 0.75), "*down*", "0.25"),
    (ex.check_largest_flushed, ("fp16", 2.0**-24), "itself representable", "2^-25"),
    (ex.check_unit_roundoff, ("bf16", 2.0**-7), "eps itself", "0.00390625"),
    (ex.check_bits_per_value, ("mxfp4", 4), "scale", "4.25"),
    (ex.check_ulp_distance, (0x3C01, 0x3C00, "fp16", -1), "other way round", "+1"),
    (ex.check_underflow_count, (np.array([0.0, 1e-9, 1e-8, 1.0]), "fp16", 3),
     "every zero after rounding", "2 of the 3"),
    (ex.check_bytes_per_param, ((32, 64, 10), "fp32", "adam", 8.0), "optimizer state", "16"),
]


@pytest.mark.parametrize("func, args, hint, answer", _HIDDEN,
                         ids=[f"{c[0].__name__}-{c[3]}" for c in _HIDDEN])
def test_feedback_names_the_mistake_without_the_answer(func, args, hint, answer):
    with pytest.raises(ExerciseError) as info:
        func(*args)
    err = info.value
    shown = err.feedback()
    assert hint in shown and shown.startswith(err.diagnosis)
    assert answer not in shown, shown
    assert answer in err.solution
    assert err.feedback(reveal=True) == str(err)
    assert answer in str(err) and hint in str(err)  # the tutorial's own message is unchanged
