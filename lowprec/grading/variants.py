"""One assignment per student: the exercises' numbers drawn from the student id and a seed.

A variant is the teacher's tutorial with some exercises' numbers replaced (a different
format, a different number to round); :func:`variant_text` makes it. The handout of a
student (``lowprec tutorials student DIR --roster roster.csv --seed S``) is the student
version of that text, and the grader (``lowprec grade ... --roster roster.csv --seed S``)
checks the submission against the checks of that same text, so the two always agree.

The draw is reproducible: a SHA-256 of ``seed``, the tutorial and the student id seeds
NumPy's generator, so the same roster and seed give the same variants on any machine.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Variant", "VARIANTS", "read_roster", "variant_rng", "variant_text"]


@dataclass(frozen=True)
class Variant:
    """A student's version of a tutorial: its text and what was changed, in words."""

    text: str
    changes: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        return "; ".join(self.changes)


def variant_rng(tutorial: str, student: str, seed: int) -> np.random.Generator:
    """The generator of one student's variant (SHA-256 of seed, tutorial and id)."""
    digest = hashlib.sha256(f"lowprec/{int(seed)}/{tutorial}/{student}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


#: Tutorial number -> function(teacher's text, rng) -> Variant.
VARIANTS: dict[str, Callable[[str, np.random.Generator], Variant]] = {}


def variant_text(text: str, tutorial: str, student: str, seed: int) -> Variant:
    """The variant of ``text`` (tutorial ``tutorial``) for ``student`` under ``seed``.

    Tutorials without variants give the teacher's text unchanged.
    """
    make = VARIANTS.get(tutorial)
    if make is None:
        return Variant(text)
    return make(text, variant_rng(tutorial, student, seed))


_ID_COLUMNS = ("id", "student_id", "student", "username", "login", "email")


def read_roster(path: str | Path) -> list[str]:
    """Student ids from a CSV roster: the column named id/student_id/student/username/login/
    email (the first column if none is), one row per student; blank rows are skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"--roster {str(path)!r}: cannot read it ({exc.strerror})") from None
    rows = [r for r in csv.reader(text.splitlines()) if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"--roster {str(path)!r} is empty; give a CSV with a column 'id'")
    header = [c.strip().lower() for c in rows[0]]
    column = next((header.index(c) for c in _ID_COLUMNS if c in header), None)
    body = rows[1:] if column is not None else rows
    column = column or 0
    ids = [r[column].strip() for r in body if len(r) > column and r[column].strip()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"--roster {str(path)!r}: student id {duplicates[0]!r} appears twice")
    if not ids:
        raise ValueError(f"--roster {str(path)!r} lists no student ids")
    return ids
