"""lowprec: low-precision floating point, bit-exact on the CPU, for learning and checking.

>>> import lowprec as lp
>>> float(lp.round_to(0.1, "fp8_e4m3"))
0.1015625
"""

from .formats import FORMATS, FloatFormat, custom_format, get_format, list_formats
from .rounding import MODES, decode, encode, round_to
from .arith import add, div, fma, mul, sqrt, sub
from .matmul import dot, list_models, matmul

__version__ = "0.1.0"

__all__ = [
    "FORMATS",
    "MODES",
    "FloatFormat",
    "add",
    "custom_format",
    "decode",
    "div",
    "dot",
    "encode",
    "fma",
    "get_format",
    "list_formats",
    "list_models",
    "matmul",
    "mul",
    "round_to",
    "sqrt",
    "sub",
]
