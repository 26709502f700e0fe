"""A gradient-quantizer lab: per-block bias and variance of NVFP4 gradient quantizers.

For a 2-D tensor (a gradient, say), every quantizer below is run ``draws`` times (once
if it is deterministic) and compared with the tensor in its own domain, per 1x16 block
of the last axis:

``rtn``      the recipe's 1x16 round-to-nearest-even quantizer;
``sr``       the same with the recipe's 8-bit stochastic rounding;
``4over6``   Transformer Engine's 4over6 block choice (round to nearest);
``rht_sr``   the random Hadamard transform (:mod:`lowprec.hadamard`, float32 output so
             that only the quantizer is measured), 8-bit stochastic rounding, and the
             inverse transform in float64 (``R`` is orthogonal: ``x = (x R) R^T``);
``eden``     Quartet II's MS-EDEN (IST-DASLab/Quartet-II,
             ``src/models/quantization/quantizers/eden.py``, ``scale_dtype="e4m3"``; read,
             not copied), with groups of 16: a fresh random-sign Hadamard rotation per
             draw, E4M3 block scales under a per-tensor scale ``amax/256`` (decode
             ``global/6 * 17/16``), round to nearest (even here), then each block scale
             times EDEN's correction ``sum(v^2) / sum(v * q)`` stochastically rounded to
             E4M3, and the inverse rotation (all float64, E4M3 roundings by lowprec).

Per element ``i``, with ``x_hat`` the dequantized draws: ``bias_i = mean(x_hat_i) - x_i``
and ``var_i`` their variance (``ddof=1``). A block reports ``bias`` = the RMS of
``bias_i`` and ``variance`` = the mean of ``var_i``; ``mse = bias**2 + variance``.
An unbiased quantizer's ``bias`` shrinks like ``sqrt(variance / draws)``; a
deterministic one has variance 0 and its whole error in ``bias``.

>>> import numpy as np
>>> from lowprec.recipes import lab
>>> g = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
>>> s = lab.block_stats(g, ("rtn", "sr"), draws=8, rng=1)
>>> float(s["rtn"].variance.max()), s["sr"].bias.shape
(0.0, (4, 2))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._blocks import as_working_array
from .._runtime import _get_rng
from ..hadamard import rht, rht_matrix
from ..rounding import round_to
from . import nvfp4

__all__ = ["QUANTIZERS", "SQRT3", "BlockStats", "NoiseRow", "block_stats", "noise_threshold"]

QUANTIZERS = ("rtn", "sr", "4over6", "rht_sr", "eden")
_STOCHASTIC = {"sr", "rht_sr", "eden"}


@dataclass(frozen=True)
class BlockStats:
    """Per 1x16 block (shape ``(rows, blocks)``): RMS bias, mean variance, and their mse."""

    bias: np.ndarray
    variance: np.ndarray
    draws: int

    @property
    def mse(self) -> np.ndarray:
        return self.bias ** 2 + self.variance


def _eden(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One MS-EDEN draw of ``x`` (module docstring), dequantized, in x's domain."""
    r = rht_matrix(rng.choice(np.array([-1, 1]), 16))
    y = x.astype(np.float64).reshape(-1, 16) @ r
    amax = np.abs(y).max(axis=1, keepdims=True)
    g = amax.max() / 256.0 or 1.0
    sb = round_to(amax / g, "fp8_e4m3", "rne", saturate=True)
    sb = np.where(sb == 0, 1.0, sb)
    gd = g / 6.0 * (17 / 16)
    v = y / sb / gd
    q = round_to(np.clip(v, -6, 6), "fp4_e2m1", "rne")
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = (v * v).sum(axis=1, keepdims=True) / (v * q).sum(axis=1, keepdims=True)
    corr = np.where(np.isfinite(corr), corr, 1.0)
    s2 = round_to(np.minimum(sb * corr, 447.99), "fp8_e4m3", "stochastic", saturate=True,
                  rng=rng)
    return ((q * s2 * gd) @ r.T).reshape(x.shape)


