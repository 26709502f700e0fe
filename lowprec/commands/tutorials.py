"""``lowprec tutorials list|student|render``: the teacher's tools."""

from __future__ import annotations

import argparse

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "tutorials", help="list tutorials, write the student version, render notebooks",
        description="Teacher's tools. 'student DIR' writes the tutorials with every solution "
        "replaced by an exercise stub; 'render DIR' writes executed .ipynb notebooks (needs "
        "the 'tutorials' extra: jupytext, nbclient, ipykernel). DIR must be new or empty "
        "unless --force.",
        examples=["lowprec tutorials list", "lowprec tutorials student handout/",
                  "lowprec tutorials student handout/ --force   # overwrite an earlier handout",
                  "lowprec tutorials render notebooks/ --only 01 05",
                  "lowprec tutorials render handout-nb/ --student --no-execute"])
    p.add_argument("action", choices=["list", "student", "render"], help="what to do")
    p.add_argument("dir", nargs="?", metavar="DIR", help="folder to write into (student, render)")
    p.add_argument("--source", metavar="SRC", help="tutorials folder (default: the checkout's)")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even if it is not empty (same-named files are replaced)")
    p.add_argument("--student", action="store_true", help="render: the student version")
    p.add_argument("--no-execute", action="store_true", help="render: do not run the cells")
    p.add_argument("--only", nargs="+", metavar="NN", help="render: only these tutorials (01 05)")
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
    tutorials.list_tutorials(args.source)  # a bad --source fails before the folder is made
    folder = prepare_out_dir(args.dir, force=args.force)
    print(f"lowprec tutorials {args.action}: writing into {folder}/", flush=True)
    if args.action == "student":
        written = tutorials.write_student_versions(folder, args.source, force=True)
    else:
        written = tutorials.render_notebooks(folder, args.source, student=args.student,
                                             execute=not args.no_execute, only=args.only)
    for path in written:
        print(f"wrote {path}")
    return 0
