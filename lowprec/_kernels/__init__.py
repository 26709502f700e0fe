"""The private heart of lowprec: the numba kernels every public verb calls.

``engine`` is the scalar reference rounding engine (``round_pack``), ``arith``
the exact integer arithmetic that ends in it, ``matmul`` the accumulation
kernels. Nothing here is public API.
"""
