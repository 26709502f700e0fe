"""What an exercise is graded on: the checking calls of the *teacher's* tutorial.

An exercise is a cell tagged ``solution`` labelled ``Exercise N`` (see
:mod:`lowprec.tutorials`); its checks are the calls ``exercises.check_*(...)`` in the code
cells after it, up to the next exercise. Each call's free names split into

* the *answers*: names the solution region assigns (``fp16_max``, ``rne_result``): the
  grader takes their values from the student's run, right after the student's cell of
  that exercise (before the next exercise's cell, so a name two exercises reuse, like
  ``value`` in tutorial 01, is read at the right time);
* the *notebook values*: other names the call reads (``act`` in tutorials 03 and 04),
  computed by cells the student did not write; they are taken from the student's run too.
  Where the teacher's own cells define such a name from lowprec alone -- a ``from
  lowprec... import`` (``qat_policy`` in tutorial 12) or an assignment of lowprec calls on
  literals (``layer = transformer_layer(4096, 16384, 2048)``) -- the grader runs those
  statements itself when the run's value is missing or not a number it can read.

Everything else in the call (literals, ``lp.custom_format(5, 6)``) is the teacher's text and
is evaluated by the grader, so editing the check cell of a submission changes nothing.

>>> text = open_tutorial("01")
>>> [(e.number, e.checks[0].answers) for e in exercise_spec(text)][:2]
[('1', ('fp16_max',)), ('2', ('value',))]
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from dataclasses import dataclass

from ..tutorials import (
    SOLUTION_TAG,
    _assigned_names,
    _exercise_label,
    list_tutorials,
    parse_cells,
)

__all__ = ["Check", "Exercise", "exercise_spec", "open_tutorial", "tutorial_path"]

#: Names a check call may use that are not the notebook's: modules the grader provides.
PROVIDED = frozenset({"lp", "np", "math", "exercises"})
_BY_HAND = re.compile(r"by hand|do not use|from the fields|from those facts", re.I)


@dataclass(frozen=True)
class Check:
    """One checking call of the teacher's tutorial."""

    call: str  #: its source text, e.g. ``exercises.check_max("fp8_e4m3", e4m3_max)``
    checker: str  #: the function of :mod:`lowprec.exercises` it calls
    answers: tuple[str, ...]  #: names the student's solution must define
    context: tuple[str, ...]  #: other notebook names it reads
    #: For context names the teacher's cells define from lowprec alone: (name, the
    #: statements that define it, in order), run by the grader when the run's value is
    #: missing or unreadable.
    teacher: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Exercise:
    """One graded exercise: its number, title and checks (all must pass for full marks)."""

    number: str
    title: str
    checks: tuple[Check, ...]
    points: float = 1.0
    #: The exercise says to work it out by hand ("by hand", "do not use", "from the fields"):
    #: the student's cell may not use lowprec or ml_dtypes (see lowprec.grading._child).
    by_hand: bool = False

    @property
    def label(self) -> str:
        return f"Exercise {self.number}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every notebook name the checks read, answers first."""
        seen = [n for c in self.checks for n in c.answers] + \
               [n for c in self.checks for n in c.context]
        return tuple(dict.fromkeys(seen))


def tutorial_path(tutorial: str) -> str:
    """The packaged tutorial whose file name starts with ``tutorial`` (``"01"``)."""
    key = str(tutorial).strip()
    if key.isdigit():
        key = key.zfill(2)
    found = [p for p in list_tutorials() if p.name.startswith(key)]
    if len(found) != 1:
        names = ", ".join(p.name[:2] for p in list_tutorials())
        raise ValueError(f"--tutorial {tutorial!r}: no single tutorial matches; give one of "
                         f"{names}")
    return str(found[0])


def open_tutorial(tutorial: str) -> str:
    """The teacher's text of a packaged tutorial, by number."""
    with open(tutorial_path(tutorial), encoding="utf-8") as fh:
        return fh.read()


def _check_calls(source: str) -> list[ast.Call]:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "exercises"
            and node.func.attr.startswith("check_")]


