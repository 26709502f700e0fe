"""lowprec: low-precision floating point, bit-exact on the CPU, for learning and checking.

>>> import lowprec as lp
>>> float(lp.round_to(0.1, "fp8_e4m3"))
0.1015625
"""

from .explain import Explanation, RangeStats, explain, range_stats
from .formats import FORMATS, FloatFormat, custom_format, get_format, list_formats
from .packing import pack, unpack
from .rounding import MODES, decode, encode, round_to

__version__ = "0.1.0"

__all__ = [
    "FORMATS",
    "MODES",
    "Explanation",
    "FloatFormat",
    "RangeStats",
    "custom_format",
    "decode",
    "encode",
    "explain",
    "get_format",
    "list_formats",
    "pack",
    "range_stats",
    "round_to",
    "unpack",
]
