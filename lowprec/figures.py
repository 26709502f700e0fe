"""Regenerate every PNG in ``figures/`` from code: ``lowprec figures [--out DIR]``.

Each figure is a small function that builds a :class:`matplotlib.figure.Figure`
(no pyplot, no global settings) from seeded data, so the files are the same on
every run with the same library versions (fixed dpi, no date or software in the
PNG metadata). A figure whose data comes from a part of lowprec that is not
installed yet is skipped with a note.

    python -m lowprec.figures --out figures/
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from . import plot as lpp
from . import quant_error as qe
from . import train
from ._names import did_you_mean
from ._outdir import prepare_out_dir
from .matmul import ModelLike, promote, vecdot

__all__ = ["FIGURES", "demo_figures", "generate", "main"]

DPI = 110
_PNG_METADATA = {"Software": None}  # nothing that changes between runs or versions


def _fig(w: float, h: float) -> Figure:
    return Figure(figsize=(w, h), layout="constrained")


def _synthetic_gradients(n: int = 200_000, seed: int = 0) -> np.ndarray:
    """Log-normal magnitudes with random signs, most of them below 2^-24 (the shape of
    the activation gradients in Micikevicius et al. 2018, Fig. 3), plus 3% exact zeros."""
    rng = np.random.default_rng(seed)
    mag = np.exp2(rng.normal(-30.0, 5.5, n))
    sign = rng.choice([-1.0, 1.0], n)
    x = sign * mag
    x[rng.random(n) < 0.03] = 0.0
    return x


# ------------------------------------------------------------------ figures
def underflow_fp16() -> Figure:
    """Histogram of synthetic gradients against fp16's regions, with and without loss scale 2^12."""
    fig = _fig(10, 4.6)
    ax = fig.add_subplot()
    lpp.underflow_histogram(_synthetic_gradients(), "fp16", loss_scale=2.0**12,
                            label="gradient x (synthetic)", ax=ax,
                            title="FP16 flushes most small gradients to zero; a loss scale "
                                  "S = $2^{12}$ saves them")
    return fig


def underflow_formats() -> Figure:
    """The same gradients against fp16, bf16, fp8_e4m3 and fp8_e5m2 at once."""
    fig = _fig(10, 5.2)
    ax = fig.add_subplot()
    lpp.underflow_histogram(_synthetic_gradients(), ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"],
                            label="gradient x (synthetic)", ax=ax,
                            title="The same gradients in four formats: bf16 keeps them all, "
                                  "FP8 loses most")
    return fig


def number_lines() -> Figure:
    """Every positive value of fp4_e2m1 and fp8_e4m3 on linear and log2 axes, ulp per binade."""
    fig = _fig(10, 7.6)
    axes = fig.subplots(3, 1)
    lpp.number_line("fp4_e2m1", ax=axes[0])
    lpp.number_line("fp8_e4m3", ax=axes[1])
    lpp.number_line("fp8_e4m3", scale="log2", ax=axes[2],
                    title="The same fp8_e4m3 values on a log2 axis: every binade holds 8 "
                          "values")
    return fig


def format_ranges() -> Figure:
    """Range (binades, subnormals hatched) and precision of nine formats side by side."""
    fig = _fig(10, 4.4)
    ax = fig.add_subplot()
    lpp.format_comparison(["fp32", "tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp6_e3m2",
                           "fp6_e2m3", "fp4_e2m1"], ax=ax)
    return fig


def ulp_spacing() -> Figure:
    """Gap to the next value against the value: the ulp staircase of four formats."""
    fig = _fig(8, 5.2)
    ax = fig.add_subplot()
    lpp.spacing(["fp16", "fp8_e5m2", "fp8_e4m3", "fp4_e2m1"], ax=ax)
    return fig


def rounding_error() -> Figure:
    """Relative rounding error across binades for fp8_e4m3 and fp8_e5m2 (round to nearest even)."""
    fig = _fig(10, 7.5)
    axes = fig.subplots(2, 1, sharex=True, sharey=True)
    lpp.relative_error("fp8_e4m3", ax=axes[0])
    lpp.relative_error("fp8_e5m2", ax=axes[1])
    axes[0].set_xlabel("")
    return fig


