"""What the grader writes: the CSV, one feedback file per student, the class summary."""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from pathlib import Path

from .run import SubmissionResult
from .spec import Exercise

__all__ = ["PartialCSV", "feedback_text", "summary", "write_csv", "write_feedback"]


_OUTPUT = 3000  # characters of the run's output shown in the feedback


def _points(p: float) -> str:
    return f"{p:g}"


def csv_header(exercises: list[Exercise]) -> list[str]:
    return ["student", *[f"ex{e.number}" for e in exercises], "total", "max", "status",
            "note", "variant", "seconds", "submission"]


def csv_row(r: SubmissionResult) -> list[str]:
    return [r.student, *[_points(e.points) for e in r.exercises], _points(r.total),
            _points(r.max_total), r.status, r.note, r.variant, f"{r.seconds:.1f}", r.path]


def write_csv(results: list[SubmissionResult], exercises: list[Exercise], path: Path) -> Path:
    """One row per submission: points per exercise, total, status and reason (written to
    a temporary file next to ``path``, then renamed: never half a table)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(csv_header(exercises))
        for r in results:
            w.writerow(csv_row(r))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


class PartialCSV:
    """The grades table while the class is graded: one row per student as it finishes,
    flushed to disk (``<out>.partial``, which survives a crash of the grader), renamed to
    ``<out>`` by :meth:`finish` once every run is over."""

    def __init__(self, path: Path, exercises: list[Exercise]) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self._fh = open(self.partial, "w", newline="", encoding="utf-8")  # noqa: SIM115
        self._w = csv.writer(self._fh)
        self.add_row(csv_header(exercises))

    def add_row(self, row: list[str]) -> None:
        self._w.writerow(row)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, r: SubmissionResult) -> None:
        self.add_row(csv_row(r))

    def finish(self) -> Path:
        self._fh.close()
        os.replace(self.partial, self.path)
        return self.path


def feedback_text(r: SubmissionResult, tutorial: str, *, reveal: bool = False) -> str:
    """The feedback a student reads (``reveal=True``: with the right answers, for teachers)."""
    lines = [f"# Feedback: tutorial {tutorial}, {r.student}", "",
             f"Total: {_points(r.total)} / {_points(r.max_total)}"]
    if r.variant:
        lines.append(f"Your variant: {r.variant}")
    if r.note:
        lines.append(f"Note: {r.note}.")
    for e in r.exercises:
        mark = "passed" if e.passed else "not passed"
        lines += ["", f"## Exercise {e.number}: {e.title} ({_points(e.points)} / "
                      f"{_points(e.max_points)}, {mark})"]
        lines += [f"- {f}" for f in e.feedback]
        if reveal and e.solution:
            lines += [f"- Solution: {s}" for s in e.solution]
    if r.output.strip():
        lines += ["", f"## The end of what your program printed (last {_OUTPUT} characters)",
                  "", "~~~~", r.output[-_OUTPUT:].replace("~~~~", "~ ~ "), "~~~~"]
    return "\n".join(lines) + "\n"


def _file_name(student: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", student).strip("._") or "student"


def write_feedback(results: list[SubmissionResult], folder: Path, tutorial: str, *,
                   reveal: bool = False) -> list[Path]:
    """``folder/<student>.md`` for every submission."""
    written = []
    for r in results:
        path = folder / f"{_file_name(r.student)}.md"
        path.write_text(feedback_text(r, tutorial, reveal=reveal), encoding="utf-8")
        written.append(path)
    return written


def _class_title(k: int, ex: Exercise, results: list[SubmissionResult]) -> str:
    """Exercise ``k``'s title as the students read it: their variants' titles (each student's
    result carries the title of their own variant), the commonest first; the teacher's
    title only when no result has one."""
    titles = Counter(r.exercises[k].title for r in results
                     if k < len(r.exercises) and r.exercises[k].title)
    if not titles:
        return ex.title
    if len(titles) == 1:
        return next(iter(titles))
    names = [t for t, _ in titles.most_common()]
    shown = "; ".join(names[:3]) + (f"; {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} variants: {shown}"


def summary(results: list[SubmissionResult], exercises: list[Exercise]) -> str:
    """The class at a glance: per exercise, how many passed and the most common mistake.

    Titles follow the students' variants (``Exercise 1 (the largest E5M6)``, or ``(3
    variants: the largest E5M6; ...)`` when the class drew several), never the teacher's
    wording for numbers nobody was given."""
    n = len(results)
    if not n:
        return "no submissions"
    lines = [f"{n} submission(s); mean total {sum(r.total for r in results) / n:.2f} / "
             f"{_points(results[0].max_total)}"]
    worst, worst_passed, worst_title = None, n + 1, ""
    for k, ex in enumerate(exercises):
        got = [r.exercises[k] for r in results]
        passed = sum(e.passed for e in got)
        mistakes = Counter(e.mistake for e in got if not e.passed and e.mistake)
        common = mistakes.most_common(1)
        title = _class_title(k, ex, results)
        text = f"  Exercise {ex.number} ({title}): {passed}/{n} passed"
        if common:
            text += f"; most common mistake ({common[0][1]}x): {common[0][0]}"
        lines.append(text)
        if passed < worst_passed:
            worst, worst_passed, worst_title = ex, passed, title
    if worst is not None and worst_passed < n:
        lines.append(f"Most missed: Exercise {worst.number} ({worst_title}), "
                     f"{n - worst_passed}/{n} did not pass")
    status = Counter(r.status for r in results)
    lines.append("Runs: " + ", ".join(f"{v} {k}" for k, v in sorted(status.items())))
    times = sorted(r.seconds for r in results if r.seconds)
    if times:
        lines.append(f"Grading time per submission: median {times[len(times) // 2]:.1f} s, "
                     f"max {times[-1]:.1f} s")
    return "\n".join(lines)