def _draw(x: np.ndarray, name: str, rng: np.random.Generator) -> np.ndarray:
    if name == "eden":
        return _eden(x, rng)
    if name == "rtn":
        return nvfp4.quantize(x).dequantize()
    if name == "4over6":
        return nvfp4.quantize(x, four_over_six=True).dequantize()
    bits = rng.integers(0, 256, x.size, dtype=np.uint8)
    if name == "sr":
        return nvfp4.quantize(x, rounding="stochastic", rbits=bits).dequantize()
    y = rht(x, precision="float32")
    yq = nvfp4.quantize(y, rounding="stochastic", rbits=bits).dequantize()
    return (yq.reshape(-1, 16) @ rht_matrix().T).reshape(x.shape)


def block_stats(x: Any, quantizers: Any = QUANTIZERS, draws: int = 64,
                rng: Any = None) -> dict[str, BlockStats]:
    """Bias and variance per 1x16 block of each quantizer in ``quantizers`` (module
    docstring) on the 2-D ``x`` (its last axis a multiple of 16); ``draws`` >= 2 draws of
    the stochastic ones from ``rng`` (a seed or numpy Generator)."""
    arr = as_working_array(x).astype(np.float32, copy=False)
    if arr.ndim != 2 or arr.shape[1] % 16 or arr.size == 0:
        raise ValueError(f"block_stats takes a non-empty 2-D array whose last axis is a "
                         f"multiple of 16, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("block_stats needs finite values (a NaN or inf block has no bias)")
    if not isinstance(draws, (int, np.integer)) or draws < 2:
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    names = [quantizers] if isinstance(quantizers, str) else list(quantizers)
    unknown = [n for n in names if n not in QUANTIZERS]
    if unknown:
        raise ValueError(f"unknown quantizers {unknown}; choose from {QUANTIZERS}")
    gen = _get_rng(rng)
    ref = arr.astype(np.float64)
    out = {}
    for name in names:
        n = draws if name in _STOCHASTIC else 1
        total = np.zeros_like(ref)
        total_sq = np.zeros_like(ref)
        for _ in range(n):
            d = _draw(arr, name, gen) - ref
            total += d
            total_sq += d * d
        mean = total / n
        var = (total_sq - n * mean * mean) / (n - 1) if n > 1 else np.zeros_like(ref)
        blocks = (arr.shape[0], arr.shape[1] // 16, 16)
        out[name] = BlockStats(np.sqrt((mean ** 2).reshape(blocks).mean(axis=-1)),
                               np.maximum(var, 0).reshape(blocks).mean(axis=-1), n)
    return out


#: FP4-All-the-Way's threshold (Chmiel, Fishman, Banner and Soudry, "FP4 All the Way:
#: Fully Quantized Training of LLMs", arXiv 2505.19115): quantized training stops being
#: effective once the gradient's norm falls below about sqrt(3) times the quantization
#: noise's.
SQRT3 = math.sqrt(3.0)

@dataclass(frozen=True)
class NoiseRow:
    """One layer's gradient against its quantizer, over ``steps`` captured steps:
    ``norm`` = ||mean of the steps' gradients|| (the expected gradient, estimated),
    ``noise`` = the root of the mean over steps of sum(E[(Q(g) - g)^2]) (each step's
    expectation estimated from the draws), ``ratio`` = norm / noise and ``below`` =
    ratio < sqrt(3)."""

    name: str
    quantizer: str
    steps: int
    size: int
    norm: float
    noise: float

    @property
    def ratio(self) -> float:
        return self.norm / self.noise if self.noise > 0 else math.inf

    @property
    def below(self) -> bool:
        return self.ratio < SQRT3

    def __str__(self) -> str:
        flag = "  < sqrt(3): quantized training no longer effective" if self.below else ""
        return (f"{self.name:28s} {self.steps:5d} {self.size:9d} {self.norm:11.4g} "
                f"{self.noise:11.4g} {self.ratio:8.3g}{flag}")


def _groups(tensors: Any) -> dict[str, list[np.ndarray]]:
    """Weight gradients by layer, in step order: from one array, a mapping
    ``"LAYER/weight_grad@STEP" -> array``, or a :class:`lowprec.torch.Capture` (whose
    weight gradients must have been kept whole: ``max_values`` >= their size)."""
    if hasattr(tensors, "samples") and hasattr(tensors, "tensors"):
        cut = [k for k, smp in tensors.samples.items()
               if "/weight_grad@" in k and smp.amax is not None]
        if cut:
            raise ValueError(f"{cut[0]} was captured as a sample, not whole: capture with "
                             f"max_values >= its size (a mean over steps needs the whole "
                             f"gradient)")
        layers = list(getattr(tensors, "layers", ()))  # the model's order
        found = _groups(tensors.tensors())
        return {k: found[k] for k in sorted(found, key=lambda k: (
            layers.index(k) if k in layers else len(layers), k))}
    if not isinstance(tensors, Mapping):
        return {"tensor": [as_working_array(tensors)]}
    out: dict[str, list[tuple[int, np.ndarray]]] = {}
    for name, t in tensors.items():
        m = re.match(r"^(.*)/weight_grad(?:@(\d+))?$", str(name))
        if m is not None:
            out.setdefault(m.group(1), []).append((int(m.group(2) or 0), as_working_array(t)))
    if not out:
        raise ValueError(f"no weight gradient among the {len(tensors)} tensors given "
                         "(names 'LAYER/weight_grad@STEP', or give one array)")
    return {k: [t for _, t in sorted(v, key=lambda st: st[0])] for k, v in out.items()}


def noise_threshold(tensors: Any, quantizer: str = "sr", draws: int = 16,
                    rng: Any = None) -> list[NoiseRow]:
    """FP4-All-the-Way's test per layer: is the expected gradient's norm above sqrt(3)
    times the noise that ``quantizer`` (one of :data:`QUANTIZERS`; the recipe quantizes
    gradients with ``"sr"``) adds to each step's gradient?

    ``tensors``: a :class:`lowprec.torch.Capture` (weight gradients kept whole), a
    mapping ``"LAYER/weight_grad@STEP" -> array`` or one array. The expected gradient is
    estimated by the mean of the steps' gradients (it still holds the batches' sampling
    noise divided by the number of steps, so with few steps its norm is too large and a
    ``below`` comes late, never early; one array or one step: its own norm). Each
    tensor is read in blocks of 16 consecutive values (the last axis's 1x16 blocks where
    that axis is a multiple of 16; else a flat tail padded with zeros, which quantize to
    0 exactly); its noise is the mean squared error of ``draws`` draws, an unbiased
    estimate of sum(E[(Q(g) - g)^2]).
    """
    if quantizer not in QUANTIZERS:
        raise ValueError(f"unknown quantizer {quantizer!r}; choose from {QUANTIZERS}")
    gen = _get_rng(rng)
    rows = []
    for name, steps in _groups(tensors).items():
        shapes = {g.shape for g in steps}
        if len(shapes) != 1:
            raise ValueError(f"{name}: the steps' gradients differ in shape {sorted(shapes)}")
        noise2 = 0.0
        for g in steps:
            flat = np.asarray(g, dtype=np.float32).reshape(-1)
            if flat.size == 0 or not np.isfinite(flat).all():
                raise ValueError(f"{name}: noise_threshold needs non-empty, finite gradients")
            if g.ndim >= 2 and g.shape[-1] % 16 == 0:
                x2 = flat.reshape(-1, g.shape[-1])
            else:
                x2 = np.concatenate([flat, np.zeros(-flat.size % 16, np.float32)])
                x2 = x2.reshape(-1, 16)
            st = block_stats(x2, (quantizer,), draws=draws, rng=gen)[quantizer]
            n = st.draws
            noise2 += 16.0 * float((st.bias ** 2 + st.variance * ((n - 1) / n)).sum())
        mean = np.mean([np.asarray(g, dtype=np.float64) for g in steps], axis=0)
        rows.append(NoiseRow(name, quantizer, len(steps), int(mean.size),
                             float(np.sqrt(np.sum(mean ** 2))),
                             float(np.sqrt(noise2 / len(steps)))))
    return rows
