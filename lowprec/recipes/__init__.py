"""The published low-precision *training* recipes, part by part, bit-exact on the CPU.

Each recipe is a set of plain functions, one per ingredient, so a precision
policy (fprop / dgrad / wgrad) can name them one entry at a time:

* :mod:`lowprec.recipes.nvfp4`: NVIDIA's NVFP4 recipe (Transformer Engine
  ``NVFP4BlockScaling``): 1x16 and 16x16 blocks, two-level scales, stochastic
  rounding with 8 random bits per element, 4over6, and the random Hadamard
  transform of :mod:`lowprec.hadamard` on the wgrad operands.
* :mod:`lowprec.recipes.fp8`: MXFP8 as torchao's ``MXLinear`` and Transformer
  Engine's ``MXFP8BlockScaling`` quantize the three GEMMs, and DeepSeek-V3's
  block-wise FP8 (1x128 activation tiles, 128x128 weight tiles).
* :mod:`lowprec.recipes.lab`: per-block bias and variance of the NVFP4 gradient
  quantizers (round to nearest, stochastic rounding, 4over6, Hadamard + SR).
* :mod:`lowprec.recipes.measure`: the recipe's wgrad GEMM and its flushed values on your
  tensors (tutorial 13).

See ``docs/recipes.md`` for the sources and the conventions where they differ.
"""

from . import fp8, lab, measure, nvfp4

__all__ = ["fp8", "lab", "measure", "nvfp4"]
