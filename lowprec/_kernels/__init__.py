"""Compiled kernels (numba), below the public modules."""
