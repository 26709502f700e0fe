"""AMD CDNA matrix cores (``v_mfma_*``): reference models of one MFMA dot product.

The rules below follow MMA-Sim (microsoft/MMA-Sim commit c785138, arXiv 2511.10909,
files ``mmasim/simulator/amd.py`` and ``mmasim/simulator/arithmetic.py``), restated
here as integer arithmetic on scaled significands (no code copied):

* **CDNA3** (``mi300``) FP16, BF16 (groups of 8 products), xf32 (FP32 inputs
  truncated to 10 fraction bits, groups of 4) and FP8/BF8 fnuz (groups of 16):
  every exact product ``s_i * 2**e_i`` (nominal exponent ``e_i = e_a + e_b``,
  subnormals at the format's minimum exponent, zero at exponent -126) is cut to
  24 fraction bits below the group's largest nominal exponent ``e``, truncated
  toward zero, and summed exactly. The sum is then aligned with C at
  ``max(e, e_c)``: the products' sum keeps 31 fraction bits, C keeps 24, both
  **rounded down (toward -inf)**, not truncated; the total is rounded to nearest
  even into FP32 and becomes the next group's C. FP8/BF8: even- and odd-indexed
  products are summed as two separate groups, each aligned (rounded down, 24
  bits) to the larger of their two exponents before they are added; a C more than
  25 binades below that is dropped.
* **CDNA1** (``mi100``) and **CDNA2** (``mi250``) FP16 and BF16: a pairwise tree of
  FP32 operations over groups of 4 products (BF16 without ``_1k``: groups of 2):
  leaves ``fmaf(a, b, +0)``, nodes FP32 additions (RNE), each group's sum added to
  the running FP32 accumulator. CDNA2 flushes subnormal inputs and C to +0, and every
  subnormal intermediate (node, accumulator) to a zero of its sign.

Inf and NaN: a NaN or infinite exact sum gives that value; on CDNA3 a product at or
beyond ``2**128`` (BF16, xf32) gives an infinity of its sign (NaN if both signs).

>>> import numpy as np
>>> a, b = np.array([-(2**-12 + 2**-20)]), np.array([2**-13])   # product -(2**-25 + 2**-33)
>>> float(mfma_dot(a, b, 1.0, "mi300", "fp16"))   # rounded down: 1 - 2**-25 - 2**-31 -> RNE
0.9999999403953552
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._kernels import amd as _compiled
from ._kernels import route
from .tensorcores import AccumulationModel

__all__ = ["AMD_MODELS", "MFMA", "MFMA_MODELS", "get_mfma", "mfma_dot", "mfma_matmul"]

_MMASIM = "MMA-Sim (microsoft/MMA-Sim c785138, mmasim/simulator/amd.py)"

#: architecture -> (CDNA generation, input formats it models)
AMD_MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mi100": ("CDNA1", ("fp16", "bf16")),
    "mi250": ("CDNA2", ("fp16", "bf16", "bf16_1k")),
    "mi300": ("CDNA3", ("fp16", "bf16", "xf32", "fp8_e4m3fnuz", "fp8_e5m2fnuz")),
}
_ALIASES = {"mi210": "mi250", "mi250x": "mi250", "mi300x": "mi300", "mi325": "mi300",
            "mi325x": "mi300", "cdna1": "mi100", "cdna2": "mi250", "cdna3": "mi300"}

# Minimum normal exponent of each input format (subnormals sit at this exponent).
_EMIN = {"fp16": -14, "bf16": -126, "bf16_1k": -126, "xf32": -126, "fp32": -126,
         "fp8_e4m3fnuz": -7, "fp8_e5m2fnuz": -15}
_FRAC = 23  # every input significand fits in 24 bits: scale by 2**23


def _arch(name: str) -> str:
    key = name.strip().lower().removesuffix(":mfma")
    key = _ALIASES.get(key, key)
    if key not in AMD_MODELS:
        raise ValueError(f"unknown AMD architecture {name!r}; known: "
                         f"{', '.join(list(AMD_MODELS) + list(_ALIASES))}")
    return key


def _split(x: float, emin: int) -> tuple[int, int]:
    """(S, e) with x == S * 2**(e - 23), e the nominal exponent (zero: -126)."""
    if x == 0.0:
        return 0, -126
    e = max(math.frexp(x)[1] - 1, emin)
    return int(math.ldexp(x, _FRAC - e)), e


def _group_sum(sig: list[int], exps: list[int]) -> tuple[int, int]:
    """Products (S, e) in 2**-46 units: each cut to 24 fraction bits below the
    largest exponent, toward zero, summed exactly. Returns (sum in 2**-24 units, e).
    No products (the odd half of an FP8 group of one, K not a multiple of 16): the
    sum of zero-padded products, 0 at -252 (no product's nominal exponent is lower)."""
    if not exps:
        return 0, -252
    e = max(exps)
    total = 0
    for s, ei in zip(sig, exps):
        shift = 2 * _FRAC - 24 + (e - ei)
        mag = abs(s) >> shift
        total += -mag if s < 0 else mag
    return total, e


def _cdna3_group(a: np.ndarray, b: np.ndarray, c: float, fmt: str) -> float:
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0, inf - inf: NaN, quietly
        prods = a.astype(np.float64) * b.astype(np.float64)
        exact = float(np.sum(prods)) + c
    if math.isnan(exact) or math.isinf(exact):
        return exact
    big = prods[np.abs(prods) >= 2.0 ** 128]
    if big.size:
        if (big > 0).any() and (big < 0).any():
            return math.nan
        return math.inf if big[0] > 0 else -math.inf
    emin = _EMIN[fmt]
    sig, exps = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        sa, ea = _split(x, emin)
        sb, eb = _split(y, emin)
        sig.append(sa * sb)
        exps.append(ea + eb)
    sc, ec = _split(c, -126)
    if fmt.startswith("fp8"):
        s0, e0 = _group_sum(sig[0::2], exps[0::2])
        s1, e1 = _group_sum(sig[1::2], exps[1::2])
        e = max(e0, e1)
        s = (s0 >> (e - e0)) + (s1 >> (e - e1))  # >> rounds toward -inf
        top = max(e, ec)
        c24 = (sc << 1) >> (top - ec) if ec >= top - 25 else 0
    else:
        s, e = _group_sum(sig, exps)
        top = max(e, ec)
        c24 = (sc << 1) >> (top - ec)
    total = ((s << 7) >> (top - e)) + (c24 << 7)  # 2**-31 units, both rounded down
    return math.ldexp(total, top - 31)


def _f32(x: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _flush(x: np.float32, keep_sign: bool) -> np.float32:
    if x != 0 and abs(x) < np.float32(2.0 ** -126):
        return np.float32(math.copysign(0.0, x)) if keep_sign else np.float32(0.0)
    return x


def _pairwise(a: np.ndarray, b: np.ndarray, flush: bool) -> np.float32:
    if a.size == 1:
        with np.errstate(over="ignore", invalid="ignore"):
            r = np.float32(float(a[0]) * float(b[0])) + np.float32(0.0)
    else:
        m = a.size // 2
        with np.errstate(over="ignore", invalid="ignore"):
            r = _pairwise(a[:m], b[:m], flush) + _pairwise(a[m:], b[m:], flush)
    return _flush(np.float32(r), True) if flush else np.float32(r)


def _group(gen: str, inputs: str) -> int:
    """Products per MFMA group: CDNA3 8 (xf32 4, fp8/bf8 16), CDNA1/2 4 (bf16 2)."""
    if gen == "CDNA3":
        return {"xf32": 4, "fp8_e4m3fnuz": 16, "fp8_e5m2fnuz": 16}.get(inputs, 8)
    return 2 if inputs == "bf16" else 4


def _truncate_xf32(x: np.ndarray) -> np.ndarray:
    """FP32 values cut to xf32's 10 fraction bits (toward zero), as float64."""
    bits = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def mfma_dot(a: np.ndarray, b: np.ndarray, c: float, arch: str, inputs: str) -> np.float32:
    """One MFMA dot product ``c + sum(a * b)`` with FP32 output under ``arch``'s rule.

    ``a``, ``b``: 1-D arrays of values exactly representable in ``inputs`` (for
    ``"xf32"``: FP32 values, truncated here to 10 fraction bits); ``c``: an FP32
    value; ``arch``: ``mi100``, ``mi250`` or ``mi300`` (aliases ``mi210``,
    ``mi250x``, ``mi300x``, ``mi325``); ``inputs``: one of that architecture's
    formats in :data:`AMD_MODELS` (``bf16_1k``: CDNA2's ``*_bf16_1k`` instructions).
    A length beyond one group chains groups, each group's FP32 result the next C.

    >>> float(mfma_dot(np.array([1.0, 2.0]), np.array([3.0, 0.5]), 0.25, "mi250", "fp16"))
    4.25
    """
    key = _arch(arch)
    gen, fmts = AMD_MODELS[key]
    if inputs not in fmts:
        raise ValueError(f"{key}:mfma has no {inputs!r} inputs; accepted: {', '.join(fmts)}")
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    if inputs == "xf32":
        a, b = _truncate_xf32(a), _truncate_xf32(b)
    acc = np.float32(c)
    group = _group(gen, inputs)
    if gen == "CDNA3":
        for lo in range(0, a.size, group):
            acc = np.float32(_f32(_cdna3_group(a[lo:lo + group], b[lo:lo + group],
                                               float(acc), inputs)))
        return acc
    flush = gen == "CDNA2"
    if flush:
        emin = _EMIN[inputs]
        a = np.where(np.abs(a) < 2.0 ** emin, 0.0, a)
        b = np.where(np.abs(b) < 2.0 ** emin, 0.0, b)
        acc = _flush(acc, False)
    for lo in range(0, a.size, group):
        with np.errstate(over="ignore", invalid="ignore"):
            acc = np.float32(acc + _pairwise(a[lo:lo + group], b[lo:lo + group], flush))
        if flush:
            acc = _flush(acc, True)
    return acc


def mfma_matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray | float, arch: str,
                inputs: str) -> np.ndarray:
    """``C + A @ B`` (A ``(m, k)``, B ``(k, n)``) with every entry computed by
    :func:`mfma_dot`; returns FP32 ``(m, n)``. A reference, not fast.

    >>> mfma_matmul(np.ones((1, 8)), np.ones((8, 1)), 0.0, "mi300x", "bf16").tolist()
    [[8.0]]
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need A (m, k) and B (k, n), got {a.shape} and {b.shape}")
    cc = np.broadcast_to(np.asarray(c, dtype=np.float32), (a.shape[0], b.shape[1]))
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = mfma_dot(a[i], b[:, j], float(cc[i, j]), arch, inputs)
    return out


# Products beyond which a cold call waits for the kernel's compile (20-35 s with an
# empty cache on the project's 2-core machine) rather than run mfma_dot (5-10 us a
# product: 2**22 products take 20-40 s; a 256^3 matmul, 2**24, minutes).
_WAIT_WORK = 1 << 22


def _many(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str, inputs: str,
          pairs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """:func:`mfma_dot` of rows ``a[i]`` (A, M x K) and ``b[j]`` (B transposed, N x K)
    from C = ``c[n]``: every (i, j) row-major (``pairs`` None) or the pairs
    ``(ia, ib)``, as FP32. Served by the compiled twin (``lowprec._kernels.amd``)
    where :mod:`lowprec._kernels.route` has it ready; before, by :func:`mfma_dot`
    itself (the same bits) while the kernel compiles in the background, unless
    the work is so large (over ``_WAIT_WORK`` products) that waiting for the
    compile is quicker."""
    key = _arch(arch)
    gen, fmts = AMD_MODELS[key]
    if inputs not in fmts:
        raise ValueError(f"{key}:mfma has no {inputs!r} inputs; accepted: {', '.join(fmts)}")
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if inputs == "xf32":
        a, b = _truncate_xf32(a), _truncate_xf32(b)
    run = (a, b, c, gen, inputs, _EMIN[inputs], _group(gen, inputs), pairs)
    try:
        return _compiled.mfma_values(*run, auto=True)
    except route.Cold:
        work = (a.shape[0] * b.shape[0] if pairs is None else len(pairs[0])) * a.shape[1]
        if work > _WAIT_WORK and route.background():
            route.wait()  # compiled in the background meanwhile: the kernel is ready now
            return _compiled.mfma_values(*run, auto=False)
    if pairs is None:
        ia, ib = np.repeat(np.arange(a.shape[0]), b.shape[0]), np.tile(np.arange(b.shape[0]),
                                                                        a.shape[0])
    else:
        ia, ib = pairs
    return np.array([mfma_dot(a[i], b[j], float(c[n]), key, inputs)
                     for n, (i, j) in enumerate(zip(ia.tolist(), ib.tolist()))],
                    dtype=np.float32)


# lowprec input format -> the mfma input name, per architecture (matmul's ``inputs``).
_MATMUL_INPUTS = {
    "mi100": {"fp16": "fp16", "bf16": "bf16"},
    "mi250": {"fp16": "fp16", "bf16": "bf16_1k"},  # CDNA2's *_bf16_1k instructions
    "mi300": {"fp16": "fp16", "bf16": "bf16", "tf32": "xf32", "fp8_e4m3fnuz": "fp8_e4m3fnuz",
              "fp8_e5m2fnuz": "fp8_e5m2fnuz"},
}


@dataclass(frozen=True)
class MFMA(AccumulationModel):
    """AMD CDNA matrix core (``v_mfma``): MMA-Sim's per-generation rule, FP32 output.

    ``arch`` is ``mi100``, ``mi250`` or ``mi300``; ``lp.matmul(..., model="mi300:mfma")``
    runs :func:`mfma_dot` on every output (``inputs`` fp16, bf16; on mi300 also tf32
    (xf32), fp8_e4m3fnuz, fp8_e5m2fnuz; on mi250 bf16 means the ``_1k`` instructions).

    >>> get_mfma("mi325:mfma").name
    'mi300:mfma'
    """

    arch: str = "mi300"
    name: str = "mi300:mfma"

    def describe(self) -> str:
        gen, fmts = AMD_MODELS[self.arch]
        return (f"{self.name}: AMD {gen} v_mfma ({', '.join(_MATMUL_INPUTS[self.arch])} inputs, "
                f"FP32 output); source: {_MMASIM}")

    def input_name(self, fmt: str) -> str:
        """The mfma input name for lowprec format ``fmt`` (a clear error if none)."""
        table = _MATMUL_INPUTS[self.arch]
        if fmt not in table:
            raise ValueError(f"{self.name} takes inputs {', '.join(table)}, got {fmt!r}")
        return table[fmt]


#: The AMD models under their instruction names.
MFMA_MODELS: dict[str, MFMA] = {f"{k}:mfma": MFMA(arch=k, name=f"{k}:mfma") for k in AMD_MODELS}


def get_mfma(name: str) -> MFMA | None:
    """The model of ``"<amd chip>:mfma"`` (aliases ``mi210``, ``mi250x``, ``mi300x``,
    ``mi325`` accepted), or None when ``name`` does not name an AMD chip.

    >>> get_mfma("mi210:mfma").name
    'mi250:mfma'
    """
    chip, _, instr = name.strip().lower().partition(":")
    chip = _ALIASES.get(chip, chip)
    if chip not in AMD_MODELS:
        return None
    if instr not in ("mfma", ""):
        raise ValueError(f"AMD {chip} has the instruction 'mfma', got {name!r}")
    return MFMA_MODELS[f"{chip}:mfma"]
