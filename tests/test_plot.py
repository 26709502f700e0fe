"""lowprec.plot: every function draws the right data, on the Agg backend.

References are independent of lowprec where possible: numpy float16 and ml_dtypes
(their finfo and their bit patterns) for format values and for what rounds where.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np
import pytest
from matplotlib.patches import Rectangle, StepPatch

import lowprec as lp
import lowprec.plot as lpp
from lowprec.plot import _style

# format name -> (ml_dtypes/numpy dtype, bits)
REFS = {
    "fp16": (np.dtype(np.float16), 16),
    "bf16": (np.dtype(ml_dtypes.bfloat16), 16),
    "fp8_e4m3": (np.dtype(ml_dtypes.float8_e4m3fn), 8),
    "fp8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), 8),
    "fp8_e4m3fnuz": (np.dtype(ml_dtypes.float8_e4m3fnuz), 8),
    "fp6_e3m2": (np.dtype(ml_dtypes.float6_e3m2fn), 8),
    "fp6_e2m3": (np.dtype(ml_dtypes.float6_e2m3fn), 8),
    "fp4_e2m1": (np.dtype(ml_dtypes.float4_e2m1fn), 8),
}


def ref_positive_values(name: str) -> np.ndarray:
    """Every positive finite value, from the reference dtype's bit patterns."""
    dt, bits = REFS[name]
    raw = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        v = raw.view(dt).astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v > 0)])


def ref_edges(name: str) -> tuple[float, float, float]:
    fi = ml_dtypes.finfo(REFS[name][0])
    return (math.log2(float(fi.smallest_subnormal)), math.log2(float(fi.smallest_normal)),
            math.log2(float(fi.max)))


def rounding_ref_edges(name: str) -> tuple[float, float, float]:
    """Round-to-nearest region edges from ml_dtypes' limits: half the smallest subnormal,
    half a subnormal step below the smallest normal, half an ulp above max."""
    fi = ml_dtypes.finfo(REFS[name][0])
    sub, norm, top = (float(fi.smallest_subnormal), float(fi.smallest_normal), float(fi.max))
    ulp_top = float(fi.eps) * 2.0 ** math.floor(math.log2(top))
    return math.log2(sub / 2), math.log2(norm - sub / 2), math.log2(top + ulp_top / 2)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"])
def test_histogram_band_agrees_with_its_table(name):
    """Values just above half the smallest subnormal round up to it; exactly half is a
    tie that goes to the even neighbour, zero. Band and table say the same."""
    sub = float(ml_dtypes.finfo(REFS[name][0]).smallest_subnormal)
    half = sub / 2
    x = np.array([half, np.nextafter(half, 0), np.nextafter(half, 1), 0.75 * sub, sub])
    assert lpp.rounding_edges(name)[0] == math.log2(half)
    assert list(lp.round_to(x, name) == 0) == [True, True, False, False, False]
    sh = lpp.underflow_shares(x, name)
    assert sh["zero"] == np.mean(x <= 2.0 ** lpp.rounding_edges(name)[0]) == 2 / 5
    ax = lpp.underflow_histogram(x, name)
    rect = by_gid(ax, f"{name}:zero")
    assert rect.get_x() + rect.get_width() == math.log2(half)
    assert "40.0" in by_gid(ax, "shares").get_text().splitlines()[1]


