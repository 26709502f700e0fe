"""The background compiler (``lowprec._kernels.warm``): one process per program that
compiles every kernel asked for, in the order asked, and finishes after the program.

A cold kernel is served by its numpy twin while the compiler process puts it into
numba's cache; a thread loads it from there as soon as the process reports it.
``tests/test_route.py`` checks a cold program's answers against the kernels' and
that three kernels asked one after another took one process.
"""

from __future__ import annotations

import base64
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

from lowprec._kernels import gemm, route, warm

ROOT = Path(__file__).resolve().parent.parent


def _line(name: str, sig: tuple) -> bytes:
    return base64.b64encode(pickle.dumps((name, sig))) + b"\n"


def test_the_compiler_answers_a_line_per_kernel_in_order() -> None:
    # The process's loop, run here (the suite compiles in place): a kernel it knows
    # is compiled, a name it does not know is reported failed (the caller then
    # compiles in place), and the loop goes on to the next.
    a = np.ones((2, 3), np.float32)
    args = (a, np.ones((3, 2), np.float32), np.zeros((2, 2), np.float32))
    sig = tuple(gemm._kernel.typeof_pyval(x) for x in args)
    asked = _line("gemm._kernel", sig) + _line("gemm._no_such_kernel", sig) + _line(
        "gemm._kernel", sig)
    said = io.BytesIO()
    assert warm.serve(io.BytesIO(asked), said) == 0
    assert said.getvalue() == b"compiled\nfailed\ncompiled\n"
    assert sig in gemm._kernel.overloads


def test_the_compiler_goes_on_when_its_caller_has_gone() -> None:
    class Gone(io.BytesIO):
        def write(self, b: bytes) -> int:  # type: ignore[override]
            raise BrokenPipeError(32, "Broken pipe")

    a = np.ones((1, 1), np.float64)
    sig = tuple(gemm._kernel.typeof_pyval(x) for x in (a, a, a))
    assert warm.serve(io.BytesIO(_line("gemm._kernel", sig)), Gone()) == 0
    assert sig in gemm._kernel.overloads


_ASK_AND_GO = """
import numpy as np
from lowprec._kernels import gemm, warm
a = np.arange(12, dtype=np.float32).reshape(3, 4)
b = np.arange(8, dtype=np.float32).reshape(4, 2)
out = gemm.matmul_in_order(a, b)          # cold: served by the numpy twin
print(warm._READY and not any(warm._READY.values()), warm._Compiler.started,
      np.array_equal(out, a @ b))
"""

_FIND = """
import sys, time, numpy as np
from lowprec._kernels import gemm, warm
a = np.ones((3, 4), np.float32)
sig = tuple(gemm._kernel.typeof_pyval(x) for x in (a, np.ones((4, 2), np.float32),
                                                    np.zeros((3, 2), np.float32)))
t = time.perf_counter()
while not warm._load(gemm._kernel, sig) and time.perf_counter() - t < 120:
    time.sleep(0.2)
print(sig in gemm._kernel.overloads)
"""


def test_a_program_that_ends_leaves_its_kernel_compiling(tmp_path: Path) -> None:
    # A short program asks for a cold kernel and ends at once; the compiler it
    # started goes on and puts the kernel into numba's cache for the next run.
    # It runs in a folder holding another "lowprec" (a student's copy, say): the
    # compiler must compile the asking program's lowprec, not the folder's.
    work, prog = tmp_path / "work", tmp_path / "prog"
    (work / "lowprec").mkdir(parents=True)
    (work / "lowprec" / "__init__.py").write_text("raise ImportError('the folder's copy')\n")
    prog.mkdir()
    (prog / "ask.py").write_text(_ASK_AND_GO)
    (prog / "find.py").write_text(_FIND)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    done = subprocess.run([sys.executable, str(prog / "ask.py")], env=env, cwd=work,
                          capture_output=True, text=True, timeout=600, check=True)
    assert done.stdout.split() == ["True", "1", "True"], done.stdout + done.stderr
    found = subprocess.run([sys.executable, str(prog / "find.py")], env=env,
                           capture_output=True, text=True, timeout=600, check=True)
    assert found.stdout.split() == ["True"], found.stderr


def test_route_asks_the_one_compiler() -> None:
    # The router's names are the background half's own: one set of kernels ready.
    assert route.ready is warm.ready and route.Cold is warm.Cold
    assert route._READY is warm._READY and route.wait is warm.wait
