"""The kernel router (``lowprec._kernels.route``) and the cache stamp that covers
every kernel source."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lowprec._kernels import _cache, convert, engine, route, sr, vec
from lowprec._kernels.params import RNE, STOCHASTIC, format_params
from lowprec.formats import FloatFormat, get_format, list_formats

ROOT = Path(__file__).resolve().parent.parent
_NONE = np.empty(0, np.uint64)


def test_the_stamp_covers_kernel_sources_in_sub_folders(tmp_path: Path) -> None:
    # Kernels moved into a sub-folder must still make every cached kernel stale
    # when they change (numba's own stamp covers the kernel's file only).
    stamp = _cache.sources_stamp.__wrapped__
    (tmp_path / "top.py").write_text("a = 1\n")
    sub = tmp_path / "twins" / "deeper"
    sub.mkdir(parents=True)
    (sub / "kernel.py").write_text("b = 1\n")
    before = stamp(str(tmp_path))
    (sub / "kernel.py").write_text("b = 2\n")  # a change two folders down
    after = stamp(str(tmp_path))
    assert after != before
    (sub / "kernel.py").rename(tmp_path / "twins" / "kernel.py")  # the same file moved up
    assert stamp(str(tmp_path)) not in (before, after)
    cache = tmp_path / "twins" / "__pycache__"
    cache.mkdir()
    moved = stamp(str(tmp_path))
    (cache / "kernel.cpython.py").write_text("compiled")  # not a source
    assert stamp(str(tmp_path)) == moved
    assert _cache._sources(str(tmp_path)) == ["top.py", "twins/kernel.py"]


# ------------------------------------------------------------ the table
# Written from the rules of docs/kernels.md, not from the router's output:
# float32 in, every format but fp32 and ue5m3 takes a bits32 kernel (bits32_direct's,
# its full-range table for bf16/tf32, the plain one of those without
# saturation or flushing; pow2's for e8m0); float64 in goes through float32
# rounded to odd first (odd64), except stochastic rounding, which needs every
# input bit (the scalar fast kernel, in stochastic_kernel's blocks); fp32
# itself takes fast.vec32_kernel (float32 in) or the scalar kernels.
FULL = {"bf16", "tf32"}


def _expected(name: str, mode: int, is64: bool, codes: bool, saturate: bool,
              ftz: bool) -> tuple[str, ...]:
    key = f"[({mode}, {codes})]"
    if name == "fp32":
        if mode == STOCHASTIC:
            return ("convert.stochastic_kernel",) if (is64 or ftz) else ("fast.vec32_kernel",)
        return ("fast.fast_kernel",) if (is64 or ftz) else ("fast.vec32_kernel",)
    if name == "ue5m3":  # unsigned with subnormals: no bits32 format, the compiled engine
        if mode == STOCHASTIC:
            return ("convert.stochastic_kernel",)
        return ("engine.encode_kernel" if codes else "engine.round_kernel",)
    if is64 and mode == STOCHASTIC:
        return ("convert.stochastic_kernel",)
    if name == "e8m0":
        twin = "pow2.KERNELS" + key
    elif name in FULL:
        table = "FULL_KERNELS" if (saturate or ftz) else "PLAIN_KERNELS"
        twin = f"bits32_direct.{table}{key}"
    else:
        twin = "bits32_direct.KERNELS" + key + (".addition" if mode == RNE else "")
    return ("odd64.to_float32_odd", twin) if is64 else (twin,)


def test_the_routing_table_names_the_kernel_of_every_format_mode_and_dtype() -> None:
    rows = 0
    for fmt in list_formats():
        for mode, is64, codes, saturate, ftz in itertools.product(
                range(7), (False, True), (False, True), (False, True), (False, True)):
            want = _expected(fmt.name, mode, is64, codes, saturate, ftz)
            assert route.serving(fmt, mode, is64, codes, saturate, ftz) == want, \
                (fmt.name, mode, is64, codes, saturate, ftz)
            rows += 1
    assert rows == len(list_formats()) * 7 * 16


def test_public_modules_ask_the_router_and_import_no_twin() -> None:
    # Outside _kernels/, rounding's verbs name no fast twin: they ask route.
    text = (ROOT / "lowprec" / "rounding.py").read_text()
    imports = [line for line in text.splitlines() if "_kernels" in line and "import" in line]
    assert imports == ["from ._kernels import convert, params, route, sr, vec"]


# ------------------------------------------------- twins against the reference
def _inputs(fmt: Any, is64: bool, rng: np.random.Generator, size: int) -> np.ndarray:
    """Bit patterns around every value (or a sample of them) of ``fmt``, the
    midpoints between neighbours, specials and random patterns."""
    P = format_params(fmt)
    codes = np.arange(1 << fmt.width) if fmt.width <= 8 else rng.integers(0, 1 << fmt.width, size)
    v = np.unique(vec.decode(P, codes))
    v = v[np.isfinite(v)]
    mids = (v[1:] + v[:-1]) / 2
    ft, ut = (np.float64, np.uint64) if is64 else (np.float32, np.uint32)
    with np.errstate(over="ignore"):
        base = np.concatenate([v, mids, -v, -mids, 3 * v, [np.inf, -np.inf, np.nan, 0.0, -0.0,
                                                          5e-324, 1e-45, 3e38]]).astype(ft)
    b = base.view(ut)
    top = np.iinfo(ut).max
    quiet_nan = 0x7FF8000000000001 if is64 else 0x7F800001
    return np.concatenate([b, b + ut(1), b - ut(1), rng.integers(0, top, size, dtype=ut),
                           np.array([quiet_nan, quiet_nan | (1 << (63 if is64 else 31))], ut)])


def _reference(P: Any, b: np.ndarray, mode: int, saturate: bool, ftz: bool,
               words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """engine.convert_one of every element (codes, flags, status), compiled."""
    n = b.shape[0]
    codes, flags, status = np.zeros(n, np.int64), np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    start = 0
    while start < n:  # the kernel stops at an element without a code: note it, go on
        bad, st = engine.encode_kernel(P, b[start:], b.dtype == np.uint64, mode, saturate, ftz,
                                       words[start:] if words.shape[0] else words,
                                       codes[start:], flags[start:], True)
        if bad < 0:
            break
        status[start + bad] = st
        codes[start + bad] = 0
        start += bad + 1
    return codes, flags, status


def test_the_numpy_engine_is_the_reference_bit_for_bit() -> None:
    # vec serves the first calls: every registered format (and an unsigned
    # one), every mode, float32 and float64 in, saturate and flush-to-zero:
    # codes, flags and statuses equal round_pack's, values decode_one's.
    rng = np.random.default_rng(39)
    fmts = [*list_formats(), FloatFormat("u_e4m3", 4, 3, 7, signed=False, has_inf=False,
                                         nan="none", has_subnormals=True)]
    for fmt in fmts:
        P = format_params(fmt)
        for is64 in (False, True):
            b = _inputs(fmt, is64, rng, 300)
            seeds = rng.integers(0, 2**63, -(-b.shape[0] // sr.SR_BLOCK), dtype=np.uint64)
            for mode in range(7):
                words = vec.sr_words(seeds, 0, b.shape[0]) if mode == STOCHASTIC else _NONE
                for saturate, ftz in itertools.product((False, True), (False, True)):
                    got = vec.convert(P, b, mode, saturate, ftz,
                                      words if mode == STOCHASTIC else None)
                    want = _reference(P, b, mode, saturate, ftz, words)
                    ok = want[2] == 0
                    what = (fmt.name, is64, mode, saturate, ftz)
                    assert np.array_equal(got[2], want[2]), what
                    assert np.array_equal(got[0][ok], want[0][ok]), what
                    assert np.array_equal(got[1][ok], want[1][ok]), what
        codes = np.arange(min(1 << fmt.width, 1 << 16), dtype=np.uint32)
        values = np.empty(codes.shape)
        engine.decode_kernel(P, codes, values)
        assert np.array_equal(vec.decode(P, codes).view(np.uint64), values.view(np.uint64))


def test_the_numpy_round_pack_is_the_reference_on_wide_significands() -> None:
    # explain() rounds exact rationals through vec.round_pack: 62-bit
    # significands (beyond float64's exact integers) and sticky bits.
    rng = np.random.default_rng(62)
    n = 300
    sig = rng.integers(1, 1 << 62, n, dtype=np.int64) >> rng.integers(0, 62, n)
    sig[sig == 0] = 1
    sig[:4] = [(1 << 62) - 1, (1 << 53) + 1, (1 << 61), 3]
    lsb = rng.integers(-200, 20, n) - 61
    neg = rng.integers(0, 2, n).astype(bool)
    sticky = rng.integers(0, 2, n).astype(np.int64)
    words = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    for name in ("fp8_e4m3", "bf16", "fp4_e2m1", "fp8_e5m2fnuz", "e8m0"):
        P = format_params(get_format(name))
        for mode in range(7):
            got = vec.round_pack(P, neg, sig, lsb, mode, False, False, words, sticky)
            for i in range(n):
                want = engine.round_pack(P, bool(neg[i]), sig[i], int(lsb[i]), bool(sticky[i]),
                                         mode, False, False, words[i])
                assert (got[0][i], got[1][i], got[2][i]) == tuple(map(int, want)), (name, mode, i)


def test_the_numpy_words_are_the_kernels_words() -> None:
    seeds = np.random.default_rng(1).integers(0, 2**64 - 1, 3, dtype=np.uint64)
    n = 2 * sr.SR_BLOCK + 77
    assert np.array_equal(vec.sr_words(seeds, 0, n), sr.sr_expand(seeds, n))
    assert np.array_equal(vec.sr_words(seeds, 5000, 100), sr.sr_expand(seeds, n)[5000:5100])


def _twin_rows(modes: tuple[int, ...]) -> list[tuple]:
    """One row per distinct compiled kernel the table routes float32 input to."""
    rows, seen = [], set()
    for fmt in list_formats():
        for mode, codes, saturate, ftz in itertools.product(modes, (False, True), (False, True),
                                                            (False, True)):
            name = route.serving(fmt, mode, False, codes, saturate, ftz)
            if name not in seen:
                seen.add(name)
                rows.append((fmt, mode, codes, saturate, ftz))
    return rows


def _check_twin(fmt: Any, mode: int, codes: bool, saturate: bool, ftz: bool) -> None:
    P = format_params(fmt)
    rng = np.random.default_rng(mode)
    b = _inputs(fmt, False, rng, 2000)
    if not fmt.has_nan:
        b = b[~np.isnan(b.view(np.float32))]
    seeds = rng.integers(0, 2**63, -(-b.shape[0] // sr.SR_BLOCK), dtype=np.uint64)
    words = vec.sr_words(seeds, 0, b.shape[0]) if mode == STOCHASTIC else _NONE
    want_codes, _, status = _reference(P, b, mode, saturate, ftz, words)
    assert not status.any()
    out = np.empty(b.shape[0], fmt.code_dtype if codes else np.float32)
    path = convert.to_codes if codes else convert.to_values
    assert path(fmt, b, mode, out, saturate=saturate, ftz=ftz, seeds=seeds) == (-1, 0)
    if codes:
        assert np.array_equal(out, want_codes.astype(fmt.code_dtype))
    else:
        want = vec.decode(P, want_codes).astype(np.float32)
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("row", _twin_rows((RNE,)), ids=lambda r: f"{r[0].name}-{r[1:]}")
def test_every_routed_twin_in_rne_is_the_reference(row: tuple) -> None:
    _check_twin(*row)


@pytest.mark.slow
@pytest.mark.parametrize("row", _twin_rows(tuple(range(7))), ids=lambda r: f"{r[0].name}-{r[1:]}")
def test_every_routed_twin_is_the_reference(row: tuple) -> None:
    _check_twin(*row)


# ------------------------------------------------------- the first call
_FIRST = """
import time, numpy as np
import lowprec as lp
from lowprec._kernels import route
x = np.linspace(-500, 500, 20001, dtype=np.float32)
t = time.perf_counter()
r = lp.round_to(x, "fp8_e5m2", "rtz")
c = lp.encode(x.astype(np.float64), "fp8_e5m2", "rtz")
first = time.perf_counter() - t
served = dict(route._READY)
route.wait()
again = lp.round_to(x, "fp8_e5m2", "rtz")
print(first, sum(served.values()), len(served), all(route._READY.values()),
      np.array_equal(r.view(np.uint32), again.view(np.uint32)),
      np.array_equal(lp.decode(c, "fp8_e5m2"), r.astype(np.float64)))
