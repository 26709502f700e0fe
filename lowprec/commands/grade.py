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
        description="Run each submission in its own sandbox, check every exercise's answers "
        "with lowprec's checkers and the teacher's checking calls (with each student's "
        "variant when a roster is given), and write a CSV (one row per submission, each "
        "written as it finishes to <out>.partial, renamed to <out> at the end), one "
        "feedback file per student and a class summary. Feedback gives the diagnosis and a "
        "hint, not the solution, unless --reveal. "
        "The sandbox (Linux, where user namespaces are allowed): each submission runs as an "
        "unprivileged user with no capabilities, in new user, mount, pid, network, IPC and "
        "UTS namespaces; it sees only the system folders, Python and lowprec (read-only) "
        "and an empty home on a 256 MiB tmpfs, not the teacher's files, other submissions, "
        "the roster or the output; no network; an environment of its own; limits on CPU "
        "time, memory, file size, 64 processes and 256 open files; only the last 64 KiB of "
        "its output kept; every process of it killed at the end (checked). Its answers are "
        "read in lock-step and any record out of turn voids its run. It does NOT protect "
        "against kernel exploits, and it can still read world-readable system files "
        "(/etc, /usr). Where namespaces are unavailable the grader says so at start and "
        "falls back to an empty folder, a scrubbed environment and the limits (the "
        "submission can then read what the grader's user can, and use the network); "
        "--require-sandbox refuses to run instead.",
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
    p.add_argument("--require-sandbox", action="store_true",
                   help="refuse to grade where submissions cannot be isolated by Linux "
                   "namespaces (instead of the weaker fallback)")
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
    from ..grading._driver import namespaces_available
    from ..grading.report import PartialCSV, summary, write_feedback
    from ..grading.run import ExerciseResult, SubmissionResult
    from ..grading.spec import Exercise, tutorial_path
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
    isolated, why = namespaces_available()
    if not isolated:
        if args.require_sandbox:
            raise ValueError(f"--require-sandbox: submissions cannot be isolated here ({why}); "
                             "grade on a Linux machine that allows user namespaces "
                             "(sysctl kernel.unprivileged_userns_clone=1, "
                             "user.max_user_namespaces > 0) or inside a container")
        print("WARNING: submissions will NOT be isolated: Linux namespaces are unavailable "
              f"({why}). Each runs in an empty folder with a scrubbed environment and "
              "limits, but can read what this user can read and use the network. Use "
              "--require-sandbox to refuse.", file=sys.stderr, flush=True)
    prepare_out_dir(feedback_dir, force=args.force)
    spec = exercise_spec(teacher)
    table = PartialCSV(out, spec)

    def own_spec(student: str) -> list[Exercise]:  # the exercises (titles) of the student's variant
        try:
            return exercise_spec(variant_text(teacher, tutorial, student, args.seed).text)
        except Exception:  # noqa: BLE001 - the row is written with the teacher's titles
            return spec

    results = []
    for path, student in zip(paths, ids):
        print(f"grading {path} ({student}) ...", end=" ", flush=True)
        try:
            variant = variant_text(teacher, tutorial, student, args.seed) if roster else None
            r = grade_submission(path, exercise_spec(variant.text if variant else teacher),
                                 student=student, timeout=args.timeout, memory_mb=args.memory,
                                 variant=variant.description if variant else "",
                                 isolate=isolated, require=args.require_sandbox)
        except Exception as exc:  # the grader's own failure on one submission: its row
            r = SubmissionResult(student, str(path), [
                ExerciseResult(e.number, e.title, 0.0, e.points, [f"not graded: {exc}"],
                               "not graded") for e in (own_spec(student) if roster else spec)],
                "error",
                f"error: the grader failed on it ({type(exc).__name__}: {exc})")
        print(f"{r.total:g}/{r.max_total:g} {r.status} ({r.seconds:.1f} s)"
              + (f": {r.note}" if r.status == "error" else ""), flush=True)
        table.add(r)
        results.append(r)
    for student in (roster or []):
        if student not in ids:  # on the roster, nothing submitted
            results.append(SubmissionResult(student, "", [
                ExerciseResult(e.number, e.title, 0.0, e.points, ["no submission"],
                               "no submission") for e in own_spec(student)], "missing",
                "no submission"))
            table.add(results[-1])
    table.finish()  # every run is over (each one's processes killed and checked)
    write_feedback(results, feedback_dir, tutorial, reveal=args.reveal)
    print(summary(results, spec))
    print(f"wrote {out} and {len(results)} feedback file(s) in {feedback_dir}/")
    sys.stdout.flush()
    return 0
