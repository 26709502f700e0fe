"""The router of the arithmetic verbs (``lowprec.arith``): which route serves
``add``, ``sub``, ``mul``, ``div``, ``sqrt`` and ``fma`` of a (format, mode,
operand dtype, saturate, subnormals), and the kernels each route runs.

The routes, every one bit-equal to the exact integer kernel (the tests hold them
so):

* ``arith32``: add/sub/mul in one compiled pass (:mod:`.arith32`: a float32
  intermediate rounded to odd, rounded once), in the deterministic modes, for
  the formats of :func:`.arith32.supports`. It declines (and the next route
  serves the call) while its kernel is not compiled, and on a bad operand or an
  invalid result, whose error the next route raises;
* ``float64``: the exact result in float64 (sums where float64 holds every sum
  of two values, products of every signed format with subnormals), rounded once
  by ``encode``;
* ``twosum_odd``: sums that float64 does not hold exactly (bf16, tf32, fp32),
  rounded to odd in float64 by TwoSum (``fma(a, 1, b)``,
  :func:`.arith_fast.fma_odd`), then rounded once by ``encode`` (deterministic
  modes);
* ``fma_odd`` and ``div_sqrt_odd``: the fused multiply-add, the quotient and
  the root rounded to odd in float64 (:mod:`.arith_fast`), then ``encode``;
* ``integer``: the exact integer kernel :func:`.arith.op_kernel` (every
  format, mode, ``flags=True`` and ``codes=True``);
* ``integer_sr``: stochastic div/sqrt/fma, :func:`.arith_fast.sr_kernel` (the
  integer kernel's results and words, faster).

Operands other than codes and the format's own dtype are checked to be values
of the format: float32 ones by the float32 conversion kernel to codes where the
format has one (``convert.kernel_for``, round toward zero, decoded back and
compared), the others by :func:`.arith.to_codes`.

:func:`arith_route` decides (cached per key: one lookup a call);
:func:`serving_arith` names the kernels a call runs, the arithmetic rows of the
routing table in ``tests/test_route.py``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from . import arith, arith32, arith_fast, bits32, bits32_direct, convert, sr
from .params import RTZ, STOCHASTIC

__all__ = ["ADD", "DIV", "FMA", "MUL", "SQRT", "SUB", "ArithRoute", "arith_route",
           "div_sqrt_odd_kernel", "fma_odd", "fused_kernel", "op_kernel", "operand_kernel",
           "serving_arith", "sr_expand", "sr_kernel", "to_codes"]

ADD, SUB, MUL, DIV, SQRT, FMA = arith.ADD, arith.SUB, arith.MUL, arith.DIV, arith.SQRT, arith.FMA

#: The kernels the routes run, named here so that ``lowprec.arith`` imports no twin.
op_kernel = arith.op_kernel
to_codes = arith.to_codes  # compiled where ready, else its numpy twin over vec.convert
sr_kernel = arith_fast.sr_kernel
fma_odd = arith_fast.fma_odd  # compiled where ready, else its numpy twin (TwoSum)
div_sqrt_odd_kernel = arith_fast.div_sqrt_odd_kernel
sr_expand = sr.sr_expand  # the integer kernel's stochastic words, as round_to's

#: The routes that compute in float64 and round once with ``encode``.
FLOAT64_ROUTES = ("float64", "twosum_odd", "fma_odd", "div_sqrt_odd")


class ArithRoute(NamedTuple):
    """How ``lowprec.arith`` serves an operation: ``fused`` (try the ``arith32``
    pass first) and ``final``, the route that serves it otherwise."""

    fused: bool
    final: str


@lru_cache(maxsize=4096)
def arith_route(fmt: Any, mode: int, op: int, saturate: bool, ftz: bool, codes: bool,
                flags: bool) -> ArithRoute:
    """The route of ``op`` into ``fmt`` in ``mode`` (an int of ``params``), with
    codes in and out (``codes``) or IEEE flags out (``flags``), both of which
    take the integer kernel. (``saturate`` and ``ftz`` choose no route today;
    they are part of the key so that a route that depends on them is decided
    here too.)

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RNE
    >>> arith_route(get_format("fp16"), RNE, ADD, False, False, False, False)
    ArithRoute(fused=True, final='float64')
    >>> arith_route(get_format("bf16"), STOCHASTIC, DIV, False, False, False, False)
    ArithRoute(fused=False, final='integer_sr')
    """
    stochastic = mode == STOCHASTIC
    plain = not (codes or flags)
    fused = plain and not stochastic and op in (ADD, SUB, MUL) and arith32.supports(fmt)
    final = _float64_route(fmt, op, stochastic) if plain else None
    if final is None:
        final = "integer_sr" if stochastic and op in (DIV, SQRT, FMA) else "integer"
    return ArithRoute(fused, final)


def _float64_route(fmt: Any, op: int, stochastic: bool) -> str | None:
    """The float64 route of ``op`` into ``fmt``, None where there is none.

    A sum of two values is a multiple of the smallest subnormal 2**s below
    2**(emax + 2): it needs emax + 2 - s <= 53 bits (fp16: 41, every 8/6/4-bit
    format; not bf16, tf32, fp32). A product of two p-bit significands has
    <= 2p <= 48 bits, and its exponent stays in float64's normal range.
    Quotients, roots and fused multiply-adds are not exact in float64, but
    rounded to odd there they round like the exact value in every deterministic
    mode (their exponents must stay well inside float64's range); so do the
    other sums, rounded to odd with TwoSum's exact error.
    """
    if not (fmt.signed and fmt.has_subnormals) or fmt.mantissa_bits > 23:
        return None
    s = fmt.smallest_subnormal_exponent
    if op in (ADD, SUB):
        if fmt.emax + 2 - s <= 53:
            return "float64"
        return None if stochastic else "twosum_odd"
    if op == MUL:
        return "float64" if 2 * s >= -1022 and 2 * (fmt.emax + 1) <= 1023 else None
    if stochastic or not (2 * s >= -900 and 2 * (fmt.emax + 1) <= 900):
        return None
    return "fma_odd" if op == FMA else "div_sqrt_odd"


def fused_kernel(op: int, fmt: Any, mode: int, saturate: bool, ftz: bool
                 ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """(kernel, params, check params, decode params) of the ``arith32`` pass of
    ``op`` (ADD or SUB, or MUL) into ``fmt``: cached, as :func:`arith_route`."""
    key = (op == MUL, fmt, mode, bool(saturate), bool(ftz))
    found = _FUSED.get(key)
    if found is None:
        found = _FUSED[key] = (
            arith32.kernel_for(MUL if op == MUL else ADD, fmt, mode),
            bits32_direct.params_array(fmt, mode, saturate, ftz),
            bits32_direct.params_array(fmt, RTZ, False, False),
            arith32.decode_params(fmt))
    return found


_FUSED: dict[tuple, tuple[Any, np.ndarray, np.ndarray, np.ndarray]] = {}


@lru_cache(maxsize=256)
def operand_kernel(fmt: Any) -> tuple[Any, np.ndarray] | None:
    """(kernel, params) that checks float32 operands of ``fmt`` (their codes
    rounding toward zero, decoded back and compared), None where the format has
    no float32 conversion kernel (then :func:`to_codes` checks them)."""
    if not bits32.supports(fmt):
        return None
    return convert.kernel_for(fmt, RTZ, False, False, True)


def serving_arith(fmt: Any, mode: int, op: int, is64: bool, saturate: bool = False,
                  ftz: bool = False, flags: bool = False) -> tuple[str, ...]:
    """The names of the compiled kernels that serve ``op`` of float64 (``is64``)
    or float32 operands into ``fmt``, in the order a call tries them: the fused
    pass (where it is tried), the operand check, and the final route's kernels
    (``encode``'s kernels of :func:`.route.serving` after a float64 route).
    The arithmetic rows of the routing table of ``tests/test_route.py``.

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RNE
    >>> serving_arith(get_format("e8m0"), RNE, SQRT, True)
    ('arith.to_code_kernel', 'arith.op_kernel')
    """
    from .route import kernel_name, serving

    how = arith_route(fmt, mode, op, saturate, ftz, False, flags)
    names = []
    if how.fused:
        names.append(kernel_name(fused_kernel(op, fmt, mode, saturate, ftz)[0]))
    check = None if is64 else operand_kernel(fmt)
    names.append(kernel_name(arith.to_code_kernel if check is None
                             else _first(check[0])))
    final = {"twosum_odd": (arith_fast.fma_odd_kernel,), "fma_odd": (arith_fast.fma_odd_kernel,),
             "div_sqrt_odd": (arith_fast.div_sqrt_odd_kernel,), "integer": (arith.op_kernel,),
             # the fast pass, then the integer kernel for the elements it leaves
             "integer_sr": (arith_fast.sr_fast_pass, arith.op_kernel)}.get(how.final, ())
    names += [kernel_name(k) for k in final]
    if how.final in FLOAT64_ROUTES:
        names += serving(fmt, mode, True, True, saturate, ftz)
    return tuple(names)


def _first(kernel: Any) -> Any:
    """The numba dispatcher that runs first in ``kernel`` (NearestEven's addition)."""
    return kernel.addition if isinstance(kernel, bits32_direct.NearestEven) else kernel
