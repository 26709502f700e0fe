"""Correctly rounded arithmetic *in* a format: ``add, sub, mul, div, sqrt, fma``.

Each function computes the exact result of the operation on values of a
format and rounds it once, in any rounding mode of :data:`lowprec.MODES`,
exactly as an IEEE 754 implementation of that format would: signed zeros,
infinities, NaNs and the five exception flags included. The arithmetic is
exact integer arithmetic on the operands' significands, ending in the one
rounding engine (see ``lowprec/_kernels/arith.py`` for why each operation is exact).
Computing in float64 and rounding once would *not* do: it double-rounds in
directed and odd modes and for ``fma``. Faster routes give the same results bit
for bit: ``add``, ``sub`` and ``mul`` in the deterministic modes take one compiled
pass that rounds a float32 intermediate rounded *to odd* once
(``lowprec/_kernels/arith32.py`` says why that is exact); the others round
float64 results rounded to odd. Which route serves a call is the router's
decision (``lowprec/_kernels/route_arith.py``, :func:`arith_route`).

>>> import lowprec as lp
>>> float(lp.add(1.0, 2.0**-11, "fp16"))          # a tie: to even
1.0
>>> float(lp.add(1.0, 2.0**-11, "fp16", "rup"))
1.0009765625
>>> lp.div(1.0, 0.0, "fp16", flags=True)           # (+inf, divide-by-zero flag 0x08)
(np.float64(inf), np.uint8(8))

Operands
    Values of the format: numbers (any real dtype, lists, scalars) that the
    format represents exactly, else ``ValueError`` naming the first one. A NaN
    of any payload is a NaN operand, quiet or signaling as its quiet bit says
    (signaling only where the format has signaling NaNs: IEEE NaNs and at least
    two mantissa bits; elsewhere a signaling NaN is refused). Arrays
    whose dtype *is* the format (``np.float16`` for fp16, ml_dtypes types) are
    used bit for bit. With ``codes=True`` operands and results are bit patterns
    (this keeps signaling NaNs, which values cannot carry). Operands broadcast
    like numpy's.

Results
    Values as float64 -- or float32 when every operand is float32 and the
    format fits float32, or the format's own dtype when every operand has it.
    With ``flags=True`` also a ``uint8`` array of IEEE flags per element in
    TestFloat's layout: 0x01 inexact, 0x02 underflow (tininess after
    rounding), 0x04 overflow, 0x08 divide by zero, 0x10 invalid.

Special results follow IEEE 754: ``x + (-x) = +0`` (``-0`` when rounding down),
``inf - inf``, ``0 * inf``, ``0/0``, ``inf/inf``, ``sqrt(x<0)`` give NaN and
raise invalid; ``x/0`` gives ±inf and raises divide-by-zero; ``sqrt(-0) = -0``;
``fma(inf, 0, c)`` is invalid even for a NaN ``c`` (as SoftFloat does). A NaN
result is the format's canonical NaN. Infinite results enter formats without
infinity the way :func:`lowprec.round_to` converts ±inf: NaN in OCP fn and fnuz
formats (``saturate=True``: ±max), ±max in fp4/fp6 (which have neither).
Formats with no NaN (fp4, fp6) cannot hold an invalid result: ``ValueError``.
A zero result in ``e8m0`` (which has no zero) gives its NaN, as ``round_to(0)`` does.
``subnormals=False`` flushes subnormal *results* to zero (operands are used as
they are). Supported: every format of at most 32 bits with at most 23 mantissa
bits (all of the registry, fp32 included).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import params, route, sr
from ._kernels import route_arith as arith
from ._runtime import (
    _CHUNK,
    _as_float_array,
    _collect,
    _get_rng,
    _random_words,
    _run_split,
    _submit,
)
from .formats import FloatFormat, get_format, reference_dtype
from .rounding import _check_out, check_mode, decode, encode

__all__ = ["add", "div", "fma", "mul", "sqrt", "sub"]

_OP_NAMES = {arith.ADD: "add", arith.SUB: "sub", arith.MUL: "mul", arith.DIV: "div",
             arith.SQRT: "sqrt", arith.FMA: "fma"}


def _check_format(fmt: Any) -> FloatFormat:
    fmt = get_format(fmt)
    if fmt.mantissa_bits > 23:
        raise ValueError(
            f"{fmt.name} has {fmt.mantissa_bits} mantissa bits; lowprec.arith handles formats "
            "with at most 23 (the exact products must fit a 64-bit integer)"
        )
    return fmt


def _operand_codes(x: Any, fmt: FloatFormat, name: str, codes: bool) -> tuple[np.ndarray, str]:
    """Codes of one operand and its kind ('own' dtype, 'f32', 'other')."""
    arr = np.asarray(x)
    if codes:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"codes=True: operand {name} must be an integer array of codes, "
                            f"got dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= 1 << fmt.width):
            raise ValueError(f"operand {name} holds codes outside 0 .. {(1 << fmt.width) - 1} "
                             f"({fmt.width}-bit {fmt.name})")
        return arr.astype(np.int64), "codes"
    own = reference_dtype(fmt)
    if own is not None and arr.dtype == own:
        return arr.view(fmt.code_dtype).astype(np.int64), "own"
    values, _ = _as_float_array(arr, f"operand {name}")
    kind = "f32" if values.dtype == np.float32 else "other"
    check = arith.operand_kernel(fmt) if kind == "f32" else None
    if check is not None:
        got = _float32_operand_codes(values, fmt, name, check)
        if got is not None:
            return got, kind
    flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    out = np.empty(flat.shape, dtype=np.int64)
    bad = arith.to_codes(params.format_params(fmt), flat.view(np.int64), out)
    if bad >= 0:
        value = float(flat[bad])
        if value != value and fmt.nan == "none":
            why = f"is NaN, and {fmt.name} has no NaN"
        elif value != value:  # a signaling NaN
            why = (f"is a signaling NaN (float64 bits {int(flat[bad:bad + 1].view(np.uint64)[0]):#x}"
                   f"), and {fmt.name} has no signaling NaN; pass a quiet NaN (np.nan)")
        else:
            why = (f"({value!r}) is not a value of {fmt.name}; round it first, e.g. "
                   f"lowprec.round_to(x, {fmt.name!r})")
        raise ValueError(f"operand {name}: element {bad} {why}")
    return out.reshape(values.shape), kind


def _float32_operand_codes(values: np.ndarray, fmt: FloatFormat, name: str,
                           check: tuple[Any, np.ndarray]) -> np.ndarray | None:
    """Codes of a float32 operand through the bits32 kernel (vectorised), with
    the checks of ``arith.to_code_kernel``: a value is one when its code decodes
    back to it (-0.0 is 0 in formats without negative zero), a NaN when
    the format has NaNs (float32 NaNs were quieted by the float64 conversion
    this replaces, so signalling ones are taken too), an infinity only in
    formats with them. None while that kernel is not compiled yet (the router
    has it compiled in the background; the float64 check answers meanwhile)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    codes = np.empty(flat.shape, fmt.code_dtype)
    kernel, q = check  # the float32 conversion to codes, rounding toward zero
    args = (q, flat, np.empty(0, np.uint64), codes)
    if not route.ready(kernel, args):
        return None  # compiling in the background: the float64 check meanwhile
    no_nan_code = kernel(*args)
    back = decode(codes, fmt)
    with np.errstate(invalid="ignore"):
        ok = back == flat
    if fmt.has_nan and not no_nan_code:
        ok |= np.isnan(flat)
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        if np.isnan(flat[bad]):
            raise ValueError(f"operand {name}: element {bad} is NaN, and {fmt.name} has no NaN")
        raise ValueError(
            f"operand {name}: element {bad} ({float(flat[bad])!r}) is not a value of {fmt.name}; "
            f"round it first, e.g. lowprec.round_to(x, {fmt.name!r})"
        )
    return codes.astype(np.int64).reshape(values.shape)