def stochastic_rounding() -> Figure:
    """10,000 stochastic roundings of 0.3 to fp8_e4m3 against the two neighbours."""
    fig = _fig(7.5, 4.6)
    ax = fig.add_subplot()
    lpp.stochastic_rounding(0.3, "fp8_e4m3", n=10_000, rng=0, ax=ax)
    return fig


def stochastic_sum() -> Figure:
    """Adding 0.001 four thousand times in bf16: round-to-nearest stalls at 0.5,
    stochastic rounding follows the exact sum."""
    from .rounding import round_to

    n, inc, seeds = 4000, 0.001, 5
    rng = np.random.default_rng(0)
    rne = np.empty(n)
    sr = np.empty((n, seeds))
    a, b = 0.0, np.zeros(seeds)
    for i in range(n):
        a = float(round_to(a + inc, "bf16"))
        b = round_to(b + inc, "bf16", "stochastic", rng=rng)
        rne[i], sr[i] = a, b
    fig = _fig(8, 4.6)
    ax = fig.add_subplot()
    lpp.running_sum({"bf16, round to nearest even": rne, "bf16, stochastic rounding": sr},
                    exact=inc * np.arange(1, n + 1), ax=ax,
                    title="Adding 0.001 in bf16: round-to-nearest stalls at 0.5 (half an ulp "
                          "there is 0.002)")
    return fig


#: The training figures show the same runs as ``lowprec demo``'s table: every preset,
#: the demo's task, seed, length and evaluation interval.
TRAINING_POLICIES = tuple(train.POLICIES)
TRAINING_STEPS = 600


@functools.lru_cache(maxsize=1)
def _training_runs() -> dict:
    """One seeded run per preset on the "underflow" task, exactly as ``lowprec demo``
    trains them (shared by the training figures)."""
    return {p: train.train(p, "underflow", steps=TRAINING_STEPS, seed=0)
            for p in TRAINING_POLICIES}


#: The extra run of the loss-scale panel: PyTorch's GradScaler defaults never move the
#: scale on this task (2^16 never overflows, 2000 steps to the first growth), so this run
#: starts too high and grows every 25 steps, to show back-off and skipped steps.
MOVING_SCALER = {"init_scale": 2.0**40, "growth_interval": 25, "steps": 300}


@functools.lru_cache(maxsize=1)
def _moving_scaler_run():
    amp = train.get_policy("fp16-amp").replace(
        name="fp16-amp from $2^{40}$, growing every 25 steps",
        init_scale=MOVING_SCALER["init_scale"], growth_interval=MOVING_SCALER["growth_interval"])
    with np.errstate(over="ignore", invalid="ignore"):  # the overflowing steps are the point
        return train.train(amp, "underflow", steps=MOVING_SCALER["steps"], seed=0,
                           record=False)


def _pick(runs: dict, preferred: str, summary_key: str):
    """The run named ``preferred``, else the one with the largest ``summary[summary_key]``."""
    if preferred in runs:
        return runs[preferred]
    return max(runs.values(), key=lambda r: r.summary.get(summary_key) or 0.0)


def training_comparison(runs: dict | None = None) -> Figure:
    """Loss and accuracy of every precision preset on the underflow task (the demo's
    runs), with the presets ranked by final loss."""
    if runs is None:
        runs = _training_runs()
    fig = _fig(16, 5.8)
    ax1, ax2, ax3 = fig.subplots(1, 3, width_ratios=[1.1, 1.1, 0.9])
    first = next(iter(runs.values()))
    lpp.training_curves(runs, "loss", ax=ax1, show_train=False, logy=True, legend=False,
                        title=f"Held-out loss ({first.task} task, {first.steps} steps, "
                              f"seed {first.seed})")
    lpp.training_curves(runs, "acc", ax=ax2, show_train=False, legend=False,
                        title="Held-out accuracy")
    lpp.final_ranking(runs, ax=ax3, title="Final held-out loss, best on top")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6),
               fontsize=8.5, frameon=False)
    return fig


