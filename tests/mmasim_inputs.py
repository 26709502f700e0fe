"""The inputs of the large MMA-Sim vector set, regenerated from a seed.

``scripts/mmasim_cases.py`` runs MMA-Sim (microsoft/MMA-Sim) on these inputs and stores
only digests of its outputs (``tests/data/mmasim_cases.npz``); ``tests/test_mmasim_cases.py``
rebuilds the same inputs here, runs lowprec's models and compares bit for bit. So the
inputs must not depend on anything that may change between numpy releases: every random
word comes from splitmix64 (Steele, Lea & Flood 2014) written on numpy uint64 arrays,
and every value is built from integer fields (sign, exponent, significand) with exact
float64 arithmetic. Formats are described here by their fields, not taken from lowprec.

``VERSION`` names this generator: change anything that changes the inputs and bump it
(the stored file records the version it was made with; the test refuses another).

Kinds of dot product (case ``i`` is of kind ``i % 8``, so every prefix holds all):
0 moderate exponents; 1 wide exponents with subnormals; 2 cancellation (the second half
repeats the first with B negated, one element changed); 3 carries (every significand
at its largest); 4 tiny addends beside a large C; 5 subnormals; 6 the largest values;
7 C at its extremes (zeros, subnormals, the largest). AMD sets add 8 zeros of both signs
and 9 NaN/inf. NVIDIA sets have no zero element: MMA-Sim gives a zero element the
exponent -126 and lets its product take part in the alignment, where lowprec (and the
hardware probes of ../shared/hardware/mma-probes.md) leave it out; that class is
documented (docs/instructions.md), not averaged in.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

VERSION = 1
SEED = 37
CHUNK = 256   # cases per stored digest
HEAD = 2048   # cases whose outputs are stored whole, for diagnosis

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Stream:
    """Counter-based splitmix64 words: field ``f`` of key ``key`` under ``seed``."""

    def __init__(self, seed: int, key: str) -> None:
        self.base = (np.uint64(seed) << np.uint64(32)) ^ np.uint64(zlib.crc32(key.encode()))

    def words(self, field: int, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape))
        f = np.array([field], np.uint64) * _GOLDEN
        start = _mix(f ^ self.base)
        ctr = np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN + start
        return _mix(ctr).reshape(shape)

    def ints(self, field: int, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        """Integers in [lo, hi] (hi - lo + 1 far below 2**64: the bias is negligible)."""
        w = self.words(field, shape) % np.uint64(hi - lo + 1)
        return w.astype(np.int64) + lo


@dataclass(frozen=True)
class Fmt:
    """A binary format by its fields: significand bits below the point, exponent range,
    the largest significand (as an integer) at the largest exponent."""
    m: int
    emin: int
    emax: int
    top: int
    has_inf: bool = False
    neg_zero: bool = True

    def value(self, sign: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
        return np.where(sign, -1.0, 1.0) * np.ldexp(s.astype(np.float64), (e - self.m))


FMT = {
    "fp8_e4m3": Fmt(3, -6, 8, 14),
    "fp8_e5m2": Fmt(2, -14, 15, 7, has_inf=True),
    "fp16": Fmt(10, -14, 15, 2047, has_inf=True),
    "bf16": Fmt(7, -126, 127, 255, has_inf=True),
    "tf32": Fmt(10, -126, 127, 2047, has_inf=True),
    "fp32": Fmt(23, -126, 127, 2 ** 24 - 1, has_inf=True),
    "fp8_e4m3fnuz": Fmt(3, -7, 7, 15, neg_zero=False),
    "fp8_e5m2fnuz": Fmt(2, -15, 15, 7, neg_zero=False),
}


def _fields(st: Stream, fld: int, f: Fmt, kind: np.ndarray, shape: tuple[int, ...],
            amd: bool) -> np.ndarray:
    """Values of format ``f``, shape (N, k), row r of kind kind[r] (see the docstring)."""
    n, k = shape
    kk = np.broadcast_to(kind[:, None], shape)
    sign = (st.words(fld, shape) >> np.uint64(63)).astype(bool)
    frac = st.ints(fld + 1, shape, 0, 2 ** f.m - 1)
    sig = frac + 2 ** f.m
    lo_w, hi_w = max(f.emin, -40), min(f.emax, 40)
    e_mod = np.clip(st.ints(fld + 2, shape, -4, 4), f.emin, f.emax)
    e_wide = st.ints(fld + 3, shape, lo_w, hi_w)
    coin = st.ints(fld + 4, shape, 0, 7)
    e = np.where(kk == 1, e_wide, e_mod)
    e = np.where(kk == 4, np.clip(e_mod - 4, f.emin, f.emax), e)
    sub = ((kk == 1) & (coin == 0)) | ((kk == 5) & (coin < 4))
    sub_sig = st.ints(fld + 5, shape, 1, 2 ** f.m - 1)
    sig = np.where(sub, sub_sig, sig)
    e = np.where(sub, f.emin, e)
    # carries: every significand at its largest, one exponent per row, one sign
    row_e = np.clip(st.ints(fld + 6, (n, 1), -2, 2), f.emin, f.emax)
    car = kk == 3
    sig = np.where(car, 2 ** (f.m + 1) - 1, sig)
    e = np.where(car, np.broadcast_to(row_e, shape), e)
    sign = np.where(car, False, sign)
    # the largest values: half at the top, the rest in the top four binades
    big = kk == 6
    e_big = st.ints(fld + 7, shape, max(f.emin, f.emax - 3), f.emax)
    sig = np.where(big & (coin < 4), f.top, np.where(big, np.minimum(sig, f.top), sig))
    e = np.where(big & (coin < 4), f.emax, np.where(big, e_big, e))
    sig = np.where(e == f.emax, np.minimum(sig, f.top), sig)
    x = f.value(sign, e, sig)
    if amd:
        zero = (kk == 8) & (coin < 4)
        x = np.where(zero, np.where(sign & f.neg_zero, -0.0, 0.0), x)
        spec = (kk == 9) & (st.ints(fld + 8, shape, 0, 2 * k - 1) == 0)
        inf = np.where(sign, -np.inf, np.inf) if f.has_inf else np.nan
        x = np.where(spec & (coin < 3), np.nan, np.where(spec, inf, x))
    return x


def _cancel(st: Stream, f: Fmt, kind: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Kind 2: a's second half repeats its first, b's is its first negated; one element
    of a's second half gets a new significand (a residual that is not zero)."""
    n, k = a.shape
    h = k // 2
    rows = np.flatnonzero(kind == 2)
    a[rows, h:2 * h] = a[rows, :h]
    b[rows, h:2 * h] = -b[rows, :h]
    j = st.ints(90, (n,), 0, h - 1)[rows] + h
    frac = st.ints(91, (n,), 0, 2 ** f.m - 1)[rows]
    old = a[rows, j]
    mag = np.abs(old)
    e = np.maximum(np.frexp(mag)[1].astype(np.int64) - 1, f.emin)  # exact, unlike log2
    new_sig = np.where(mag < 2.0 ** f.emin, frac % (2 ** f.m - 1) + 1, frac + 2 ** f.m)
    new_sig = np.where(e == f.emax, np.minimum(new_sig, f.top), new_sig)
    a[rows, j] = f.value(old < 0, e, new_sig)


