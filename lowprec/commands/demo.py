"""``lowprec demo``: train the standard precision presets side by side."""

from __future__ import annotations

import argparse

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    from ..train.data import TASKS
    from ..train.policy import POLICIES

    p = add_command(
        sub, "demo", help="train the precision presets side by side (no arguments needed)",
        description="Train every standard precision preset on the same task and seed; print "
        "a comparison table and save the runs.",
        examples=["lowprec demo", "lowprec demo --steps 300 --policies fp32,fp16-amp",
                  "lowprec demo --task digits --out runs/ --no-figures"])
    p.add_argument("--out", default=None, help="output folder (default: ./lowprec-demo, or a "
                   "fresh name if that folder is someone else's)")
    p.add_argument("--task", default="underflow", choices=list(TASKS))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policies", default=None,
                   help=f"comma-separated presets (default: all): {', '.join(POLICIES)}")
    p.add_argument("--no-figures", action="store_true", help="do not draw figures")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train the standard precision presets side by side (lowprec.demo)."""
    from ..demo import DEMO_POLICIES, run_demo

    policies = tuple(args.policies.split(",")) if args.policies else DEMO_POLICIES
    run_demo(args.out, policies=policies, task=args.task, steps=args.steps, seed=args.seed,
             figures=not args.no_figures)
    return 0
