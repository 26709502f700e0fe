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
