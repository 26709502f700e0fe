"""The training figures read back: one line per preset in its own style, legends that
cover no data, a loss scale that moves, the task's 2^-24 bound, the ranking = the table."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D

from lowprec import figures, train
from lowprec import plot as lpp

PRESETS = tuple(train.POLICIES)


def _fake_run(i: int, name: str) -> dict:
    steps = list(range(50))
    loss = list(1.0 + np.exp(-np.arange(50) / (10 + i)))
    return {"policy": name, "history": {
        "step": steps, "loss": loss, "train_acc": [0.5] * 50, "eval_step": [25, 50],
        "eval_loss": [loss[24], loss[49]], "eval_acc": [0.5 + 0.01 * i, 0.6 + 0.01 * i]},
        "summary": {"final_loss": loss[49], "final_acc": 0.6 + 0.01 * i}}


@pytest.fixture(scope="module")
def real_runs():
    return {p: train.train(p, "underflow", steps=20, seed=0, eval_every=10)
            for p in ("fp32", "fp16-naive", "fp16-amp", "bf16-pure")}


def test_every_preset_gets_its_own_style():
    runs = {name: _fake_run(i, name) for i, name in enumerate(PRESETS)}
    ax = lpp.training_curves(runs, "loss", show_train=False)
    lines = [ln for ln in ax.get_lines() if str(ln.get_gid()).endswith(":eval")]
    assert [ln.get_gid() for ln in lines] == [f"{p}:eval" for p in PRESETS]
    colors = [to_hex(ln.get_color()) for ln in lines]
    assert len(set(colors)) == len(PRESETS), colors
    styles = {(c, ln.get_marker(), str(ln.get_linestyle())) for c, ln in zip(colors, lines)}
    assert len(styles) == len(PRESETS)


def _overlaps(a, b) -> bool:
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def test_comparison_figure_legend_covers_no_data(real_runs):
    fig = figures.training_comparison(real_runs)
    fig.canvas.draw()
    curves, acc, ranking = fig.axes
    assert curves.get_legend() is None and acc.get_legend() is None
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not _overlaps(box, ax.get_window_extent()), ax.get_title()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == list(real_runs)
    evals = [ln for ln in curves.get_lines() if str(ln.get_gid()).endswith(":eval")]
    for ln, run in zip(evals, real_runs.values()):
        assert list(ln.get_ydata()) == run.history["eval_loss"]
    # the ranking panel: one bar per preset, its length the table's final loss, best on top
    bars = {p.get_gid().split(":")[0]: p for p in ranking.patches if p.get_gid()}
    assert set(bars) == set(real_runs)
    for name, run in real_runs.items():
        assert bars[name].get_width() == run.summary["final_loss"]
    top_down = sorted(bars, key=lambda n: -bars[n].get_y())
    assert top_down == sorted(real_runs, key=lambda n: real_runs[n].summary["final_loss"])


def test_loss_scale_panel_moves_and_marks_skipped_steps(real_runs):
    fig = figures.training_underflow(real_runs)
    panel = fig.axes[2]
    (trace,) = [ln for ln in panel.get_lines() if str(ln.get_gid()).endswith(":scale")]
    (marks,) = [ln for ln in panel.get_lines() if str(ln.get_gid()).endswith(":skipped")]
    run = figures._moving_scaler_run()
    assert trace.get_gid() == f"{run.policy}:scale"
    assert len(set(trace.get_ydata())) > 2  # it moves: backs off and grows again
    assert list(trace.get_ydata()) == run.history["loss_scale"]
    skipped = np.flatnonzero(run.history["skipped"])
    assert skipped.size > 0 and list(marks.get_xdata()) == list(skipped)
    # after every skipped step the scale halves
    for k in skipped:
        if k + 1 < len(run.history["loss_scale"]):
            assert run.history["loss_scale"][k + 1] == run.history["loss_scale"][k] / 2


def test_underflow_run_marks_the_tasks_bound(real_runs):
    fig = figures.underflow_run(real_runs)
    ax = fig.axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "task_bound"]
    assert isinstance(line, Line2D)
    assert list(line.get_xdata()) == [-24.0, -24.0]  # 2^-18 loss weight / batch 64
    out_layer = lpp.gradient_samples(real_runs["fp32"], "act_grad", layer="fc3")
    assert 2.0**-25 < np.abs(out_layer).max() <= 2.0**-24  # the claim, on the real samples
    zero = next(p for p in ax.patches if p.get_gid() == "fp16:zero")
    assert zero.get_x() + zero.get_width() == -25.0  # half the smallest subnormal


def test_figures_default_to_the_demo_runs():
    assert figures.TRAINING_POLICIES == PRESETS
    import inspect

    from lowprec.demo import run_demo
    assert inspect.signature(run_demo).parameters["steps"].default == figures.TRAINING_STEPS


def test_memory_figure_segments_are_the_exact_bytes():
    fig = figures.memory_roles()
    layer = train.transformer_layer(4096, 16384, 2048)
    for ax, batch in zip(fig.axes, (1, 32)):
        for policy in ("fp32", "fp16-amp", "mxfp4"):
            table = train.memory(layer, policy, batch=batch, optimizer="adam")
            left = 0.0
            for role in ("master", "weights", "weight_grads", "optimizer_state", "activations"):
                (seg,) = [p for p in ax.patches if p.get_gid() == f"{policy}:{role}"]
                assert seg.get_width() == table.bytes_of(role) / 2**30
                assert seg.get_x() == left
                left += seg.get_width()
    # the lesson the figure carries: with Adam, AMP's weight side is no smaller than fp32's,
    # and at batch 32 its total is well below fp32's because activations halve
    amp, fp32 = (train.memory(layer, p, batch=32, optimizer="adam") for p in ("fp16-amp", "fp32"))
    assert amp.weight_side_bytes() == fp32.weight_side_bytes()
    assert 2 * amp.bytes_of("activations") == fp32.bytes_of("activations")
