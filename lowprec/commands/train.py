"""``lowprec train``: train one precision policy on one task and save the run."""

from __future__ import annotations

import argparse

from ._common import add_command, int_at_least


def register(sub: argparse._SubParsersAction) -> None:
    from ..train.data import TASKS
    from ..train.policy import POLICIES

    p = add_command(
        sub, "train", help="train one precision policy on one task",
        description="Train the small MLP of lowprec.train under one precision policy and "
        "print its summary; with --out, save the run as DIR/<policy>/run.json. The output "
        "folder is checked before training starts.",
        examples=["lowprec train --policy fp16-amp --task digits --steps 500",
                  "lowprec train --policy bf16-pure-sr --out runs/",
                  "lowprec train --policy fp16-naive --grad-exp 10 --optimizer adam",
                  "lowprec train --policy bf16-master --gemms "
                  "input=fp8_e4m3_current,weight=fp8_e4m3_current,output_grad=fp8_e5m2_current",
                  "lowprec train --policy nvfp4 --gemms wgrad=nvfp4_1x16 --keep-last 0"])
    p.add_argument("--policy", default="fp16-amp", choices=list(POLICIES),
                   help="precision preset")
    p.add_argument("--task", default="underflow", choices=list(TASKS), help="training task")
    p.add_argument("--steps", type=int_at_least(1), default=600, help="training steps")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (data, init)")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"], help="optimizer")
    p.add_argument("--grad-exp", type=int, default=None, metavar="K",
                   help="gradient knob k: loss * 2^-k, learning rate * 2^k (SGD) "
                   "(default: the task's own)")
    p.add_argument("--gemms", default=None, metavar="SPEC",
                   help="what each GEMM reads, over the preset's: KEY=SCHEME,... with KEY a "
                   "direction (fprop, dgrad, wgrad), a kind (input, weight, output_grad) or "
                   "one operand (wgrad.input) and SCHEME a lowprec.schemes name or none "
                   "(docs/schemes-and-pytorch.md)")
    p.add_argument("--keep-last", type=int_at_least(0), default=None, metavar="N",
                   help="the last N layers leave the GEMM formats out (default: the preset's)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="save the run as DIR/<policy>/run.json; DIR must be new or empty "
                   "unless --force (default: do not save)")
    p.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train one policy on one task and save the run (lowprec.train)."""
    from .._outdir import prepare_out_dir
    from ..demo import ProgressBar, format_table
    from ..train import save_run, train

    if args.grad_exp is not None and not -64 <= args.grad_exp <= 64:
        raise ValueError(f"--grad-exp {args.grad_exp}: the gradient knob must be in "
                         "-64..64 (2**64 already overflows fp16 and fp8 many times over)")
    from ..train import get_policy

    policy = get_policy(args.policy)
    if args.gemms is not None or args.keep_last is not None:
        policy = policy.with_gemms(args.gemms or {}, keep_last=args.keep_last,
                                   name=args.policy + ("+gemms" if args.gemms else ""))
    folder = prepare_out_dir(args.out, force=args.force) if args.out else None  # before work
    if folder is not None:
        print(f"lowprec train: writing into {folder}/", flush=True)
    bar = ProgressBar()
    bar.start(policy.name)
    knobs = {"grad_exp": args.grad_exp} if args.grad_exp is not None else {}
    run = train(policy, args.task, steps=args.steps, seed=args.seed,
                optimizer=args.optimizer, progress=bar, **knobs)
    print(format_table({policy.name: run}))
    if folder is not None:
        print(f"results: {save_run(run, folder / policy.name)}")
    return 0
