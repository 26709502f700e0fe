"""``lowprec train``: train one precision policy on one task and save the run."""

from __future__ import annotations

import argparse

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    from ..train.data import TASKS
    from ..train.policy import POLICIES

    p = add_command(
        sub, "train", help="train one precision policy on one task",
        description="Train the small MLP of lowprec.train under one precision policy and "
        "print its summary; with --out, save the run as <out>/<policy>/run.json.",
        examples=["lowprec train --policy fp16-amp --task digits --steps 500",
                  "lowprec train --policy bf16-pure-sr --out runs/"])
    p.add_argument("--policy", default="fp16-amp", choices=list(POLICIES))
    p.add_argument("--task", default="underflow", choices=list(TASKS))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    p.add_argument("--grad-exp", type=int, default=None,
                   help="gradient knob k: loss * 2^-k, learning rate * 2^k (SGD)")
    p.add_argument("--out", default=None, help="folder for <out>/<policy>/run.json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train one policy on one task and save the run (lowprec.train)."""
    from ..demo import ProgressBar, choose_out_dir, format_table
    from ..train import save_run, train

    bar = ProgressBar()
    bar.start(args.policy)
    knobs = {"grad_exp": args.grad_exp} if args.grad_exp is not None else {}
    run = train(args.policy, args.task, steps=args.steps, seed=args.seed,
                optimizer=args.optimizer, progress=bar, **knobs)
    folder = choose_out_dir(args.out) if args.out else None
    print(format_table({args.policy: run}))
    if folder is not None:
        (folder / ".lowprec-demo").parent.mkdir(parents=True, exist_ok=True)
        (folder / ".lowprec-demo").write_text("written by lowprec train; safe to overwrite\n")
        print(f"results: {save_run(run, folder / args.policy)}")
    return 0
