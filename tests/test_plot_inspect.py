"""The report figures draw one cell per series and recipe, one panel per series."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lowprec import inspect  # noqa: E402
from lowprec.plot import inspect_heatmap, inspect_histograms  # noqa: E402


@pytest.fixture()
def rep():
    rng = np.random.default_rng(0)
    tensors = {f"l{i}/{k}@{s}": (rng.standard_normal((4, 64)) * 10.0**-(i + 3 * (k == "g")))
               .astype(np.float32) for i in range(3) for k in ("w", "g") for s in (0, 1)}
    return inspect.report(tensors, ["fp16", "fp8_e4m3", "mxfp4"])


def test_heatmap_has_a_cell_per_series_and_recipe(rep) -> None:
    fig = inspect_heatmap(rep)
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 2
    for ax in heat:
        assert ax.images[0].get_array().shape == (6, 3)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["fp16", "fp8_e4m3", "mxfp4"]
    under = heat[0].images[0].get_array()
    row = [r for r in rep.rows if r["layer"] == "l0" and r["kind"] == "w" and
           r["recipe"] == "fp16"]
    assert under[0, 0] == sum(r["underflow"] for r in row) / sum(r["nonzero"] for r in row)
    plt.close(fig)
    with pytest.raises(ValueError, match="metric"):
        inspect_heatmap(rep, ("nan",))


def test_histograms_one_panel_per_series(rep) -> None:
    fig = inspect_histograms(rep, ["fp16", "fp8_e4m3"], ncols=4)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == [f"l{i}/{k}" for i in range(3) for k in "wg"]
    bars = sum(p.get_height() for p in shown[0].patches)
    assert bars == sum(sum(rep.histograms[f"l0/w@{s}"].values()) for s in (0, 1))
    plt.close(fig)