def _free_names(call: ast.Call) -> list[str]:
    names = [n.id for arg in [*call.args, *(k.value for k in call.keywords)]
             for n in ast.walk(arg) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return [n for n in dict.fromkeys(names) if n not in PROVIDED and not hasattr(builtins, n)]


_Defs = dict[str, tuple[str, tuple[str, ...]]]  # name -> (statement, names it needs)


def _teacher_defs(source: str, defs: _Defs) -> None:
    """Update ``defs`` with the top-level statements of a teacher's cell that define a name
    from lowprec alone; a name bound any other way is dropped from ``defs``.

    Qualifying: ``from lowprec[.x] import a`` and ``name = <expr>`` where ``<expr>`` reads
    only ``lp``, literals and names already in ``defs``. ``np`` does not qualify on
    purpose: ``rng.standard_normal(...)`` depends on the draws made before it.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and \
                (stmt.module or "").split(".")[0] == "lowprec":
            for alias in stmt.names:
                if alias.name != "*":
                    name = alias.asname or alias.name
                    line = f"from {stmt.module} import {alias.name}" + \
                        (f" as {alias.asname}" if alias.asname else "")
                    defs[name] = (line, ())
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            reads = [n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)]
            if all(r == "lp" or r in defs for r in reads) and not any(
                    isinstance(n, (ast.Lambda, ast.NamedExpr)) for n in ast.walk(stmt.value)):
                defs[stmt.targets[0].id] = (ast.unparse(stmt),
                                            tuple(dict.fromkeys(r for r in reads if r != "lp")))
                continue
        for name in _assigned_names(ast.unparse(stmt)):
            defs.pop(name, None)


def _statements(names: list[str], defs: _Defs) -> tuple[str, ...]:
    """The statements defining ``names``, each after the statements it needs."""
    order: list[str] = []

    def add(name: str) -> None:
        stmt, needs = defs[name]
        for need in needs:
            add(need)
        if stmt not in order:
            order.append(stmt)

    for name in names:
        add(name)
    return tuple(order)


def exercise_spec(text: str) -> list[Exercise]:
    """The graded exercises of a teacher's tutorial text, in order.

    An exercise without any checking call (a written answer) is not listed: it is not
    graded automatically.
    """
    cells = parse_cells(text)
    found: list[Exercise] = []
    defs: _Defs = {}
    last_markdown = ""
    k = 0
    while k < len(cells):
        cell = cells[k]
        if cell.kind == "markdown" and SOLUTION_TAG not in cell.tags:
            last_markdown = "\n".join(ln.lstrip("# ").rstrip() for ln in cell.lines)
        if SOLUTION_TAG not in cell.tags or cell.kind != "code":
            if cell.kind == "code":
                _teacher_defs(cell.source, defs)
            k += 1
            continue
        for name in _assigned_names(cell.source):  # the student's names now
            defs.pop(name, None)
        label = _exercise_label(cell, last_markdown)
        by_hand = bool(_BY_HAND.search(last_markdown))
        assigned = set(_assigned_names(cell.source))
        checks: list[Check] = []
        j = k + 1
        while j < len(cells) and SOLUTION_TAG not in cells[j].tags:
            if cells[j].kind == "markdown":  # the next exercise's question, perhaps
                last_markdown = "\n".join(ln.lstrip("# ").rstrip() for ln in cells[j].lines)
            if cells[j].kind == "code":
                _teacher_defs(cells[j].source, defs)
                for call in _check_calls(cells[j].source):
                    names = _free_names(call)
                    context = tuple(n for n in names if n not in assigned)
                    checks.append(Check(
                        call=ast.unparse(call), checker=call.func.attr,  # type: ignore[attr-defined]
                        answers=tuple(n for n in names if n in assigned), context=context,
                        teacher=tuple((n, _statements([n], defs)) for n in context
                                      if n in defs)))
            j += 1
        if checks and label.startswith("Exercise "):
            number, _, title = label[len("Exercise "):].partition(": ")
            found.append(Exercise(number, title, tuple(checks),
                                  by_hand=by_hand))
        k = j
    return found
