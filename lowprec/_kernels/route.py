"""The router: which kernel serves a conversion, and whether it is compiled yet.

``lowprec._kernels`` holds three kinds of code:

* the readable reference, :mod:`.engine` (``round_pack``, ``convert_one``,
  ``decode_one``) and its numpy transcription :mod:`.vec`, which needs no
  compiler;
* the fast twins, each held bit-equal to the reference by the tests
  (:mod:`.bits32_direct`, :mod:`.pow2`, :mod:`.bits32`, :mod:`.odd64`,
  :mod:`.fast`, the arithmetic, block, matmul and AMD mfma kernels);
* this module, which picks among them for a (format, mode, input dtype,
  output, saturate, subnormals) conversion (:func:`fast_path`,
  :func:`kernel_for`), and says whether the kernel it picked can run now
  (:func:`ready`).

Whether a kernel is compiled yet, and compiling it in the background where
it is not, is :mod:`.warm`'s; its names that callers use (:func:`ready`,
:class:`Cold`, :func:`wait`, :func:`large`, :func:`background`) are
re-exported here, so that every caller asks this one module (:func:`call`
asks :func:`ready`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from . import bits32, bits32_direct, odd64, pow2
from .params import STOCHASTIC
from .warm import (  # noqa: F401 (re-exported; _READY for the tests)
    _READY,
    LOAD_IN_PLACE,
    Cold,
    _dispatcher,
    background,
    large,
    ready,
    wait,
)

__all__ = ["Cold", "LOAD_IN_PLACE", "background", "call", "decode", "fast_path", "kernel_for",
           "kernel_name", "kind", "large", "ready", "serving", "serving_mfma", "takes_bits32",
           "wait"]


# ------------------------------------------------------------ which kernel
@lru_cache(maxsize=1024)
def fast_path(fmt: Any, is64: bool, same_type: bool, ftz: bool) -> str:
    """The kernel ``path="fast"`` takes: ``"bits32"``, ``"odd64"``, ``"vec32"``,
    ``"scalar"`` or ``"reference"``.

    ``bits32`` takes float32 in (values out as float32, or codes) for every
    format it supports (:func:`bits32.supports`: all of the registry but fp32);
    ``odd64`` float64 in for the formats of :func:`odd64.supports`, in every
    mode but stochastic (which then takes ``scalar``).
    ``fast_kernel`` needs a signed format with subnormals and mantissa bits
    whose values are all of the input's type (it takes ties-to-even's parity
    from the input's bits, which for m = 0 is an exponent bit), and values out
    of the input's type (``same_type``) or codes. ``vec32_kernel`` needs besides
    float32 in, no flush to zero, and a normal range that starts inside float32's.
    """
    if not is64 and same_type and bits32.supports(fmt):
        return "bits32"
    if is64 and same_type and odd64.supports(fmt):
        return "odd64"  # float64 -> float32 rounded to odd -> bits32 (not stochastic)
    if not (fmt.signed and fmt.has_subnormals and fmt.mantissa_bits > 0 and same_type
            and (fmt.emin >= -1022 if is64 else fmt.fits_float32)):
        return "reference"
    if (not is64 and not ftz and fmt.emin >= -126
            and (fmt.emin == -126 or fmt.smallest_subnormal_exponent >= -126)):
        return "vec32"
    return "scalar"


def takes_bits32(fmt: Any, is64: bool = False) -> bool:
    """Whether a conversion of float32 into ``fmt`` (of float64, ``is64``: through
    float32 rounded to odd) takes one of :func:`kernel_for`'s float32-bits kernels
    (the block quantizers' float32 passes call them).

    >>> from lowprec import get_format
    >>> takes_bits32(get_format("fp4_e2m1")), takes_bits32(get_format("ue5m3"))
    (True, False)
    """
    return fast_path(fmt, is64, True, False) == ("odd64" if is64 else "bits32")


def kind(fmt: Any, is64: bool, same_type: bool, ftz: bool, mode: int, path: str) -> str:
    """The kernel a conversion takes: :func:`fast_path`'s for ``path`` ``"fast"``
    or ``"auto"`` (``odd64`` becomes ``scalar`` for stochastic rounding, which
    needs every bit of the input), else the reference."""
    if path == "reference":
        return "reference"
    found = fast_path(fmt, is64, same_type, ftz)
    return "scalar" if found == "odd64" and mode == STOCHASTIC else found


def kernel_for(fmt: Any, mode: int, saturate: bool, ftz: bool, codes: bool
               ) -> tuple[Any, np.ndarray]:
    """(kernel, params array) of the fastest float32-bits kernel for ``fmt`` in
    ``mode``, writing codes (``codes``) or float32 values: :mod:`.bits32_direct`
    where it applies (the usual formats), :mod:`.pow2` for E8M0, else
    :mod:`.bits32`'s. Either is called as ``kernel(q, xbits, seeds, out)`` and
    returns 1 if a NaN has no code in the format, else 0 (cached per format,
    mode and output).

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RNE
    >>> kernel_for(get_format("fp16"), RNE, False, False, True)[0] is \\
    ...     bits32_direct.KERNELS[RNE, True]
    True
    >>> kernel_for(get_format("e8m0"), RNE, False, False, False)[0] is pow2.KERNELS[RNE, False]
    True
    """
    key = (fmt, mode, bool(saturate), bool(ftz), bool(codes))
    found = _FOR.get(key)
    if found is None:
        if mode in bits32_direct.DIRECT_MODES and bits32_direct.supports(fmt):
            found = (bits32_direct.kernel(fmt, mode, bool(codes), saturate, ftz),
                     bits32_direct.params_array(fmt, mode, saturate, ftz))
        elif mode in pow2.POW2_MODES and pow2.supports(fmt):
            found = (pow2.kernel(fmt, mode, bool(codes)),
                     pow2.params_array(fmt, mode, saturate, ftz))
        else:
            found = (bits32.KERNELS[mode, bool(codes)],
                     bits32.params_array(fmt, mode, saturate, ftz))
        _FOR[key] = found
    return found


_FOR: dict[tuple, tuple[Any, np.ndarray]] = {}


def serving(fmt: Any, mode: int, is64: bool, codes: bool, saturate: bool = False,
            ftz: bool = False) -> tuple[str, ...]:
    """The names of the compiled kernels that serve a conversion of float64
    (``is64``) or float32 input into ``fmt``, to codes or to values of the
    input's type, as :mod:`.convert` runs them (``path="fast"``): the routing
    table of ``tests/test_route.py``.

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RTZ
    >>> serving(get_format("bf16"), RTZ, False, False)
    ('bits32_direct.PLAIN_KERNELS[(2, False)]',)
    >>> serving(get_format("fp16"), RTZ, True, True)
    ('odd64.to_float32_odd', 'bits32_direct.KERNELS[(2, True)]')
    """
    how = kind(fmt, is64, True, ftz, mode, "fast")
    if how in ("bits32", "odd64"):
        name = kernel_name(_dispatcher(kernel_for(fmt, mode, saturate, ftz, codes)[0]))
        return (name,) if how == "bits32" else ("odd64.to_float32_odd", name)
    if how == "vec32":
        return ("fast.vec32_kernel",)
    if mode == STOCHASTIC:
        return ("convert.stochastic_kernel",)
    if how == "scalar":
        return ("fast.fast_kernel",)
    return ("engine.encode_kernel" if codes else "engine.round_kernel",)


def serving_mfma(gen: str, grid: bool, special: bool) -> tuple[str, ...]:
    """The compiled kernel that serves an AMD mfma model of generation ``gen``
    (``"CDNA1"``, ``"CDNA2"``, ``"CDNA3"``) on a full ``A @ B`` (``grid``) or on
    dot products of row pairs, inputs with NaN/inf (``special``) or not: the AMD
    rows of the routing table. Cold, :mod:`lowprec.amd`'s ``mfma_dot`` answers.

    >>> serving_mfma("CDNA3", True, False)
    ('amd.cdna3_grid',)
    >>> serving_mfma("CDNA2", False, True)
    ('amd.cdna12_pairs',)
    """
    from . import amd

    return (kernel_name(amd.kernel_for(gen, grid, special)),)


# ------------------------------------------------- compiled yet, or cold?
def call(auto: bool, kernel: Any, *args: Any) -> Any:
    """``kernel(*args)``; with ``auto``, :class:`Cold` instead where it would compile."""
    if auto and not ready(kernel, args):
        raise Cold(kernel_name(_dispatcher(kernel)))
    return kernel(*args)


def decode(P: Any, codes: np.ndarray) -> np.ndarray:
    """The float64 values of ``codes`` (uint32) in the format ``P``: the compiled
    reference where it is ready, else :mod:`.vec`'s."""
    from . import engine, vec

    out = np.empty(codes.shape, np.float64)
    with large(codes.size):
        now = ready(engine.decode_kernel, (P, codes, out))
    if now:
        engine.decode_kernel(P, codes, out)
        return out
    return vec.decode(P, codes)


@lru_cache(maxsize=1)
def _names() -> tuple[dict[int, str], dict[str, Any]]:
    """Every routed numba kernel, its name by id and itself by name: a name is
    ``module.attribute`` or ``module.TABLE[key]`` (``.addition``/``.integer``)."""
    from numba.core.registry import CPUDispatcher

    from . import amd, arith, arith_fast, blocks, convert, engine, fast, gemm, recipe

    names: dict[int, str] = {}
    kernels: dict[str, Any] = {}

    def add(d: Any, name: str) -> None:
        if isinstance(d, CPUDispatcher) and id(d) not in names:
            names[id(d)] = name
            kernels[name] = d

    for module in (bits32_direct, pow2, bits32, odd64, fast, engine, convert, blocks, recipe,
                   gemm, arith, arith_fast, amd):
        short = module.__name__.rsplit(".", 1)[1]
        for attr, value in vars(module).items():
            add(value, f"{short}.{attr}")
            if isinstance(value, dict) and attr.isupper():
                for key, k in value.items():
                    add(k, f"{short}.{attr}[{key!r}]")
                    for part in ("addition", "integer"):
                        add(getattr(k, part, None), f"{short}.{attr}[{key!r}].{part}")
    return names, kernels


def kernel_name(kernel: Any) -> str:
    """The routed kernel's name (``bits32_direct.KERNELS[(0, True)].addition``,
    ``arith32._KERNELS[key]`` for the arithmetic kernels made on demand), or its
    Python name where it is not one of the routed tables."""
    from . import arith32

    name = _names()[0].get(id(kernel))
    if name is None:
        name = next((f"arith32._KERNELS[{key!r}]" for key, k in arith32._KERNELS.items()
                     if k is kernel), None)  # noqa: SLF001
    return str(name or getattr(kernel, "__name__", repr(kernel)))


def _kernel_named(name: str) -> Any:
    """The kernel :func:`kernel_name` calls ``name`` (made first where it is one of
    arith32's kernels made on demand)."""
    import ast

    from . import arith32

    prefix = "arith32._KERNELS["
    if name.startswith(prefix):
        key = ast.literal_eval(name[len(prefix):-1])
        found = arith32._KERNELS.get(key)  # noqa: SLF001
        if found is None:
            found = arith32._KERNELS[key] = arith32._make(*key)  # noqa: SLF001
        return found
    return _names()[1][name]
