"""lowprec: low-precision floating point, bit-exact on the CPU, for learning and checking.

>>> import lowprec as lp
>>> float(lp.round_to(0.1, "fp8_e4m3"))
0.1015625
"""

from . import mx, nvfp4, quant_error, scaling
from .formats import FORMATS, FloatFormat, custom_format, get_format, list_formats
from .rounding import MODES, decode, encode, round_to

__version__ = "0.1.0"

__all__ = [
    "FORMATS",
    "MODES",
    "FloatFormat",
    "custom_format",
    "decode",
    "encode",
    "get_format",
    "list_formats",
    "mx",
    "nvfp4",
    "quant_error",
    "round_to",
    "scaling",
]