def test_rounding_edges_of_directed_modes():
    assert lpp.rounding_edges("fp16", "rtz") == (-24.0, -14.0, math.inf)
    z, n, o = lpp.rounding_edges("fp16", "rup")
    assert z == -math.inf and n == math.log2(2.0**-14 - 2.0**-24) and o == math.log2(65504)
    assert lpp.rounding_edges("fp16", "stochastic") == lpp.region_edges("fp16")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def by_gid(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found[0]


def gradients(n=20_000, seed=1):
    rng = np.random.default_rng(seed)
    x = (rng.choice([-1, 1], n) * np.exp2(rng.normal(-22, 6, n))).astype(np.float32)
    return x.astype(np.float64)


# ------------------------------------------------------------- underflow
@pytest.mark.parametrize("scale", [1.0, 2.0**10, 3.0])
def test_underflow_shares_match_numpy_float16(scale):
    x = gradients()
    sh = lpp.underflow_shares(x, "fp16", loss_scale=scale)
    h = (np.abs(x) * scale).astype(np.float16)  # numpy rounds to nearest even
    tiny = np.finfo(np.float16).smallest_normal
    assert sh["zero"] == np.mean(h == 0)
    assert sh["subnormal"] == np.mean((h > 0) & (h < tiny))
    assert sh["overflow"] == np.mean(np.isinf(h))
    assert math.isclose(sum(sh.values()), 1.0)


def test_underflow_shares_match_ml_dtypes_fp8():
    x = gradients() * 2.0**14
    sh = lpp.underflow_shares(x, "fp8_e4m3")
    with np.errstate(over="ignore"):
        r = np.abs(x).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert sh["zero"] == np.mean(r == 0)
    assert sh["subnormal"] == np.mean((r > 0) & (r < 2.0**-6))
    assert sh["overflow"] == np.mean(np.isnan(r))


def test_underflow_shares_bad_input():
    with pytest.raises(ValueError, match="no non-zero"):
        lpp.underflow_shares([0.0, np.nan], "fp16")
    with pytest.raises(ValueError, match="loss_scale"):
        lpp.underflow_shares([1.0], "fp16", loss_scale=0)


@pytest.mark.parametrize("formats", [["fp16"], ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]])
def test_underflow_histogram_counts_and_regions(formats):
    x = gradients()
    x[:37] = 0.0
    ax = lpp.underflow_histogram(x, formats, bins_per_binade=4)
    hist = by_gid(ax, "hist")
    assert isinstance(hist, StepPatch)
    values, edges = hist.get_data()[:2]
    assert values.sum() == x.size - 37  # every non-zero value, exactly once
    assert np.allclose(np.diff(edges), 0.25)
    lg = np.log2(np.abs(x[x != 0]))
    assert edges[0] <= lg.min() and lg.max() < edges[-1]
    for name in formats:
        b_zero, b_norm, b_over = rounding_ref_edges(name)
        rect = {r: by_gid(ax, f"{name}:{r}") for r in lpp.REGIONS}
        assert all(isinstance(p, Rectangle) for p in rect.values())
        # the band ends where rounding to nearest stops returning zero: half the smallest
        # subnormal (2^-25 for fp16), not the smallest subnormal itself
        assert rect["zero"].get_x() + rect["zero"].get_width() == b_zero
        assert b_zero == ref_edges(name)[0] - 1
        assert rect["subnormal"].get_x() == b_zero
        assert math.isclose(rect["subnormal"].get_x() + rect["subnormal"].get_width(), b_norm)
        assert math.isclose(rect["normal"].get_x(), b_norm)
        assert math.isclose(rect["normal"].get_x() + rect["normal"].get_width(), b_over)
        assert rect["overflow"].get_x() == b_over
    table = by_gid(ax, "shares").get_text().splitlines()
    assert len(table) == 1 + len(formats) + 1  # header, one row per format, zeros note
    assert "37 exact zeros" in table[-1]
    sh = lpp.underflow_shares(x, formats[0])
    assert _style._pct(sh["zero"]) in table[1]


def test_underflow_histogram_loss_scale_shifts_by_log2_s():
    x = gradients()
    ax = lpp.underflow_histogram(x, "fp16", loss_scale=2.0**12)
    v0, e0 = by_gid(ax, "hist").get_data()[:2]
    v1, e1 = by_gid(ax, "hist_scaled").get_data()[:2]
    assert np.array_equal(v0, v1)
    assert np.array_equal(e1, e0 + 12)
    assert len(by_gid(ax, "shares").get_text().splitlines()) == 3


def test_underflow_histogram_rejects_empty_and_bad_bins():
    with pytest.raises(ValueError, match="no non-zero"):
        lpp.underflow_histogram(np.zeros(5), "fp16")
    with pytest.raises(ValueError, match="bins_per_binade"):
        lpp.underflow_histogram([1.0], "fp16", bins_per_binade=0)
    with pytest.raises(ValueError, match="unknown format"):
        lpp.underflow_histogram([1.0], "fp7")


def test_gradient_samples_reads_a_run_folder(tmp_path):
    a = np.arange(1, 5, dtype=np.float64)
    b = -np.arange(1, 3, dtype=np.float64)
    np.savez(tmp_path / "grads.npz", **{"act_grad/fc1/step0": a, "act_grad/fc2/step0": b,
                                        "weight_grad/fc1/step0": a * 7})
    assert np.array_equal(lpp.gradient_samples(tmp_path), np.concatenate([a, b]))
    assert np.array_equal(lpp.gradient_samples(tmp_path, "weight_grad", "fc1", 0), a * 7)
    with pytest.raises(ValueError, match="it holds"):
        lpp.gradient_samples(tmp_path, "act_grad", "fc3")
    run = FakeRun("p", ["fc1"], grads={"act_grad/fc1/step3": a})
    assert np.array_equal(lpp.gradient_samples(run, step=3), a)
    with pytest.raises(ValueError, match="it holds: act_grad/fc1/step3"):
        lpp.gradient_samples(run, step=4)
    with pytest.raises(ValueError, match="does not exist"):
        lpp.gradient_samples(tmp_path / "nope")


