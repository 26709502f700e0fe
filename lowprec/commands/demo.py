"""``lowprec demo``: train the standard precision presets side by side."""

from __future__ import annotations

import argparse

from ._common import add_command, int_at_least


def register(sub: argparse._SubParsersAction) -> None:
    from ..train.data import TASKS
    from ..train.policy import POLICIES

    p = add_command(
        sub, "demo", help="train the precision presets side by side (no arguments needed)",
        description="Train every standard precision preset on the same task and seed; print "
        "a comparison table and save the runs (and figures) under the output folder.",
        examples=["lowprec demo", "lowprec demo --steps 300 --policies fp32,fp16-amp",
                  "lowprec demo --task digits --out runs/ --no-figures",
                  "lowprec demo --out runs/ --force     # write into runs/ again"])
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder, new or empty unless --force (default: ./lowprec-demo, "
                   "or lowprec-demo-2, ... if that one is not empty)")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even if it is not empty")
    p.add_argument("--task", default="underflow", choices=list(TASKS), help="training task")
    p.add_argument("--steps", type=int_at_least(1), default=600, help="training steps per run")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (data, init)")
    p.add_argument("--policies", default=None,
                   help=f"comma-separated presets (default: all): {', '.join(POLICIES)}")
    p.add_argument("--no-figures", action="store_true", help="do not draw figures")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train the standard precision presets side by side (lowprec.demo)."""
    from ..demo import DEMO_POLICIES, run_demo

    policies = (tuple(n.strip() for n in args.policies.split(",") if n.strip())
                if args.policies else DEMO_POLICIES)
    if not policies:
        raise ValueError("--policies: give at least one preset name")
    run_demo(args.out, policies=policies, task=args.task, steps=args.steps, seed=args.seed,
             figures=not args.no_figures, force=args.force)
    return 0