def c_values(st: Stream, out: str, kind: np.ndarray) -> np.ndarray:
    """C (FP32 or FP16 values) for each case."""
    f = FMT["fp32" if out == "fp32" else "fp16"]
    n = len(kind)
    sign = (st.words(60, (n,)) >> np.uint64(63)).astype(bool)
    sig = st.ints(61, (n,), 0, 2 ** f.m - 1) + 2 ** f.m
    hi = 12 if out == "fp32" else 10
    e = np.clip(st.ints(62, (n,), -30, hi), f.emin, f.emax)
    coin = st.ints(63, (n,), 0, 15)
    e = np.where(kind == 2, np.maximum(e - 20, f.emin), e)     # small beside cancellation
    e = np.where(kind == 4, st.ints(64, (n,), 6, 14 if out == "fp16" else 20), e)
    c = f.value(sign, e, sig)
    c = np.where((coin < 2) & (kind != 4), 0.0, c)             # C = +0 at 1/8
    ext = np.array([0.0, -0.0, 2.0 ** (f.emin - f.m), -(2.0 ** (f.emin - f.m)),
                    2.0 ** f.emin, -(2.0 ** f.emin), f.top * 2.0 ** (f.emax - f.m),
                    -f.top * 2.0 ** (f.emax - f.m), 1.0, -1.0,
                    f.value(np.array(False), np.array(f.emin), np.array(2 ** f.m - 1)),
                    -3.0 * 2.0 ** (f.emin - f.m)])
    pick = st.ints(65, (n,), 0, len(ext) - 1)
    return np.where(kind == 7, ext[pick], c)