def training_underflow(runs: dict | None = None) -> Figure:
    """Inside the runs: gradients flushed to zero, updates lost, and a dynamic loss scale
    that moves (an extra run that starts too high), with its skipped steps marked."""
    runs = runs if runs is not None else _training_runs()
    fig = _fig(15, 4.6)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    lpp.underflow_per_layer(_pick(runs, "fp16-naive", "grad_underflow_pct"), ax=ax1)
    lpp.lost_updates(_pick(runs, "bf16-pure", "lost_update_pct"), ax=ax2)
    traces = {k: r for k, r in runs.items() if r.policy_config.get("loss_scaling") == "dynamic"
              and len(set(r.history["loss_scale"])) > 1}
    if not traces:  # the demo's own scalers stay flat: show one that moves
        extra = _moving_scaler_run()
        traces = {extra.policy: extra}
    lpp.loss_scale_trace(traces, ax=ax3, title="Dynamic loss scale (× = step skipped)")
    ax3.legend(loc="upper right", fontsize=8)  # the trace starts top left: keep clear of it
    ax3.text(0.98, 0.78, "(fp16-amp with PyTorch's defaults\nkeeps $2^{16}$ all run long here)",
             transform=ax3.transAxes, fontsize=7.5, color="0.3", ha="right", va="top",
             gid="note")
    return fig


def underflow_run(runs: dict | None = None) -> Figure:
    """Real activation gradients of the fp32 run against fp16, with the static scale 2^12;
    the largest of them sit at 2^-24 by construction of the task (marked)."""
    runs = runs if runs is not None else _training_runs()
    run = runs.get("fp32") or next(iter(runs.values()))
    g = lpp.gradient_samples(run, "act_grad")
    fig = _fig(10, 4.9)
    ax = fig.add_subplot()
    lpp.underflow_histogram(g, "fp16", loss_scale=2.0**12, ax=ax, label="gradient g",
                            title=f"Activation gradients of a real {run.policy} run against "
                                  "FP16, unscaled and with S = $2^{12}$")
    # Why the histogram ends at 2^-24: the task is built so. The output layer's gradient is
    # (softmax - one-hot) / batch * 2^-k, and |softmax - one-hot| <= 1.
    k, batch = run.task_config["grad_exp"], run.task_config["batch_size"]
    bound = -k - np.log2(batch)
    ax.axvline(bound, color="black", linestyle=":", linewidth=1.2, gid="task_bound")
    ax.text(1.02, 0.42, f"dotted line: the largest possible\noutput gradient of this task,\n"
            f"|softmax − one-hot| ≤ 1, ÷ batch {batch},\n× loss weight $2^{{-{k}}}$ = "
            f"$2^{{{bound:.0f}}}$. The output layer's\ngradients cannot pass it (the task\nis "
            "built so, lowprec.train.data);\nthe hidden layers' end near it", transform=ax.transAxes, fontsize=7.5, va="top",
            ha="left", gid="task_bound_note")
    return fig


def memory_roles() -> Figure:
    """Exact memory of one transformer layer per recipe (Adam), stacked by tensor role, at
    batch 1 (the weight side dominates) and batch 32 (the activations do)."""
    from .train.memory import transformer_layer

    layer = transformer_layer(4096, 16384, 2048)
    fig = _fig(14, 5.2)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, batch, what in ((axes[0], 1, "weights dominate"),
                            (axes[1], 32, "activations dominate")):
        tables = [train.memory(layer, p, batch=batch, optimizer="adam") for p in train.POLICIES]
        lpp.memory_stack(tables, ax=ax, title=f"batch {batch} × 2048 tokens: {what}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=5, fontsize=8.5,
               frameon=False)
    fig.suptitle("One transformer layer (d_model 4096, d_ff 16384), Adam: a master copy keeps "
                 "the weight side at FP32's 16 bytes per parameter or above; mixed precision "
                 "saves on the activations", fontsize=10)
    return fig


