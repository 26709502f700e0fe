"""Handouts with one variant per student: ``lowprec tutorials student DIR --roster R``.

Each student's handout is the student version (:func:`lowprec.tutorials.student_version`)
of their variant of the teacher's tutorial (:mod:`lowprec.grading.variants`), with a cell
before the exercises naming the student, the course seed and their numbers.

>>> from lowprec.grading import open_tutorial
>>> text, what = assignment_text(open_tutorial("01"), "01", "alice", 2026)
>>> "Assignment for student `alice`" in text and what.startswith("Exercise 1: E")
True
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..tutorials import (
    Cell,
    join_cells,
    list_tutorials,
    parse_cells,
    select_tutorials,
    student_version,
)
from .variants import variant_text

__all__ = ["assignment_text", "write_assignments"]


def assignment_text(text: str, tutorial: str, student: str, seed: int) -> tuple[str, str]:
    """One student's handout of a teacher's tutorial: (text, description of the variant).

    The variant (:mod:`lowprec.grading.variants`) is drawn from the student id and the
    course seed; a cell before the exercises tells the student which numbers are theirs.
    """
    variant = variant_text(text, tutorial, student, seed)
    note = (f"Your exercises use your own numbers ({variant.description}); your classmates' "
            "differ, so compare methods, not answers."
            if variant.changes else "This tutorial's exercises are the same for everyone.")
    cells = parse_cells(student_version(variant.text))
    intro = Cell("markdown", "# %% [markdown]", [
        f"# **Assignment for student `{student}`** (tutorial {tutorial}, course seed {seed}).",
        f"# {note}", ""])
    at = next((k for k, c in enumerate(cells)
               if c.kind == "markdown" and any("## Exercises" in ln for ln in c.lines)),
              len(cells))
    cells.insert(at, intro)
    return join_cells(cells), variant.description


def write_assignments(
    dest: str | os.PathLike[str],
    students: list[str],
    seed: int,
    source: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    only: list[str] | None = None,
) -> list[Path]:
    """``dest/<student>/NN_name.py`` for every student and tutorial, each with its variant.

    Refuses (``FileExistsError``, nothing written) if any target exists, unless ``force``.
    """
    dest = Path(dest)
    sources = select_tutorials(list_tutorials(source), only)
    bad = [s for s in students if not re.fullmatch(r"[A-Za-z0-9_.@-]+", s) or s in (".", "..")]
    if bad:
        raise ValueError(f"student id {bad[0]!r} cannot be a folder name; use letters, digits "
                         "and _.@- only")
    targets = [(s, p, dest / s / p.name) for s in students for p in sources]
    existing = [t for _, _, t in targets if t.exists()]
    if existing and not force:
        raise FileExistsError(
            f"{len(existing)} handout file(s) already exist, e.g. {existing[0]}; "
            "nothing was written (use --force to overwrite them)"
        )
    teacher = {p: p.read_text(encoding="utf-8") for p in sources}
    texts = [assignment_text(teacher[p], p.name[:2], s, seed)[0] for s, p, _ in targets]
    for (_, _, target), text in zip(targets, texts):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return [t for _, _, t in targets]