def plain_cases(key: str, fmt: str, out: str, k: int, n: int, *, amd: bool = False,
                seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` independent dot products of length ``k``: a (n, k), b (n, k), c (n,)."""
    st = Stream(seed, key)
    f = FMT[fmt]
    kind = np.arange(n) % (10 if amd else 8)
    a = _fields(st, 0, f, kind, (n, k), amd)
    b = _fields(st, 20, f, kind, (n, k), amd)
    _cancel(st, f, kind, a, b)
    return a, b, c_values(st, out, kind)


def scaled_tiles(key: str, fmt: str, k: int, block: int, skind: str, tiles: int,
                 seed: int = SEED) -> tuple[np.ndarray, ...]:
    """Block-scaled MMA tiles m128 n8: A (t, 128, k), B (t, k, 8), C (t, 128, 8) and the
    scale codes SA (t, 128, k/block), SB (t, k/block, 8) (E8M0 or UE4M3 bytes).
    ``fmt`` 'fp4_e2m1' gives element codes 0..15 (zeros included, as MMA-Sim's FP4
    path sums each group of 16 exactly before the alignment)."""
    st = Stream(seed, key)
    m, nn, nb = 128, 8, k // block
    if fmt == "fp4_e2m1":
        a = st.ints(0, (tiles, m, k), 0, 15).astype(np.uint8)
        b = st.ints(1, (tiles, k, nn), 0, 15).astype(np.uint8)
    else:
        f = FMT[fmt]
        ka = np.arange(tiles * m) % 8
        kb = np.arange(tiles * nn) % 8
        ka = np.where(ka == 2, 0, ka)  # no cancellation structure across a tile
        kb = np.where(kb == 2, 1, kb)
        a = _fields(st, 0, f, ka, (tiles * m, k), False).reshape(tiles, m, k)
        b = _fields(st, 20, f, kb, (tiles * nn, k), False).reshape(tiles, nn, k)
        b = b.transpose(0, 2, 1).copy()
    kc = np.arange(tiles * m * nn) % 8
    c = c_values(st, "fp32", kc).reshape(tiles, m, nn)
    if skind == "e8m0":
        spread = 40 if fmt != "fp4_e2m1" else 30
        sa = st.ints(70, (tiles, m, nb), 127 - spread, 127 + spread).astype(np.uint8)
        sb = st.ints(71, (tiles, nb, nn), 127 - spread, 127 + spread).astype(np.uint8)
    else:  # UE4M3 scale codes, positive, NaN (0x7F) left out; 0 (a zero scale) kept
        sa = st.ints(70, (tiles, m, nb), 0, 0x7E).astype(np.uint8)
        sb = st.ints(71, (tiles, nb, nn), 0, 0x7E).astype(np.uint8)
    return a, b, c, sa, sb


def canonical_bits(d: np.ndarray) -> np.ndarray:
    """FP32 bit patterns of the outputs (FP16 outputs widen exactly), any NaN as 0x7FC00000."""
    d32 = np.asarray(d, np.float64).astype(np.float32)
    bits = d32.view(np.uint32).copy()
    bits[np.isnan(d32)] = np.uint32(0x7FC00000)
    return bits


def digests(bits: np.ndarray) -> np.ndarray:
    """sha256 of each CHUNK of little-endian FP32 patterns, first 8 bytes: (chunks, 8)."""
    import hashlib

    raw = np.ascontiguousarray(bits, "<u4")
    out = [np.frombuffer(hashlib.sha256(raw[i:i + CHUNK].tobytes()).digest()[:8], np.uint8)
           for i in range(0, len(raw), CHUNK)]
    return np.array(out, np.uint8)


@dataclass(frozen=True)
class Key:
    """One (instruction, type) of the set: lowprec's model and MMA-Sim's instruction."""
    name: str
    model: str      # lowprec model name
    fmt: str        # element format (FMT, or fp4_e2m1)
    out: str        # fp32 or fp16 (D and C)
    sim: str        # MMA-Sim class
    arch: str       # MMA-Sim architecture
    qual: str       # MMA-Sim qualifier
    k: int
    n: int          # dot products
    skind: str = ""  # block-scaled: e8m0 or ue4m3
    block: int = 0


def _nv(name: str, model: str, sim: str, arch: str, shape: str, fmt: str, out: str, k: int,
        n: int = 100_000) -> Key:
    t = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2", "fp16": "f16", "bf16": "bf16",
         "tf32": "tf32"}[fmt]
    o = "f32" if out == "fp32" else "f16"
    qual = f"{shape}.{o}.{t}.{t}" if sim != "mma" else f"{shape}.{o}.{t}.{t}.{o}"
    return Key(name, model, fmt, out, sim, arch, qual, k, n)


def _bs(name: str, qual: str, fmt: str, k: int, skind: str, block: int) -> Key:
    return Key(name, "b200:tcgen05", fmt, "fp32", "tcgen05mma_block_scale", "Blackwell", qual,
               k, 98 * 1024, skind, block)


def _amd(name: str, qual: str, fmt: str, k: int) -> Key:
    return Key(name, "mi300:mfma", fmt, "fp32", "mfma", "CDNA3", qual, k, 100_000)


KEYS: dict[str, Key] = {x.name: x for x in [
    # Hopper wgmma
    _nv("wgmma_f16_e4m3", "h100:wgmma", "wgmma", "Hopper", "m64n8k32", "fp8_e4m3", "fp16", 32),
    _nv("wgmma_f32_e4m3", "h100:wgmma", "wgmma", "Hopper", "m64n8k32", "fp8_e4m3", "fp32", 32),
    _nv("wgmma_f16_e5m2", "h100:wgmma", "wgmma", "Hopper", "m64n8k32", "fp8_e5m2", "fp16", 32),
    _nv("wgmma_f32_e5m2", "h100:wgmma", "wgmma", "Hopper", "m64n8k32", "fp8_e5m2", "fp32", 32),
    _nv("wgmma_f32_f16", "h100:wgmma", "wgmma", "Hopper", "m64n8k16", "fp16", "fp32", 16),
    _nv("wgmma_f16_f16", "h100:wgmma", "wgmma", "Hopper", "m64n8k16", "fp16", "fp16", 16),
    _nv("wgmma_f32_bf16", "h100:wgmma", "wgmma", "Hopper", "m64n8k16", "bf16", "fp32", 16),
    _nv("wgmma_f32_tf32", "h100:wgmma", "wgmma", "Hopper", "m64n8k8", "tf32", "fp32", 8),
    # Blackwell tcgen05.mma
    _nv("tcgen05_f32_e4m3", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k32", "fp8_e4m3",
        "fp32", 32),
    _nv("tcgen05_f16_e4m3", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k32", "fp8_e4m3",
        "fp16", 32),
    _nv("tcgen05_f32_e5m2", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k32", "fp8_e5m2",
        "fp32", 32),
    _nv("tcgen05_f16_e5m2", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k32", "fp8_e5m2",
        "fp16", 32),
    _nv("tcgen05_f32_f16", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k16", "fp16",
        "fp32", 16),
    _nv("tcgen05_f16_f16", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k16", "fp16",
        "fp16", 16),
    _nv("tcgen05_f32_bf16", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k16", "bf16",
        "fp32", 16),
    _nv("tcgen05_f32_tf32", "b200:tcgen05", "tcgen05mma", "Blackwell", "m64n8k8", "tf32",
        "fp32", 8),
    # mma.sync
    _nv("v100_mma_f32_f16", "v100:mma.sync", "mma", "Volta", "m8n8k4", "fp16", "fp32", 4),
    _nv("v100_mma_f16_f16", "v100:mma.sync", "mma", "Volta", "m8n8k4", "fp16", "fp16", 4),
    _nv("a100_mma_f32_f16", "a100:mma.sync", "mma", "Ampere", "m16n8k16", "fp16", "fp32", 16),
    _nv("a100_mma_f16_f16", "a100:mma.sync", "mma", "Ampere", "m16n8k16", "fp16", "fp16", 16),
    _nv("a100_mma_f32_bf16", "a100:mma.sync", "mma", "Ampere", "m16n8k16", "bf16", "fp32", 16),
    _nv("a100_mma_f32_tf32", "a100:mma.sync", "mma", "Ampere", "m16n8k8", "tf32", "fp32", 8),
    _nv("ada_mma_f32_e4m3", "ada:mma.sync", "mma", "Ada Lovelace", "m16n8k32", "fp8_e4m3",
        "fp32", 32),
    _nv("ada_mma_f16_e4m3", "ada:mma.sync", "mma", "Ada Lovelace", "m16n8k32", "fp8_e4m3",
        "fp16", 32),
    _nv("ada_mma_f32_e5m2", "ada:mma.sync", "mma", "Ada Lovelace", "m16n8k32", "fp8_e5m2",
        "fp32", 32),
    _nv("ada_mma_f16_e5m2", "ada:mma.sync", "mma", "Ada Lovelace", "m16n8k32", "fp8_e5m2",
        "fp16", 32),
    _nv("h100_mma_f32_f16", "h100:mma.sync", "mma", "Hopper", "m16n8k16", "fp16", "fp32", 16),
    _nv("h100_mma_f32_bf16", "h100:mma.sync", "mma", "Hopper", "m16n8k16", "bf16", "fp32", 16),
    _nv("h100_mma_f32_tf32", "h100:mma.sync", "mma", "Hopper", "m16n8k8", "tf32", "fp32", 8),
    _nv("b200_mma_f32_f16", "b200:mma.sync", "mma", "Blackwell", "m16n8k16", "fp16", "fp32", 16),
    _nv("b200_mma_f32_bf16", "b200:mma.sync", "mma", "Blackwell", "m16n8k16", "bf16", "fp32",
        16),
    # Blackwell tcgen05.mma block_scale (tiles m128 n8)
    _bs("bs_mxf8f6f4_e4m3", "m128n8k32.block32.f32.e4m3.e4m3.ue8m0", "fp8_e4m3", 32, "e8m0", 32),
    _bs("bs_mxf8f6f4_e5m2", "m128n8k32.block32.f32.e5m2.e5m2.ue8m0", "fp8_e5m2", 32, "e8m0", 32),
    _bs("bs_mxf4nvf4_ue4m3_16", "m128n8k64.block16.f32.e2m1.e2m1.ue4m3", "fp4_e2m1", 64,
        "ue4m3", 16),
    _bs("bs_mxf4nvf4_e8m0_32", "m128n8k64.block32.f32.e2m1.e2m1.ue8m0", "fp4_e2m1", 64,
        "e8m0", 32),
    _bs("bs_mxf4nvf4_e8m0_16", "m128n8k64.block16.f32.e2m1.e2m1.ue8m0", "fp4_e2m1", 64,
        "e8m0", 16),
    # AMD CDNA3 mfma
    _amd("cdna3_fp16", "f32_16x16x16_f16", "fp16", 16),
    _amd("cdna3_bf16", "f32_16x16x16_bf16", "bf16", 16),
    _amd("cdna3_xf32", "f32_16x16x8_xf32", "fp32", 8),
    _amd("cdna3_fp8_e4m3fnuz", "f32_16x16x32_fp8_fp8", "fp8_e4m3fnuz", 32),
    _amd("cdna3_fp8_e5m2fnuz", "f32_16x16x32_bf8_bf8", "fp8_e5m2fnuz", 32),
]}


def cases(key: Key, n: int | None = None) -> tuple[np.ndarray, ...]:
    """The inputs of ``key`` (its first ``n`` dot products, or tiles covering them)."""
    n = key.n if n is None else n
    if key.skind:
        return scaled_tiles(key.name, key.fmt, key.k, key.block, key.skind, -(-n // 1024))
    return plain_cases(key.name, key.fmt, key.out, key.k, n, amd=key.sim == "mfma")
