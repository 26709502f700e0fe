"""Figures for low-precision arithmetic (temporary package layout: see underflow.py)."""

from .underflow import *  # noqa: F401,F403
from .underflow import REGIONS, SERIES_COLORS, __all__  # noqa: F401
