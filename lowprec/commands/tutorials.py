"""``lowprec tutorials list|student|render``: the teacher's tools."""

from __future__ import annotations

import argparse
import sys

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "tutorials", help="list tutorials, write the student version, render notebooks",
        description="Teacher's tools. 'student DIR' writes the tutorials with every solution "
        "replaced by an exercise stub (with --roster: one folder per student, each with its "
        "own variant of the numbers); 'render DIR' writes executed .ipynb notebooks (needs "
        "the 'tutorials' extra: jupytext, nbclient, ipykernel). The tutorials ship with the "
        "package; --source points at another folder of them.",
        examples=["lowprec tutorials list", "lowprec tutorials student handout/",
                  "lowprec tutorials student handouts/ --roster roster.csv --seed 2026",
                  "lowprec tutorials render notebooks/ --only 01 05",
                  "lowprec tutorials render handout-nb/ --student --no-execute"])
    p.add_argument("action", choices=["list", "student", "render"])
    p.add_argument("dir", nargs="?", metavar="DIR", help="folder to write into")
    p.add_argument("--source", metavar="SRC",
                   help="tutorials folder (default: the checkout's, else the packaged copy)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
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

    try:
        if args.action == "list":
            for path in tutorials.list_tutorials(args.source):
                print(path)
            return 0
        if args.dir is None:
            raise ValueError(f"lowprec tutorials {args.action}: give the folder to write into "
                             "(DIR)")
        if args.roster and args.action != "student":
            raise ValueError("--roster is for 'lowprec tutorials student'")
        if args.action == "student" and args.roster:
            from ..grading.handouts import write_assignments
            from ..grading.variants import read_roster

            written = write_assignments(args.dir, read_roster(args.roster), args.seed,
                                                  args.source, force=args.force, only=args.only)
        elif args.action == "student":
            written = tutorials.write_student_versions(args.dir, args.source, force=args.force)
        else:
            written = tutorials.render_notebooks(args.dir, args.source, student=args.student,
                                                 execute=not args.no_execute, only=args.only)
    except BrokenPipeError:  # lowprec tutorials list | head
        return 0
    except (FileExistsError, FileNotFoundError, ImportError, OSError) as exc:
        print(f"lowprec: error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError):
        raise  # cli.main: one line, exit status 2
    except Exception as exc:  # a notebook that failed to execute, a kernel that is missing
        print(f"lowprec: error: tutorials {args.action} failed: {type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}",
              file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0