# ------------------------------------------------------------ number line
@pytest.mark.parametrize("name", ["fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"])
@pytest.mark.parametrize("scale", ["linear", "log2"])
def test_number_line_has_exactly_the_positive_values(name, scale):
    ax = lpp.number_line(name, scale=scale)
    sub, norm = by_gid(ax, "subnormal"), by_gid(ax, "normal")
    xs = [np.asarray(c.get_xdata())[::3] for c in (sub, norm)]
    for c in (sub, norm):  # each tick is x, x, NaN
        x = np.asarray(c.get_xdata())
        assert np.array_equal(x[1::3], x[::3]) and np.all(np.isnan(x[2::3]))
    drawn = np.sort(np.concatenate(xs))
    assert np.array_equal(drawn, ref_positive_values(name))
    tiny = 2.0 ** ref_edges(name)[1]
    assert np.all(xs[0] < tiny) and np.all(xs[1] >= tiny)
    assert ax.get_xscale() == ("log" if scale == "log2" else "linear")


def test_number_line_refuses_wide_formats():
    with pytest.raises(ValueError, match="at most 16 bits"):
        lpp.number_line("fp32")
    with pytest.raises(ValueError, match="scale"):
        lpp.number_line("fp16", scale="log10")


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz",
                                  "fp6_e3m2", "fp4_e2m1"])
def test_ulp_steps_equal_the_real_gaps(name):
    v = ref_positive_values(name)
    xs, us = lpp.ulp_steps(name)
    assert xs[0] == v[0] and xs[-1] == v[-1]
    step = us[np.searchsorted(xs, v[:-1], side="right") - 1]
    assert np.array_equal(step, np.diff(v))


def test_spacing_and_format_comparison_draw_the_formats():
    ax = lpp.spacing(["fp16", "fp8_e4m3", "fp32"])
    for name in ("fp16", "fp8_e4m3", "fp32"):
        xs, us = lpp.ulp_steps(name)
        line = by_gid(ax, name)
        assert np.array_equal(line.get_xdata(), xs) and np.array_equal(line.get_ydata(), us)
    ax = lpp.format_comparison(["fp16", "fp8_e4m3", "bf16"])
    for name in ("fp16", "fp8_e4m3", "bf16"):
        b_sub, b_norm, b_max = ref_edges(name)
        sub, norm = by_gid(ax, f"{name}:subnormal"), by_gid(ax, f"{name}:normal")
        assert (sub.get_x(), sub.get_x() + sub.get_width()) == (b_sub, b_norm)
        assert norm.get_x() == b_norm and math.isclose(norm.get_x() + norm.get_width(), b_max)


# --------------------------------------------------------------- rounding
@pytest.mark.parametrize("name,mode", [("fp8_e4m3", "rne"), ("fp8_e5m2", "rtz"),
                                       ("fp16", "rne")])
def test_relative_error_respects_the_bounds(name, mode):
    ax = lpp.relative_error(name, mode=mode)
    line = by_gid(ax, name)
    x, rel = line.get_xdata(), line.get_ydata()
    ok = np.isfinite(rel)
    assert ok.sum() > 0.5 * x.size
    f = lp.get_format(name)
    u = 2.0**-f.precision if mode == "rne" else 2.0**-f.mantissa_bits
    normal = ok & (x >= f.smallest_normal)
    assert np.all(rel[normal] <= u)
    # The bound is nearly reached (the worst case is just above a power of two,
    # u / (1 + u)), so it is not loose.
    assert rel[normal].max() > 0.95 * u / (1 + u)
    sub = ok & (x < f.smallest_normal) & (x >= f.smallest_subnormal)
    half = 0.5 if mode == "rne" else 1.0
    assert np.all(rel[sub] * x[sub] <= half * f.smallest_subnormal)
    lost = ok & (x < f.smallest_subnormal / 2)
    assert np.all(rel[lost] == 1.0)


