"""``lowprec inspect FILE``: a saved model's tensors through every recipe.

Reads named arrays from ``.npz`` (and ``.pt``/``.pth`` with torch, ``.safetensors`` with
safetensors installed), prints the :func:`lowprec.inspect.report` table, and writes
``report.csv``, ``report.json``, ``heatmap.png`` and ``histograms.png`` into the output
folder (created; an existing non-empty one only with ``--force``). ``--recommend`` adds
the per-layer choice (also ``recommendation.txt``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXTENSIONS = (".npz", ".pt", ".pth", ".safetensors")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; defaults shown where there is one to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def register(sub: Any) -> None:
    """Add the ``inspect`` parser to the sub-command parsers."""
    p = sub.add_parser(
        "inspect", help="replay a saved model's tensors through every format and recipe",
        description="Replay every floating-point tensor in FILE through lowprec's recipes "
                    "(plain formats, fp16 with a loss scale, FP8 current/delayed scaling, "
                    "MX under each scale rule, NVFP4) and report underflow, subnormals, "
                    "overflow, clipping, NaN and SQNR, exactly.",
        epilog="examples:\n  lowprec inspect weights.npz\n"
               "  lowprec inspect model.pt --recipes fp16,bf16,mxfp4 --recommend\n"
               "  lowprec inspect grads.npz --out grads-report --force --loss-scale 65536\n"
               "  lowprec inspect --list-recipes",
        formatter_class=_Formatter)
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="tensors to inspect: " + ", ".join(EXTENSIONS))
    p.add_argument("--recipes", metavar="R1,R2",
                   help="comma-separated recipe names (default: lowprec.inspect.DEFAULT_RECIPES)",
                   default=None)
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: inspect-<FILE stem>)")
    p.add_argument("--force", action="store_true",
                   help="write into an existing non-empty output folder")
    p.add_argument("--recommend", action="store_true",
                   help="print the narrowest recipe per tensor that meets the thresholds")
    p.add_argument("--max-underflow", type=float, default=1e-3, metavar="FRAC",
                   help="--recommend: largest share of non-zero values that may flush")
    p.add_argument("--min-sqnr", type=float, default=20.0, metavar="DB",
                   help="--recommend: smallest SQNR in dB")
    p.add_argument("--loss-scale", type=float, metavar="S",
                   help="loss scale for fp16_loss_scale (default: what GradScaler settles on)")
    p.add_argument("--list-recipes", action="store_true", help="list the recipes and exit")
    p.set_defaults(func=run)


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise ValueError(f"FILE {str(path)!r} does not exist or is not a file")
    if path.suffix.lower() not in EXTENSIONS:
        raise ValueError(f"FILE {str(path)!r}: unknown extension {path.suffix!r}; accepted: "
                         + ", ".join(EXTENSIONS))


def load_tensors(path: Path) -> tuple[dict[str, Any], list[str]]:
    """Float arrays by name, and notes on what was skipped (non-float entries)."""
    _check_file(path)
    ext = path.suffix.lower()
    reader = _reader(ext)
    try:
        raw = reader(path)
    except Exception as exc:  # a damaged or foreign file: one line, no traceback
        raise ValueError(f"FILE {str(path)!r} could not be read as {ext}: "
                         f"{type(exc).__name__}: {exc}") from None
    tensors, skipped = {}, []
    for name, a in raw.items():
        dtype = str(getattr(a, "dtype", type(a).__name__))
        if "float" in dtype:
            tensors[name] = a
        else:
            skipped.append(f"{name} ({dtype})")
    if not tensors:
        raise ValueError(f"FILE {str(path)!r} holds no floating-point tensors"
                         + (f" (only {', '.join(skipped)})" if skipped else ""))
    return tensors, skipped


def _reader(ext: str) -> Any:
    """The function reading files of this extension (a ValueError if its library is
    missing)."""
    if ext == ".npz":
        import numpy as np

        def read_npz(path: Path) -> dict[str, Any]:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        return read_npz
    if ext == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise ValueError("reading .safetensors needs the safetensors package "
                             "(pip install safetensors)") from None
        return lambda path: dict(load_file(str(path)))
    try:
        import torch
    except ImportError:
        raise ValueError("reading .pt files needs torch (pip install 'lowprec[torch]')") from None
    return lambda path: _flatten(torch.load(path, map_location="cpu", weights_only=True))


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Tensors of a (nested) dict or list, named by their path (``a.b.0``)."""
    if hasattr(obj, "dtype") and hasattr(obj, "shape"):
        return {prefix or "tensor": obj}
    items: list[tuple[Any, Any]] = []
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))
    out: dict[str, Any] = {}
    for k, v in items:
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def run(args: argparse.Namespace) -> int:
    from lowprec import inspect
    from lowprec._outdir import prepare_out_dir

    if args.list_recipes:
        for name, desc in inspect.list_recipes().items():
            print(f"{name:20s} {desc}")
        print("NAME_sr              any of these but fp32 and fp16_loss_scale, with "
              "stochastic rounding (lowprec.schemes)")
        return 0
    if args.file is None:
        raise ValueError("FILE is missing: give a .npz, .pt or .safetensors file "
                         "(or --list-recipes)")
    recipes = None
    if args.recipes:
        recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
        for r in recipes:
            inspect.get_recipe(r)  # unknown names fail before any work
    if not 0 <= args.max_underflow <= 1:
        raise ValueError(f"--max-underflow is a fraction between 0 and 1, got "
                         f"{args.max_underflow}")
    path = Path(args.file)
    _check_file(path)
    out = prepare_out_dir(args.out or f"inspect-{path.stem}", force=args.force)
    print(f"output folder: {out}/")
    tensors, skipped = load_tensors(path)
    for note in skipped:
        print(f"skipped {note}: not floating point")
    rep = inspect.report(tensors, recipes, loss_scale=args.loss_scale)
    print(rep)
    rep.to_csv(out / "report.csv")
    rep.to_json(out / "report.json")
    import matplotlib.pyplot as plt

    from lowprec.plot import inspect_heatmap, inspect_histograms

    for name, fig in (("heatmap", inspect_heatmap(rep)), ("histograms", inspect_histograms(rep))):
        fig.savefig(out / f"{name}.png", dpi=100, bbox_inches="tight")
        plt.close(fig)
    if args.recommend:
        rec = rep.recommend(max_underflow=args.max_underflow, min_sqnr_db=args.min_sqnr)
        print()
        print(rec)
        (out / "recommendation.txt").write_text(str(rec) + "\n", encoding="utf-8")
    print(f"\nwrote report.csv, report.json, heatmap.png, histograms.png to {out}/")
    return 0
