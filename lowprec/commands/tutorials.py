"""``lowprec tutorials list|student|render``: the teacher's tools."""

from __future__ import annotations

import argparse
import sys

from ._common import EXIT_FAILED, add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "tutorials", help="list tutorials, write the student version, render notebooks",
        description="Teacher's tools. 'student DIR' writes the tutorials with every solution "
        "replaced by an exercise stub (with --roster: one folder per student, each with its "
        "own variant of the numbers); 'render DIR' writes executed .ipynb notebooks (needs "
        "the 'tutorials' extra: jupytext, nbclient, ipykernel). The tutorials ship with the "
        "package; --source points at another folder of them. DIR must be new or empty "
        "unless --force.",
        examples=["lowprec tutorials list", "lowprec tutorials student handout/",
                  "lowprec tutorials student handout/ --force   # overwrite an earlier handout",
                  "lowprec tutorials student handouts/ --roster roster.csv --seed 2026",
                  "lowprec tutorials render notebooks/ --only 01 05",
                  "lowprec tutorials render handout-nb/ --student --no-execute"])
    p.add_argument("action", choices=["list", "student", "render"], help="what to do")
    p.add_argument("dir", nargs="?", metavar="DIR", help="folder to write into (student, render)")
    p.add_argument("--source", metavar="SRC",
                   help="tutorials folder (default: the checkout's, else the packaged copy)")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even if it is not empty (same-named files are replaced)")
    p.add_argument("--roster", metavar="CSV", help="student: one handout folder per student "
                   "id (column 'id'), each with its own variant")
    p.add_argument("--seed", type=int, default=0, help="student --roster: the course seed "
                   "(give the same one to 'lowprec grade')")
    p.add_argument("--student", action="store_true", help="render: the student version")
    p.add_argument("--no-execute", action="store_true", help="render: do not run the cells")
    p.add_argument("--only", nargs="+", metavar="NN", help="only these tutorials (01 05)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the tutorials, write student versions, or render notebooks."""
    from .. import tutorials
    from .._outdir import prepare_out_dir

    if args.action == "list":
        for path in tutorials.list_tutorials(args.source):
            print(path)
        return 0
    if args.dir is None:
        raise ValueError(f"tutorials {args.action}: give the folder to write into, e.g. "
                         f"'lowprec tutorials {args.action} handout/'")
    if args.roster and args.action != "student":
        raise ValueError("--roster is for 'lowprec tutorials student'")
    # a bad --source or --only fails before the folder is made
    tutorials.select_tutorials(tutorials.list_tutorials(args.source), args.only)
    roster = None
    if args.roster:
        from ..grading.variants import read_roster

        roster = read_roster(args.roster)  # a bad roster fails before the folder is made
    folder = prepare_out_dir(args.dir, force=args.force)
    print(f"lowprec tutorials {args.action}: writing into {folder}/", flush=True)
    if args.action == "student" and roster is not None:
        from ..grading.handouts import write_assignments

        written = write_assignments(folder, roster, args.seed, args.source, force=True,
                                    only=args.only)
    elif args.action == "student":
        written = tutorials.write_student_versions(folder, args.source, force=True,
                                                   only=args.only)
    else:
        try:
            written = tutorials.render_notebooks(folder, args.source, student=args.student,
                                                 execute=not args.no_execute, only=args.only)
        except (ValueError, TypeError, OSError, ImportError):
            raise  # cli.main: one line with the right exit status
        except Exception as exc:  # a notebook cell that failed, a kernel that is missing
            last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
            print(f"lowprec tutorials: error: render failed: {type(exc).__name__}: {last}",
                  file=sys.stderr)
            return EXIT_FAILED
    for path in written:
        print(f"wrote {path}")
    return 0
