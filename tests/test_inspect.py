"""lowprec.inspect: every statistic equals a direct computation with lowprec's own
quantizers (round_to, scaling, mx, nvfp4) on the same arrays; counts exactly."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

import lowprec as lp
from lowprec import inspect
from lowprec._blocks import overflow_threshold
from lowprec.scaling import DelayedScaling


def _wide(seed: int = 0, n: int = 4096, dtype=np.float32) -> np.ndarray:
    """Values spread over many binades (underflow and overflow for every format), with
    exact zeros of both signs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-40, 20, n))
    x[::97] = 0.0
    x[1::97] = -0.0
    return x.astype(dtype).reshape(64, -1)


def _direct(x: np.ndarray, q: np.ndarray, e: np.ndarray, tiny: float, clip) -> dict:
    """The definitions of lowprec.inspect.stats, written out with numpy."""
    x = x.astype(np.float64).ravel()
    q = np.asarray(q, np.float64).ravel()
    e = np.asarray(e, np.float64).ravel()
    fin = np.isfinite(x)
    nz = fin & (x != 0)
    qfin = np.isfinite(q)
    return {
        "zeros": int(np.sum(x == 0)),
        "nonzero": int(nz.sum()),
        "underflow": int(np.sum(nz & (q == 0))),
        "subnormal": int(np.sum((np.abs(e) > 0) & (np.abs(e) < tiny))),
        "overflow": int(np.sum(fin & ~qfin)),
        "clipped": int(np.sum(fin & qfin & (np.abs(x) >= np.asarray(clip).ravel()))),
        "nan": int(np.isnan(q).sum()),
    }


def _sqnr(x: np.ndarray, q: np.ndarray) -> float:
    x = x.astype(np.float64).ravel()
    d = np.asarray(q, np.float64).ravel() - x
    return 10 * math.log10(float(np.sum(x * x)) / float(np.sum(d * d)))


def _check(row: dict, want: dict) -> None:
    got = {k: row[k] for k in want}
    assert got == want


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2",
                                 "fp6_e2m3", "fp4_e2m1"])
def test_plain_recipes_equal_round_to(fmt: str) -> None:
    x = _wide()
    row = inspect.report({"w": x}, [fmt]).rows[0]
    f = lp.get_format(fmt)
    q = lp.round_to(x, fmt)
    clip = np.full(x.shape, overflow_threshold(f) if not (f.has_inf or f.has_nan) else np.inf)
    _check(row, _direct(x, q, q, f.smallest_normal, clip))
    assert row["n"] == x.size and (row["underflow"] > 0 or fmt == "bf16")  # bf16: fp32 range
    if row["overflow"] == 0:
        assert row["sqnr_db"] == pytest.approx(_sqnr(x, q), rel=1e-9)
    else:
        assert row["sqnr_db"] == -math.inf


def test_zeros_are_not_underflow_and_minus_zero_is_zero() -> None:
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 1.0], dtype=np.float32)
    row = inspect.report({"x": x}, ["fp16"]).rows[0]
    assert (row["zeros"], row["nonzero"], row["underflow"]) == (2, 3, 2)
    assert row["underflow_frac"] == pytest.approx(2 / 3)


def test_loss_scale_multiplies_gradients_only() -> None:
    x = _wide(1)
    s = 2.0**12
    r = inspect.report({"fc/output_grad": x, "fc/weight": x}, ["fp16_loss_scale"], loss_scale=s)
    e = lp.round_to(x.astype(np.float64) * s, "fp16")
    want = _direct(x, e / s, e, lp.get_format("fp16").smallest_normal, np.inf)
    _check(r.row("fc/output_grad", "fp16_loss_scale"), want)
    q = lp.round_to(x, "fp16")  # a weight is not multiplied by the loss scale
    _check(r.row("fc/weight", "fp16_loss_scale"),
           _direct(x, q, q, lp.get_format("fp16").smallest_normal, np.inf))
    assert r.loss_scale == s and r.row("fc/output_grad", "fp16_loss_scale")["scale"] == "2^12"


