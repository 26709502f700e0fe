"""lowprec.plot.quantizer_lab draws what lowprec.recipes.lab measured."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import lowprec.plot as lpp  # noqa: E402
from lowprec.recipes import lab  # noqa: E402


def test_quantizer_lab_bars_are_bias_squared_and_variance():
    g = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    stats = lab.block_stats(g, ("rtn", "sr"), draws=4, rng=1)
    ax = lpp.quantizer_lab(stats)
    bars = {p.get_gid(): p for p in ax.patches}
    for name, st in stats.items():
        b2 = np.mean(st.bias ** 2)
        assert np.isclose(bars[f"{name}:bias"].get_height(), b2)
        assert np.isclose(bars[f"{name}:variance"].get_height(), np.mean(st.variance))
        assert np.isclose(bars[f"{name}:variance"].get_y(), b2)
    assert bars["rtn:variance"].get_height() == 0 and bars["sr:variance"].get_height() > 0
    plt.close(ax.figure)


def test_noise_threshold_bars_are_the_rows_ratios_and_colour_the_ones_below():
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    steps = {"l/weight_grad@0": x, "l/weight_grad@1": -x + np.float32(1e-3),
             "m/weight_grad@0": x, "m/weight_grad@1": x}
    rows = lab.noise_threshold(steps, "rtn")
    ax = lpp.noise_threshold(rows)
    bars = {p.get_gid(): p for p in ax.patches}
    for r in rows:
        assert np.isclose(bars[r.name].get_width(), r.ratio)
    assert bars["l"].get_facecolor() != bars["m"].get_facecolor()
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.name for r in rows]
    assert any(np.isclose(line.get_xdata()[0], np.sqrt(3)) for line in ax.get_lines())
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="at least one row"):
        lpp.noise_threshold([])