def test_relative_error_zoom():
    ax = lpp.relative_error("bf16", binades=(-3, 2))
    x = by_gid(ax, "bf16").get_xdata()
    assert x[0] == 2.0**-3 and x[-1] == 2.0**2
    with pytest.raises(ValueError, match="nothing"):
        lpp.relative_error("fp8_e4m3", binades=(10, 12))


def test_stochastic_rounding_bars_at_the_two_neighbours():
    ax = lpp.stochastic_rounding(0.3, "fp8_e4m3", n=4000, rng=5)
    bars = [a for a in ax.patches if a.get_gid() == "sr_counts"]
    v = ref_positive_values("fp8_e4m3")
    lo, hi = v[v < 0.3].max(), v[v > 0.3].min()
    centers = [p.get_x() + p.get_width() / 2 for p in bars]
    heights = np.array([p.get_height() for p in bars])
    assert np.allclose(centers, [lo, hi])
    assert math.isclose(heights.sum(), 1.0)
    p_up = (0.3 - lo) / (hi - lo)
    assert abs(heights[1] - p_up) < 4 * math.sqrt(p_up * (1 - p_up) / 4000)
    with pytest.raises(ValueError, match="exactly representable"):
        lpp.stochastic_rounding(0.25, "fp8_e4m3")


def test_running_sum_draws_every_trace():
    sr = np.arange(12.0).reshape(4, 3)
    ax = lpp.running_sum({"rne": [1, 1, 1, 1], "sr": sr}, exact=[1, 2, 3, 4])
    assert list(by_gid(ax, "rne").get_ydata()) == [1, 1, 1, 1]
    for j, gid in enumerate(["sr", "sr#1", "sr#2"]):
        assert np.array_equal(by_gid(ax, gid).get_ydata(), sr[:, j])
    assert list(by_gid(ax, "exact").get_xdata()) == [1, 2, 3, 4]


# ---------------------------------------------------------- training runs
@dataclass
class FakeRun:
    """The fields of lowprec.train's RunResult that the plots read."""

    policy: str
    layers: list
    history: dict = field(default_factory=dict)
    grads: dict = field(default_factory=dict)


def fake_run(policy, steps=50, seed=0):
    rng = np.random.default_rng(seed)
    step = list(range(steps))
    skipped = [bool(s % 17 == 3) for s in step]
    scale = 2.0 ** (16 - np.cumsum(skipped))
    return FakeRun(policy, ["fc1", "fc2"], {
        "step": step, "loss": list(np.exp(-np.arange(steps) / 20) + 0.01 * rng.random(steps)),
        "train_acc": None, "eval_step": step[::10],
        "eval_loss": list(np.exp(-np.arange(0, steps, 10) / 20) * (1 + 0.1 * seed)),
        "eval_acc": list(np.linspace(0.1, 0.9, len(step[::10]))),
        "loss_scale": list(scale), "skipped": skipped,
        "grad_underflow": {"fc1": list(rng.random(steps) * 0.1), "fc2": list(rng.random(steps))},
        "lost_updates": {"fc1": list(rng.random(steps) * 0.2), "fc2": list(rng.random(steps))},
    })


def test_training_plots_draw_the_run_data():
    runs = [fake_run("fp32"), fake_run("fp16-amp", seed=1)]
    ax = lpp.training_curves(runs, "loss")
    for r in runs:
        line = by_gid(ax, f"{r.policy}:train")
        assert np.array_equal(line.get_ydata(), r.history["loss"])
        assert np.array_equal(by_gid(ax, f"{r.policy}:eval").get_xdata(), r.history["eval_step"])
    ax = lpp.training_curves({"a": runs[0], "b": runs[0], "c": runs[1]}, "loss")
    assert "of a (within 2%" in by_gid(ax, "coinciding").get_text()  # b lies on a
    assert not by_gid(ax, "coinciding").get_text().endswith("c")
    ax = lpp.training_curves({"a": runs[0]}, "acc")
    assert np.array_equal(by_gid(ax, "a:eval").get_ydata(), runs[0].history["eval_acc"])
    ax = lpp.loss_scale_trace(runs[1])
    sk = by_gid(ax, "fp16-amp:skipped")
    assert list(sk.get_xdata()) == [s for s, k in zip(runs[1].history["step"],
                                                      runs[1].history["skipped"]) if k]
    as_dict = {"policy": "p", "layers": ["fc1", "fc2"], "history": runs[0].history}
    for fn, key in ((lpp.underflow_per_layer, "grad_underflow"),
                    (lpp.lost_updates, "lost_updates")):
        ax = fn(as_dict)
        for layer in ("fc1", "fc2"):
            assert np.allclose(by_gid(ax, layer).get_ydata(),
                               100 * np.asarray(runs[0].history[key][layer]))
    with pytest.raises(ValueError, match="metric"):
        lpp.training_curves(runs, "f1")


