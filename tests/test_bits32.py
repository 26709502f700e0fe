"""The branch-free float32 kernels (lowprec/_kernels/bits32.py, every format and
mode, and bits32_direct.py, the usual formats in the deterministic modes) against the
reference engine (``convert.to_codes(..., path="reference")``: ``convert_one`` ->
``round_pack`` for every element).

Inputs, for every format of at most 16 bits (and tf32): every value of the
format, every midpoint between neighbours, the overflow threshold (max plus
half a quantum) and 2**(emax + 1), every power of two float32 has (so every
shift below the smallest subnormal), each of them one float32 ulp up and down,
both signs, zeros, infinities, quiet and signalling NaNs, and spread-out bit
patterns. Every mode, with and without saturation and flush-to-zero; codes and
values both. Stochastic rounding gets the same words on both sides
(``sr_expand`` of the same block seeds), so it must agree bit for bit too.
"""

import contextlib
import ctypes
import ctypes.util
import math
import platform
import sys

import numpy as np
import pytest
from numba import njit

import lowprec as lp
from lowprec._kernels import bits32, bits32_direct, convert, memory, pow2, u32
from lowprec._kernels.params import MODE_INT, RNE
from lowprec._kernels.sr import SR_BLOCK
from lowprec.formats import custom_format

# Every registered format of <= 16 bits, tf32, and two without mantissa bits
# whose code 0 is zero (ties-to-even and odd read the implicit bit as the last).
# Two more at the edges of rne by float32 addition (bits32_direct): emax 116, where
# C would leave float32's range, and q = 2**-126, where subnormal inputs round to q;
# and a float32 cut to 3 mantissa bits (bits32_direct's plain kernels, as bf16).
# An unsigned format with zero and subnormals (ue5m3) is not one of bits32's (its
# docstring; the compiled engine serves it, test_route says so).
FORMATS = [f for f in lp.FORMATS.values() if f.width <= 16 and (f.signed or not f.has_subnormals)
           ] + [lp.get_format("tf32")] + [
    custom_format(4, 0, has_inf=False, nan="max"), custom_format(3, 0, has_inf=False, nan="none"),
    custom_format(7, 3, bias=10), custom_format(6, 3, bias=124), custom_format(8, 3)]
NO_SEEDS = np.empty(0, np.uint64)


def _inputs(f: lp.FloatFormat) -> np.ndarray:
    v = lp.decode(np.arange(1 << f.width), f)
    v = np.unique(np.abs(v[np.isfinite(v)]))
    mids = (v[1:] + v[:-1]) / 2  # exact in float64, and in float32 (m <= 22)
    q_max = 2.0 ** (f.emax - f.mantissa_bits)
    edges = [f.max + q_max / 2, 2.0 ** (f.emax + 1), f.max + q_max]
    powers = 2.0 ** np.arange(-149, 128)
    with np.errstate(over="ignore"):
        x = np.concatenate([v, mids, edges, powers, powers * 1.5]).astype(np.float32)
    x = x[np.isfinite(x)]
    up = np.nextafter(x, np.float32(np.inf))
    down = np.nextafter(x, np.float32(0))
    spread = ((np.arange(1 << 15, dtype=np.uint64) * 131071 + 5) % (1 << 32)).astype(np.uint32)
    specials = np.array([0, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7F7FFFFF, 1,
                         0x00400000, 0x003FFFFF, 0x00800000], np.uint32)
    pos = np.concatenate([x.view(np.uint32), up.view(np.uint32), down.view(np.uint32),
                          spread & 0x7FFFFFFF, specials])
    return np.unique(np.concatenate([pos, pos | np.uint32(0x80000000)]))


def _reference(f, xb, mode, saturate, ftz, seeds):
    ref = np.empty(xb.shape, f.code_dtype)
    bad, status = convert.to_codes(f, xb, mode, ref, saturate=saturate, ftz=ftz, seeds=seeds,
                                   path="reference")
    assert bad < 0, f"reference refused element {bad} ({xb[bad]:#x}), status {status}"
    return ref


