"""The cold path's short cut (``_kernels.quick``) against the numpy engine (``_kernels.vec``,
itself held equal to the compiled reference by ``tests/test_route.py``): the same values
and codes, bit for bit, where the rounding decisions are made: every code of every
format it serves, the midpoints between neighbours, one float32/float64 step either side
of each, the overflow threshold, zeros, infinities, NaNs and random bit patterns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lowprec._kernels import quick, vec
from lowprec._kernels.params import MODE_INT, format_params
from lowprec.formats import get_format, list_formats

SERVED = [f.name for f in list_formats() if quick.applies(format_params(f), MODE_INT["rne"])]
MODES = ["rne", "rtz", "rup", "rdown", "rna"]


def test_it_serves_the_signed_formats_with_subnormals() -> None:
    assert {"fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1",
            "fp6_e3m2", "fp8_e4m3fnuz"} <= set(SERVED)
    assert "e8m0" not in SERVED and "ue5m3" not in SERVED  # unsigned: left to vec
    P = format_params(get_format("fp16"))
    assert not quick.applies(P, MODE_INT["stochastic"]) and not quick.applies(P, MODE_INT["odd"])


def _inputs(name: str, is64: bool) -> np.ndarray:
    """Every code's value (a sample of fp32's and tf32's), the midpoints between neighbours, a step
    of the input type either side of each, the range's ends and random bit patterns."""
    fmt = get_format(name)
    P = format_params(fmt)
    rng = np.random.default_rng(7)
    if fmt.width <= 16:
        mags = np.arange(P.max_mag + 1)
    else:
        mags = np.unique(np.concatenate([np.arange(1 << 12), P.max_mag - np.arange(1 << 12),
                                         rng.integers(0, P.max_mag, 1 << 15)]))
    v = vec.decode(P, mags)
    mid = (v[1:] + v[:-1]) / 2  # exact in float64
    top = v[-1] + (v[-1] - v[-2]) / 2  # the overflow threshold of round-to-nearest
    pts = np.concatenate([v, mid, [top, 2 * top, 1e300 if is64 else 3e38, 5e-324, 1e-45]])
    ftype = np.float64 if is64 else np.float32
    with np.errstate(over="ignore"):  # (float32 rounds some midpoints, 2 * top may be inf)
        pts = pts.astype(ftype)
        steps = [pts, np.nextafter(pts, ftype(np.inf)), np.nextafter(pts, ftype(0))]
    rand = rng.integers(0, 1 << (64 if is64 else 32), 1 << 14, dtype=np.uint64, endpoint=False)
    rand = rand.astype(np.uint64 if is64 else np.uint32).view(ftype)
    x = np.concatenate([*steps, rand, np.array([0.0, np.inf, np.nan], ftype)])
    return np.concatenate([x, -x])


@pytest.mark.parametrize(("name", "is64"), list(itertools.product(SERVED, [False, True])))
def test_quick_is_the_numpy_engine_bit_for_bit(name: str, is64: bool) -> None:
    fmt = get_format(name)
    P = format_params(fmt)
    x = _inputs(name, is64)
    bits = x.view(np.uint64 if is64 else np.uint32)
    vtype = np.float32 if (not is64 and fmt.fits_float32) else np.float64
    checked = 0
    for mode, saturate, ftz in itertools.product(MODES, [False, True], [False, True]):
        m = MODE_INT[mode]
        want, _, status = vec.convert(P, bits, m, saturate, ftz)
        codes = np.empty(x.shape, fmt.code_dtype)
        values = np.empty(x.shape, vtype)
        if status.any():  # a NaN without a code: vec raises, quick must decline
            assert not quick.values(P, x, m, saturate, ftz, values)
            assert not quick.codes(P, x, m, saturate, ftz, codes)
            ok = ~np.isnan(x)
            x2, want = x[ok], want[ok]
            codes, values = codes[ok], values[ok]
        else:
            x2 = x
        assert quick.values(P, x2, m, saturate, ftz, values)
        ref = vec.decode(P, want).astype(vtype)
        assert np.array_equal(values.view(f"u{vtype().itemsize}"),
                              ref.view(f"u{vtype().itemsize}")), (mode, saturate, ftz)
        if fmt.width <= 16:
            assert quick.codes(P, x2, m, saturate, ftz, codes)
            assert np.array_equal(codes.astype(np.int64), want), (mode, saturate, ftz)
        checked += x2.size
    assert checked >= 20 * (1 << 15)  # 20 option sets, the random patterns at least


def test_round_to_takes_it_while_the_kernel_is_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    import lowprec as lp
    from lowprec import rounding
    from lowprec._kernels import route

    served = []
    real = quick.values

    def spy(*a):  # type: ignore[no-untyped-def]
        served.append(a[0])
        return real(*a)

    monkeypatch.setattr(quick, "values", spy)
    monkeypatch.setattr(route, "ready", lambda kernel, args: False)
    monkeypatch.setattr(rounding, "_WARM", set())
    x = np.linspace(-500, 500, 1001, dtype=np.float32)
    got = lp.round_to(x, "fp8_e5m2", "rtz")
    assert served and np.array_equal(got, np.asarray(
        vec.decode(format_params(get_format("fp8_e5m2")),
                   vec.convert(format_params(get_format("fp8_e5m2")), x.view(np.uint32),
                               MODE_INT["rtz"], False, False)[0]), np.float32))