def test_settled_loss_scale_is_the_largest_power_of_two_without_overflow() -> None:
    rng = np.random.default_rng(3)
    for amax in rng.uniform(1e-9, 1e3, 20):
        s = inspect.settled_loss_scale([amax])
        assert np.isfinite(lp.round_to(amax * s, "fp16"))
        assert np.isinf(lp.round_to(amax * 2 * s, "fp16"))
        assert math.log2(s) == int(math.log2(s))


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_current_scaling_equals_quantize_per_tensor(fmt: str) -> None:
    x = _wide(2)
    row = inspect.report({"a": x}, [f"{fmt}_current"]).rows[0]
    t = lp.scaling.quantize_per_tensor(x, fmt)
    f = lp.get_format(fmt)
    e = lp.decode(t.codes, f)
    _check(row, _direct(x, t.dequantize(), e, f.smallest_normal, t.clip_threshold()))
    assert row["sqnr_db"] == pytest.approx(_sqnr(x, t.dequantize()), rel=1e-9)


def test_delayed_scaling_walks_the_steps_in_order() -> None:
    steps = [_wide(s) * 4.0**s for s in range(4)]
    tensors = {f"l/output_grad@{s}": x for s, x in reversed(list(enumerate(steps)))}
    r = inspect.report(tensors, ["fp8_e5m2_delayed"])
    ds = DelayedScaling("fp8_e5m2")
    f = lp.get_format("fp8_e5m2")
    for s, x in enumerate(steps):
        t = ds.quantize(x)
        ds.update()
        want = _direct(x, t.dequantize(), lp.decode(t.codes, f), f.smallest_normal,
                       t.clip_threshold())
        _check(r.row(f"l/output_grad@{s}", "fp8_e5m2_delayed"), want)
    assert r.row("l/output_grad@0", "fp8_e5m2_delayed")["scale"] == "2^0"  # TE's first step


@pytest.mark.parametrize("mxf", ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4"])
@pytest.mark.parametrize("rule", ["floor", "ceil", "rceil", "even"])
def test_mx_recipes_equal_mx_quantize_with_block_forensics(mxf: str, rule: str) -> None:
    x = _wide(4)[:, :48]  # 48 columns: a short last block in every row
    name = mxf if rule == "floor" else f"{mxf}_{rule}"
    r = inspect.report({"w": x}, [name])
    m = lp.mx.quantize(x, mxf, scale_rule=rule)
    q = m.dequantize()
    _check(r.rows[0], _direct(x, q, m.elements, m.fmt.element.smallest_normal,
                              m.clip_threshold()))
    b = r.blocks["w", name]
    pad = np.zeros((x.shape[0], 64), np.float64)
    xb = pad.copy()
    xb[:, :48] = x
    qb = pad.copy()
    qb[:, :48] = q
    cb = np.full(pad.shape, np.inf)
    cb[:, :48] = m.clip_threshold()
    xb, qb, cb = (a.reshape(-1, 32) for a in (xb, qb, cb))
    assert b.n_blocks == m.n_blocks == xb.shape[0]
    assert b.flushed == int(np.any((xb != 0) & (qb == 0), axis=1).sum())
    assert b.clipped == int(np.any(np.abs(xb) >= cb, axis=1).sum())
    exps, counts = np.unique(np.log2(m.scales.ravel()).astype(int), return_counts=True)
    assert b.scale_exponents == dict(zip(exps.tolist(), counts.tolist()))
    rel = np.sqrt(((qb - xb) ** 2).sum(1) / np.maximum((xb**2).sum(1), 1e-300))
    assert b.worst[0]["rel_error"] == pytest.approx(rel.max(), rel=1e-9)


def test_nvfp4_equals_nvfp4_quantize() -> None:
    x = _wide(5)
    r = inspect.report({"w": x}, ["nvfp4"])
    t = lp.nvfp4.quantize(x)
    _check(r.rows[0], _direct(x, t.dequantize(), lp.decode(t.codes, "fp4_e2m1"),
                              lp.get_format("fp4_e2m1").smallest_normal, t.clip_threshold()))
    assert r.blocks["w", "nvfp4"].n_blocks == t.n_blocks


@pytest.mark.parametrize("rec", ["fp8_e4m3_current", "fp8_e5m2_current", "nvfp4"])
def test_sample_with_the_full_tensors_amax_is_quantized_as_in_the_full_tensor(rec) -> None:
    rng = np.random.default_rng(6)
    for _ in range(40):
        x = (rng.standard_normal((48, 40)) * rng.uniform(1e-6, 1e3)).astype(np.float32)
        pick = np.sort(rng.choice(48, 5, replace=False))
        amax = float(np.max(np.abs(x)))
        full = inspect.recipes.apply(inspect.get_recipe(rec), x)
        part = inspect.recipes.apply(inspect.get_recipe(rec), x[pick], amax=amax)
        np.testing.assert_array_equal(part.q, full.q[pick])
        np.testing.assert_array_equal(part.elements, full.elements[pick])


def test_unknown_recipe_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        inspect.report({"x": np.ones(4)}, ["fp16", "mxfp3"])
    assert "'mxfp3'" in str(info.value) and all(n in str(info.value) for n in inspect.RECIPES)


def test_non_float_tensor_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="'steps'.*int64"):
        inspect.report({"steps": np.arange(4)}, ["fp16"])


