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

A first call in a process with an empty numba cache would wait seconds for
numba to compile its kernel. Where a public verb allows it (``path="auto"``
of :mod:`.convert`), a kernel that is neither compiled in this process nor in
numba's cache is not compiled here: :func:`call` raises :class:`Cold`, the
verb serves the call with :mod:`.vec` (the same bits), and a background
process compiles the kernel into numba's cache (:func:`main`), from which a
later call loads it in milliseconds. ``LOWPREC_COLD=compile`` in the
environment restores compiling in place, ``LOWPREC_COLD=numpy`` serves such
calls with :mod:`.vec` and compiles nothing; ``docs/kernels.md`` has the
measurements behind the choice.
"""

from __future__ import annotations

import base64
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import numpy as np

from . import bits32, bits32_direct, odd64, pow2
from .params import STOCHASTIC

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
class Cold(Exception):
    """A kernel is not compiled and not in numba's cache (raised by :func:`call`
    on ``path="auto"``): serve the call with :mod:`.vec`."""


#: Kernel (id, argument types) -> True once it runs without compiling, False
#: while the background worker loads or compiles it.
_READY: dict[tuple[int, tuple], bool] = {}
_QUEUE: queue.Queue = queue.Queue()
_WORKER: list[threading.Thread] = []
_EARLY: list[subprocess.Popen] = []  # the compile process started by a call, if any


def _policy() -> str:
    """What a call whose kernel is not compiled does, from LOWPREC_COLD:
    ``"background"`` (the default: served by :mod:`.vec` while the kernel is
    loaded or compiled in the background), ``"numpy"`` (served by :mod:`.vec`,
    nothing compiled: every call of a kernel not yet compiled in this
    process) or ``"compile"`` (numba compiles in place, as before)."""
    found = os.environ.get("LOWPREC_COLD", "").strip()
    return found if found in ("compile", "numpy") else "background"


def background() -> bool:
    """Whether a kernel that is not compiled is being compiled in the background
    (LOWPREC_COLD unset, the default), so that :func:`wait` then has it ready.
    A caller whose reference would take longer than a compile (the AMD models on a
    large matmul) waits for it instead of running the reference."""
    return _policy() == "background"


def _dispatcher(kernel: Any) -> Any:
    """The numba dispatcher that runs first in ``kernel`` (NearestEven's addition)."""
    return kernel.addition if isinstance(kernel, bits32_direct.NearestEven) else kernel


def ready(kernel: Any, args: tuple) -> bool:
    """Whether ``kernel(*args)`` runs now without compiling (compiled in this
    process). Where it would not, False, and a background thread loads it from
    numba's cache or, where it is not there, has a background process compile
    it into the cache first (:func:`_work`); a later call finds it ready.
    True where this cannot be known (not a numba kernel, another numba) and
    under ``LOWPREC_COLD=compile``: numba compiles in place, as always.

    Not even a cache hit is loaded in the calling thread: numba's first load
    in a process sets up its typing and target contexts, about a second."""
    disp = _dispatcher(kernel)
    key = (id(disp), tuple(map(_type_key, args)))
    state = _READY.get(key)
    if state is not None and (state or _policy() != "compile"):
        if state or not getattr(_LARGE, "on", False) or _policy() == "numpy":
            return state
        return _load_here(key, disp, args)  # a large call while the worker has it
    try:
        sig = tuple(disp.typeof_pyval(a) for a in args)
        if sig in disp.overloads or _policy() == "compile":
            _READY[key] = True
            return True
        name = kernel_name(disp)
    except Exception:  # noqa: BLE001 (an unknown numba: compile in place, as always)
        _READY[key] = True
        return True
    if _policy() == "numpy":
        _READY[key] = False  # never compiled in this process: asked once
        return False
    if getattr(_LARGE, "on", False) and _maybe_cached(disp) and _load_here(key, disp, args):
        return True
    _READY[key] = False
    # No index file: not in the cache, so the compile starts now (a short
    # program ends before the thread's load would find out, and its next run
    # would be as cold).
    # One such process at a time; the worker thread compiles the others.
    started = None
    if not (_EARLY and _EARLY[0].poll() is None) and not _maybe_cached(disp):
        started = _compile_elsewhere([(name, sig)])
        _EARLY[:] = [started] if started is not None else []
    _QUEUE.put((key, disp, name, sig, started))
    if not _WORKER or not _WORKER[0].is_alive():
        _WORKER[:] = [threading.Thread(target=_work, name="lowprec-kernels", daemon=True)]
        _WORKER[0].start()
    return False


#: A call on at least this many values loads its kernel from numba's cache in the
#: calling thread (:func:`large`) instead of being served by numpy meanwhile: numba's
#: first load in a process takes about 0.6 s of CPU (its typing and target contexts),
#: numpy's reference about 0.15 s per million values, so from about 4 million values
#: on the load is the shorter wait (docs/kernels.md, "First calls in a warm process").
LOAD_IN_PLACE = 1 << 22
_LARGE = threading.local()


@contextmanager
def large(n: int) -> Iterator[None]:
    """Within it, :func:`ready` loads a kernel that numba's cache holds in this thread
    where ``n`` (the call's number of values) is at least :data:`LOAD_IN_PLACE`:
    a warm cache's first large call waits for the load instead of running numpy."""
    before = getattr(_LARGE, "on", False)
    _LARGE.on = n >= LOAD_IN_PLACE
    try:
        yield
    finally:
        _LARGE.on = before


def _load_here(key: tuple, disp: Any, args: tuple) -> bool:
    """Load ``disp``'s overload for ``args`` from numba's cache in this thread (True:
    it runs now; False: the cache does not hold it, or it could not be read)."""
    try:
        loaded = _load(disp, tuple(disp.typeof_pyval(a) for a in args))
    except Exception:  # noqa: BLE001 (left to the background worker)
        return False
    if loaded:
        _READY[key] = True
    return loaded


def _work() -> None:
    """The background thread: load each queued kernel from numba's cache; those
    not there are compiled by one process (:func:`main`) for the lot, then loaded.
    A kernel that still does not load (a cache that cannot be written) is left
    to compile in place on its next call."""
    while True:
        try:
            items = [_QUEUE.get(timeout=0.5)]
        except queue.Empty:
            return
        while not _QUEUE.empty():
            items.append(_QUEUE.get())
        missing = []
        for key, disp, name, sig, started in items:
            if started is not None:
                started.wait()
            try:
                loaded = _load(disp, sig)
            except Exception:  # noqa: BLE001
                loaded = True  # compile in place
            if loaded:
                _READY[key] = True
            else:
                missing.append((key, disp, name, sig))
        if missing:
            done = _compile_elsewhere([(name, sig) for _, _, name, sig in missing])
            _load_as_compiled(missing, done)


def _load_as_compiled(items: list[tuple[Any, Any, str, Any]],
                      done: subprocess.Popen | None) -> None:
    """Load each of ``items`` (key, dispatcher, name, signature) as soon as the process
    ``done`` has written it to numba's cache (it compiles them in order, so the first
    asked is served first), not when the whole batch is compiled; whatever is still not
    there when the process ends (or none could start) compiles in place on its next call.
    numba writes a cache entry's data, then its index, each by an atomic rename."""
    pending = list(items)
    while pending:
        finished = done is None or done.poll() is not None
        still = []
        for key, disp, name, sig in pending:
            try:
                loaded = _load(disp, sig)
            except Exception:  # noqa: BLE001 (then compiled in place)
                loaded = True
            if loaded or finished:
                _READY[key] = True
            else:
                still.append((key, disp, name, sig))
        pending = still
        if pending:
            time.sleep(0.25)


def wait() -> None:
    """Wait until the kernels asked for so far are ready (tests and benchmarks)."""
    while _WORKER and _WORKER[0].is_alive():
        _WORKER[0].join(0.1)


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


def _type_key(a: Any) -> Any:
    """What numba's signature of an argument depends on, cheaply."""
    if isinstance(a, np.ndarray):
        return (a.dtype.str, a.ndim, a.flags.c_contiguous, a.flags.writeable)
    return type(a)


def _load(disp: Any, sig: tuple) -> bool:
    """Load ``disp``'s overload for ``sig`` from numba's cache, as
    ``Dispatcher.compile`` does before compiling (False: not there)."""
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        if sig in disp.overloads:
            return True
        cres = disp._cache.load_overload(sig, disp.targetctx)  # noqa: SLF001
        if cres is None:
            return False
        if not cres.objectmode:
            disp.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        disp.add_overload(cres)
    return True


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


def _maybe_cached(disp: Any) -> bool:
    """False where numba's cache has no index file for ``disp`` (then no
    signature of it is cached); True where it may have the one asked for."""
    try:
        return os.path.exists(disp._cache._cache_file._index_path)  # noqa: SLF001
    except Exception:  # noqa: BLE001 (another numba)
        return True


def _compile_elsewhere(items: list[tuple[str, Any]]) -> subprocess.Popen | None:
    """Start compiling the kernels ``items`` (name, signature) into numba's cache
    in a process of their own (the compiler holds the GIL for seconds; this
    process serves calls meanwhile), left to finish if this one ends first;
    None where no process could start (the kernels then compile in place)."""
    payload = base64.b64encode(pickle.dumps(items)).decode()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, LOWPREC_COLD="compile",
               PYTHONPATH=root + (os.pathsep + path if path else ""))
    try:
        return subprocess.Popen([sys.executable, "-m", "lowprec._kernels.route", payload],
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def main(argv: list[str]) -> int:
    """The warm-up process: compile each (kernel name, signature) into numba's cache."""
    for name, sig in pickle.loads(base64.b64decode(argv[0])):
        _kernel_named(name).compile(sig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
