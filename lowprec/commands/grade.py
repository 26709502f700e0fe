"""``lowprec grade``: the autograder (see :mod:`lowprec.grading`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "grade", help="grade students' tutorial submissions (.py or .ipynb)",
        description="Run each submission in its own subprocess (time and memory limits), "
        "check every exercise's answers with lowprec's checkers and the teacher's checking "
        "calls (with each student's variant when a roster is given), and write a CSV (one "
        "row per submission), one feedback file per student and a class summary. Feedback "
        "gives the diagnosis and a hint, not the solution, unless --reveal.",
        examples=[
            'lowprec grade submissions/*.py --tutorial 01',
            'lowprec grade submitted/ --tutorial 02 --roster roster.csv --seed 2026 --out grades.csv',
            'lowprec grade alice.ipynb --tutorial 01 --reveal       # feedback with the solutions',
        ])
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                   help="submitted files (.py percent scripts or .ipynb), or folders of them")
    p.add_argument("--tutorial", required=True, metavar="NN", help="the tutorial, e.g. 01")
    p.add_argument("--roster", metavar="CSV", help="students (column 'id'): match files to "
                   "ids and grade each against that student's variant")
    p.add_argument("--seed", type=int, default=0, help="course seed of the variants (the one "
                   "given to 'lowprec tutorials student --roster')")
    p.add_argument("--out", default="grades.csv", metavar="CSV", help="the grades table")
    p.add_argument("--feedback", metavar="DIR",
                   help="folder for one feedback file per student (default: <out>-feedback)")
    p.add_argument("--reveal", action="store_true",
                   help="teacher's feedback: include the right answers")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per submission")
    p.add_argument("--memory", type=int, default=4096, metavar="MIB",
                   help="address-space limit per submission, MiB")
    p.add_argument("--force", action="store_true", help="replace the CSV and feedback files")
    p.set_defaults(func=run)


def _expand(items: list[str]) -> list[Path]:
    found: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".py", ".ipynb")
                            and ".ipynb_checkpoints" not in p.parts)
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(f"submission {item!r} does not exist")
    if not found:
        raise ValueError("no submissions (.py or .ipynb) found in " + ", ".join(items))
    return found


def student_ids(paths: list[Path], roster: list[str] | None) -> list[str]:
    """Who submitted each file: a roster id (file stem, a folder on its path, or a stem
    starting with '<id>_'), else the file stem, else the folder where the paths differ."""
    if roster is not None:
        ids = []
        for p in paths:
            parts = [p.stem, *(q.name for q in p.parents)]
            match = next((i for i in roster for part in parts
                          if part == i or part.startswith((i + "_", i + "-"))), None)
            if match is None:
                raise ValueError(f"submission {str(p)!r} matches no student id of the roster "
                                 "(name the file <id>.py, <id>_anything.py or put it in a "
                                 "folder named <id>)")
            ids.append(match)
        return ids
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    resolved = [p.resolve().parts for p in paths]
    common = os.path.commonpath([str(p.resolve()) for p in paths])
    depth = len(Path(common).parts)
    return [parts[depth] if len(parts) > depth + 1 else p.stem
            for parts, p in zip(resolved, paths)]


def run(args: argparse.Namespace) -> int:
    from .._outdir import prepare_out_dir
    from ..grading import exercise_spec, grade_submission, open_tutorial
    from ..grading.report import summary, write_csv, write_feedback
    from ..grading.run import ExerciseResult, SubmissionResult
    from ..grading.spec import tutorial_path
    from ..grading.variants import read_roster, variant_text

    tutorial = Path(tutorial_path(args.tutorial)).name[:2]
    teacher = open_tutorial(tutorial)
    if not exercise_spec(teacher):
        raise ValueError(f"--tutorial {args.tutorial}: it has no automatically graded exercises")
    if args.timeout <= 0 or args.memory < 256:
        raise ValueError("--timeout must be positive and --memory at least 256 MiB")
    out = Path(args.out)
    if out.exists() and not args.force:
        raise ValueError(f"--out {str(out)!r} already exists; pass --force to replace it")
    feedback_dir = Path(args.feedback) if args.feedback else out.with_name(out.stem + "-feedback")
    roster = read_roster(args.roster) if args.roster else None
    paths = _expand(args.submissions)
    ids = student_ids(paths, roster)
    prepare_out_dir(feedback_dir, force=args.force)
    results = []
    for path, student in zip(paths, ids):
        variant = variant_text(teacher, tutorial, student, args.seed) if roster else None
        spec = exercise_spec(variant.text if variant else teacher)
        print(f"grading {path} ({student}) ...", end=" ", flush=True)
        r = grade_submission(path, spec, student=student, timeout=args.timeout,
                             memory_mb=args.memory,
                             variant=variant.description if variant else "")
        print(f"{r.total:g}/{r.max_total:g} {r.status} ({r.seconds:.1f} s)", flush=True)
        results.append(r)
    spec = exercise_spec(teacher)
    for student in (roster or []):
        if student not in ids:  # on the roster, nothing submitted
            results.append(SubmissionResult(student, "", [
                ExerciseResult(e.number, e.title, 0.0, e.points, ["no submission"],
                               "no submission") for e in spec], "missing", "no submission"))
    write_csv(results, spec, out)
    write_feedback(results, feedback_dir, tutorial, reveal=args.reveal)
    print(summary(results, spec))
    print(f"wrote {out} and {len(results)} feedback file(s) in {feedback_dir}/")
    sys.stdout.flush()
    return 0
