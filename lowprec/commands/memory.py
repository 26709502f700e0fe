"""``lowprec memory``: exact bytes per tensor role for every precision recipe.

The model is the demo's MLP by default, any MLP (``--sizes 784,256,10``) or one
transformer layer (``--transformer 4096,16384,2048``: d_model, d_ff, sequence length).
"""

from __future__ import annotations

import argparse

from ..train.memory import MemoryTable, ModelShape, memory, mlp_shape, transformer_layer
from ..train.policy import POLICIES
from ._common import HelpFormatter

EPILOG = """examples:
  lowprec memory                                   # the demo's 32-64-64-10 MLP, SGD
  lowprec memory --optimizer adam --transformer 4096,16384,2048 --batch 8
  lowprec memory --policies fp32,fp16-amp,mxfp4 --detail
"""


def _ints(text: str, what: str, n: int | None = None) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or (n is not None and len(values) != n) or min(values) < 1:
        count = f"{n} " if n else ""
        raise ValueError(f"{what} must be {count}comma-separated positive integers, got "
                         f"{text!r}")
    return values


def model_from_args(args: argparse.Namespace) -> ModelShape:
    """The model named by ``--sizes`` / ``--transformer`` (shared with ``lowprec cost``)."""
    if args.transformer and args.sizes:
        raise ValueError("give --sizes or --transformer, not both")
    if args.transformer:
        d, f, s = _ints(args.transformer, "--transformer (d_model,d_ff,seq)", 3)
        return transformer_layer(d, f, s)
    return mlp_shape(_ints(args.sizes or "32,64,64,10", "--sizes"))


def policies_from_args(args: argparse.Namespace) -> list[str]:
    names = [p.strip() for p in args.policies.split(",")] if args.policies else list(POLICIES)
    bad = [p for p in names if p not in POLICIES]
    if bad:
        raise ValueError(f"--policies: unknown {', '.join(bad)}; presets: {', '.join(POLICIES)}")
    return names


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", default=None, metavar="W,W,...",
                   help="MLP layer widths, input first; unset: the demo's 32,64,64,10")
    p.add_argument("--transformer", default=None, metavar="D_MODEL,D_FF,SEQ",
                   help="one transformer layer instead (no biases); batch = sequences")
    p.add_argument("--batch", type=int, default=64, help="batch elements")
    p.add_argument("--policies", default=None, help="comma-separated presets; unset: all")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory", help="exact bytes per tensor role (weights, master, grads, optimizer "
        "state, activations) per recipe",
        description="Exact memory of a model under each precision recipe, per tensor role "
        "(block-scale overhead included). Arithmetic only: nothing is trained.",
        epilog=EPILOG, formatter_class=HelpFormatter)
    add_model_arguments(p)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"],
                   help="sgd: momentum, 1 state value per parameter; adam: 2")
    p.add_argument("--detail", action="store_true", help="one table per recipe, every role")
    p.set_defaults(func=run)


def _size(nbytes: float) -> str:
    if nbytes >= 2**20:
        return f"{nbytes / 2**20:,.2f} MiB"
    return f"{nbytes:.6g} B"


def summary_table(tables: list[MemoryTable]) -> str:
    """One row per recipe: bytes per parameter per weight-side role, activations per
    batch element, and the total."""
    head = ("policy", "master", "weights", "grads", "opt state", "B/param", "act/elem",
            "total MiB")
    rows: list[tuple[str, ...]] = [head]
    for t in tables:
        per = [t.bytes_of(r) / t.n_params for r in ("master", "weights", "weight_grads",
                                                     "optimizer_state")]
        rows.append((t.policy, *(f"{v:.4g}" for v in per),
                     f"{float(t.weight_side_per_param()):.4g}",
                     _size(float(t.activation_bytes_per_example())),
                     f"{t.total_bytes / 2**20:,.2f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    shape = model_from_args(args)
    tables = [memory(shape, p, batch=args.batch, optimizer=args.optimizer)
              for p in policies_from_args(args)]
    if args.detail:
        print("\n\n".join(str(t) for t in tables))
        return 0
    print(f"{shape.name}: {shape.n_params:,} parameters, batch {args.batch}, optimizer "
          f"{args.optimizer} (exact bytes; weight-side roles in bytes per parameter)\n")
    print(summary_table(tables))
    print("\nB/param: master + weights + grads + optimizer state per parameter.  act/elem: "
          "activations kept\nfor the backward pass per batch element.  A master copy keeps "
          "the weight side at or above\nfp32's; only the activations shrink.")
    return 0