def _apply(op: int, operands: tuple, fmt: Any, mode: str, saturate: bool, subnormals: bool,
           flags: bool, rng: Any, codes: bool, into: Any = None) -> Any:
    fmt = _check_format(fmt)
    mode = check_mode(mode)
    stochastic = mode == "stochastic"
    if not stochastic and rng is not None:
        raise ValueError(f"rng is only used by mode='stochastic', not mode={mode!r}")
    gen = _get_rng(rng) if stochastic else None
    names = "abc"
    scalar = all(np.ndim(x) == 0 and not isinstance(x, np.ndarray) for x in operands)
    how = arith.arith_route(fmt, params.MODE_INT[mode], op, bool(saturate), not subnormals,
                            bool(codes), bool(flags))
    if how.fused:
        fused = _fused(op, operands, fmt, mode, saturate, subnormals, into)
        if fused is not None:
            return fused[()] if scalar and into is None else fused
    converted = [_operand_codes(x, fmt, names[i], codes) for i, x in enumerate(operands)]
    shape = np.broadcast_shapes(*(c.shape for c, _ in converted))
    if how.final in arith.FLOAT64_ROUTES:
        out = _via_float64(how.final, op, operands, fmt, mode, saturate, subnormals, gen)
    else:
        out = _via_kernel(how.final, op, converted, shape, fmt, mode, saturate, subnormals,
                          flags, gen, len(operands))
    kinds = {k for _, k in converted}
    flag_arr = np.zeros(0, dtype=np.uint8)
    if flags:
        out, flag_arr = out
        flag_arr = flag_arr.reshape(shape)
    out = out.astype(fmt.code_dtype).reshape(shape)
    if codes:
        result = out
    elif kinds == {"own"}:  # operands of the format's own numpy/ml_dtypes dtype
        own = reference_dtype(fmt)
        assert own is not None
        result = out.view(own)
    else:
        result = decode(out, fmt)
        if kinds <= {"f32", "own"} and "f32" in kinds and fmt.fits_float32:
            result = result.astype(np.float32)
    if into is not None:  # out=, numpy's convention: written in place and returned
        np.copyto(_check_out(into, result.shape, result.dtype, _OP_NAMES[op]), result)
        result = into
    elif scalar:
        result = result[()]
        flag_arr = flag_arr[()] if flags else flag_arr
    return (result, flag_arr) if flags else result


