"""The grader's side of one submission's subprocess (``python -m lowprec.grading._child``).

Started by the launcher (:mod:`lowprec.grading._sandbox`) inside the submission's
sandbox. Reads the job (the cells, the limits) as the first line of fd 0, sets its own
time and memory limits, then answers the grader's commands in lock-step (:func:`main`):
run cell k (in one namespace; a cell that raises is reported and the next one runs, as
in Jupyter), give the values of an exercise's names, end. ``exercises.check_*`` calls in
the submission do nothing here: the grader checks the answers itself, with the teacher's
calls.

The submission runs in this process, so it can write anything to the answer channel; what
it cannot do is make the grader accept it: the grader asks for one record at a time and
treats any byte out of turn (a record ahead of its command, a duplicate, anything after
``done``) as a forgery that voids the run (:mod:`lowprec.grading._driver`).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import resource
import sys
import traceback
import types
from fractions import Fraction
from typing import Any

_MAX_OUTPUT = 20_000  # characters of printed output kept per cell


class _Capped(io.StringIO):
    """Collects printed output, keeping only the first ``_MAX_OUTPUT`` characters."""

    def write(self, s: str) -> int:
        room = _MAX_OUTPUT - self.tell()
        if room > 0:
            super().write(s[:room])
        return len(s)


def encode_value(v: Any, depth: int = 0) -> Any:
    """A JSON-safe form of an answer (numbers, strings, lists, arrays, Fractions)."""
    import numpy as np

    if depth > 4:
        raise TypeError("nested too deeply")
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, int) or isinstance(v, np.integer):
        return int(v)
    if isinstance(v, float) or isinstance(v, np.floating):
        f = float(v)
        return f if math.isfinite(f) else {"__float__": repr(f)}
    if isinstance(v, Fraction):
        return {"__fraction__": [v.numerator, v.denominator]}
    if isinstance(v, np.ndarray):
        if v.size > 1_000_000 or v.dtype.kind not in "biuf":
            raise TypeError(f"an array of {v.size} {v.dtype} values")
        return {"__ndarray__": v.astype(np.float64).ravel().tolist() if v.dtype.kind == "f"
                else v.ravel().tolist(), "dtype": v.dtype.str, "shape": list(v.shape)}
    if isinstance(v, (list, tuple)):
        return [encode_value(x, depth + 1) for x in v]
    raise TypeError(f"a {type(v).__name__}")


def _silence_checks() -> None:
    """The submission's own ``exercises.check_*`` calls: the grader does the checking."""
    from lowprec import exercises

    def quiet(*args: Any, **kwargs: Any) -> None:
        print("(checked by the grader)")

    for name in dir(exercises):
        if name.startswith("check_"):
            setattr(exercises, name, quiet)


_LIBRARIES = ("lowprec", "ml_dtypes")


def _is_library(v: Any) -> bool:
    """Whether ``v`` is lowprec's or ml_dtypes' (a module, a function, a FloatFormat, ...)."""
    if isinstance(v, types.ModuleType):
        name = v.__name__
    elif callable(v) and getattr(v, "__module__", None):
        name = str(v.__module__)
    else:
        name = getattr(type(v), "__module__", "") or ""
    return name.split(".")[0] in _LIBRARIES and name != "lowprec.exercises"


def library_uses(source: str, namespace: dict[str, Any]) -> list[str]:
    """The names (and imports) in ``source`` that reach lowprec or ml_dtypes, or np.finfo."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names
                      if a.name.split(".")[0] in _LIBRARIES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _LIBRARIES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in namespace and _is_library(namespace[node.id]):
                found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr == "finfo":
            found.append("finfo")
    return sorted(set(found))


def _limits(seconds: float, memory_bytes: int) -> None:
    cpu = max(1, int(math.ceil(seconds)))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _channel() -> tuple[Any, Any]:
    """The grader's commands (fd 0) and the answers (fd 3), moved to private descriptors
    (not inherited) before any submission code runs; fd 0 becomes ``/dev/null``."""
    import os

    commands = os.fdopen(os.dup(0), "r", encoding="utf-8")
    answers = os.fdopen(os.dup(3), "w", encoding="utf-8", buffering=1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.close(3)
    return commands, answers


def _run_cell(cell: dict[str, Any], namespace: dict[str, Any]) -> str | None:
    """Run one cell; the error it raised, as one line, or None."""
    buffer = _Capped()
    try:
        code = compile(cell["source"], f"<{cell['name']}>", "exec")
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exec(code, namespace)
    except BaseException as exc:  # noqa: B036 - the submission's errors are data here
        if isinstance(exc, KeyboardInterrupt):
            raise
        where = ""
        if isinstance(exc, SyntaxError):
            where = f" (line {exc.lineno})"
        else:
            tb = traceback.extract_tb(exc.__traceback__)
            lines = [f.lineno for f in tb if f.filename == f"<{cell['name']}>"]
            where = f" (line {lines[-1]})" if lines else ""
        return f"{type(exc).__name__}{where}: {exc}".strip()
    return None


def main() -> int:
    """Answer the grader's commands, one line each, in order (see lowprec.grading._driver):

    ``{"run": k}`` -> ``{"ran": k, "error": ..., "library": [...]}``;
    ``{"snap": label, "names": [...]}`` -> ``{"snap": label, "values": ..., "unreadable": ...}``;
    ``{"end": true}`` -> ``{"done": true}``, then exit.
    """
    commands, answers = _channel()
    job = json.loads(commands.readline())

    def emit(record: dict[str, Any]) -> None:
        answers.write(json.dumps(record) + "\n")

    _silence_checks()  # imports lowprec (numpy, numba) before the memory limit
    _limits(job["cpu_seconds"], job["memory_bytes"])
    namespace: dict[str, Any] = {"__name__": "__main__"}
    cells = job["cells"]
    for line in commands:
        command = json.loads(line)
        if "run" in command:
            k = command["run"]
            error = _run_cell(cells[k], namespace)
            uses = library_uses(cells[k]["source"], namespace) if command.get("by_hand") else []
            emit({"ran": k, "error": error, "library": uses})
        elif "snap" in command:
            values, problems = {}, {}
            for name in command["names"]:
                if name not in namespace:
                    continue
                try:
                    values[name] = encode_value(namespace[name])
                except (TypeError, ValueError, OverflowError) as exc:
                    problems[name] = str(exc)
            emit({"snap": command["snap"], "values": values, "unreadable": problems})
        else:
            emit({"done": True})
            break
    answers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
