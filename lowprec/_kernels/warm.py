"""Whether a kernel runs now, and compiling it in the background where it would not.

A first call in a process with an empty numba cache would wait seconds for
numba to compile its kernel. Where a public verb allows it (``path="auto"``
of :mod:`.convert`), a kernel that is neither compiled in this process nor in
numba's cache is not compiled here: ``route.call`` raises :class:`Cold`, the
verb serves the call with :mod:`.vec` (the same bits), and the kernel is
compiled into numba's cache by :class:`_Compiler`, one background process that
lives as long as this one and compiles every kernel asked for, in the order
asked; a background thread loads each from the cache as soon as it is there,
and later calls run it. ``LOWPREC_COLD=compile`` in the environment restores
compiling in place, ``LOWPREC_COLD=numpy`` serves such calls with :mod:`.vec`
and compiles nothing; ``docs/kernels.md`` has the measurements behind the
choice. :mod:`.route` re-exports the names callers use.

One process for the lot, not one per batch of kernels asked: a process costs
its start, the imports and numba's typing and target contexts (about a second
of CPU) before its first compile, and a batch started only when the one before
had finished left the compiler idle while a program asked for kernel after
kernel (``lowprec demo``: a new process for each of seven batches).
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
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import numpy as np

from .bits32_direct import NearestEven

__all__ = ["LOAD_IN_PLACE", "Cold", "background", "large", "ready", "serve", "wait"]


class Cold(Exception):
    """A kernel is not compiled and not in numba's cache (raised by :func:`call`
    on ``path="auto"``): serve the call with :mod:`.vec`."""


#: Kernel (id, argument types) -> True once it runs without compiling, False
#: while the background worker loads or compiles it.
_READY: dict[tuple[int, tuple], bool] = {}
#: The kernels asked for and not ready yet (:func:`wait` waits for it to empty).
_PENDING: set[tuple[int, tuple]] = set()
_QUEUE: queue.Queue = queue.Queue()  # kernels numba's cache may hold: loaded by _work
_WORKER: list[threading.Thread] = []
_LOCK = threading.Lock()  # _start_compiler's


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
    return kernel.addition if isinstance(kernel, NearestEven) else kernel


def ready(kernel: Any, args: tuple) -> bool:
    """Whether ``kernel(*args)`` runs now without compiling (compiled in this
    process). Where it would not, False, and the kernel is loaded from numba's
    cache by a background thread or, where the cache does not hold it, compiled
    into the cache by the background compiler first (:class:`_Compiler`); a
    later call finds it ready. True where this cannot be known (not a numba
    kernel, another numba) and under ``LOWPREC_COLD=compile``: numba compiles in
    place, as always.

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
        from .route import kernel_name

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
    _PENDING.add(key)
    item = (key, disp, name, sig)
    if _maybe_cached(disp):  # the worker thread loads it, or has it compiled
        _QUEUE.put(item)
        if not _WORKER or not _WORKER[0].is_alive():
            _WORKER[:] = [threading.Thread(target=_work, name="lowprec-kernels", daemon=True)]
            _WORKER[0].start()
    else:
        # No index file: not in the cache, so its compile is asked for now (a
        # short program ends before the thread's load would find out, and its
        # next run would be as cold).
        _compile(item)
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


def _done(key: tuple) -> None:
    """``key``'s kernel runs now (loaded), or compiles in place on its next call."""
    _READY[key] = True
    _PENDING.discard(key)


def _load_here(key: tuple, disp: Any, args: tuple) -> bool:
    """Load ``disp``'s overload for ``args`` from numba's cache in this thread (True:
    it runs now; False: the cache does not hold it, or it could not be read)."""
    try:
        loaded = _load(disp, tuple(disp.typeof_pyval(a) for a in args))
    except Exception:  # noqa: BLE001 (left to the background worker)
        return False
    if loaded:
        _done(key)
    return loaded


def _load_or_leave(key: tuple, disp: Any, sig: tuple) -> bool:
    """Load ``disp``'s overload ``sig`` from numba's cache (True); False where the
    cache does not hold it. One that cannot be read is left to compile in place."""
    try:
        loaded = _load(disp, sig)
    except Exception:  # noqa: BLE001 (then compiled in place)
        loaded = True
    if loaded:
        _done(key)
    return loaded


def _work() -> None:
    """The background thread: load each queued kernel from numba's cache, and ask
    the compiler for those not there."""
    while True:
        try:
            key, disp, name, sig = _QUEUE.get(timeout=0.5)
        except queue.Empty:
            return
        if not _load_or_leave(key, disp, sig):
            _compile((key, disp, name, sig))