def demo_figures(runs: dict, out: str | Path) -> list[Path]:
    """The training figures of ``lowprec demo``'s runs (policy -> RunResult), into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in (("training_comparison", training_comparison),
                        ("training_underflow", training_underflow),
                        ("underflow_run", underflow_run),
                        ("memory_roles", lambda _runs: memory_roles())):
        path = out / f"{name}.png"
        save(build(dict(runs)), path)
        written.append(path)
    return written


def scaling_schemes() -> Figure:
    """SQNR of per-tensor, MX and NVFP4 scaling against block size; one outlier under
    per-tensor against per-block scaling."""
    rng = np.random.default_rng(0)
    # Heavy-tailed like activations: Student t with 4 degrees of freedom.
    x = rng.standard_t(4, (64, 1024)).astype(np.float32)
    blocks = [8, 16, 32, 64, 128]
    blocked = {"MXFP8 (E4M3, E8M0 scales)": "mxfp8_e4m3",
               "MXFP8, scale rounded up (rule=rceil)": "mxfp8_e4m3:rule=rceil",
               "MXFP6 (E3M2)": "mxfp6_e3m2",
               "MXFP4 (E2M1)": "mxfp4", "NVFP4 (E2M1, E4M3 scales)": "nvfp4"}
    errors: dict = {}
    for label, kind in blocked.items():
        res = qe.compare_schemes(x, [f"{kind}:block={b}" for b in blocks])
        errors[label] = {b: r.sqnr_db for b, r in zip(blocks, res)}
    for label, spec in {"per-tensor FP8 E4M3": "per_tensor:fp8_e4m3",
                        "per-tensor FP4 E2M1": "per_tensor:fp4_e2m1"}.items():
        errors[label] = qe.compare_schemes(x, [spec])[0].sqnr_db

    fig = _fig(11, 4.6)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.25])
    lpp.scheme_errors(errors, ax=ax1, metric="SQNR (dB, higher is better)", logy=False,
                      title="SQNR per scheme and block size\n(64×1024 tensor, Student t with 4 d.o.f.)")
    ax1.set_ylim(0, None)
    ax1.legend(loc="lower center", ncols=2, fontsize=7.5)
    v = np.abs(rng.standard_normal(128)) + 0.05
    v[37] = 2000.0
    q = {label: np.asarray(qe.parse_scheme(spec).quantize(v)[0])
         for label, spec in {"per-tensor FP4 E2M1": "per_tensor:fp4_e2m1",
                             "MXFP4, blocks of 32": "mxfp4:block=32",
                             "NVFP4, blocks of 16": "nvfp4:block=16"}.items()}
    lpp.outlier_scaling(v, q, block_size=32, ax=ax2,
                        title="One outlier (2000) among values near 1:\nper-tensor FP4 "
                              "scaling flushes all the others to zero")
    return fig


def accumulation() -> Figure:
    """Dot-product error against K under each GPU architecture's tensor-core model
    (lowprec.tensorcores), for zero-mean and for all-positive data, with FP32 FMA
    loops and DeepSeek-V3's promotion as references."""
    from .rounding import round_to

    ks = 2 ** np.arange(5, 15)
    # label -> (inputs, model); A100/Ada and H100/B200 share their fp16 rule
    models: dict[str, tuple[str, ModelLike]] = {
        "V100, fp16 inputs": ("fp16", "v100"),
        "A100 / Ada, fp16": ("fp16", "a100"),
        "H100 / B200, fp16": ("fp16", "h100"),
        "Ada, FP8 E4M3 (13-bit sum, block 16)": ("fp8_e4m3", "ada"),
        "H100, FP8 E4M3 (13-bit sum, block 32)": ("fp8_e4m3", "h100"),
        "H100 FP8, promoted to FP32 every 128 (DeepSeek-V3)": ("fp8_e4m3", promote(128)),
        "B200, FP8 E4M3": ("fp8_e4m3", "b200"),
        "sequential FP32 FMA loop, fp16": ("fp16", "sequential"),
    }
    rows = 16
    fig = _fig(13.0, 6.4)
    for panel, (kind, title) in enumerate([
            ("normal", "zero-mean data: N(0, 1) inputs"),
            ("uniform", "all-positive data: inputs uniform in [0, 1)")]):
        rng = np.random.default_rng(panel)
        errors: dict = {name: [] for name in models}
        for k in ks:
            raw_a = rng.standard_normal((rows, int(k))) if kind == "normal" else \
                rng.random((rows, int(k)))
            raw_b = rng.standard_normal((rows, int(k))) if kind == "normal" else \
                rng.random((rows, int(k)))
            for name, (inputs, model) in models.items():
                a, b = round_to(raw_a, inputs), round_to(raw_b, inputs)
                # Products of fp16/FP8 values are exact in float64; fsum rounds their
                # sum once, so `exact` is within 2**-53 of the true dot product.
                exact = np.array([math.fsum(a[r] * b[r]) for r in range(rows)])
                scale = np.sum(np.abs(a * b), axis=1)
                got = vecdot(a, b, inputs=inputs, model=model)
                errors[name].append(float(np.mean(np.abs(got - exact) / scale)))
        ax = fig.add_subplot(1, 2, panel + 1)
        lpp.accumulation_error(ks, errors, ax=ax, title=title,
                               ylabel="mean |error| / sum |a_k b_k|, 16 dot products")
    return fig


