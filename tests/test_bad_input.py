"""Bad input gets a clear error naming what was wrong and what is accepted;
odd-but-valid input (scalars, lists, 0-d and empty arrays, views) just works,
and inputs are never modified."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lowprec as lp


@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
def test_unknown_format_lists_valid_names(func) -> None:
    with pytest.raises(ValueError) as info:
        func(1.0, "fp9")
    msg = str(info.value)
    assert "'fp9'" in msg and all(name in msg for name in lp.FORMATS)
    with pytest.raises(ValueError, match="fp8_e4m3"):
        lp.decode(np.uint8(1), "fp9")


@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
@pytest.mark.parametrize("mode", ["nearest_odd", "RNEE", "", "ceil"])
def test_unknown_mode_lists_valid_modes(func, mode: str) -> None:
    with pytest.raises(ValueError) as info:
        func(1.0, "fp16", mode)
    msg = str(info.value)
    assert repr(mode) in msg and all(repr(m) in msg for m in lp.MODES)


def test_mode_names_are_forgiving() -> None:
    assert lp.round_to(2.5, "fp4", " RNE ") == lp.round_to(2.5, "fp4", "rne") == 2.0
    assert lp.round_to(2.5, "fp4", "nearest_away") == 3.0


@pytest.mark.parametrize("x", [
    np.array([1 + 2j]), 1 + 0j, np.array(["1.0"]), "1.0", b"1", np.array([None]),
    [1.0, "a"], np.array([1], dtype="datetime64[s]"), np.array([1], dtype="timedelta64[s]"),
    None, {1: 2},
])
@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
def test_non_real_input_is_a_type_error(func, x) -> None:
    with pytest.raises(TypeError, match="dtype|complex"):
        func(x, "fp16")


def test_longdouble_is_refused() -> None:
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 here")
    with pytest.raises(TypeError, match="longdouble|float128|float96"):
        lp.round_to(np.array([1.5], np.longdouble), "fp16")


def test_integers_must_be_exact_in_float64() -> None:
    """Integers are rounded from their exact value, or refused: never rounded
    twice (first to float64, then to the format). Regression test: int64 2**53 + 1
    was silently converted to 2**53 first."""
    assert lp.round_to(2**60, "fp32") == 2.0**60  # exact in float64: fine
    assert lp.round_to(np.array([-(2**63)]), "fp32") == -(2.0**63)
    assert lp.round_to(np.array([2**64 - 2**11], np.uint64), "fp32", "rtz") == 2.0**64 - 2**40
    for bad in (2**53 + 1, np.array([2**63 - 1]), np.array([2**64 - 1], np.uint64)):
        with pytest.raises(ValueError, match="cannot hold exactly"):
            lp.round_to(bad, "fp32", "rup")
    assert lp.round_to(np.arange(-5, 6, dtype=np.int8), "fp4").tolist() == [
        -4, -4, -3, -2, -1, 0, 1, 2, 3, 4, 4]


@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
def test_shapes_scalars_lists(func) -> None:
    empty = func(np.empty((0, 3), np.float32), "bf16")
    assert empty.shape == (0, 3)
    zero_d = func(np.array(1.5), "fp8_e4m3")
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == ()
    scalar = func(1.5, "fp8_e4m3")
    assert np.ndim(scalar) == 0 and not isinstance(scalar, np.ndarray)
    assert np.array_equal(func([1.5, 2.5], "fp8_e4m3"), func(np.array([1.5, 2.5]), "fp8_e4m3"))
    nested = func([[1.0, 2.0], [3.0, 4.0]], "fp16")
    assert nested.shape == (2, 2)
    assert func(True, "fp16") == func(1.0, "fp16")
    assert func(np.float16(0.1), "fp8_e4m3") == func(float(np.float16(0.1)), "fp8_e4m3")
    # Non-contiguous views and other layouts give the same as a contiguous copy.
    x = np.linspace(-500, 500, 600).reshape(20, 30)
    for view in (x[:, ::3], x.T, x[::-1], np.asfortranarray(x)):
        assert np.array_equal(func(view, "fp8_e4m3"),
                              func(np.ascontiguousarray(view), "fp8_e4m3"), equal_nan=True)
    big_endian = x.astype(">f8")
    assert np.array_equal(func(big_endian, "fp8_e4m3"), func(x, "fp8_e4m3"), equal_nan=True)


def test_output_dtypes() -> None:
    assert lp.round_to(np.float32(1.1), "bf16").dtype == np.float32
    assert lp.round_to(1.1, "bf16").dtype == np.float64
    assert lp.round_to(np.arange(3), "fp16").dtype == np.float64
    assert lp.encode(np.arange(3.0), "fp16").dtype == np.uint16
    assert lp.encode(np.arange(3.0), "fp4").dtype == np.uint8
    assert lp.encode(np.arange(3.0), "fp32").dtype == np.uint32
    assert lp.decode(np.arange(3, dtype=np.uint8), "fp4").dtype == np.float64


@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
def test_inputs_are_not_modified(func) -> None:
    rng = np.random.default_rng(0)
    for x in (rng.normal(size=(70_000,)) * 100, rng.normal(size=(300, 7)).astype(np.float32)):
        before = x.copy()
        for mode in ("rne", "stochastic"):
            kw = {"rng": 1} if mode == "stochastic" else {}
            out = func(x, "fp8_e4m3", mode, **kw)
            assert not np.shares_memory(out, x)
        assert np.array_equal(x, before)
    codes = np.arange(256, dtype=np.uint8)
    lp.decode(codes, "fp8_e4m3")
    assert np.array_equal(codes, np.arange(256, dtype=np.uint8))
    # A read-only input works.
    ro = np.ones(5)
    ro.setflags(write=False)
    assert (func(ro, "fp16") == func(np.ones(5), "fp16")).all()


@pytest.mark.parametrize("name", ["fp4_e2m1", "fp6_e3m2", "fp6_e2m3"])
@pytest.mark.parametrize("func", [lp.round_to, lp.encode])
def test_nan_into_a_format_without_nan(func, name: str) -> None:
    x = np.array([1.0, 2.0, np.nan, 3.0], np.float32)
    with pytest.raises(ValueError, match=r"element 2 is NaN.*no NaN"):
        func(x, name)
    with pytest.raises(ValueError, match="NaN"):
        func(float("nan"), name, "rtz", saturate=True)
    # Infinities are fine: no inf, no NaN -> saturate to max.
    assert func(math.inf, name) == func(lp.get_format(name).max, name)


def test_e8m0_zero_and_negative_are_nan() -> None:
    """e8m0 has no zero and no sign: documented as NaN (with the invalid flag)."""
    codes, flags = lp.encode(np.array([0.0, -0.0, -1.0, -np.inf]), "e8m0", flags=True)
    assert (codes == 0xFF).all() and (flags == 0x10).all()


def test_decode_bad_codes() -> None:
    with pytest.raises(TypeError, match="integer"):
        lp.decode(np.array([1.0]), "fp16")
    with pytest.raises(ValueError, match=r"out of range.*0 \.\. 255"):
        lp.decode(np.array([256]), "fp8_e4m3")
    with pytest.raises(ValueError, match="out of range"):
        lp.decode(np.array([-1]), "fp8_e4m3")
    with pytest.raises(ValueError, match=r"0 \.\. 15"):
        lp.decode(np.array([16], np.uint8), "fp4")
    assert lp.decode(np.array([], np.uint8), "fp4").shape == (0,)
    assert lp.decode(7, "fp4") == 6.0


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_ml_dtypes_arrays_are_accepted_exactly(name):
    import ml_dtypes

    dt = np.dtype(getattr(ml_dtypes, name))
    codes = np.arange(1 << (8 if dt.itemsize == 1 else 16), dtype=np.uint8 if dt.itemsize == 1 else np.uint16)
    if name == "float4_e2m1fn":
        codes = codes[:16]
    values = codes.view(dt) if name != "float4_e2m1fn" else codes.astype(np.uint8).view(dt)
    with np.errstate(invalid="ignore"):
        expected = values.astype(np.float64)
    got = lp.round_to(values, "fp32")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)  # NaNs compare equal here
