"""lowprec: low-precision floating point, bit-exact on the CPU, for learning and checking.

The package is layered, lower layers knowing nothing of higher ones:

formats (what a format is) -> rounding (values <-> codes, every mode) -> arith and
matmul (computing in a format) -> scaling, mx, nvfp4 (scaled and block formats) ->
autograd and train (precision policies, loss scaling) -> plot, figures, cli.
``lowprec.gpu`` runs the same operations on NVIDIA GPUs (CuPy, optional) and
``lowprec.validate`` compares the two.

>>> import lowprec as lp
>>> float(lp.round_to(0.1, "fp8_e4m3"))
0.1015625
"""

from . import hadamard, mx, nvfp4, quant_error, recipes, scaling
from .arith import add, div, fma, mul, sqrt, sub
from .explain import Explanation, RangeStats, explain, range_stats
from .formats import FORMATS, FloatFormat, custom_format, get_format, list_formats
from .gemm_identify import identify_gemm
from .matmul import dot, list_models, matmul, vecdot
from .packing import pack, unpack
from .rounding import MODES, decode, encode, round_to

__version__ = "0.1.0"

__all__ = [
    "Explanation",
    "FloatFormat",
    "FORMATS",
    "MODES",
    "RangeStats",
    "add",
    "custom_format",
    "decode",
    "div",
    "dot",
    "encode",
    "explain",
    "fma",
    "get_format",
    "hadamard",
    "identify_gemm",
    "list_formats",
    "list_models",
    "matmul",
    "vecdot",
    "mul",
    "mx",
    "nvfp4",
    "pack",
    "quant_error",
    "recipes",
    "range_stats",
    "round_to",
    "scaling",
    "sqrt",
    "sub",
    "unpack",
]
