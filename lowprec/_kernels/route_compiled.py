"""The router of the compiled kernels that have no numpy twin: the accumulation
models of ``lowprec.matmul`` and ``lowprec.blockmma``, and the measuring pass of
``lowprec.inspect``. A first call of one compiles it in place.

The accumulation models have no numpy twin because one in numpy would take
minutes on a matrix the kernels take a second for; the bit-exact references they
are tested against are the Fraction sums and MMA-Sim's vectors of ``tests/``.
The measuring pass counts and sums (``tests/test_inspect*.py`` check it against
numpy's counts). Which model a call takes is the caller's argument; the router
names the kernel for it, looked up once in a dict.

>>> kernel("tensor_core_grid").__name__
'tc_grid'
>>> sorted(ROUTES)[:3]
['block_mma', 'blocked', 'exact']
"""

from __future__ import annotations

from typing import Any

from . import blockmma, inspect_stats, matmul, tc_fast

__all__ = ["ROUTES", "kernel"]

#: route -> (module, attribute) of the kernel that serves it.
ROUTES: dict[str, tuple[Any, str]] = {
    "exact": (matmul, "exact_kernel"),  # the exact sum, rounded once
    "unpack": (matmul, "unpack_matrix"),  # codes -> significands, exponents
    "sequential": (matmul, "sequential_kernel"),  # one rounding per addition
    "sequential_fast": (matmul, "sequential_fast"),  # the same where float64 is exact
    "pairwise": (matmul, "pairwise_kernel"),
    "blocked": (matmul, "blocked_kernel"),
    "tensor_core": (matmul, "tensor_core_kernel"),  # NVIDIA/Promote models, any pairs
    "tensor_core_grid": (tc_fast, "tc_grid"),  # the same on a full A @ B of finite inputs
    "block_mma": (blockmma, "block_mma_kernel"),  # the block-scaled MMA (MX, NVFP4)
    "inspect_measure": (inspect_stats, "measure_pass"),  # inspect's counts and block sums
    "inspect_fields": (inspect_stats, "field_counts"),  # exponent fields of a float array
    "inspect_amax": (inspect_stats, "finite_amax"),  # the largest finite |x|
}

_FOUND: dict[str, Any] = {}


def kernel(route: str) -> Any:
    """The kernel of ``route`` (a key of :data:`ROUTES`), cached: a call's one dict
    lookup. An unknown route is a ``KeyError`` naming the routes."""
    found = _FOUND.get(route)
    if found is None:
        if route not in ROUTES:
            raise KeyError(f"no such route {route!r}; routes: {', '.join(sorted(ROUTES))}")
        module, attr = ROUTES[route]
        found = _FOUND[route] = getattr(module, attr)
    return found