def _fused(op: int, operands: tuple, fmt: FloatFormat, mode: str, saturate: bool,
           subnormals: bool, into: Any) -> np.ndarray | None:
    """add/sub/mul in one compiled pass (``_kernels.arith32``): operands read as
    they are (float32 values, checked there, or the format's own codes), results
    written straight into the result (or ``out=``). None when the kernel found
    a bad operand or an invalid result: the caller's route then raises the
    error. Result types as :func:`_apply`'s.

    The kernel takes two operands of one kind: both of the format's own dtype,
    or both float32. Mixed kinds become float32 first (own dtypes exactly, any
    other operand once checked by :func:`_operand_codes`), and results due as
    float64 are converted from float32: one pass more, and few compiled kernels.
    """
    own = reference_dtype(fmt)
    arrays = [np.asarray(x) for x in operands]
    kinds = ["own" if own is not None and x.dtype == own else
             "f32" if x.dtype == np.float32 else "other" for x in arrays]
    if kinds == ["own", "own"]:
        flat = [x.view(fmt.code_dtype) for x in arrays]
        dtype, store = np.dtype(own), fmt.code_dtype
    else:
        for i, kind in enumerate(kinds):
            if kind == "own":
                with np.errstate(invalid="ignore"):  # ml_dtypes warns on casting its NaNs
                    arrays[i] = arrays[i].astype(np.float32)
            elif kind == "other":  # checked (and refused) here
                codes, _ = _operand_codes(arrays[i], fmt, "ab"[i], False)
                arrays[i] = decode(codes, fmt).astype(np.float32)
        flat = [x.view(np.uint32) for x in arrays]
        dtype = np.dtype(np.float64 if "other" in kinds else np.float32)
        store = np.dtype(np.uint32)
    shape = np.broadcast_shapes(*(x.shape for x in flat))
    flat = [x.reshape(1) if x.size == 1 else
            np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1) for x in flat]
    if into is None:
        result = np.empty(shape, dtype)
    else:
        try:
            result = _check_out(into, shape, dtype, _OP_NAMES[op])
        except (TypeError, ValueError):
            return None  # the other route raises, a bad operand's error first
    target = result
    if (dtype.itemsize != store.itemsize or not result.flags.c_contiguous
            or any(np.may_share_memory(result, x) for x in flat)):
        target = np.empty(shape, np.float32 if dtype == np.float64 else dtype)
    out = target.reshape(-1).view(store)
    kernel, q, qc, dq = arith.fused_kernel(op, fmt, params.MODE_INT[mode], saturate,
                                           not subnormals)
    neg_b = 0x80000000 if op == arith.SUB else 0
    a, b = flat

    if not route.ready(kernel, (q, qc, dq, neg_b, a, b, out)):
        return None  # compiling in the background: the other routes meanwhile

    def run(start: int, stop: int) -> int:
        return kernel(q, qc, dq, neg_b, a if a.shape[0] == 1 else a[start:stop],
                      b if b.shape[0] == 1 else b[start:stop], out[start:stop])

    if any(status for _, status in _run_split(run, out.shape[0], 1)):
        return None
    if target is not result:  # float64 results, a strided or overlapping out=
        np.copyto(result, target)
    return result



