"""The grader's side of one submission's subprocess (``python -m lowprec.grading._child``).

Reads a job (JSON) from the file named by ``argv[1]``, sets its own time and memory limits,
runs the submission's code cells one by one in one namespace (a cell that raises is
reported and the next one runs, as in Jupyter), and after each exercise writes the values
of that exercise's names to the result file, one JSON line each, so that what was recorded
survives a later crash or time-out. ``exercises.check_*`` calls in the submission do
nothing here: the grader checks the recorded answers itself, with the teacher's calls.

This is not a security sandbox: run untrusted code in a container (as nbgrader and Otter
deployments do) if that matters.
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
        if v.size > 10_000_000 or v.dtype.kind not in "biuf":
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


def main(job_path: str) -> int:
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    out = open(job["result"], "a", encoding="utf-8", buffering=1)

    def emit(record: dict[str, Any]) -> None:
        record["token"] = job["token"]
        out.write(json.dumps(record) + "\n")

    _silence_checks()  # imports lowprec (numpy, numba) before the memory limit
    _limits(job["cpu_seconds"], job["memory_bytes"])
    namespace: dict[str, Any] = {"__name__": "__main__"}
    current: dict[str, Any] | None = None  # the exercise whose answers are pending
    errors: dict[str, str] = {}
    uses: dict[str, list[str]] = {}

    def snapshot(ex: dict[str, Any]) -> None:
        values, problems = {}, {}
        for name in ex["names"]:
            if name not in namespace:
                continue
            try:
                values[name] = encode_value(namespace[name])
            except (TypeError, ValueError, OverflowError) as exc:
                problems[name] = str(exc)
        emit({"exercise": ex["label"], "values": values, "unreadable": problems,
              "cell_error": errors.get(ex["label"]), "library": uses.get(ex["label"], [])})

    for index, cell in enumerate(job["cells"]):
        label = cell.get("label")
        if label and label in job["exercises"]:
            if current is not None:
                snapshot(current)
            current = job["exercises"][label]
        emit({"cell": index, "label": label, "running": True})
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
            message = f"{type(exc).__name__}{where}: {exc}".strip()
            errors.setdefault(label or (current or {}).get("label", ""), message)
            emit({"cell": index, "label": label, "error": message})
        if label and job["exercises"].get(label, {}).get("by_hand"):
            uses.setdefault(label, []).extend(library_uses(cell["source"], namespace))
    if current is not None:
        snapshot(current)
    # For exercises whose cell was not found (labels removed, a plain script): the end state.
    every = [n for ex in job["exercises"].values() for n in ex["names"]]
    snapshot({"label": "__end__", "names": list(dict.fromkeys(every))})
    emit({"done": True})
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
