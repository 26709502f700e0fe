"""The private heart of lowprec: the kernels every public verb calls.

Three roles (``docs/kernels.md``):

* the readable reference: ``engine`` (``round_pack``, ``convert_one``,
  ``decode_one``: compiled scalar kernels) and ``vec``, the same engine in
  numpy, which needs no compiler and serves first calls;
* the fast twins, each held bit-equal to the reference by the tests:
  ``bits32_direct`` (with ``direct_params``, ``direct_round``), ``pow2``,
  ``bits32``, ``odd64``, ``fast``, the arithmetic (``arith``, ``arith32``,
  ``arith_fast``), block and matmul kernels, the NVFP4 recipe's (``recipe``)
  and the trainer's in-order GEMM (``gemm``), each with its numpy twin;
* the routers: ``route`` (which kernel serves a conversion, and whether it is
  compiled yet; ``convert`` holds the conversion entry points it routes),
  ``route_arith`` (the arithmetic verbs' routes) and ``route_compiled`` (the
  kernels without a numpy twin: matmul models, block MMA, inspect's pass).
  Modules outside ``_kernels`` import a twin only through them
  (``tests/test_route.py``).

Nothing here is public API.
"""

from . import _cache

_cache.install()  # compiled kernels go to the user's cache folder, not site-packages