def _via_float64(how, op, operands, fmt, mode, saturate, subnormals, gen) -> np.ndarray:
    """Codes of ``op`` computed in float64 by the route ``how`` (``float64``:
    exactly; ``twosum_odd``, ``fma_odd``, ``div_sqrt_odd``: rounded to odd; see
    ``_kernels/route_arith.py``) and rounded once by the engine (``encode``, its
    fast path). IEEE float64 arithmetic gives the right infinities, NaNs and signs
    of zero -- except that an exact zero sum is -0 when rounding down (unless both
    terms are +0)."""
    if how == "twosum_odd":
        # a + b = fma(a, 1, b): the sum rounded to odd in float64.
        a, b = operands
        operands = (a, 1.0, np.negative(b) if op == arith.SUB else b)
        op = arith.FMA
    if op in (arith.DIV, arith.SQRT, arith.FMA):
        xs = [np.asarray(v, dtype=np.float64) for v in operands]
        shape = np.broadcast_shapes(*(v.shape for v in xs))
        flat = [v.reshape(1) if v.size == 1 else
                np.ascontiguousarray(np.broadcast_to(v, shape)).reshape(-1) for v in xs]
        r = np.empty(shape, dtype=np.float64)
        if op == arith.FMA:
            arith.fma_odd(flat[0], flat[1], flat[2], mode == "rdown", r.reshape(-1))
        else:
            arith.div_sqrt_odd_kernel(op == arith.SQRT, flat[0], flat[-1], r.reshape(-1))
        return np.asarray(encode(r, fmt, mode, saturate=saturate, subnormals=subnormals))
    x, y = (np.asarray(v, dtype=np.float64) for v in operands)
    with np.errstate(all="ignore"):
        if op == arith.MUL:
            r = x * y
        else:
            if op == arith.SUB:
                y = -y
            r = x + y
            if mode == "rdown":
                both_plus_zero = (x == 0) & (y == 0) & ~np.signbit(x) & ~np.signbit(y)
                r = np.where((r == 0) & ~both_plus_zero, -0.0, r)
    return np.asarray(encode(r, fmt, mode, saturate=saturate, subnormals=subnormals, rng=gen))