def test_nan_filled_and_empty_tensors_are_reported_not_crashing() -> None:
    nan = np.full((4, 32), np.nan, dtype=np.float32)
    empty = np.zeros((0, 32), dtype=np.float32)
    r = inspect.report({"nan/output_grad": nan, "empty": empty}, list(inspect.RECIPES))
    for row in r.where(tensor="nan/output_grad"):
        assert row["nan"] == row["nan_in"] == nan.size and math.isnan(row["sqnr_db"])
        assert row["underflow"] == row["overflow"] == 0
    for row in r.where(tensor="empty"):
        assert row["n"] == 0 and row["underflow_frac"] == 0.0
    assert "nan/output_grad" in str(r)


def test_csv_and_json_hold_every_row() -> None:
    r = inspect.report({"a/input": _wide(7), "a/output_grad": _wide(8)}, ["fp16", "mxfp4"])
    rows = list(csv.DictReader(io.StringIO(r.to_csv())))
    assert [row["recipe"] for row in rows] == [row["recipe"] for row in r.rows]
    assert [int(row["underflow"]) for row in rows] == [row["underflow"] for row in r.rows]
    doc = json.loads(r.to_json())
    assert len(doc["rows"]) == 4 and len(doc["blocks"]) == 2


def test_recommend_picks_the_narrowest_recipe_meeting_the_thresholds() -> None:
    rng = np.random.default_rng(9)
    tensors = {"fc1/input": rng.standard_normal((32, 64)).astype(np.float32),
               "fc1/output_grad": (rng.standard_normal((32, 64)) * 1e-6).astype(np.float32)}
    recipes = ["fp16", "bf16", "fp8_e4m3", "fp8_e4m3_current", "mxfp4"]
    r = inspect.report(tensors, recipes)
    rec = r.recommend(max_underflow=1e-3, min_sqnr_db=15, candidates=recipes)
    assert len(rec.choices) == 2

    def ok(row: dict) -> bool:
        return row["underflow_frac"] <= 1e-3 and row["overflow"] == 0 and row["sqnr_db"] >= 15
    for c in rec.choices:
        rows = {row["recipe"]: row for row in r.where(layer=c.layer, kind=c.kind)}
        assert c.recipe is not None and ok(rows[c.recipe])
        narrower = [n for n in recipes if rows[n]["bits_per_value"] < rows[c.recipe]
                    ["bits_per_value"]]
        assert all(not ok(rows[n]) for n in narrower)
        assert {n for n, _ in c.rejected} >= set(narrower)
    assert rec.choice("fc1", "output_grad").recipe != "fp8_e4m3"  # 1e-6 flushes unscaled
    assert math.log2(rec.loss_scale) == int(math.log2(rec.loss_scale))
    with pytest.raises(ValueError, match="not in the report"):
        r.recommend(candidates=["nvfp4"])


def test_recommend_reasons_read_true_at_the_threshold() -> None:
    """A rejection's numbers carry the digits that show them past the limit: an
    underflow of 0.104% against 0.1% reads "0.104% > 0.10%", never "0.10% > 0.10%"."""
    # 100,000 values, 104 of them far below fp8_e4m3's smallest subnormal (2^-9) and normal
    # in fp16: 0.104% underflow in fp8_e4m3, none in fp16
    x = np.ones(100_000, np.float32)
    x[:104] = 1e-4
    r = inspect.report({"l/input": x}, ["fp8_e4m3", "fp16"])
    rec = r.recommend(max_underflow=1e-3, min_sqnr_db=0, candidates=["fp8_e4m3", "fp16"])
    (why,) = [w for n, w in rec.choice("l", "input").rejected if n == "fp8_e4m3"]
    shown = float(why.split("underflow ")[1].split("%")[0]) / 100
    assert shown > 1e-3 and why.endswith("> 0.10%"), why
    assert rec.choice("l", "input").recipe == "fp16"
