"""Dot products and matrix multiplies under the accumulation rules of real hardware.

``matmul(a, b, c, inputs="fp16", accumulate="fp32", model="sequential")`` and
``vecdot(a, b, c, ...)`` compute ``A·B + C``: ``a`` and ``b`` are values of
``inputs``, products are exact, and ``model`` says how they are added into the
accumulator ``c`` (zero when omitted). Models are small frozen dataclasses;
:func:`list_models` names them all and each has a ``describe()``:

* ``exact``: the exact sum of the exact products, rounded once to the output.
* ``sequential``: ``acc = fma(a[i,k], b[k,j], acc)`` for k = 0, 1, ... with
  every step rounded to ``accumulate`` (a CPU/CUDA-core loop of FMAs).
* ``pairwise``: products rounded to ``accumulate``, summed as a balanced tree.
* ``blocked(k_block)``: sequential FMAs inside blocks of ``k_block``, block
  sums added in order (Blanchard, Higham & Mary 2020 call it blocked summation).
* GPU architectures ``v100``, ``a100``, ``ada``, ``h100``, ``b200`` (and their
  chips: ``h200``, ``l40s``, ``l4``, ``rtx4090``, ``a2``, ``a10``, ``a30``): the
  tensor-core block FMA of :mod:`lowprec.tensorcores` with that chip's parameters
  for the given ``inputs`` and output, bit for bit as measured;
  ``tensor_core(block, align_bits, ...)`` builds a what-if model.
* ``"<chip>:<instruction>"`` (``h100:wgmma``, ``h100:mma.sync``, ``b200:tcgen05``,
  ...): the rule of one instruction (:mod:`lowprec.instructions`). MX and NVFP4
  tensors (``lp.mx.quantize``, ``lp.nvfp4.quantize``) as ``a`` and ``b`` run
  Blackwell's block-scaled MMA (:mod:`lowprec.blockmma`).
* ``promote(every, inner)``: a tensor-core accumulator restarted every
  ``every`` products, its partial sums added into an FP32 accumulator
  (``deepseek_v3`` = ``promote(128, "h100")`` on FP8 inputs).

On a tensor-core model the MMA's C and D are FP16 when ``output`` (or
``accumulate``) is fp16 and FP32 otherwise; ``c`` is rounded (RNE) into that
format before the first block, as the MMA's C operand is.

Rounding: ``mode`` rounds every software step (sequential, pairwise, blocked,
exact, promotion adds) and the final conversion to ``output``; inside a tensor
core the hardware's own rounding applies. Stochastic rounding is not supported
here (it would need one random word per step).

The kernels are compiled loops over output elements and k
(``lowprec/_kernels/matmul.py``), shared among threads. Inputs with NaN or inf
follow IEEE rules (NaN if any product is NaN or inf*0 or infinities of both
signs meet).
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._kernels import params
from ._kernels.route_compiled import kernel as K
from ._names import did_you_mean
from ._runtime import _threads
from .amd import MFMA, MFMA_MODELS, get_mfma
from .amd import _many as mfma_many
from .blockmma import BLOCK_MMA_MODELS, block_scaled_matmul, is_block_scaled
from .formats import FloatFormat, custom_format, get_format
from .instructions import INSTRUCTIONS, get_instruction
from .library_gemms import LIBRARY_GEMMS, LibraryGemm
from .rounding import check_mode, decode, encode
from .tensorcores import (
    ARCHITECTURES,
    AccumulationModel,
    Architecture,
    Blocked,
    Exact,
    Pairwise,
    Promote,
    Sequential,
    TensorCore,
    chip_names,
    get_architecture,
)

__all__ = [
    "AccumulationModel",
    "Architecture",
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
    "vecdot",
]


# ---------------------------------------------------------------------- models
def tensor_core(block: int, align_bits: int, *, acc_mantissa_bits: int | None = None,
                hw_mode: str = "rtz", c_late: bool = False, name: str = "tensor_core",
                source: str = "user-defined") -> TensorCore:
    """A tensor-core model with your own parameters (see :class:`TensorCore`).

    >>> m = tensor_core(8, 1)            # Ampere's FP16 rule, written by hand
    >>> m.frac_bits
    24
    """
    if block < 1 or not 0 <= (acc_mantissa_bits or 23) + align_bits <= 52:
        raise ValueError(f"need block >= 1 and 0 <= fraction bits <= 52, got block={block}, "
                         f"align_bits={align_bits}, acc_mantissa_bits={acc_mantissa_bits}")
    if acc_mantissa_bits is not None and not 1 <= acc_mantissa_bits <= 23:
        raise ValueError(f"acc_mantissa_bits must be 1..23 or None, got {acc_mantissa_bits}")
    return TensorCore(block=block, align_bits=align_bits, acc_mantissa_bits=acc_mantissa_bits,
                      hw_mode=check_mode(hw_mode), c_late=c_late, source=source, name=name)


def blocked(k_block: int) -> Blocked:
    """Blocked summation with blocks of ``k_block`` products."""
    if k_block < 1:
        raise ValueError(f"k_block must be >= 1, got {k_block}")
    return Blocked(k_block=k_block)


# Architectures (lowprec.tensorcores.ARCHITECTURES) under their old preset names.
V100, A100, ADA, H100, B200 = (ARCHITECTURES[n] for n in ("v100", "a100", "ada", "h100", "b200"))
H100_FP8 = H100.rule("fp8_e4m3")
A100_TF32 = A100.rule("tf32")
DEEPSEEK_V3 = Promote(name="deepseek_v3", every=128, inner=H100)


_MODELS: dict[str, AccumulationModel] = {
    m.name: m for m in [Exact(), Sequential(), Pairwise(), Blocked(), *ARCHITECTURES.values(),
                        DEEPSEEK_V3, *INSTRUCTIONS.values(), *MFMA_MODELS.values(),
                        *LIBRARY_GEMMS.values()]
}
# Preset names before the architecture table; they resolve to an architecture.
_DEPRECATED = {"h100_fp8": "h100", "a100_tf32": "a100"}


def promote(every: int = 128, inner: TensorCore | Architecture | str = "h100") -> Promote:
    """Partial sums of ``every`` products in tensor core ``inner``, added into FP32.

    >>> promote(128).describe().split(":")[0]
    'promote'
    """
    inner_model = get_model(inner)
    if not isinstance(inner_model, (TensorCore, Architecture)):
        raise TypeError(f"promote needs a tensor-core inner model, got {inner_model.name}")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    return Promote(every=every, inner=inner_model)


def list_models() -> dict[str, str]:
    """Every named model with its one-line description (chip aliases not repeated).

    >>> "h100" in list_models()
    True
    """
    return {name: m.describe() for name, m in _MODELS.items()}


ModelLike = str | AccumulationModel


def get_model(model: ModelLike) -> AccumulationModel:
    """A model by name (``"h200"`` gives Hopper's ``h100``), or the model itself.

    >>> get_model("rtx4090").name
    'ada'
    """
    if isinstance(model, AccumulationModel):
        return model
    if isinstance(model, str):
        key = model.strip().lower()
        if key in _MODELS:
            found = _MODELS[key]
            return found.model if isinstance(found, LibraryGemm) and found.model else found
        if key in _DEPRECATED:
            warnings.warn(f"model {model!r} is deprecated: use {_DEPRECATED[key]!r}, which picks "
                          "the rule from `inputs`", DeprecationWarning, stacklevel=3)
            return _MODELS[_DEPRECATED[key]]
        if key in chip_names():
            return get_architecture(key)
        amd = get_mfma(key)  # "mi300:mfma" (lowprec.amd)
        if amd is not None:
            return amd
        try:
            inst = get_instruction(key)  # "h100:wgmma": raises on an unknown pair
        except ValueError:
            if key not in BLOCK_MMA_MODELS:
                raise
            inst = None
        if inst is not None:
            return inst
        if key in BLOCK_MMA_MODELS:
            raise ValueError(f"model {model!r} ({BLOCK_MMA_MODELS[key]}) takes block-scaled "
                             "operands only: pass lp.mx.quantize / lp.nvfp4.quantize tensors "
                             "as a and b")
    names = [*_MODELS, *[c for c in chip_names() if c not in _MODELS]]
    hint = did_you_mean(model, names) if isinstance(model, str) else ""
    raise ValueError(f"unknown accumulation model {model!r}{hint}; known: {', '.join(names)} "
                     "(or build one: blocked(k), tensor_core(block, align_bits), promote(n))")


# ------------------------------------------------------------------- helpers
def _float64_exact(fin: FloatFormat, facc: FloatFormat) -> bool:
    """Whether products of ``fin`` values and sums with ``facc`` values stay far from
    float64's overflow and underflow (the fast sequential path relies on it)."""
    lo = min(2 * fin.smallest_subnormal_exponent, facc.smallest_subnormal_exponent)
    hi = max(2 * (fin.emax + 1), facc.emax + 1)
    return lo >= -960 and hi <= 1000


def _zero(fmt: FloatFormat) -> int:
    return int(encode(0.0, fmt))


def _run_rows(fn, n: int) -> None:
    """Call fn(n0, n1) on ranges of output elements, in threads (the kernels release the GIL)."""
    nt = min(_threads(), max(1, n // 64))
    if nt <= 1:
        fn(0, n)
        return
    cuts = [n * t // nt for t in range(nt + 1)]
    with ThreadPoolExecutor(max_workers=nt) as pool:
        list(pool.map(lambda t: fn(cuts[t], cuts[t + 1]), range(nt)))


def _narrow(fmt: FloatFormat, mantissa_bits: int | None, exponent_bits: int | None = None
            ) -> FloatFormat:
    """fmt with fewer fraction bits (and optionally another exponent width)."""
    e = fmt.exponent_bits if exponent_bits is None else exponent_bits
    m = fmt.mantissa_bits if mantissa_bits is None else min(mantissa_bits, fmt.mantissa_bits)
    if e == fmt.exponent_bits and m == fmt.mantissa_bits:
        return fmt
    return custom_format(e, m, bias=(1 << (e - 1)) - 1, name=f"e{e}m{m}")


def _tensor_core_rule(mdl: TensorCore | Architecture, fin: FloatFormat, mma: FloatFormat
                      ) -> TensorCore:
    if isinstance(mdl, TensorCore):
        return mdl
    if mma.name not in ("fp32", "fp16"):
        raise ValueError(f"{mdl.name} tensor cores accumulate in fp32 or fp16, got "
                         f"{mma.name}; supported: {', '.join(mdl.supported())}")
    return mdl.rule(fin, mma.name)


def _accumulate(ca: np.ndarray, cb: np.ndarray, ia: np.ndarray, ib: np.ndarray,
                c: np.ndarray | None, mdl: AccumulationModel, fin: FloatFormat,
                facc: FloatFormat, fout: FloatFormat, mode: str, grid: bool = False) -> np.ndarray:
    """Codes of fout for the pairs (row ia[n] of ca) . (row ib[n] of cb) + c[n].

    ``ca`` (Ma, K) and ``cb`` (Nb, K) are int64 codes of ``fin``; ``c`` float values
    (or None for zero)."""
    n_out, k_len = len(ia), ca.shape[1]
    out = np.empty(n_out, dtype=np.int64)
    Pi, Pa, Po = (params.format_params(f) for f in (fin, facc, fout))
    m = params.MODE_INT[mode]

    def c_codes(fmt: FloatFormat) -> np.ndarray:
        if c is None:
            return np.full(n_out, _zero(fmt), dtype=np.int64)
        return np.ascontiguousarray(encode(c, fmt), dtype=np.int64)

    if c is not None and isinstance(mdl, (Exact, Pairwise, Blocked)):
        raise ValueError(f"model {mdl.name!r} takes no c; c is accumulated by sequential, "
                         "the GPU architectures, tensor_core(...) and promote(...) models")
    if isinstance(mdl, MFMA):
        return _mfma_codes(ca, cb, ia, ib, c, mdl, fin, facc, fout, grid)
    if isinstance(mdl, Exact):
        base = 2 * (fin.emin - 2 * fin.mantissa_bits)
        top = 2 * (fin.emax + 1) + max(1, math.ceil(math.log2(max(k_len, 1)))) + 2
        nlimbs = (top - base) // 32 + 4
        _run_rows(lambda n0, n1: K("exact")(Pi, Po, ca, cb, ia, ib, m, n0, n1, out, base,
                                                nlimbs), n_out)
        return out
    asig, aexp = np.empty(ca.shape, np.int64), np.empty(ca.shape, np.int64)
    bsig, bexp = np.empty(cb.shape, np.int64), np.empty(cb.shape, np.int64)
    special = K("unpack")(Pi, ca, asig, aexp) | K("unpack")(Pi, cb, bsig, bexp)
    if isinstance(mdl, (Sequential, Blocked)) and not special and _float64_exact(fin, facc):
        kb = mdl.k_block if isinstance(mdl, Blocked) else max(k_len, 1)
        af, bf = decode(ca.astype(fin.code_dtype), fin), decode(cb.astype(fin.code_dtype), fin)
        cc = c_codes(facc)
        _run_rows(lambda n0, n1: K("sequential_fast")(Pa, Po, af, bf, ia, ib, cc, m, n0, n1, out,
                                                   _zero(facc), kb), n_out)
    elif isinstance(mdl, Sequential):
        cc = c_codes(facc)
        _run_rows(lambda n0, n1: K("sequential")(Pi, Pa, Po, ca, cb, ia, ib, cc, m, n0, n1,
                                                     out), n_out)
    elif isinstance(mdl, Pairwise):
        _run_rows(lambda n0, n1: K("pairwise")(Pi, Pa, Po, ca, cb, ia, ib, m, n0, n1, out,
                                                   _zero(facc)), n_out)
    elif isinstance(mdl, Blocked):
        _run_rows(lambda n0, n1: K("blocked")(Pi, Pa, Po, ca, cb, ia, ib, m, n0, n1, out,
                                                  _zero(facc), mdl.k_block), n_out)
    elif isinstance(mdl, (TensorCore, Architecture, Promote)):
        inner = (mdl.inner or H100) if isinstance(mdl, Promote) else mdl
        assert isinstance(inner, (TensorCore, Architecture))
        every = mdl.every if isinstance(mdl, Promote) else 0
        # The MMA's C/D format: fp16 for an fp16 output, else the accumulator's.
        mma = fout if fout.name == "fp16" and not every else facc
        tc = _tensor_core_rule(inner, fin, mma)
        if tc.c_late:  # products' sum normalised with FP32's range first
            fhw = _narrow(get_format("fp32"), tc.acc_mantissa_bits)
        else:
            fhw = _narrow(mma, tc.acc_mantissa_bits)
        Pc, Ph = params.format_params(mma), params.format_params(fhw)
        cc = c_codes(facc if every else mma)
        hw = params.MODE_INT[check_mode(tc.hw_mode)]
        if grid and not special and not tc.c_late and tc.frac_bits - 2 * fin.mantissa_bits <= 30 \
                and fin.mantissa_bits <= 10 and tc.hw_mode in ("rtz", "rne"):
            K("tensor_core_grid")(Pi, Pc, Ph, Pa, Po, fin, asig, aexp, bsig, bexp, cc, m, out, tc, every)
            return out
        _run_rows(lambda n0, n1: K("tensor_core")(
            Pi, Pc, Ph, Pa, Po, ca, cb, asig, aexp, bsig, bexp, ia, ib, cc, special, m, n0, n1,
            out, tc.block, tc.frac_bits, hw, tc.c_late, every, _zero(mma)), n_out)
    else:
        raise TypeError(f"unsupported model type {type(mdl).__name__}")
    return out


def _mfma_codes(ca: np.ndarray, cb: np.ndarray, ia: np.ndarray, ib: np.ndarray,
                c: np.ndarray | None, mdl: MFMA, fin: FloatFormat, facc: FloatFormat,
                fout: FloatFormat, grid: bool) -> np.ndarray:
    """AMD mfma (lowprec.amd: its compiled twin, or its reference while that
    compiles): FP32 accumulation, then fout. ``grid``: every (ia, ib) pair of a matmul."""
    if facc.name != "fp32":
        raise ValueError(f"{mdl.name} accumulates in fp32, got accumulate={facc.name!r}")
    name = mdl.input_name(fin.name)
    af, bf = decode(ca.astype(fin.code_dtype), fin), decode(cb.astype(fin.code_dtype), fin)
    cv = np.zeros(len(ia)) if c is None else c
    d = mfma_many(af, bf, cv, mdl.arch, name, None if grid else (ia, ib)).astype(np.float64)
    return np.asarray(encode(d, fout), dtype=np.int64)


def _formats(inputs: FloatFormat | str, accumulate: FloatFormat | str,
             output: FloatFormat | str | None, mode: str
             ) -> tuple[FloatFormat, FloatFormat, FloatFormat, str]:
    fin, facc = get_format(inputs), get_format(accumulate)
    fout = get_format(output) if output is not None else facc
    mode = check_mode(mode)
    if mode == "stochastic":
        raise ValueError("matmul does not support mode='stochastic' (one random word per "
                         "step); use a deterministic mode")
    for f in (fin, facc, fout):
        if f.mantissa_bits > 23:
            raise ValueError(f"{f.name}: at most 23 mantissa bits are supported")
    return fin, facc, fout, mode


def _c_values(c: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    if c is None:
        return None
    cv = np.asarray(c, dtype=np.float64)
    if cv.shape not in (shape, ()):
        raise ValueError(f"c must have the output's shape {shape} (or be a scalar), got "
                         f"shape {cv.shape}")
    return np.ascontiguousarray(np.broadcast_to(cv, shape)).ravel()


# -------------------------------------------------------------------- matmul
def matmul(a: Any, b: Any, c: Any = None, *, inputs: FloatFormat | str = "fp16",
           accumulate: FloatFormat | str = "fp32", output: FloatFormat | str | None = None,
           model: ModelLike = "sequential", mode: str = "rne",
           operand_rounding: str = "rne") -> np.ndarray:
    """a @ b + c for 2-D arrays, emulating low-precision hardware.

    ``a`` (M x K) and ``b`` (K x N) are rounded to ``inputs`` (under
    ``operand_rounding``, default ``"rne"``; exact when they already are values of
    it). ``operand_rounding="rtz"`` is what a TF32 tensor core does to FP32
    operands: it truncates them (PTX ISA, ``mma``/``wgmma`` with ``.tf32``: the
    operand's low 13 bits are ignored; MMA-Sim, microsoft/MMA-Sim commit 16a0188,
    ``mmasim/simulator/nv.py`` calls ``truncate_to_tf32`` on A and B), so
    ``lp.matmul(a32, b32, inputs="tf32", model="a100", operand_rounding="rtz")`` is
    the hardware fed FP32 data. Products are exact; ``model`` says how
    they are added, starting from ``c`` (M x N, default zero), in ``accumulate``;
    the result is rounded to ``output`` (default: ``accumulate``) and returned as
    float64. On a GPU architecture model ``K`` longer than one instruction's k
    chains instructions, each block's D being the next one's C.

    >>> import numpy as np, lowprec as lp
    >>> a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])
    >>> b = np.ones((4, 1))
    >>> float(lp.matmul(a, b, accumulate="fp16")[0, 0])   # each 2**-12 is lost
    1.0
    >>> float(lp.matmul(a, b, accumulate="fp16", model="exact")[0, 0])
    1.0009765625
    >>> float(lp.matmul(a, b, [[0.5]], model="h100")[0, 0])   # C enters the MMA
    1.500732421875
    >>> x = np.array([[1 + 2.0**-10 + 2.0**-11]])   # between two TF32 values
    >>> float(lp.matmul(x, [[1.0]], inputs="tf32", model="a100")[0, 0])
    1.001953125
    >>> float(lp.matmul(x, [[1.0]], inputs="tf32", model="a100", operand_rounding="rtz")[0, 0])
    1.0009765625
    """
    if is_block_scaled(a) or is_block_scaled(b):  # MX / NVFP4 tensors: lowprec.blockmma
        return block_scaled_matmul(a, b, c, model=model, output=output or "fp32", mode=mode)
    mdl = get_model(model)
    fin, facc, fout, mode = _formats(inputs, accumulate, output, mode)
    op_mode = _operand_mode(operand_rounding)
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs a (M, K) and b (K, N) arrays, got shapes {a.shape} "
                         f"and {b.shape}")
    M, N = a.shape[0], b.shape[1]
    cv = _c_values(c, (M, N))
    ca = np.ascontiguousarray(encode(a, fin, op_mode), dtype=np.int64)  # int64: one kernel
    cb = np.ascontiguousarray(encode(b, fin, op_mode).T, dtype=np.int64)
    ia = np.repeat(np.arange(M, dtype=np.int64), N)
    ib = np.tile(np.arange(N, dtype=np.int64), M)
    out = _accumulate(ca, cb, ia, ib, cv, mdl, fin, facc, fout, mode, grid=True)
    return decode(out.astype(fout.code_dtype), fout).reshape(M, N)


def _operand_mode(operand_rounding: Any) -> str:
    """The rounding of matmul's operands into ``inputs``: a deterministic mode."""
    if not isinstance(operand_rounding, str):
        raise TypeError(f"operand_rounding must be a rounding mode name such as 'rne' or "
                        f"'rtz', got {type(operand_rounding).__name__}")
    op = check_mode(operand_rounding)
    if op == "stochastic":
        raise ValueError("operand_rounding must be deterministic ('rne', 'rtz', ...), not "
                         "'stochastic'")
    return op


def _exact_codes(x: np.ndarray, fmt: FloatFormat, name: str) -> np.ndarray:
    """Codes of x, which must hold values of fmt (NaN and inf included)."""
    codes = encode(x, fmt)
    back = decode(codes, fmt)
    bad = ~((back == x) | (np.isnan(back) & np.isnan(x)))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name}{list(idx)} = {float(x[idx])!r} is not a value of "
                         f"inputs={fmt.name!r}; round first (lp.round_to(x, {fmt.name!r}))")
    return np.ascontiguousarray(codes, dtype=np.int64)


def vecdot(a: Any, b: Any, c: Any = None, *, inputs: FloatFormat | str = "fp16",
           accumulate: FloatFormat | str = "fp32", output: FloatFormat | str | None = None,
           model: ModelLike = "sequential", mode: str = "rne") -> np.ndarray:
    """Dot products over the last axis, ``sum_k a[..., k] * b[..., k] + c``.

    The other axes broadcast as in numpy 2's ``np.vecdot``; ``c`` (default zero)
    has the broadcast shape. ``a`` and ``b`` must hold values of ``inputs``
    (use :func:`lowprec.round_to` first). Each dot product is what one output of
    an MMA computes: on a GPU model ``c`` is the instruction's C operand and a K
    longer than one instruction's k chains instructions.

    >>> import numpy as np, lowprec as lp
    >>> a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])   # products 1, 3 x 2**-24
    >>> float(lp.vecdot(a, a, inputs="fp16", model="v100")[0])   # truncated away
    1.0
    >>> float(lp.vecdot(a, a, inputs="fp16", model="a100")[0])   # one extra bit
    1.0000001192092896
    >>> float(lp.vecdot(a, a, inputs="fp16", model="exact")[0])
    1.000000238418579
    """
    mdl = get_model(model)
    fin, facc, fout, mode = _formats(inputs, accumulate, output, mode)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim < 1 or b.ndim < 1 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"vecdot needs a (..., K) and b (..., K) with the same K, got shapes "
                         f"{a.shape} and {b.shape}")
    try:
        shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    except ValueError:
        raise ValueError(f"vecdot: shapes {a.shape} and {b.shape} do not broadcast (the axes "
                         "before the last must be equal or 1)") from None
    k_len = a.shape[-1]
    ca = _exact_codes(a, fin, "a").reshape(-1, k_len)
    cb = _exact_codes(b, fin, "b").reshape(-1, k_len)
    ia = np.broadcast_to(np.arange(ca.shape[0]).reshape(a.shape[:-1]), shape).ravel()
    ib = np.broadcast_to(np.arange(cb.shape[0]).reshape(b.shape[:-1]), shape).ravel()
    cv = _c_values(c, shape)
    out = _accumulate(ca, cb, ia.astype(np.int64), ib.astype(np.int64), cv, mdl, fin, facc,
                      fout, mode)
    return decode(out.astype(fout.code_dtype), fout).reshape(shape)


def dot(x: Any, y: Any, **kwargs: Any) -> np.floating:
    """Dot product of two vectors under :func:`matmul`'s options (a numpy scalar).

    >>> import lowprec as lp
    >>> float(lp.dot([1.0, 2.0], [3.0, 4.0], model="exact"))
    11.0
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"dot needs two vectors of equal length, got {x.shape} and {y.shape}")
    return matmul(x[None, :], y[:, None], **kwargs)[0, 0]
