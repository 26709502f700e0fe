"""Counting what a recipe did to a tensor: the definitions every report uses.

Over a tensor ``x`` and its quantized-and-dequantized values ``q`` (see
:class:`~lowprec.inspect.recipes.Outcome`):

``zeros``
    inputs that are ±0 (never counted as underflow).
``nonzero``
    finite, non-zero inputs: the denominator of ``underflow_frac``.
``underflow``
    finite non-zero inputs whose result is ±0 (−0 is zero).
``subnormal``
    results whose stored element (before any scale) is a non-zero subnormal of the
    element format.
``overflow``
    finite inputs whose result is ±inf or NaN (fp16 past 65504, E4M3 past 448 without
    a scale, an MX block that shares a NaN), plus every ±inf input, whatever it became
    (a scaled recipe saturates an inf to ±max: still counted here).
``inf_in``
    inputs that were ±inf (counted in ``overflow`` too).
``clipped``
    finite inputs at or beyond the saturation threshold ``(max + ulp(max)/2) / scale``
    whose result stayed finite (saturated to ±max: scaled recipes, fp6, fp4).
``nan``
    results that are NaN, plus NaN inputs whose result is not NaN (``nan_in``: the
    inputs that were NaN).
``sqnr_db``
    ``10 log10(sum x^2 / sum (q - x)^2)`` over the finite inputs (the non-finite ones are
    reported beside it, in ``inf_in`` and ``nan_in``); ``inf`` when nothing changed,
    ``-inf`` when a finite input became inf or NaN, NaN when there is no finite input.
``max_rel_error``, ``mean_rel_error``
    of ``|q - x| / |x|`` over finite non-zero inputs with a finite result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._kernels.route_compiled import kernel
from .recipes import Outcome

__all__ = ["BlockStats", "exponent_histogram", "measure"]


def _as_rows(x: np.ndarray) -> tuple[int, int]:
    if x.ndim == 0:
        return 1, 1
    cols = int(x.shape[-1])
    return (int(x.size // cols) if cols else 0), cols


def measure(x: np.ndarray, out: Outcome, tiny: float, block_size: int | None = None,
            worst: int = 5) -> tuple[dict[str, Any], BlockStats | None]:
    """The counts and errors of the module docstring for one tensor and one outcome, and
    for block recipes (``block_size``) the per-block forensics."""
    rows, cols = _as_rows(x)
    xf = np.ascontiguousarray(x).reshape(-1)
    none = np.empty(0)
    if out.codes is not None and out.table is not None:
        codes = np.ascontiguousarray(out.codes).reshape(-1)
        table, factor, q, e = out.table, out.factor, none, none
    else:
        codes, table, factor = np.empty(0, np.uint8), none, np.ones(1)
        q = np.ascontiguousarray(out.q, dtype=np.float64).reshape(-1)
        e = np.ascontiguousarray(out.elements, dtype=np.float64).reshape(-1)
    clip = np.asarray(out.clip, dtype=np.float64).reshape(-1)
    bs = block_size or max(cols, 1)
    n_blocks = rows * (-(-cols // bs)) if block_size else 0
    per_block = np.zeros((n_blocks, 5))
    (zeros, nonzero, underflow, subnormal, overflow, clipped, nan, nan_in, n_finite,
     signal, noise, max_rel, sum_rel, n_rel, inf_in) = kernel("inspect_measure")(
        xf, q, e, codes, table, factor, clip, 0 if clip.size == 1 else 1, float(tiny), rows,
        cols, bs, per_block)
    if n_finite == 0:
        sqnr = float("nan")
    elif overflow:
        sqnr = float("-inf")
    elif noise == 0:
        sqnr = float("inf")
    else:
        sqnr = float(10 * np.log10(signal / noise)) if signal else float("-inf")
    row = {
        "n": int(xf.size), "zeros": zeros, "nonzero": nonzero, "underflow": underflow,
        "underflow_frac": underflow / nonzero if nonzero else 0.0,
        "subnormal": subnormal, "overflow": overflow + inf_in, "clipped": clipped, "nan": nan,
        "nan_in": nan_in, "inf_in": inf_in, "sqnr_db": sqnr, "max_rel_error": float(max_rel),
        "mean_rel_error": float(sum_rel / n_rel) if n_rel else 0.0,
        "bits_per_value": float(out.bits),
    }
    blocks = _blocks_from(per_block, out, x, bs, worst) if block_size else None
    return row, blocks


@dataclass
class BlockStats:
    """Per-block forensics of one tensor under one block recipe (MX or NVFP4).

    ``n_blocks``; ``clipped`` / ``flushed``: blocks holding at least one clipped value /
    one finite non-zero value that became zero; ``scale_exponents``: how many blocks have
    a scale in each binade (``floor(log2 scale)`` -> count; NaN scales are left out);
    ``worst``: the blocks with the largest relative error ``sqrt(sum err^2 / sum x^2)``,
    each a dict with ``block`` (index into the blocked shape), ``amax``, ``scale``,
    ``rel_error``, ``flushed`` and ``clipped`` (counts in the block).
    """

    n_blocks: int
    clipped: int
    flushed: int
    scale_exponents: dict[int, int] = field(default_factory=dict)
    worst: list[dict[str, Any]] = field(default_factory=list)

    @property
    def clipped_frac(self) -> float:
        return self.clipped / self.n_blocks if self.n_blocks else 0.0

    @property
    def flushed_frac(self) -> float:
        return self.flushed / self.n_blocks if self.n_blocks else 0.0

    def __str__(self) -> str:
        lines = [f"{self.n_blocks} blocks: {self.clipped} clip ({self.clipped_frac:.1%}), "
                 f"{self.flushed} flush ({self.flushed_frac:.1%})",
                 "block scales (log2 -> blocks): " + ", ".join(
                     f"{k}: {v}" for k, v in sorted(self.scale_exponents.items()))]
        for w in self.worst:
            lines.append(f"  block {w['block']}: amax {w['amax']:.3g}, scale {w['scale']:.3g}, "
                         f"rel. error {w['rel_error']:.3g}, {w['flushed']} flushed, "
                         f"{w['clipped']} clipped")
        return "\n".join(lines)


def _blocks_from(per_block: np.ndarray, out: Outcome, x: np.ndarray, bs: int,
                 worst: int) -> BlockStats:
    noise, signal = per_block[:, 0], per_block[:, 1]
    n_clip, n_flush, amax = per_block[:, 2], per_block[:, 3], per_block[:, 4]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.sqrt(np.where(signal > 0, noise / signal, np.where(noise > 0, np.inf, 0.0)))
    rel[np.isnan(amax)] = np.nan
    scales = np.asarray(out.block_scales, dtype=np.float64).reshape(-1)  # same block order
    ok = np.isfinite(scales) & (scales > 0)
    exps, counts = np.unique(np.frexp(scales[ok])[1] - 1, return_counts=True)
    nb = -(-(int(x.shape[-1]) if x.ndim else 1) // bs)
    blocked_shape = (x.shape[:-1] if x.ndim else ()) + (nb,)
    order = _smallest(-np.nan_to_num(rel, nan=-1.0), worst)
    worst_rows = [{"block": tuple(int(i) for i in np.unravel_index(int(b), blocked_shape)),
                   "amax": float(amax[b]), "scale": float(scales[b]),
                   "rel_error": float(rel[b]), "flushed": int(n_flush[b]),
                   "clipped": int(n_clip[b])} for b in order]
    return BlockStats(int(rel.size), int(np.count_nonzero(n_clip)),
                      int(np.count_nonzero(n_flush)),
                      {int(k): int(v) for k, v in zip(exps, counts)}, worst_rows)


def _smallest(key: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest keys, ties in index order: the first ``k`` of a
    stable argsort, without sorting everything (only the keys up to the k-th)."""
    if k <= 0:
        return np.empty(0, np.intp)
    if k >= key.size:
        return np.argsort(key, kind="stable")
    kth = np.partition(key, k - 1)[k - 1]
    candidates = np.flatnonzero(key <= kth)  # every one of the first k, in index order
    return candidates[np.argsort(key[candidates], kind="stable")[:k]]


def exponent_histogram(x: np.ndarray) -> dict[int, int]:
    """How many finite non-zero values lie in each binade ``floor(log2 |x|)``.

    Read from the exponent field of float32/float64 values (subnormals, whose field is
    0, from their highest set fraction bit), in one compiled pass.

    >>> exponent_histogram(np.array([0.0, 1.0, 1.5, 0.25, np.nan, 5e-324]))
    {-1074: 1, -2: 1, 0: 2}
    """
    v = np.ascontiguousarray(x).reshape(-1)
    if v.dtype == np.float32:
        bits, mant_bits, fields, bias = v.view(np.int32), 23, 0x100, 127
    else:
        v = v.astype(np.float64, copy=False)
        bits, mant_bits, fields, bias = v.view(np.int64), 52, 0x800, 1023
    counts, sub = kernel("inspect_fields")(bits, mant_bits, fields)
    out = {int(k) - bias: int(counts[k]) for k in np.flatnonzero(counts[1:fields - 1]) + 1}
    for pos in np.flatnonzero(sub):  # subnormals: 2**pos * 2**(1 - bias - mant_bits)
        out[int(pos) + 1 - bias - mant_bits] = int(sub[pos])
    return dict(sorted(out.items()))
