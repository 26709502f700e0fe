"""Dot products and matrix multiplies under the accumulation rules of real hardware.

``matmul(a, b, inputs="fp16", accumulate="fp32", model="sequential")`` rounds
``a`` and ``b`` to ``inputs`` (round to nearest even, like a cast before a GEMM),
multiplies exactly, and adds the products the way ``model`` says. Models are
small frozen dataclasses; :func:`list_models` names them all and each has a
``describe()``:

* ``exact``: the exact sum of the exact products, rounded once to the output.
* ``sequential``: ``acc = fma(a[i,k], b[k,j], acc)`` for k = 0, 1, ... with
  every step rounded to ``accumulate`` (a CPU/CUDA-core loop of FMAs).
* ``pairwise``: products rounded to ``accumulate``, summed as a balanced tree.
* ``blocked(k_block)``: sequential FMAs inside blocks of ``k_block``, block
  sums added in order (Blanchard, Higham & Mary 2020 call it blocked summation).
* ``tensor_core(block, align_bits, ...)``: NVIDIA's block FMA (below), with
  presets ``v100``, ``a100``, ``a100_tf32``, ``h100``, ``h100_fp8``, ``b200``.
* ``promote(every, inner)``: a tensor-core accumulator restarted every
  ``every`` products, its partial sums added into an FP32 accumulator
  (``deepseek_v3`` = ``promote(128, h100_fp8)``).

Rounding: ``mode`` rounds every software step (sequential, pairwise, blocked,
exact, promotion adds) and the final conversion to ``output``; inside a tensor
core the hardware's own mode (``hw_mode``) applies. Stochastic rounding is not
supported here (it would need one random word per step).

The kernels are compiled loops over rows, columns and k (``lowprec/_kernels/matmul.py``);
rows are shared among threads. Inputs with NaN or inf follow IEEE rules
(NaN if any product is NaN or inf*0 or infinities of both signs meet).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._kernels import matmul as K
from ._kernels import params
from ._names import did_you_mean
from ._runtime import _threads
from .formats import FloatFormat, custom_format, get_format
from .rounding import check_mode, decode, encode

__all__ = [
    "AccumulationModel",
    "Blocked",
    "Exact",
    "Pairwise",
    "Promote",
    "Sequential",
    "TensorCore",
    "blocked",
    "dot",
    "get_model",
    "list_models",
    "matmul",
    "promote",
    "tensor_core",
]


# ---------------------------------------------------------------------- models
@dataclass(frozen=True)
class AccumulationModel:
    """Base class: how the products of a dot product are added."""

    name: str

    def describe(self) -> str:
        return f"{self.name}: {(type(self).__doc__ or '').strip().splitlines()[0]}"


@dataclass(frozen=True)
class Exact(AccumulationModel):
    """Exact sum of the exact products, rounded once to the output format."""

    name: str = "exact"


@dataclass(frozen=True)
class Sequential(AccumulationModel):
    """acc = fma(a_k, b_k, acc) for k in order, each step rounded to `accumulate`."""

    name: str = "sequential"


@dataclass(frozen=True)
class Pairwise(AccumulationModel):
    """Products rounded to `accumulate`, then added as a balanced binary tree."""

    name: str = "pairwise"


@dataclass(frozen=True)
class Blocked(AccumulationModel):
    """Sequential fma within blocks of k_block products; block sums added in order."""

    k_block: int = 32
    name: str = "blocked"

    def describe(self) -> str:
        return f"{self.name}(k_block={self.k_block}): " + super().describe().split(": ", 1)[1]


@dataclass(frozen=True)
class TensorCore(AccumulationModel):
    """NVIDIA tensor-core block FMA: `block` exact products + the accumulator,
    aligned to the largest exponent, truncated, summed, normalised and rounded once.

    Parameters
    ----------
    block:
        Products fused per step (the hardware's inner-product length along k).
    align_bits:
        Extra bits kept below the accumulator's precision when the terms are
        aligned to the largest exponent (everything smaller is truncated).
    acc_mantissa_bits:
        Fraction bits the hardware keeps in the accumulator (None: those of
        ``accumulate``, e.g. 23 for FP32). The accumulator has the exponent
        range of ``accumulate``.
    hw_mode:
        Rounding of the normalised block sum into the accumulator (``rtz``:
        truncation, as measured on V100/A100).

    Alignment truncates the *magnitude* of every term (toward zero), as a
    sign-magnitude adder does; an adder that aligns in two's complement would
    truncate negative terms toward -inf instead. That detail, like the
    parameters, is a modelling choice to check against the sources.
    source:
        Where the parameters come from.
    """

    block: int = 4
    align_bits: int = 0
    acc_mantissa_bits: int | None = None
    hw_mode: str = "rtz"
    source: str = ""
    name: str = "tensor_core"

    def describe(self) -> str:
        acc = "accumulate's" if self.acc_mantissa_bits is None else str(self.acc_mantissa_bits)
        return (f"{self.name}: block FMA of {self.block} products, {self.align_bits} extra "
                f"alignment bits, {acc} accumulator fraction bits, {self.hw_mode} "
                f"normalisation. Source: {self.source}")


@dataclass(frozen=True)
class Promote(AccumulationModel):
    """Tensor-core partial sums over `every` products, each added (rounded in `mode`)
    into an `accumulate`-format (FP32) accumulator on the CUDA cores."""

    every: int = 128
    inner: TensorCore | None = None
    name: str = "promote"

    def describe(self) -> str:
        inner = self.inner.name if self.inner is not None else "h100_fp8"
        return (f"{self.name}: partial sums of {self.every} products in the {inner} tensor-core "
                "model, promoted into an FP32 accumulator (DeepSeek-V3 technical report, "
                "arXiv 2412.19437, Sec. 3.3.2: 'increasing accumulation precision', N_C = 128)")


def tensor_core(block: int, align_bits: int, *, acc_mantissa_bits: int | None = None,
                hw_mode: str = "rtz", name: str = "tensor_core",
                source: str = "user-defined") -> TensorCore:
    """A tensor-core model with your own parameters (see :class:`TensorCore`)."""
    if block < 1 or align_bits < 0:
        raise ValueError(f"need block >= 1 and align_bits >= 0, got {block}, {align_bits}")
    return TensorCore(block=block, align_bits=align_bits, acc_mantissa_bits=acc_mantissa_bits,
                      hw_mode=check_mode(hw_mode), source=source, name=name)


def blocked(k_block: int) -> Blocked:
    if k_block < 1:
        raise ValueError(f"k_block must be >= 1, got {k_block}")
    return Blocked(k_block=k_block)


# Presets. Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor
# cores", PeerJ Comput. Sci. 7:e330 (2021) measured V100, T4 and A100: products
# are exact, the terms of one block FMA are aligned to the largest magnitude with
# their low bits truncated, the sum is normalised only at the end and rounded
# toward zero into FP32 -- which makes the sum non-monotonic and drops small
# addends. Khattak & Mikaitis, "Accurate Models of NVIDIA Tensor Cores",
# arXiv 2512.07004 (2025) built bit-accurate models for V100, A100, H100 and B200
# in terms of FMA size, extra alignment bits, normalisation and rounding.
# NOTE: this session could read only the abstracts and secondary summaries of
# the 2025 paper; the H100/B200 values below are the summaries' and must be
# checked against the paper's tables before being relied on bit for bit.
_FASI = "Fasi, Higham, Mikaitis & Pranesh 2021 (PeerJ Comput. Sci. 7:e330)"
_KM = "Khattak & Mikaitis 2025 (arXiv 2512.07004)"
V100 = TensorCore(name="v100", block=4, align_bits=0, hw_mode="rtz",
                  source=f"{_FASI}: fp16 inputs, 4-product block FMA, products exact, "
                         "alignment truncates, normalised once, RZ into FP32")
A100 = TensorCore(name="a100", block=8, align_bits=3, hw_mode="rtz",
                  source=f"{_FASI}: fp16/bf16 inputs, 8-product block FMA with 3 extra "
                         "alignment bits, RZ into FP32; confirmed by " + _KM)
A100_TF32 = TensorCore(name="a100_tf32", block=4, align_bits=3, hw_mode="rtz",
                       source=f"{_FASI}: tf32 inputs, 4-product block FMA, 3 extra bits, RZ")
H100 = TensorCore(name="h100", block=16, align_bits=3, hw_mode="rtz",
                  source=f"{_KM}: fp16/bf16 inputs, 16-product block FMA, 3 extra alignment "
                         "bits, RZ into FP32 (values from secondary summaries: verify)")
H100_FP8 = TensorCore(name="h100_fp8", block=32, align_bits=0, acc_mantissa_bits=13,
                      hw_mode="rtz",
                      source=f"{_KM}: FP8 (E4M3/E5M2) inputs, 32-product block FMA, the FP32 "
                             "accumulator keeps 13 fraction bits (e8m13) and truncates; "
                             "DeepSeek-V3 report (arXiv 2412.19437, Sec. 3.3.2): 'around 14 "
                             "bits' (values from secondary summaries: verify)")
B200 = TensorCore(name="b200", block=16, align_bits=3, hw_mode="rtz",
                  source=f"{_KM}: fp16/bf16 (and FP8) inputs on Blackwell, modelled like H100 "
                         "fp16 with a full FP32 accumulator (values from secondary summaries: "
                         "verify)")
DEEPSEEK_V3 = Promote(name="deepseek_v3", every=128, inner=H100_FP8)

_MODELS: dict[str, AccumulationModel] = {
    m.name: m for m in [Exact(), Sequential(), Pairwise(), Blocked(), V100, A100, A100_TF32, H100,
                        H100_FP8, B200, DEEPSEEK_V3]
}


def promote(every: int = 128, inner: TensorCore | str = "h100_fp8") -> Promote:
    """Partial sums of ``every`` products in tensor core ``inner``, added into FP32."""
    inner_model = get_model(inner)
    if not isinstance(inner_model, TensorCore):
        raise TypeError(f"promote needs a tensor-core inner model, got {inner_model.name}")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    return Promote(every=every, inner=inner_model)


def list_models() -> dict[str, str]:
    """Every named model with its one-line description."""
    return {name: m.describe() for name, m in _MODELS.items()}


ModelLike = str | AccumulationModel


def get_model(model: ModelLike) -> AccumulationModel:
    if isinstance(model, AccumulationModel):
        return model
    if isinstance(model, str) and model.strip().lower() in _MODELS:
        return _MODELS[model.strip().lower()]
    hint = did_you_mean(model, _MODELS) if isinstance(model, str) else ""
    raise ValueError(f"unknown accumulation model {model!r}{hint}; known: {', '.join(_MODELS)} "
                     "(or build one: blocked(k), tensor_core(block, align_bits), promote(n))")


# -------------------------------------------------------------------- matmul
def _float64_exact(fin: FloatFormat, facc: FloatFormat) -> bool:
    """Whether products of ``fin`` values and sums with ``facc`` values stay far from
    float64's overflow and underflow (the fast sequential path relies on it)."""
    lo = min(2 * fin.smallest_subnormal_exponent, facc.smallest_subnormal_exponent)
    hi = max(2 * (fin.emax + 1), facc.emax + 1)
    return lo >= -960 and hi <= 1000


def _zero(fmt: FloatFormat) -> int:
    return int(encode(0.0, fmt))


def _run_rows(fn, M: int) -> None:
    """Call fn(i0, i1) on row ranges, in threads (the kernels release the GIL)."""
    nt = min(_threads(), max(1, M))
    if nt == 1 or M < 4:
        fn(0, M)
        return
    cuts = [M * t // nt for t in range(nt + 1)]
    with ThreadPoolExecutor(max_workers=nt) as pool:
        list(pool.map(lambda t: fn(cuts[t], cuts[t + 1]), range(nt)))


def matmul(a: Any, b: Any, *, inputs: FloatFormat | str = "fp16",
           accumulate: FloatFormat | str = "fp32", output: FloatFormat | str | None = None,
           model: ModelLike = "sequential", mode: str = "rne") -> np.ndarray:
    """a @ b for 2-D arrays, emulating low-precision hardware.

    ``a`` (M x K) and ``b`` (K x N) are rounded to ``inputs`` (rne; exact when
    they already are values of it); products are exact; ``model`` says how
    they are added in ``accumulate``; the result is rounded to ``output``
    (default: ``accumulate``) and returned as float64.

    >>> import numpy as np, lowprec as lp
    >>> a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])
    >>> b = np.ones((4, 1))
    >>> float(lp.matmul(a, b, accumulate="fp16")[0, 0])   # each 2**-12 is lost
    1.0
    >>> float(lp.matmul(a, b, accumulate="fp16", model="exact")[0, 0])
    1.0009765625
    """
    mdl = get_model(model)
    fin, facc = get_format(inputs), get_format(accumulate)
    fout = get_format(output) if output is not None else facc
    mode = check_mode(mode)
    if mode == "stochastic":
        raise ValueError("matmul does not support mode='stochastic' (one random word per "
                         "step); use a deterministic mode")
    for f in (fin, facc, fout):
        if f.mantissa_bits > 23:
            raise ValueError(f"{f.name}: at most 23 mantissa bits are supported")
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs a (M, K) and b (K, N) arrays, got shapes {a.shape} "
                         f"and {b.shape}")
    ca = np.ascontiguousarray(encode(a, fin), dtype=np.int64)  # int64: one compiled kernel
    cbt = np.ascontiguousarray(encode(b, fin).T, dtype=np.int64)
    M, N = a.shape[0], b.shape[1]
    out = np.empty((M, N), dtype=np.int64)
    Pi, Pa, Po = (params.format_params(f) for f in (fin, facc, fout))
    m = params.MODE_INT[mode]
    # Unpack the inputs once (signed significands, exponents); the fast kernels
    # use them when no input is inf or NaN.
    asig, aexp = np.empty(ca.shape, np.int64), np.empty(ca.shape, np.int64)
    bsig, bexp = np.empty(cbt.shape, np.int64), np.empty(cbt.shape, np.int64)
    special = K.unpack_matrix(Pi, ca, asig, aexp) | K.unpack_matrix(Pi, cbt, bsig, bexp)

    if isinstance(mdl, Exact):
        base = 2 * (fin.emin - 2 * fin.mantissa_bits)
        top = 2 * (fin.emax + 1) + max(1, math.ceil(math.log2(max(a.shape[1], 1)))) + 2
        nlimbs = (top - base) // 32 + 4
        _run_rows(lambda i0, i1: K.exact_kernel(Pi, Po, ca, cbt, m, i0, i1, out, base, nlimbs),
                  M)
    elif isinstance(mdl, (Sequential, Blocked)) and not special and _float64_exact(fin, facc):
        z = _zero(facc)
        kb = mdl.k_block if isinstance(mdl, Blocked) else max(a.shape[1], 1)
        af, bf = decode(ca.astype(fin.code_dtype), fin), decode(cbt.astype(fin.code_dtype), fin)
        _run_rows(lambda i0, i1: K.sequential_fast(Pa, Po, af, bf, m, i0, i1, out, z, kb), M)
    elif isinstance(mdl, Sequential):
        z = _zero(facc)
        _run_rows(lambda i0, i1: K.sequential_kernel(Pi, Pa, Po, ca, cbt, m, i0, i1, out, z), M)
    elif isinstance(mdl, Pairwise):
        z = _zero(facc)
        _run_rows(lambda i0, i1: K.pairwise_kernel(Pi, Pa, Po, ca, cbt, m, i0, i1, out, z), M)
    elif isinstance(mdl, Blocked):
        z = _zero(facc)
        _run_rows(lambda i0, i1: K.blocked_kernel(Pi, Pa, Po, ca, cbt, m, i0, i1, out, z,
                                                  mdl.k_block), M)
    elif isinstance(mdl, (TensorCore, Promote)):
        tc = mdl if isinstance(mdl, TensorCore) else (mdl.inner or H100_FP8)
        every = mdl.every if isinstance(mdl, Promote) else 0
        fhw = facc
        if tc.acc_mantissa_bits is not None and tc.acc_mantissa_bits < facc.mantissa_bits:
            fhw = custom_format(facc.exponent_bits, tc.acc_mantissa_bits, bias=facc.bias,
                                name=f"{facc.name}_m{tc.acc_mantissa_bits}")
        Ph = params.format_params(fhw)
        zh, za = _zero(fhw), _zero(facc)
        hw = params.MODE_INT[check_mode(tc.hw_mode)]
        if special:
            _run_rows(lambda i0, i1: K.tensor_core_kernel(Pi, Ph, Pa, Po, ca, cbt, m, i0, i1,
                                                          out, zh, tc.block, tc.align_bits, hw,
                                                          every, za), M)
        else:
            _run_rows(lambda i0, i1: K.tensor_core_fast(Ph, Pa, Po, asig, aexp, bsig, bexp, m,
                                                        i0, i1, out, zh, tc.block,
                                                        tc.align_bits, hw, every, za), M)
    else:
        raise TypeError(f"unsupported model type {type(mdl).__name__}")
    return decode(out.astype(fout.code_dtype), fout)


def dot(x: Any, y: Any, **kwargs: Any) -> np.floating:
    """Dot product of two vectors under :func:`matmul`'s options (a numpy scalar)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"dot needs two vectors of equal length, got {x.shape} and {y.shape}")
    return matmul(x[None, :], y[:, None], **kwargs)[0, 0]
