"""round_to/encode around the kernels: ``out=`` (numpy's convention), the
single-call path for small arrays, the split across threads, and stochastic
rounding's seeds (one per 4096-element block, drawn in order), all against the
reference path of ``_kernels.convert``."""

import numpy as np
import pytest

import lowprec as lp
from lowprec import _runtime
from lowprec._kernels import convert
from lowprec._kernels.params import MODE_INT
from lowprec._kernels.sr import SR_BLOCK

SMALL_FORMATS = ["fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2fnuz", "fp6_e2m3", "fp4_e2m1",
                 "e8m0"]


def _reference_codes(x, fmt, mode, seeds=None, **kw):
    f = lp.get_format(fmt)
    codes = np.empty(x.size, f.code_dtype)
    xb = np.ascontiguousarray(x).reshape(-1).view(np.uint64 if x.dtype == np.float64
                                                    else np.uint32)
    extra = {} if seeds is None else {"seeds": seeds}
    bad, _ = convert.to_codes(f, xb, MODE_INT[mode], codes, path="reference", **extra, **kw)
    assert bad < 0
    return codes.reshape(x.shape)


def _data(n, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 8
    x[::97] = np.float32(3e-6)
    return x


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_small_arrays_equal_the_reference(fmt):
    x = np.abs(_data(37)) if fmt == "e8m0" else _data(37)
    for mode in lp.MODES:
        if mode == "stochastic":
            continue
        ref = _reference_codes(x, fmt, mode)
        np.testing.assert_array_equal(lp.encode(x, fmt, mode), ref, err_msg=f"{fmt} {mode}")
        want = lp.decode(ref, fmt).astype(np.float32)
        got = lp.round_to(x, fmt, mode)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_small_path_errors_are_the_usual_ones():
    with pytest.raises(ValueError, match="element 1 is NaN"):
        lp.round_to(np.array([1.0, np.nan], np.float32), "fp4_e2m1")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        lp.round_to(np.ones(3, np.float32), "fp8_e4m3", "nearest-ish")
    with pytest.raises(ValueError, match="rng is only used"):
        lp.round_to(np.ones(3, np.float32), "fp8_e4m3", rng=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["rne", "rtz", "stochastic"])
def test_out_is_written_and_returned(dtype, mode):
    x = _data(5000).astype(dtype).reshape(50, 100)
    kw = {"rng": 4} if mode == "stochastic" else {}
    fresh = lp.round_to(x, "fp8_e4m3", mode, **kw)
    buf = np.full_like(fresh, 7.0)
    assert lp.round_to(x, "fp8_e4m3", mode, out=buf, **kw) is buf
    np.testing.assert_array_equal(buf, fresh)
    codes = np.zeros(x.shape, np.uint8)
    assert lp.encode(x, "fp8_e4m3", mode, out=codes, **kw) is codes
    np.testing.assert_array_equal(codes, lp.encode(x, "fp8_e4m3", mode, **kw))
    strided = np.zeros((50, 200), fresh.dtype)[:, ::2]  # not contiguous: written apart
    assert lp.round_to(x, "fp8_e4m3", mode, out=strided, **kw) is strided
    np.testing.assert_array_equal(strided, fresh)


def test_out_may_be_the_input_itself():
    x = _data(3000)
    want = lp.round_to(x, "bf16")
    assert lp.round_to(x, "bf16", out=x) is x
    np.testing.assert_array_equal(x, want)
    y = _data(3000)
    shifted_want = lp.round_to(y[:-1], "fp16")
    lp.round_to(y[:-1], "fp16", out=y[1:])  # overlapping view: computed apart
    np.testing.assert_array_equal(y[1:], shifted_want)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "bf16", "fp4_e2m1", "e8m0"])
def test_in_place_pieces_equal_a_separate_output(monkeypatch, fmt, threads):
    # In place, a kernel rounds a piece at a time into scratch (its loop would
    # not vectorise with the same array in and out): pieces of 2 blocks here,
    # so a small array has many, a short last one, and (on 2 threads) pieces
    # that start inside a thread's share.
    monkeypatch.setattr(convert, "IN_PLACE_PIECE", 2 * SR_BLOCK)
    monkeypatch.setattr(_runtime, "_SPLIT_MIN", 3 * SR_BLOCK)
    monkeypatch.setenv("LOWPREC_NUM_THREADS", threads)
    x = _data(11 * SR_BLOCK + 77)
    x = np.abs(x) if fmt == "e8m0" else x
    for mode in lp.MODES:
        kw = {"rng": 5} if mode == "stochastic" else {}
        want = lp.round_to(x, fmt, mode, **kw)
        y = x.copy()
        assert lp.round_to(y, fmt, mode, out=y, **kw) is y
        np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32),
                                      err_msg=f"{fmt} {mode}")


def test_in_place_nan_error_names_its_element(monkeypatch):
    monkeypatch.setattr(convert, "IN_PLACE_PIECE", 2 * SR_BLOCK)
    y = _data(7 * SR_BLOCK)
    y[5 * SR_BLOCK + 3] = np.nan  # in the third piece
    with pytest.raises(ValueError, match=f"element {5 * SR_BLOCK + 3} is NaN"):
        lp.round_to(y, "fp4_e2m1", out=y)