def _via_kernel(how, op, converted, shape, fmt, mode, saturate, subnormals, flags, gen, arity):
    """Codes (and flags) of ``op`` from the compiled integer kernel (the route
    ``how``: ``integer``, or ``integer_sr``, its faster stochastic div/sqrt/fma)."""
    stochastic = mode == "stochastic"
    n = int(np.prod(shape))
    flat = []
    for c, _ in converted:
        if c.size == 1:
            flat.append(np.ascontiguousarray(c.reshape(1)))
        elif c.shape == shape:
            flat.append(np.ascontiguousarray(c).reshape(-1))
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(c, shape)).reshape(-1))
    while len(flat) < 3:
        flat.append(flat[0][:1])
    a, b, c = flat
    # Codes travel as int64 whatever the format: one compiled kernel for all.
    out = np.empty(n, dtype=np.int64)
    flag_arr = np.zeros(n if flags else 0, dtype=np.uint8)
    P = params.format_params(fmt)
    m = params.MODE_INT[mode]

    def run(start: int, stop: int, seeds: np.ndarray) -> tuple[int, int]:
        part = [x if x.shape[0] == 1 else x[start:stop] for x in (a, b, c)]
        fl = flag_arr[start:stop] if flags else flag_arr
        if how == "integer_sr":
            # The same results as op_kernel, without its digit loops (route "integer_sr").
            return arith.sr_kernel(P, op, part[0], part[1], part[2], saturate, not subnormals,
                                    seeds, out[start:stop], fl, flags), 0
        # Stochastic: the words round_to would use for the same elements and seed.
        rnd = arith.sr_expand(seeds, stop - start) if seeds.shape[0] else seeds
        bad = arith.op_kernel(P, op, part[0], part[1], part[2], m, saturate, not subnormals,
                               rnd, out[start:stop], fl, flags)
        return bad, 0

    no_rnd = np.empty(0, dtype=np.uint64)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        seeds = (_random_words(gen, -(-(stop - start) // sr.SR_BLOCK)) if stochastic
                 else no_rnd)
        for bad, _ in _collect(_submit(run, start, stop, seeds)):
            if bad >= 0:
                args = ", ".join(repr(float(decode(x[0 if x.shape[0] == 1 else bad]
                                                   .astype(fmt.code_dtype), fmt)))
                                 for x in flat[:arity])
                raise ValueError(
                    f"{_OP_NAMES[op]}({args}) at element {bad} is invalid (NaN), but "
                    f"{fmt.name} has no NaN; check operands before the operation"
                )
    return (out, flag_arr) if flags else out


_DOC_ARGS = """
    fmt: the format (name, dtype or FloatFormat); operands must be its values.
    mode: rounding mode (``rne``, ``rna``, ``rtz``, ``rup``, ``rdown``, ``odd``,
        ``stochastic``); saturate: clamp overflow to ±max; subnormals: False
        flushes subnormal results to zero; flags: also return the IEEE flags;
        rng: Generator or seed for ``stochastic`` (one 64-bit word per element);
        codes: operands and result are bit patterns instead of values;
        out: an existing array of the result's shape and dtype to write it
        into (returned), as in numpy.
"""


def add(a: Any, b: Any, fmt: FloatFormat | str, mode: str = "rne", *, saturate: bool = False,
        subnormals: bool = True, flags: bool = False, rng: Any = None,
        codes: bool = False, out: np.ndarray | None = None) -> Any:
    """a + b, correctly rounded in ``fmt``."""
    return _apply(arith.ADD, (a, b), fmt, mode, saturate, subnormals, flags, rng, codes, out)


def sub(a: Any, b: Any, fmt: FloatFormat | str, mode: str = "rne", *, saturate: bool = False,
        subnormals: bool = True, flags: bool = False, rng: Any = None,
        codes: bool = False, out: np.ndarray | None = None) -> Any:
    """a - b, correctly rounded in ``fmt``."""
    return _apply(arith.SUB, (a, b), fmt, mode, saturate, subnormals, flags, rng, codes, out)


def mul(a: Any, b: Any, fmt: FloatFormat | str, mode: str = "rne", *, saturate: bool = False,
        subnormals: bool = True, flags: bool = False, rng: Any = None,
        codes: bool = False, out: np.ndarray | None = None) -> Any:
    """a * b, correctly rounded in ``fmt``."""
    return _apply(arith.MUL, (a, b), fmt, mode, saturate, subnormals, flags, rng, codes, out)


def div(a: Any, b: Any, fmt: FloatFormat | str, mode: str = "rne", *, saturate: bool = False,
        subnormals: bool = True, flags: bool = False, rng: Any = None,
        codes: bool = False, out: np.ndarray | None = None) -> Any:
    """a / b, correctly rounded in ``fmt``."""
    return _apply(arith.DIV, (a, b), fmt, mode, saturate, subnormals, flags, rng, codes, out)


def sqrt(a: Any, fmt: FloatFormat | str, mode: str = "rne", *, saturate: bool = False,
         subnormals: bool = True, flags: bool = False, rng: Any = None,
         codes: bool = False, out: np.ndarray | None = None) -> Any:
    """Square root of a, correctly rounded in ``fmt``."""
    return _apply(arith.SQRT, (a,), fmt, mode, saturate, subnormals, flags, rng, codes, out)


def fma(a: Any, b: Any, c: Any, fmt: FloatFormat | str, mode: str = "rne", *,
        saturate: bool = False, subnormals: bool = True, flags: bool = False, rng: Any = None,
        codes: bool = False, out: np.ndarray | None = None) -> Any:
    """a * b + c with a single rounding in ``fmt`` (fused multiply-add)."""
    return _apply(arith.FMA, (a, b, c), fmt, mode, saturate, subnormals, flags, rng, codes, out)


for _f in (add, sub, mul, div, sqrt, fma):
    _f.__doc__ = (_f.__doc__ or "") + "\n" + _DOC_ARGS
