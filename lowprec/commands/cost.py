"""``lowprec cost``: a roofline estimate (not a measurement) of a training step per layer."""

from __future__ import annotations

import argparse

from ..train.cost import GPUS, estimate
from ._common import HelpFormatter
from .memory import add_model_arguments, model_from_args, policies_from_args

EPILOG = """examples:
  lowprec cost --transformer 4096,16384,2048 --batch 8 --policies fp32,bf16-master,fp8
  lowprec cost --gpu b200 --transformer 8192,28672,4096 --batch 1 --policies mxfp4
  lowprec cost                                     # the demo's MLP: memory-bound
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cost", help="roofline estimate of a training step per layer and recipe on a "
        "named GPU (an estimate, not a measurement)",
        description="FLOPs, bytes moved and the roofline time of each layer's three matmuls "
        "per training step, from the GPU's published peak numbers. An ESTIMATE, NOT A "
        "MEASUREMENT.", epilog=EPILOG, formatter_class=HelpFormatter)
    add_model_arguments(p)
    p.add_argument("--gpu", default="h100-sxm", choices=list(GPUS),
                   help="whose datasheet peaks to use")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    shape = model_from_args(args)
    estimates = [estimate(shape, p, gpu=args.gpu, batch=args.batch)
                 for p in policies_from_args(args)]
    print("\n\n".join(str(e) for e in estimates))
    base = estimates[0].seconds
    if len(estimates) > 1 and base:
        print(f"\nstep time relative to {estimates[0].policy} (estimate): " + ", ".join(
            f"{e.policy} {base / e.seconds:.2f}x faster" if e.seconds else f"{e.policy} n/a"
            for e in estimates[1:]))
    return 0
