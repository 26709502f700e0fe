"""The private heart of lowprec: the numba kernels every public verb calls.

``engine`` is the scalar reference rounding engine (``round_pack``), ``arith``
the exact integer arithmetic that ends in it, ``matmul`` the accumulation
kernels, ``bits32`` the branch-free float32 fast path of ``round_to`` and
``encode`` (held bit-equal to ``round_pack``). Nothing here is public API.
"""

from . import _cache

_cache.install()  # compiled kernels go to the user's cache folder, not site-packages