def _kernel_inputs(f, seed):
    """The inputs (without NaNs where the format has none) and stochastic seeds."""
    xb = _inputs(f)
    if not f.has_nan:
        xb = xb[~np.isnan(xb.view(np.float32))]
    seeds = np.random.default_rng(seed).integers(0, 2**64, -(-xb.size // SR_BLOCK),
                                                 dtype=np.uint64)
    return xb, seeds


def _assert_equals_round_pack(f, kernel, q, xb, mode, saturate, ftz, seeds):
    """The kernels' codes (``kernel[True]``) and values (``kernel[False]``) of
    ``xb`` equal round_pack's, bit for bit."""
    what = f"{f.name} mode {mode} saturate={saturate} ftz={ftz}"
    ref = _reference(f, xb, mode, saturate, ftz, seeds)
    codes = np.empty(xb.shape, f.code_dtype)
    assert kernel[True](q, xb.view(np.float32), seeds, codes) == 0
    bad = np.flatnonzero(codes != ref)
    assert bad.size == 0, (
        f"{what}: {bad.size} mismatches, first x bits {xb[bad[0]]:#010x}: kernel "
        f"{int(codes[bad[0]]):#x}, round_pack {int(ref[bad[0]]):#x}")
    vals = np.empty(xb.shape, np.float32)
    assert kernel[False](q, xb.view(np.float32), seeds, vals) == 0
    vals = vals.view(np.int32)
    want = lp.decode(ref, f).astype(np.float32).view(np.int32)
    bad = np.flatnonzero(vals != want)
    assert bad.size == 0, (
        f"{what}: values differ at x bits {xb[bad[0]]:#010x}: "
        f"kernel {np.int32(vals[bad[0]]).view(np.float32)!r}, "
        f"round_pack {np.int32(want[bad[0]]).view(np.float32)!r}")


CASES = ((False, False), (True, False), (False, True))  # (saturate, ftz)


@pytest.mark.parametrize("f", FORMATS, ids=lambda f: f.name)
def test_bits32_equals_round_pack(f):
    assert bits32.supports(f)
    xb, seeds = _kernel_inputs(f, 7)
    for mode in MODE_INT.values():
        s = seeds if mode == MODE_INT["stochastic"] else NO_SEEDS
        for saturate, ftz in CASES:
            q = bits32.params_array(f, mode, saturate, ftz)
            kernels = {codes: bits32.KERNELS[mode, codes] for codes in (True, False)}
            _assert_equals_round_pack(f, kernels, q, xb, mode, saturate, ftz, s)


@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp6_e3m2"])
def test_bits32_reports_nans_without_a_code(fmt):
    f = lp.get_format(fmt)
    x = np.array([1.0, np.nan, 2.0, -np.nan, np.inf], np.float32)
    out = np.empty(x.shape, f.code_dtype)
    q = bits32.params_array(f, RNE, False, False)
    assert bits32.round_bits32(q, RNE, x, NO_SEEDS, out, True) == 1
    assert bits32.round_bits32(q, RNE, x[[0, 2, 4]], NO_SEEDS, out[:3], True) == 0


def test_bits32_supports_every_small_format_but_not_fp32():
    assert all(bits32.supports(f) for f in FORMATS)
    assert not bits32.supports(lp.get_format("fp32"))


DIRECT_FORMATS = [f for f in FORMATS if bits32_direct.supports(f)]


def _assert_table_equals_round_pack(f, table, modes, seed):
    """The kernels ``convert.kernel_for`` picks for ``f`` are ``table``'s (a
    function of saturate and ftz), and they equal round_pack in every one of
    ``modes`` and CASES."""
    xb, seeds = _kernel_inputs(f, seed)
    for mode in modes:
        s = seeds if mode == MODE_INT["stochastic"] else NO_SEEDS
        for saturate, ftz in CASES:
            kernels = {}
            for codes in (True, False):
                kernels[codes], q = convert.kernel_for(f, mode, saturate, ftz, codes)
                assert kernels[codes] is table(saturate, ftz)[mode, codes]
            _assert_equals_round_pack(f, kernels, q, xb, mode, saturate, ftz, s)


def _direct_table(f):
    """The kernels bits32_direct is expected to give ``f``, by saturate and ftz:
    bf16 and tf32 (and a float32 cut short of the same kind) take the plain
    ones unless saturating or flushing."""
    def table(saturate, ftz):
        if f.emin != -126:
            if bits32_direct.rne_by_addition(f):
                return bits32_direct.KERNELS
            # C beyond float32's range: rne takes the integer kernel directly
            integer = {(RNE, c): bits32_direct.KERNELS[RNE, c].integer for c in (True, False)}
            return {**bits32_direct.KERNELS, **integer}
        if f.exponent_bits == 8 and f.has_inf and f.nan == "ieee" and not (saturate or ftz):
            return bits32_direct.PLAIN_KERNELS
        return bits32_direct.FULL_KERNELS
    return table


@pytest.mark.parametrize("f", DIRECT_FORMATS, ids=lambda f: f.name)
def test_bits32_direct_equals_round_pack(f):
    _assert_table_equals_round_pack(f, _direct_table(f), bits32_direct.DIRECT_MODES, 8)


def test_plain_kernels_take_bf16_and_tf32_without_saturation_or_flushing():
    for name in ("bf16", "tf32"):
        f = lp.get_format(name)
        assert bits32_direct.plain(f, False, False)
        assert not bits32_direct.plain(f, True, False) and not bits32_direct.plain(f, False, True)
    assert not any(bits32_direct.plain(lp.get_format(n), False, False)
                   for n in ("fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"))


def test_bits32_direct_covers_the_registry_but_e8m0_and_fp32():
    small = {f.name for f in lp.FORMATS.values() if f.width <= 19}
    assert {f.name for f in DIRECT_FORMATS} >= small - {"e8m0", "ue5m3"}
    assert not bits32_direct.supports(lp.get_format("e8m0"))
    assert not bits32.supports(lp.get_format("ue5m3"))  # unsigned with subnormals: the engine


# E8M0 and its kin (unsigned powers of two) have a kernel of their own, pow2:
# the registry's e8m0 (2**-127 is a float32 subnormal) and two custom ones whose
# values are all float32 normals.
POW2_FORMATS = [lp.get_format("e8m0")] + [
    custom_format(e, 0, signed=False, has_inf=False, nan="max", has_subnormals=False)
    for e in (5, 7)]


@pytest.mark.parametrize("f", POW2_FORMATS, ids=lambda f: f.name)
def test_pow2_equals_round_pack(f):
    assert pow2.supports(f) and not bits32_direct.supports(f)
    _assert_table_equals_round_pack(f, lambda saturate, ftz: pow2.KERNELS, pow2.POW2_MODES, 9)


def test_pow2_takes_e8m0_alone_of_the_registry():
    assert [f.name for f in lp.FORMATS.values() if pow2.supports(f)] == ["e8m0"]
    assert not pow2.supports(custom_format(8, 0, signed=False, has_inf=False, nan="max",
                                           has_subnormals=False, bias=100))  # 2**155


@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp6_e3m2"])
def test_bits32_direct_reports_nans_without_a_code(fmt):
    f = lp.get_format(fmt)
    x = np.array([1.0, np.nan, 2.0, -np.inf], np.float32)
    out = np.empty(x.shape, f.code_dtype)
    kernel, q = convert.kernel_for(f, RNE, False, False, True)
    assert kernel(q, x, NO_SEEDS, out) == 1
    assert kernel(q, x[[0, 2, 3]], NO_SEEDS, out[:3]) == 0


# ----------------------------------------- rne by the processor's float32 addition
# bits32_direct rounds to nearest even by (|x| + C) - C, which is right only
# while the processor rounds to nearest even and reads subnormals as they are.
# Each call checks; under any other state the kernel takes its integer loop.
_GLIBC_X86 = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
_FE = {"downward": 0x400, "upward": 0x800, "towardzero": 0xC00}  # glibc x86-64's <fenv.h>


@njit
def _fpu_check(q):
    return bits32_direct.fpu_rounds_to_nearest(bits32_direct._unpack(q))


def test_rne_by_addition_covers_the_small_formats_and_not_bf16():
    names = {f.name for f in DIRECT_FORMATS if bits32_direct.rne_by_addition(f)}
    assert names == {f.name for f in DIRECT_FORMATS if f.emin > -126} - {"e7m3"}  # (below)
    assert "fp16" in names and "fp4_e2m1" in names and not names & {"bf16", "tf32"}
    # a format whose C would pass float32's range one binade above its max keeps the integers
    wide = custom_format(7, 3, bias=10)  # emax 116
    assert bits32_direct.supports(wide) and not bits32_direct.rne_by_addition(wide)


@contextlib.contextmanager
def _rounding(direction):
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    old = libm.fegetround()
    assert libm.fesetround(_FE[direction]) == 0
    try:
        yield
    finally:
        assert libm.fesetround(old) == 0


@pytest.mark.skipif(not _GLIBC_X86, reason="sets the rounding direction with glibc x86-64's fesetround")
@pytest.mark.parametrize("direction", list(_FE))
def test_rne_kernel_is_exact_whatever_the_processor_rounding(direction):
    fmts = [lp.get_format(n) for n in ("fp16", "fp8_e4m3", "fp8_e5m2fnuz", "fp4_e2m1")]
    q0 = bits32_direct.params_array(fmts[0], RNE, False, False)
    assert _fpu_check(q0)
    want = {}
    for f in fmts:
        xb, _ = _kernel_inputs(f, 9)
        want[f.name] = _reference(f, xb, RNE, False, False, NO_SEEDS), xb
        kernel, q = convert.kernel_for(f, RNE, False, False, True)
        assert kernel is bits32_direct.KERNELS[RNE, True]
        kernel(q, xb[:8].view(np.float32), NO_SEEDS, np.empty(8, f.code_dtype))  # compiled now
    with _rounding(direction):
        # the processor really rounds otherwise now, and the kernel's check sees it
        assert np.float32(1) + np.float32(2.0 ** -25) != 1 or \
            np.float32(1) + np.float32(3 * 2.0 ** -25) == 1
        assert not _fpu_check(q0)
        # the addition's kernel says so and writes nothing; NearestEven runs the integers'
        probe = np.zeros(8, fmts[0].code_dtype)
        addition = bits32_direct.KERNELS[RNE, True].addition
        assert addition(q0, np.ones(8, np.float32), NO_SEEDS, probe) == bits32_direct.NOT_NEAREST
        assert not probe.any()
        got = {}
        for f in fmts:
            ref, xb = want[f.name]
            kernel, q = convert.kernel_for(f, RNE, False, False, True)
            got[f.name] = np.empty(xb.shape, f.code_dtype)
            kernel(q, xb.view(np.float32), NO_SEEDS, got[f.name])
    assert _fpu_check(q0)
    for f in fmts:
        ref, xb = want[f.name]
        bad = np.flatnonzero(got[f.name] != ref)
        assert bad.size == 0, f"{f.name} rounding {direction}: x bits {xb[bad[0]]:#010x}"


def test_rne_kernel_is_exact_with_denormals_are_zero():
    torch = pytest.importorskip("torch", reason="sets denormals-are-zero with torch.set_flush_denormal")
    f = custom_format(6, 3, bias=124)  # q = 2**-126: a float32 subnormal input above q/2 rounds to q
    assert bits32_direct.rne_by_addition(f)
    x = np.array([2.0 ** -126 * 0.75, -(2.0 ** -126) * 0.75, 2.0 ** -149, 1.0], np.float32)
    q = bits32_direct.params_array(f, RNE, False, False)
    kernel = bits32_direct.KERNELS[RNE, False]
    want = np.empty(4, np.float32)
    kernel(q, x, NO_SEEDS, want)
    assert want[0] == 2.0 ** -126 and want[1] == -(2.0 ** -126) and want[2] == 0
    if not torch.set_flush_denormal(True):
        pytest.skip("this processor has no denormals-are-zero mode")
    try:
        assert not _fpu_check(q)
        got = np.empty(4, np.float32)
        kernel(q, x, NO_SEEDS, got)
    finally:
        torch.set_flush_denormal(False)
    assert got.tobytes() == want.tobytes()


# ------------------------------- stochastic rounding at the word's exact threshold
# A float32 x rounds up iff the element's 64-bit word w is below V = (the dropped
# part of x, in quanta) * 2**64, a real number (the exact probability, however far
# below the quantum x is). Random words almost never land next to V, so these words
# are made to: the seed of a one-element block is chosen so that its first word is
# V's floor or ceiling, or one off (the generator is a bijection of the seed,
# inverted here: sr.py's module docstring).
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1


def _unxorshift32(y: int, s: int) -> int:
    x = y
    for _ in range(32 // s + 1):
        x = y ^ (x >> s)
    return x


def _unmix32(y: int) -> int:
    """The inverse of lowbias32 (sr.mix32), in Python integers."""
    x = _unxorshift32(y, 16)
    x = (x * pow(0x846CA68B, -1, 1 << 32)) & _M32
    x = _unxorshift32(x, 15)
    x = (x * pow(0x7FEB352D, -1, 1 << 32)) & _M32
    return _unxorshift32(x, 16)


def _seed_for_first_word(w: int) -> int:
    """The block seed whose first stochastic-rounding word is ``w``."""
    hi, lo = w >> 32, w & _M32
    k1 = (_unmix32(lo) - hi) & _M32
    k0 = ((_unmix32(hi) ^ k1) - 0x9E3779B9) & _M32
    return (k1 << 32) | k0


def test_seed_for_first_word_inverts_the_generator():
    from lowprec._kernels.sr import sr_word
    for w in (0, 1, 2**32 - 1, 2**32, 2**63, _M64, 0x0123456789ABCDEF):
        assert int(sr_word(np.uint64(_seed_for_first_word(w)), 0)) == w


def _threshold_cases(f: lp.FloatFormat) -> list[tuple[float, int]]:
    """(x, w) pairs with w next to x's threshold V: x below q (down to float32's
    smallest subnormal), between q and 2q, and in the normal range; and zeros."""
    from fractions import Fraction
    rng = np.random.default_rng(11)
    q = Fraction(2) ** (f.emin - f.mantissa_bits)
    xs = []
    for e in [1, 0, -1, -7, -8, -9, -31, -32, -33, -40, -41, -64, -90]:
        for frac in (0, 1, 2**22 + 1, int(rng.integers(1, 2**23))):
            xs.append(np.float32((1 + frac / 2**23) * 2.0 ** e * float(q)))
    xs += [np.float32(v) for v in (2.0 ** -149, 3 * 2.0 ** -149, float(f.max) * 0.75 * 1.0001)]
    cases = []
    for x in xs:
        if not (0 < x < 2**127) or np.isinf(x):
            continue
        a = Fraction(float(x))
        e = math.frexp(float(x))[1] - 1  # x's binade
        ulp = q if e < f.emin else Fraction(2) ** (e - f.mantissa_bits)
        dropped = a / ulp - int(a / ulp)  # in [0, 1)
        v = dropped * 2**64
        lo, hi = int(v), -(-v.numerator // v.denominator)
        for w in {lo - 1, lo, hi, hi + 1}:
            if 0 <= w <= _M64:
                cases += [(float(x), w), (-float(x), w)]
    # zero never rounds up, not even with the smallest words (V = 0)
    cases += [(z, w) for z in (0.0, -0.0) for w in (0, 1, _M32, 1 << 32)]
    return cases


@pytest.mark.parametrize("f", DIRECT_FORMATS, ids=lambda f: f.name)
def test_stochastic_kernel_at_the_words_threshold(f):
    mode = MODE_INT["stochastic"]
    cases = _threshold_cases(f)
    xs = np.array([x for x, _ in cases], np.float32)
    seeds = np.array([_seed_for_first_word(w) for _, w in cases], np.uint64)
    kernels = {c: convert.kernel_for(f, mode, False, False, c) for c in (True, False)}
    codes = np.empty(1, f.code_dtype)
    ups = 0
    for i in range(xs.size):
        xb = xs[i:i + 1].view(np.uint32)
        ref = _reference(f, xb, mode, False, False, seeds[i:i + 1])
        kernel, q = kernels[True]
        kernel(q, xs[i:i + 1], seeds[i:i + 1], codes)
        assert codes[0] == ref[0], (
            f"x {xs[i]!r} word {int(seeds[i]):#x}: kernel {int(codes[0]):#x}, reference {int(ref[0]):#x}")
        vals = np.empty(1, np.float32)
        kernel, q = kernels[False]
        kernel(q, xs[i:i + 1], seeds[i:i + 1], vals)
        assert vals.view(np.int32)[0] == lp.decode(ref, f).astype(np.float32).view(np.int32)[0]
        ups += abs(float(lp.decode(ref, f)[0])) > abs(float(xs[i]))
    # the words straddle the thresholds: both directions happen
    assert 0 < ups < xs.size


def test_stochastic_kernel_is_exact_with_denormals_are_zero():
    # Below q the kernels take a tiny input's threshold from a float32 product,
    # which a denormals-are-zero mode reads as 0 for float32's subnormals; the
    # words at that threshold are redone in integers, so the codes do not change.
    torch = pytest.importorskip("torch", reason="sets denormals-are-zero with torch.set_flush_denormal")
    f = lp.get_format("fp8_e4m3")
    mode = MODE_INT["stochastic"]
    cases = [(x, w) for x, w in _threshold_cases(f) if abs(x) < 2.0 ** -126] + \
        [(s * 2.0 ** -149 * k, w) for s in (1, -1) for k in (1, 3, 2**22) for w in (0, 1, 2, 2**32)]
    xs = np.array([x for x, _ in cases], np.float32)
    assert (xs != 0).sum() >= 24
    seeds = np.array([_seed_for_first_word(w) for _, w in cases], np.uint64)
    kernel, q = convert.kernel_for(f, mode, False, False, True)

    def run():
        out = np.empty(xs.size, f.code_dtype)
        for i in range(xs.size):  # one element a block, so its word is w
            kernel(q, xs[i:i + 1], seeds[i:i + 1], out[i:i + 1])
        return out

    want = np.array([_reference(f, xs[i:i + 1].view(np.uint32), mode, False, False,
                                seeds[i:i + 1])[0] for i in range(xs.size)], f.code_dtype)
    np.testing.assert_array_equal(run(), want)
    assert (want != 0).any()  # some went up (word 0 against a threshold of 1)
    if not torch.set_flush_denormal(True):
        pytest.skip("this processor has no denormals-are-zero mode")
    try:
        assert np.float32(2.0 ** -149) * np.float32(2) == 0  # the processor reads them as 0 now
        got = run()
    finally:
        torch.set_flush_denormal(False)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["fp16", "fp8_e4m3", "fp8_e5m2fnuz", "fp4_e2m1"])
def test_stochastic_redo_of_unsure_elements_in_a_full_block(name):
    # The kernels make only each word's top half and redo, after the block, the
    # elements whose bottom half decides. Here element 0 of each block is such an
    # element (its word is V's floor or ceiling, V with a non-zero bottom half);
    # the rest of the block is ordinary data and tiny inputs. Codes and values,
    # into a new array and in place, must equal the reference's, element for element.
    f = lp.get_format(name)
    mode = MODE_INT["stochastic"]
    cases = [(x, w) for x, w in _threshold_cases(f)
             if abs(x) < 2.0 ** (f.emin - f.mantissa_bits - 10) and w & 0xFFFFFFFF]
    assert len(cases) >= 8  # inputs whose dropped part reaches the word's bottom half
    rng = np.random.default_rng(3)
    blocks, seeds = [], []
    for x, w in cases:
        rest = rng.standard_normal(SR_BLOCK - 1) * float(f.max) / 4
        rest[::7] *= 2.0 ** -40  # tiny ones too
        blocks.append(np.concatenate([[x], rest]).astype(np.float32))
        seeds.append(_seed_for_first_word(w))
    xs = np.concatenate(blocks)
    seeds = np.array(seeds, np.uint64)
    ref = _reference(f, xs.view(np.uint32), mode, False, False, seeds)
    want = lp.decode(ref, f).astype(np.float32)
    (kc, qc), (kv, qv) = (convert.kernel_for(f, mode, False, False, c) for c in (True, False))
    codes = np.empty(xs.size, f.code_dtype)
    kc(qc, xs, seeds, codes)
    np.testing.assert_array_equal(codes, ref)
    vals = np.empty_like(xs)
    kv(qv, xs, seeds, vals)
    np.testing.assert_array_equal(vals.view(np.int32), want.view(np.int32))
    inplace = xs.copy()
    kv(qv, inplace, seeds, inplace)
    np.testing.assert_array_equal(inplace.view(np.int32), want.view(np.int32))
    # and element 0 of the blocks went both ways
    ups = np.abs(want[::SR_BLOCK]) > np.abs(xs[::SR_BLOCK])
    assert ups.any() and not ups.all()
    # The same blocks repeated past memory.FAR elements, where the loop walks
    # each block in pieces that ask for memory ahead: the redo still finds them.
    reps = -(-memory.FAR // xs.size) + 1
    big, big_seeds = np.tile(xs, reps), np.tile(seeds, reps)
    codes = np.empty(big.size, f.code_dtype)
    kc(qc, big, big_seeds, codes)
    np.testing.assert_array_equal(codes, np.tile(ref, reps))
    vals = np.empty_like(big)
    kv(qv, big, big_seeds, vals)
    np.testing.assert_array_equal(vals.view(np.int32), np.tile(want, reps).view(np.int32))


@pytest.mark.parametrize("f", DIRECT_FORMATS + POW2_FORMATS[:1], ids=lambda f: f.name)
def test_far_arrays_equal_the_same_in_small_calls(f):
    # From memory.FAR elements on, the kernels' loop takes pieces that prefetch
    # (the other tests here mostly run smaller arrays): every mode, codes and
    # values, equal to the same kernel called on slices below FAR (a whole
    # number of stochastic blocks each, with their seeds).
    xb, _ = _kernel_inputs(f, 10)
    n = memory.FAR + 3 * SR_BLOCK + 5
    big = np.tile(xb, -(-n // xb.size))[:n].view(np.float32)
    seeds = np.random.default_rng(11).integers(0, 2**64, -(-n // SR_BLOCK), dtype=np.uint64)
    step = 16 * SR_BLOCK
    assert step < memory.FAR
    for mode in MODE_INT.values():
        s = seeds if mode == MODE_INT["stochastic"] else NO_SEEDS
        for codes in (True, False):
            kernel, q = convert.kernel_for(f, mode, False, False, codes)
            dtype = f.code_dtype if codes else np.float32
            whole, parts = np.empty(n, dtype), np.empty(n, dtype)
            kernel(q, big, s, whole)
            for lo in range(0, n, step):
                kernel(q, big[lo:lo + step], s[lo // SR_BLOCK:] if s.size else s,
                       parts[lo:lo + step])
            np.testing.assert_array_equal(whole.view(np.uint8), parts.view(np.uint8),
                                          err_msg=f"{f.name} mode {mode} codes={codes}")


ORDINARY_FORMATS = [f for f in DIRECT_FORMATS if not bits32_direct.full_range(f)]


def _ordinary(xb, q, mode):
    """The inputs of ``xb`` whose magnitudes are ordinary for the kernel of
    ``mode`` with parameters ``q`` (bits32_direct.ordinary_bounds)."""
    lo, hi = bits32_direct.ordinary_bounds(q, mode)
    a = xb & np.uint32(0x7FFFFFFF)
    return xb[(a >= lo) & (a <= hi)], int(lo), int(hi)


@pytest.mark.parametrize("f", ORDINARY_FORMATS, ids=lambda f: f.name)
def test_ordinary_inputs_alone_equal_round_pack(f):
    # An array whose inputs are all ordinary takes the kernels' short loop
    # (bits32_direct._ordinary_*) alone: every input of _inputs from the
    # kernel's ordinary bound up to the largest value, both of them included.
    xb, _ = _kernel_inputs(f, 12)
    for mode in bits32_direct.DIRECT_MODES:
        for saturate, ftz in CASES:
            q = bits32_direct.params_array(f, mode, saturate, ftz)
            x, lo, hi = _ordinary(xb, q, mode)
            # From the flushing bound (0 without flushing: zeros and tiny inputs
            # included) or, in stochastic rounding, from q, to the largest value.
            flush = int(np.float32(f.smallest_normal).view(np.uint32)) * ftz
            q_bits = int(np.float32(f.smallest_subnormal).view(np.uint32))
            assert lo == (max(q_bits, flush) if mode == MODE_INT["stochastic"] else flush)
            assert hi == int(np.float32(f.max).view(np.uint32))
            assert {lo, hi, lo | 0x80000000, hi | 0x80000000} <= set(x.tolist())
            seeds = np.random.default_rng(13).integers(0, 2**64, -(-x.size // SR_BLOCK),
                                                       dtype=np.uint64)
            s = seeds if mode == MODE_INT["stochastic"] else NO_SEEDS
            kernels = {codes: convert.kernel_for(f, mode, saturate, ftz, codes)[0]
                       for codes in (True, False)}
            _assert_equals_round_pack(f, kernels, q, x, mode, saturate, ftz, s)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2fnuz", "fp4_e2m1"])
def test_far_arrays_mixing_ordinary_and_other_pieces_equal_round_pack(name):
    # A far array (pieces of memory.PIECE) whose pieces are ordinary or hold one
    # other input (a special, a tiny one, an overflow) among ordinary ones, in
    # runs of every length up to past the back-off's 64 pieces, so that the short
    # loop, the long one, and the checks between them all run; in place as well.
    f = lp.get_format(name)
    rng = np.random.default_rng(14)
    xb, _ = _kernel_inputs(f, 15)
    a = xb & np.uint32(0x7FFFFFFF)
    normal = (a >= np.float32(f.smallest_normal).view(np.uint32)) & (
        a <= np.float32(f.max).view(np.uint32))
    ordinary, other = xb[normal], xb[~normal]
    runs = [1, 2, 1, 3, 5, 1, 8, 2, 70, 1, 130, 3, 1, 1, 4, 9, 2] * 5
    pieces = []
    for k, length in enumerate(runs):
        for _ in range(length):
            piece = rng.choice(ordinary, memory.PIECE)
            if k % 2:
                piece[rng.integers(memory.PIECE)] = rng.choice(other)
            pieces.append(piece)
    x = np.concatenate(pieces).view(np.float32)
    assert x.size >= memory.FAR
    seeds = rng.integers(0, 2**64, -(-x.size // SR_BLOCK), dtype=np.uint64)
    for mode in bits32_direct.DIRECT_MODES:
        s = seeds if mode == MODE_INT["stochastic"] else NO_SEEDS
        for saturate, ftz in CASES:
            q = bits32_direct.params_array(f, mode, saturate, ftz)
            ref = _reference(f, x.view(np.uint32), mode, saturate, ftz, s)
            want = lp.decode(ref, f).astype(np.float32)
            for codes in (True, False):
                kernel = convert.kernel_for(f, mode, saturate, ftz, codes)[0]
                out = np.empty(x.shape, f.code_dtype) if codes else np.empty_like(x)
                assert kernel(q, x, s, out) == 0
                got, exp = (out, ref) if codes else (out.view(np.int32), want.view(np.int32))
                np.testing.assert_array_equal(got, exp, err_msg=f"{name} {mode} {codes}")
            inplace = x.copy()
            convert.kernel_for(f, mode, saturate, ftz, False)[0](q, inplace, s, inplace)
            np.testing.assert_array_equal(inplace.view(np.int32), want.view(np.int32))


def test_rounding_kernels_ask_for_wide_vectors():
    # The loop marks the kernel it is inlined into with LLVM's prefer-vector-width
    # of 512 (u32.wide_vectors): a speed hint only, on processors with AVX-512.
    # Compiled afresh here (the shared kernels may come from numba's disk cache,
    # whose code cannot be inspected).
    # (bits32_direct's rne is NearestEven: its addition kernel holds the loops)
    for module, name, kernel in (
            (bits32_direct, "fp8_e4m3", bits32_direct.KERNELS[RNE, False].addition),
            (pow2, "e8m0", pow2.KERNELS[RNE, False])):
        f = lp.get_format(name)
        k = njit(kernel.py_func)
        x = np.linspace(-3, 3, 100, dtype=np.float32)
        out = np.empty_like(x)
        k(module.params_array(f, RNE, False, False), x, NO_SEEDS, out)
        np.testing.assert_array_equal(out, lp.round_to(x, f))
        llvm = "".join(k.inspect_llvm().values())
        assert u32.WIDE in llvm, name


def test_the_loop_refuses_a_route_its_mode_cannot_take() -> None:
    """``direct_loop.make_kernel`` builds no kernel that would round wrongly: the float32
    addition is round-to-nearest-even's only, the SR route stochastic rounding's, DET
    the other modes'; an unknown route is named."""
    from lowprec._kernels import direct_loop as dl

    sr, rtz = MODE_INT["stochastic"], MODE_INT["rtz"]
    for route, mode in ((dl.ADDITION, rtz), (dl.SR, rtz), (dl.DET, sr), (7, RNE)):
        with pytest.raises(ValueError, match="route"):
            dl.make_kernel(route, mode, True)
    for route in dl.ROUTES:  # each legal pairing is made (compiled only when called)
        mode = RNE if route in (dl.ADDITION, dl.DET) else sr
        assert callable(dl.make_kernel(route, mode, False))
