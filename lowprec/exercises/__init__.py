"""Checking functions for the tutorials' exercises (temporary layout: see t01_anatomy.py)."""

from .t01_anatomy import *  # noqa: F401,F403
from .t01_anatomy import __all__  # noqa: F401
