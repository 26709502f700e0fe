"""Running one submission in its own subprocess and checking what it answered.

:func:`grade_submission` reads a submission (a jupytext percent script ``.py`` or a
notebook ``.ipynb``), runs its code cells in a fresh Python process, isolated by the
operating system where it can be (:mod:`lowprec.grading._sandbox`), driven in lock-step by
the grader (:mod:`lowprec.grading._driver`) with a wall-clock, CPU-time and memory limit
(:mod:`lowprec.grading._child`), and checks each exercise's
recorded answers with the teacher's calls of :mod:`lowprec.exercises` (see
:mod:`lowprec.grading.spec`). A submission that raises, loops, runs out of memory or is
not valid Python costs the affected exercises their points, each with a reason; the
grader itself never fails on a submission.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import re
import signal
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .. import exercises as _exercises
from ..tutorials import EXERCISE_TAG, SOLUTION_TAG, parse_cells
from ._driver import run_cells
from .spec import Check, Exercise

__all__ = ["ExerciseResult", "SubmissionResult", "grade_submission", "read_submission"]

_LABEL = re.compile(r"^\s*#\s*Exercise\s+(?P<num>\d+[a-z]?)\b")
_STUB = "(write your code here)"


@dataclass
class ExerciseResult:
    """The grade of one exercise of one submission."""

    number: str
    title: str
    points: float
    max_points: float
    feedback: list[str] = field(default_factory=list)  #: what the student reads
    mistake: str = ""  #: a short name of what went wrong, for the class summary
    solution: list[str] = field(default_factory=list)  #: the right answers (teacher only)

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@dataclass
class SubmissionResult:
    """The grade of one submission: every exercise, a total, and how the run went."""

    student: str
    path: str
    exercises: list[ExerciseResult]
    status: str  #: ok, timeout, memory, crashed, error, unreadable, missing
    note: str = ""
    seconds: float = 0.0
    variant: str = ""
    output: str = ""  #: the last bytes the run printed (stdout and stderr), for the teacher
    sandbox: str = ""  #: how it was isolated: isolated, fallback (why), failed: why

    @property
    def total(self) -> float:
        return sum(e.points for e in self.exercises)

    @property
    def max_total(self) -> float:
        return sum(e.max_points for e in self.exercises)


class SubmissionError(ValueError):
    """A submission that cannot be read at all (the message says why)."""


# ------------------------------------------------------------- reading
def _label(source: str, tags: list[str]) -> str | None:
    for line in source.split("\n"):
        if line.strip():
            m = _LABEL.match(line)
            if m:
                return f"Exercise {m.group('num')}"
            break
    if EXERCISE_TAG in tags or SOLUTION_TAG in tags:
        m = re.search(r"Exercise\s+(\d+[a-z]?)", source)
        return f"Exercise {m.group(1)}" if m else None
    return None


def read_submission(path: str | Path) -> list[dict[str, Any]]:
    """The code cells of a submission: ``{"source", "label", "name"}`` each, in order."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SubmissionError(f"cannot read {path}: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    cells: list[dict[str, Any]] = []
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(text)
            items = [(c.get("cell_type"), c.get("source", ""), c.get("metadata", {}).get("tags", []))
                     for c in nb["cells"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SubmissionError(f"{path.name} is not a valid notebook (.ipynb JSON): "
                                  f"{exc}") from None
        for kind, source, tags in items:
            if kind == "code":
                src = "".join(source) if isinstance(source, list) else str(source)
                # IPython magics and shell escapes are not Python: leave them out.
                src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                                for ln in src.split("\n"))
                cells.append({"source": src, "tags": list(tags)})
    else:
        try:
            parsed = parse_cells(text)
        except ValueError:  # no cell markers: the whole file is one cell
            parsed = []
        if parsed:
            cells = [{"source": c.source, "tags": c.tags} for c in parsed if c.kind == "code"]
        else:
            cells = [{"source": text, "tags": []}]
    for k, cell in enumerate(cells):
        cell["label"] = _label(cell["source"], cell.pop("tags"))
        cell["name"] = f"cell {k + 1}" + (f", {cell['label']}" if cell["label"] else "")
    return cells


# ------------------------------------------------------------- running
def _run(cells: list[dict[str, Any]], exercises: list[Exercise], timeout: float,
         memory_mb: int, isolate: bool | None = None, require: bool = False
         ) -> tuple[list[dict[str, Any]], str, str, float, str, str]:
    """Run the cells isolated (:mod:`lowprec.grading._driver`);
    (records, status, note, seconds, output tail, sandbox)."""
    out = run_cells(cells, exercises, timeout, memory_mb, isolate=isolate, require=require)
    records, status, note, output = out.records, out.status, out.note, out.output
    done = any(r.get("done") for r in records)
    if status == "ok" and not done:
        rc = out.returncode or 0
        signum = rc - 128 if rc > 128 else -rc if rc < 0 else 0
        if signum in (signal.SIGXCPU, signal.SIGKILL) or "SIGXCPU" in output:
            status = "timeout"
        elif "MemoryError" in output or signum == signal.SIGSEGV:
            status, note = "memory", f"the run stopped: out of memory (limit {memory_mb} MiB)"
        else:
            status = "crashed"
            tail = output.strip().splitlines()[-1:] or [f"exit status {rc}"]
            note = f"the run stopped before the end: {tail[0][:300]}"
    if status == "timeout":
        note = f"the run was stopped at the time limit ({timeout:g} s)"
    if note and out.running and status != "error":
        note += f", while running {out.running}"
    return records, status, note, out.seconds, output, out.sandbox


# ------------------------------------------------------------- checking
class _Unreadable:
    def __init__(self, why: str) -> None:
        self.why = why


def _decode_value(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode_value(x) for x in v]
    if isinstance(v, dict):
        if "__float__" in v:
            return float(v["__float__"])
        if "__fraction__" in v:
            return Fraction(*v["__fraction__"])
        if "__ndarray__" in v:
            return np.asarray(v["__ndarray__"], dtype=np.dtype(v["dtype"])).reshape(v["shape"])
    return v


def teacher_values(check: Check, names: list[str]) -> dict[str, Any]:
    """The values of ``names`` from the teacher's own statements (:attr:`Check.teacher`)."""
    import lowprec

    ns: dict[str, Any] = {"lp": lowprec}
    statements = dict(check.teacher)
    for name in names:
        for stmt in statements[name]:
            exec(compile(stmt, "<teacher>", "exec"), ns)  # noqa: S102 - the teacher's text
    return {name: ns[name] for name in names}


def run_check(check: Check, values: dict[str, Any]) -> tuple[bool, str, str, str]:
    """Call the teacher's check with the recorded values: (passed, feedback, mistake, solution)."""
    call = ast.parse(check.call, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    fn = getattr(_exercises, call.func.attr)
    import lowprec

    ns = {"lp": lowprec, "np": np, "math": math, "exercises": _exercises, **values}

    def ev(node: ast.expr) -> Any:
        return eval(compile(ast.Expression(node), "<check>", "eval"),  # noqa: S307 - teacher's
                    {"__builtins__": {}}, ns)

    args = [ev(a) for a in call.args]
    kwargs = {k.arg: ev(k.value) for k in call.keywords if k.arg}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            fn(*args, **kwargs)
    except _exercises.ExerciseError as exc:
        # The diagnosis and hint for the student; the solution only for the teacher.
        mistake = exc.hint.split(": ")[0].split(". ")[0] if exc.hint else "wrong value"
        return False, exc.feedback(reveal=False), mistake, exc.solution
    except Exception as exc:  # a wrong kind of answer the checker did not foresee
        message = f"your answer could not be checked ({type(exc).__name__}: {exc})"
        return False, message, type(exc).__name__, ""
    return True, printed.getvalue().strip(), "", ""


def _grade_exercise(ex: Exercise, snap: dict[str, Any] | None, earlier_error: str | None,
                    stopped: str) -> ExerciseResult:
    result = ExerciseResult(ex.number, ex.title, 0.0, ex.points)
    if snap is None:
        why = stopped or "the submission has no cell for it"
        result.feedback.append(f"{ex.label}: no answer recorded: {why}.")
        result.mistake = "no answer (" + ("run stopped" if stopped else "no cell") + ")"
        return result
    values = {k: _decode_value(v) for k, v in snap.get("values", {}).items()}
    for name, why in snap.get("unreadable", {}).items():
        values[name] = _Unreadable(why)
    cell_error = snap.get("cell_error")
    share = ex.points / len(ex.checks)
    if cell_error:  # what the cell left behind is not an answer (names may be stale)
        if _STUB in cell_error:
            result.feedback.append(f"{ex.label}: not attempted (the NotImplementedError stub "
                                   "is still there).")
            result.mistake = "not attempted"
        else:
            result.feedback.append(f"{ex.label}: your cell raised {cell_error}.")
            result.mistake = "the cell raised an error"
        return result
    library = snap.get("library") or []
    if ex.by_hand and library:
        used = ", ".join(f"`{u}`" for u in library)
        result.feedback.append(f"{ex.label} asks you to work it out by hand, but your cell uses "
                               f"{used} (lowprec or ml_dtypes): compute it from the format's "
                               "fields instead.")
        result.mistake = "used the library instead of working it out"
        return result
    for check in ex.checks:
        mine = [n for n, _ in check.teacher
                if n not in values or isinstance(values[n], _Unreadable)]
        if mine:  # notebook values the run could not give: the teacher's own definitions
            values = {**values, **teacher_values(check, mine)}
        missing = [n for n in (*check.answers, *check.context) if n not in values]
        bad = [n for n in (*check.answers, *check.context) if isinstance(values.get(n), _Unreadable)]
        if missing or bad:
            if bad:
                text = f"`{bad[0]}` is {values[bad[0]].why}, which the grader cannot read; " \
                       "give a number"
                mistake = "unreadable answer"
            else:
                text = f"`{missing[0]}` is not defined" + (
                    f" (an earlier cell failed: {earlier_error})" if earlier_error else "")
                mistake = "answer not defined"
            result.feedback.append(f"{ex.label}: {text}.")
            result.mistake = result.mistake or mistake
            continue
        passed, feedback, mistake, solution = run_check(check, values)
        result.feedback.append(("Correct: " if passed else "") + feedback
                               if not feedback.startswith("Correct") else feedback)
        if passed:
            result.points += share
        else:
            result.mistake = result.mistake or mistake
            if solution:
                result.solution.append(solution)
    result.points = round(result.points, 6)
    return result


def grade_submission(path: str | Path, exercises: list[Exercise], *, student: str = "",
                     timeout: float = 120.0, memory_mb: int = 4096,
                     variant: str = "", isolate: bool | None = None,
                     require: bool = False) -> SubmissionResult:
    """Run one submission and grade every exercise of ``exercises`` (see the module doc).

    ``isolate``: run it in Linux namespaces (None: where the machine allows, see
    :func:`lowprec.grading._driver.namespaces_available`); ``require``: fail the run
    ("error") rather than fall back to the weaker protection."""
    path = Path(path)
    student = student or path.stem
    try:
        cells = read_submission(path)
    except SubmissionError as exc:
        results = [_grade_exercise(e, None, None, str(exc)) for e in exercises]
        return SubmissionResult(student, str(path), results, "unreadable", str(exc),
                                variant=variant)
    records, status, note, seconds, output, sandbox = _run(cells, exercises, timeout,
                                                            memory_mb, isolate, require)
    snaps = {r["exercise"]: r for r in records if "exercise" in r}
    errors = [r for r in records if "error" in r]
    first_error = errors[0]["error"] if errors else None
    if status == "ok" and not any(r.get("done") for r in records):
        status = "crashed"
    if status == "error":  # a forged or failed run: nothing it recorded counts
        snaps, first_error = {}, None
    end = snaps.get("__end__")
    results = [_grade_exercise(e, snaps.get(e.label, end), first_error, note)
               for e in exercises]
    if status == "ok" and errors and all(r["error"].startswith("SyntaxError")
                                         for r in errors) and len(cells) == 1:
        note = f"not valid Python: {first_error}"
    return SubmissionResult(student, str(path), results, status, note, seconds, variant,
                            output=output, sandbox=sandbox)