#: Every figure: file stem -> builder.
FIGURES: dict[str, Callable[[], Figure]] = {
    "underflow_fp16": underflow_fp16,
    "underflow_formats": underflow_formats,
    "number_lines": number_lines,
    "format_ranges": format_ranges,
    "ulp_spacing": ulp_spacing,
    "rounding_error": rounding_error,
    "stochastic_rounding": stochastic_rounding,
    "stochastic_sum": stochastic_sum,
    "underflow_run": underflow_run,
    "training_comparison": training_comparison,
    "training_underflow": training_underflow,
    "memory_roles": memory_roles,
    "scaling_schemes": scaling_schemes,
    "accumulation": accumulation,
}


def save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a PNG with fixed dpi and no varying metadata."""
    fig.savefig(path, dpi=DPI, metadata=_PNG_METADATA)


def check_names(names: list[str] | None) -> None:
    """Raise ValueError naming the unknown figures in ``names`` and the closest valid ones."""
    unknown = [n for n in names or [] if n not in FIGURES]
    if unknown:
        hints = "".join(did_you_mean(n, FIGURES) for n in unknown)
        raise ValueError(f"unknown figure(s) {', '.join(unknown)}{hints}; valid: "
                         f"{', '.join(FIGURES)}")


def generate(out: str | Path = "figures", names: list[str] | None = None,
             *, verbose: bool = True) -> list[Path]:
    """Draw the figures ``names`` (default: all) into ``out``; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check_names(names)
    written = []
    for name in names or list(FIGURES):
        fig = FIGURES[name]()
        path = out / f"{name}.png"
        save(fig, path)
        written.append(path)
        if verbose:
            print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return written


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="figures", help="folder for the PNGs (default: figures)")
    p.add_argument("names", nargs="*", metavar="FIGURE",
                   help=f"figures to draw (default: all): {', '.join(FIGURES)}")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.add_argument("--force", action="store_true", help="write into --out even if not empty")


def run(args: argparse.Namespace) -> int:
    """List the figures, or check the names and the output folder, then draw them."""
    if args.list:
        for name, fn in FIGURES.items():
            print(f"{name:<22} {(fn.__doc__ or '').strip()}")
        return 0
    check_names(args.names)
    folder = prepare_out_dir(args.out, force=args.force)  # before any drawing
    print(f"figures: writing into {folder}/", flush=True)
    generate(folder, args.names or None)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lowprec.figures", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