# ---------------------------------------------------- scaling, accumulation
def test_scaling_and_accumulation_plots():
    ax = lpp.scheme_errors({"MXFP8": {16: 0.02, 32: 0.03, 64: 0.04}, "per-tensor FP8": 0.1})
    assert list(by_gid(ax, "MXFP8").get_ydata()) == [0.02, 0.03, 0.04]
    assert list(by_gid(ax, "per-tensor FP8").get_ydata()) == [0.1, 0.1]
    x = np.linspace(1, 2, 64)
    x[5] = 1000.0
    q = {"per-tensor": np.where(np.arange(64) == 5, x, 0.0), "per-block": x * (1 + 1e-3)}
    ax = lpp.outlier_scaling(x, q, block_size=16)
    assert np.allclose(by_gid(ax, "per-block").get_ydata(), 1e-3)
    rel = by_gid(ax, "per-tensor").get_ydata()
    assert np.isnan(rel[5]) and np.all(rel[np.arange(64) != 5] == 1.0)
    assert [seg[0, 0] for seg in by_gid(ax, "outliers").get_segments()] == [5]
    k = [16, 64, 256]
    ax = lpp.accumulation_error(k, {"fp16 acc": [1e-3, 4e-3, 1.6e-2]})
    assert list(by_gid(ax, "fp16 acc").get_xdata()) == k
    ax = lpp.accumulation_error(k, {"fp32": [0.0, 0.0, 1e-7]})
    assert np.isnan(by_gid(ax, "fp32").get_ydata()[:2]).all()
    assert "exact for 2 of the K" in ax.get_legend().get_texts()[0].get_text()
    with pytest.raises(ValueError, match="values of K"):
        lpp.accumulation_error(k, {"bad": [1.0]})


# -------------------------------------------------------------- no state
def test_plots_keep_no_global_state():
    before = dict(matplotlib.rcParams)
    _, ax = plt.subplots()
    n_figs = len(plt.get_fignums())
    assert lpp.underflow_histogram(gradients(2000), "fp16", loss_scale=8.0, ax=ax) is ax
    assert lpp.number_line("fp4_e2m1", ax=ax) is ax
    assert lpp.stochastic_rounding(0.3, "fp8_e4m3", n=100, ax=ax) is ax
    assert len(plt.get_fignums()) == n_figs
    after = dict(matplotlib.rcParams)
    assert {k for k in before if before[k] != after[k]} == set()


# --------------------------------------------------------------- figures
def test_figures_command_writes_every_file(tmp_path, capsys):
    from lowprec import cli, figures

    assert cli.main(["figures", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in figures.FIGURES:
        path = tmp_path / f"{name}.png"
        if f"skipped {name}:" in out:
            assert not path.exists()
            continue
        assert path.exists(), name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size < 250_000, f"{name}.png is {path.stat().st_size} bytes"


def test_figures_are_byte_stable(tmp_path):
    from lowprec import figures

    a = figures.generate(tmp_path / "a", ["stochastic_rounding"], verbose=False)
    b = figures.generate(tmp_path / "b", ["stochastic_rounding"], verbose=False)
    assert a[0].read_bytes() == b[0].read_bytes()
    with pytest.raises(ValueError, match="unknown figure"):
        figures.generate(tmp_path, ["nope"])


def test_readme_example_runs(tmp_path, monkeypatch):
    """The Python example of docs/figures.md runs as written."""
    from pathlib import Path

    doc = Path(__file__).parents[1] / "docs" / "figures.md"
    code = doc.read_text().split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(doc), "exec"), {})  # noqa: S102 -- our own documentation
    assert (tmp_path / "where_my_gradients_land.png").exists()


def test_demo_figures_from_real_runs(tmp_path):
    """lowprec demo hands its runs to figures.demo_figures; short real runs here."""
    from lowprec import figures, train

    runs = {p: train.train(p, "underflow", steps=12, seed=0, eval_every=4)
            for p in ("fp32", "fp16-naive", "fp16-amp", "bf16-pure")}
    written = figures.demo_figures(runs, tmp_path)
    assert sorted(p.name for p in written) == ["memory_roles.png", "training_comparison.png",
                                               "training_underflow.png", "underflow_run.png"]
    assert all(p.stat().st_size > 10_000 for p in written)