"""


def test_a_cold_first_call_is_served_without_compiling(tmp_path: Path) -> None:
    # An empty numba cache: the first calls are served by the numpy engine
    # (nothing compiled in the calling process), the kernels are compiled in
    # the background, and a later call runs them with the same bits.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    done = subprocess.run([sys.executable, "-c", _FIRST], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    _, compiled, asked, ready, same, decoded = done.stdout.split()
    assert (int(compiled), int(asked)) == (0, 3)  # bits32 to values, odd64 and bits32 to codes
    assert ready == same == decoded == "True"
    # (how long the first calls took is benchmarks/bench_coldstart.py's to measure)


def test_the_twins_special_codes_are_the_compiled_engines() -> None:
    # The twins' parameters hold the codes of infinity, NaN and overflow, asked
    # of vec (nothing compiled); the compiled engine gives the same ones.
    from lowprec._kernels import bits32

    for fmt in list_formats():
        P = format_params(fmt)
        for mode, saturate, ftz in itertools.product(range(7), (False, True), (False, True)):
            got = bits32.special_codes(fmt, mode, saturate, ftz)
            for name, pos_bits in (("inf", 0x7F800000), ("nan", 0x7FC00000)):
                for sign in (1, -1):
                    bits = pos_bits | (0x80000000 if sign < 0 else 0)
                    code, _, status = engine.convert_one(P, bits, False, mode, saturate, ftz,
                                                         np.uint64(0))
                    if fmt.signed or name != "nan":
                        assert got[name, sign] == (code if status == 0 else 0), (fmt.name, name)
            for sign in (1, -1):
                want = engine._overflow(P, sign < 0, mode, saturate)[0]
                assert got["ovf", sign] == want, (fmt.name, mode, saturate)


_BLOCKS = """
import sys, numpy as np
from lowprec import mx, nvfp4
from lowprec._kernels import blocks
x = np.load(sys.argv[1])
out = {}
for f in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8"):
    for mode in ("rne", "rup", "odd"):
        q = mx.quantize(x, f, mode=mode)
        out[f"{f}-{mode}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
        out[f"{f}-{mode}-values"] = q.dequantize(np.float32)
for mode, rng in (("rne", None), ("stochastic", 7)):
    q = nvfp4.quantize(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), mode=mode, rng=rng)
    out[f"nvfp4-{mode}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
    out[f"nvfp4-{mode}-values"] = q.dequantize(np.float32)
compiled = [k for k in ("_mx_chunk", "_nvfp4_chunk", "nvfp4_block_amax", "_dequantize",
                        "twos_complement") if getattr(blocks, k).overloads]
np.savez(sys.argv[2], **out)
print(",".join(compiled) or "none")
"""


def test_cold_block_quantizers_are_served_by_their_reference(tmp_path: Path) -> None:
    # MX and NVFP4 ask the router too: with nothing compiled (an empty numba cache,
    # LOWPREC_COLD=numpy), no block kernel compiles in the calling process and the
    # numpy references answer with the compiled kernels' bits, random words included.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((96, 80)) * 10.0 ** rng.integers(-9, 9, (96, 80))).astype(np.float32)
    x[4, :32] = 0.0
    x[5, 7], x[6, 40], x[7, 0] = np.inf, np.nan, -np.inf
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               LOWPREC_COLD="numpy")
    done = subprocess.run([sys.executable, "-c", _BLOCKS, str(tmp_path / "x.npy"),
                           str(tmp_path / "cold.npz")], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    assert done.stdout.split() == ["none"]
    from lowprec import mx, nvfp4
    from lowprec._kernels import blocks

    cold = np.load(tmp_path / "cold.npz")
    for f in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8"):
        for mode in ("rne", "rup", "odd"):
            q = mx.quantize(x, f, mode=mode)
            assert np.array_equal(cold[f"{f}-{mode}"],
                                  np.concatenate([q.codes.ravel(), q.scales.ravel()]),
                                  equal_nan=True), (f, mode)
            assert np.array_equal(cold[f"{f}-{mode}-values"], q.dequantize(np.float32),
                                  equal_nan=True), (f, mode)
    for mode, seed in (("rne", None), ("stochastic", 7)):
        q = nvfp4.quantize(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), mode=mode,
                           rng=seed)
        assert np.array_equal(cold[f"nvfp4-{mode}"],
                              np.concatenate([q.codes.ravel(), q.scales.ravel()]),
                              equal_nan=True), mode
        assert np.array_equal(cold[f"nvfp4-{mode}-values"], q.dequantize(np.float32)), mode
    # ...and here (LOWPREC_COLD=compile) the block kernels did the work
    assert blocks._mx_chunk.overloads and blocks._nvfp4_chunk.overloads


# ------------------------------------------------------- AMD mfma models
# Written from the rules of lowprec/_kernels/amd.py: CDNA3's full A @ B of finite
# inputs takes the vectorised grid kernel; NaN/inf inputs, and dot products of row
# pairs (lp.vecdot), take the scalar pairs kernel (the reference's full rule per
# group). CDNA1/2 are IEEE FP32 arithmetic, NaN/inf included: grid or pairs only.
def _expected_mfma(gen: str, grid: bool, special: bool) -> tuple[str, ...]:
    if gen == "CDNA3":
        return ("amd.cdna3_grid",) if grid and not special else ("amd.cdna3_pairs",)
    return ("amd.cdna12_grid",) if grid else ("amd.cdna12_pairs",)


def test_the_routing_table_names_the_kernel_of_every_amd_model() -> None:
    from lowprec.amd import AMD_MODELS

    rows = 0
    for arch, (gen, _) in AMD_MODELS.items():
        for grid, special in itertools.product((False, True), (False, True)):
            assert route.serving_mfma(gen, grid, special) == _expected_mfma(gen, grid, special), \
                (arch, grid, special)
            rows += 1
    assert rows == 12


_MFMA = """
import sys, numpy as np
import lowprec as lp
from lowprec._kernels import amd
x = np.load(sys.argv[1])
a, b, c = x[:12, :40], x[12:52, :9], x[52:64, :9]
out = {}
for model, f in (("mi300", "fp16"), ("mi300", "fp8_e4m3fnuz"), ("mi300", "tf32"),
                 ("mi100", "bf16"), ("mi250", "fp16")):
    A, B = lp.round_to(a, f), lp.round_to(b, f)
    out[f"{model}-{f}"] = lp.matmul(A, B, c, inputs=f, model=model)
    out[f"{model}-{f}-vecdot"] = lp.vecdot(A[:9], B.T, c[0], inputs=f, model=model)
compiled = [k for k in ("cdna3_grid", "cdna3_pairs", "cdna12_grid", "cdna12_pairs")
            if getattr(amd, k).overloads]
np.savez(sys.argv[2], **out)
print(",".join(compiled) or "none")
"""


def test_cold_amd_models_are_served_by_their_reference(tmp_path: Path) -> None:
    # With nothing compiled (an empty numba cache, LOWPREC_COLD=numpy) lp.matmul and
    # lp.vecdot on the AMD models compile no mfma kernel: lowprec.amd.mfma_dot
    # answers, with the kernels' bits (here, LOWPREC_COLD=compile, the kernels run).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 40)) * np.exp2(rng.integers(-12, 12, (64, 40)))
    x[3, 5] = 0.0
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               LOWPREC_COLD="numpy")
    done = subprocess.run([sys.executable, "-c", _MFMA, str(tmp_path / "x.npy"),
                           str(tmp_path / "cold.npz")], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    assert done.stdout.split() == ["none"]
    import lowprec as lp
    from lowprec._kernels import amd

    cold = np.load(tmp_path / "cold.npz")
    a, b, c = x[:12, :40], x[12:52, :9], x[52:64, :9]
    for model, f in (("mi300", "fp16"), ("mi300", "fp8_e4m3fnuz"), ("mi300", "tf32"),
                     ("mi100", "bf16"), ("mi250", "fp16")):
        A, B = lp.round_to(a, f), lp.round_to(b, f)
        warm = lp.matmul(A, B, c, inputs=f, model=model)
        assert np.array_equal(cold[f"{model}-{f}"].view(np.uint64), warm.view(np.uint64))
        warm = lp.vecdot(A[:9], B.T, c[0], inputs=f, model=model)
        assert np.array_equal(cold[f"{model}-{f}-vecdot"].view(np.uint64), warm.view(np.uint64))
    assert amd.cdna3_grid.overloads and amd.cdna12_grid.overloads and amd.cdna3_pairs.overloads


_MFMA_WAIT = """
import numpy as np
import lowprec as lp
from lowprec import amd as public
from lowprec._kernels import amd
public._WAIT_WORK = 100  # this small matmul counts as large
a = np.arange(-40.0, 40.0).reshape(10, 8) / 8
r = lp.matmul(a, a.T, inputs="bf16", model="mi100")
print(bool(amd.cdna12_grid.overloads), np.array_equal(r, public.mfma_matmul(a, a.T, 0.0,
                                                                             "mi100", "bf16")))
"""


def test_a_large_cold_amd_call_waits_for_the_compile(tmp_path: Path) -> None:
    # Beyond _WAIT_WORK products the reference would take longer than the compile:
    # a cold call (an empty cache, the default background policy) waits for the
    # background process and runs the kernel, loaded from the cache it filled.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    done = subprocess.run([sys.executable, "-c", _MFMA_WAIT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    assert done.stdout.split() == ["True", "True"]