def test_out_must_match():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"round_to needs shape \(4,\) and dtype float32"):
        lp.round_to(x, "fp8_e4m3", out=np.empty(4, np.float64))
    with pytest.raises(ValueError, match=r"needs shape \(4,\)"):
        lp.encode(x, "fp8_e4m3", out=np.empty(5, np.uint8))
    with pytest.raises(ValueError, match="dtype uint8"):
        lp.encode(x, "fp8_e4m3", out=np.empty(4, np.uint16))
    with pytest.raises(TypeError, match="out must be a numpy array"):
        lp.round_to(x, "fp8_e4m3", out=[0.0] * 4)
    ro = np.empty(4, np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        lp.round_to(x, "fp8_e4m3", out=ro)


@pytest.mark.parametrize("mode", ["rne", "odd", "stochastic"])
def test_threads_do_not_change_results(monkeypatch, mode):
    monkeypatch.setattr(_runtime, "_SPLIT_MIN", 3 * SR_BLOCK)  # split even a small array
    x = _data(10 * SR_BLOCK + 123)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("LOWPREC_NUM_THREADS", threads)
        kw = {"rng": np.random.default_rng(9)} if mode == "stochastic" else {}
        runs.append(lp.encode(x, "fp4_e2m1", mode, **kw))
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_stochastic_seeds_one_per_block_in_order():
    # Across the old 2**20-element chunk boundary: one seed per block, drawn in
    # order from the Generator, the same words as the reference path makes.
    n = (1 << 20) + 3 * SR_BLOCK + 17
    x = _data(n, seed=3)
    seeds = np.random.default_rng(21).bit_generator.random_raw(-(-n // SR_BLOCK))
    ref = _reference_codes(x, "fp8_e5m2", "stochastic", seeds=seeds)
    np.testing.assert_array_equal(lp.encode(x, "fp8_e5m2", "stochastic", rng=21), ref)
    np.testing.assert_array_equal(lp.round_to(x, "fp8_e5m2", "stochastic", rng=21),
                                  lp.decode(ref, "fp8_e5m2").astype(np.float32))


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_float64_through_float32_rounded_to_odd(fmt):
    # Values between float32 neighbours (so float32 alone would round twice),
    # beyond float32's range both ways, and the format's own ties +- a hair.
    f = lp.get_format(fmt)
    assert convert.fast_path(f, True, True, False) == "odd64"
    rng = np.random.default_rng(5)
    v = lp.decode(np.arange(1 << min(f.width, 12)), f)
    v = v[np.isfinite(v)]
    mids = (v[1:] + v[:-1]) / 2
    x = np.concatenate([mids, mids * (1 + 2.0**-40), mids * (1 - 2.0**-40),
                        rng.standard_normal(20_000) * 8 * (1 + 2.0**-30),
                        [1e-300, -1e-300, 1e300, -1e300, 2.0**-149 * 0.75, 2.0**-150,
                         3.5e38, -3.5e38, np.inf, -np.inf, 0.0, -0.0]])
    if f.has_nan:
        x = np.append(x, np.nan)
    if not f.signed:
        x = np.abs(x)
    for mode in lp.MODES:
        if mode == "stochastic":
            continue
        ref = _reference_codes(x, fmt, mode)
        np.testing.assert_array_equal(lp.encode(x, fmt, mode), ref, err_msg=f"{fmt} {mode}")
        got = lp.round_to(x, fmt, mode)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, lp.decode(ref, fmt), err_msg=f"{fmt} {mode}")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "fma", "sqrt"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arith_out_is_written_and_returned(op, dtype):
    rng = np.random.default_rng(3)
    fn = getattr(lp, op)
    args = [np.abs(lp.round_to(rng.standard_normal((3, 50)).astype(dtype), "bf16"))
            for _ in range(3 if op == "fma" else 1 if op == "sqrt" else 2)]
    want = fn(*args, "bf16", mode="rtz")
    buf = np.full(want.shape, -7.0, want.dtype)
    got = fn(*args, "bf16", mode="rtz", out=buf)
    assert got is buf
    np.testing.assert_array_equal(buf.view(np.uint8), want.view(np.uint8))
    codes = np.zeros(want.shape, lp.get_format("bf16").code_dtype)
    assert fn(*args, "bf16", mode="rtz", codes=False, out=np.empty_like(want)).dtype == want.dtype
    c_args = [lp.encode(a, "bf16") for a in args]
    assert fn(*c_args, "bf16", mode="rtz", codes=True, out=codes) is codes
    np.testing.assert_array_equal(codes, lp.encode(want, "bf16"))


def test_arith_out_must_match():
    a = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"out has shape \(5,\) and dtype float32; add needs shape \(4,\)"):
        lp.add(a, a, "fp16", out=np.empty(5, np.float32))
    with pytest.raises(ValueError, match="dtype float32"):
        lp.mul(a, a, "fp16", out=np.empty(4, np.float64))
    with pytest.raises(TypeError, match="out must be a numpy array"):
        lp.add(a, a, "fp16", out=[0.0] * 4)