def _compile(item: tuple) -> None:
    """Have the background compiler compile ``item`` (key, dispatcher, name,
    signature); where no compiler runs, the kernel compiles in place on its next call."""
    with _LOCK:
        if not (_COMPILER and _COMPILER[0].pid == os.getpid() and _COMPILER[0].send(item)):
            found = _Compiler.start()
            _COMPILER[:] = [found] if found is not None else []
            if found is None or not found.send(item):
                _done(item[0])


class _Compiler:
    """The background process that compiles kernels into numba's cache (:func:`serve`),
    one after the other in the order asked, and a thread here that loads each as
    soon as the process says it is there (a line on its output per kernel). The
    process is not a thread (the compiler holds the GIL for seconds) and is left
    to finish what it was asked for if this process ends first: the next run
    finds those kernels in the cache."""

    started = 0  # processes started in this one (the tests count them)

    def __init__(self, process: subprocess.Popen) -> None:
        _Compiler.started += 1
        self.process = process
        self.pid = os.getpid()  # a forked child starts its own (it has not this one's thread)
        self.sent: deque[tuple] = deque()  # (key, dispatcher, name, signature), in order
        self.alive = True
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name="lowprec-compiled", daemon=True)
        self.reader.start()

    @classmethod
    def start(cls) -> _Compiler | None:
        """A new compiler process (None where none can start)."""
        # This lowprec, not one the working folder or PYTHONPATH would find first
        # (python -c puts the working folder first on sys.path): its kernels are
        # the ones to put into the cache.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, LOWPREC_COLD="compile")
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                "from lowprec._kernels.warm import serve; sys.exit(serve())")
        try:
            process = subprocess.Popen([sys.executable, "-c", code], env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return None
        return cls(process)

    def send(self, item: tuple) -> bool:
        """Ask for ``item``'s kernel (False where the process has ended)."""
        line = base64.b64encode(pickle.dumps((item[2], item[3]))) + b"\n"
        with self.lock:
            if not self.alive:
                return False
            self.sent.append(item)
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(line)
                self.process.stdin.flush()
            except (OSError, ValueError):
                self.sent.pop()
                return False
        return True

    def _read(self) -> None:
        """Load each kernel as the process reports it compiled (or failed: then it
        compiles in place); when the process ends, whatever it had not reported."""
        assert self.process.stdout is not None
        for _ in self.process.stdout:
            with self.lock:
                key, disp, _name, sig = self.sent.popleft()
            if not _load_or_leave(key, disp, sig):
                _done(key)  # not in the cache after all (one that cannot be written)
        with self.lock:
            self.alive = False
            left = list(self.sent)
            self.sent.clear()
        for key, *_ in left:
            _done(key)


_COMPILER: list[_Compiler] = []


def serve(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> int:
    """The compiler process: compile each kernel named on a line of ``stdin`` (a
    base64 pickle of its name and signature) into numba's cache, and write a line
    to ``stdout`` after each; when the asking process has ended, go on to the end."""
    from .route import _kernel_named

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    for line in stdin:
        name, sig = pickle.loads(base64.b64decode(line))
        try:
            _kernel_named(name).compile(sig)
            said = b"compiled\n"
        except Exception:  # noqa: BLE001 (the caller compiles it in place)
            said = b"failed\n"
        try:
            stdout.write(said)
            stdout.flush()
        except OSError:
            pass  # the caller has ended: its kernels still go into the cache
    return 0


def wait() -> None:
    """Wait until the kernels asked for so far are ready (tests and benchmarks)."""
    while _PENDING:
        time.sleep(0.02)


def _type_key(a: Any) -> Any:
    """What numba's signature of an argument depends on, cheaply (the dtype itself,
    not its ``str``, which is a new string each time: 1.1 against 2.5 us for ten
    arguments; a call asks this about 160k times in ``lowprec demo``)."""
    if isinstance(a, np.ndarray):
        flags = a.flags
        return (a.dtype, a.ndim, flags.c_contiguous, flags.writeable)
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


def _maybe_cached(disp: Any) -> bool:
    """False where numba's cache has no index file for ``disp`` (then no
    signature of it is cached); True where it may have the one asked for."""
    try:
        return os.path.exists(disp._cache._cache_file._index_path)  # noqa: SLF001
    except Exception:  # noqa: BLE001 (another numba)
        return True
