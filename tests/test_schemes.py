"""lowprec.schemes: one name table, accepted by every part (or refused in the table).

Every scheme is measured by ``inspect.report``, chosen by ``recommend``, held by
``policy()`` (``Quant.from_scheme``), run by ``lowprec.torch.emulate`` (rounding exactly
as the report measured it), listed and accepted by ``lowprec inspect``, and accepted by
``quant_error`` unless the table itself says why not. Report counts are honest about
±inf and NaN inputs under every scheme, and ``recommend`` honours its thresholds or
says what it fell back to.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

from lowprec import inspect, quant_error
from lowprec.cli import main
from lowprec.inspect.recipes import apply
from lowprec.schemes import (
    BLOCK_VARIANT_KINDS,
    KINDS,
    SCHEMES,
    Scheme,
    get_scheme,
    list_schemes,
)
from lowprec.train import Quant

NAMES = list(SCHEMES) + ["bf16_sr", "fp8_e4m3_current_sr", "mxfp4_rceil_sr", "nvfp4_sr",
                        "nvfp4_1x16_sr", "nvfp4_16x16_sr", "nvfp4_rht_sr", "nvfp4_b32_sr",
                        "mxfp4_ue4m3_sr", "mxfp4_ue5m3_sr", "nvfp4_ue5m3_sr"]


def _x(shape=(4, 64), seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(np.float32)


def test_the_table_is_one_vocabulary():
    assert list(list_schemes()) == list(SCHEMES)
    assert inspect.RECIPES is SCHEMES and inspect.Recipe is Scheme
    assert {s.kind for s in SCHEMES.values()} == set(KINDS)
    for name in NAMES:
        s = get_scheme(name)
        q = Quant.from_scheme(name)
        # the Quant names its scheme back (fp16 under a loss scale is stored as fp16)
        assert q.scheme == (name if s.kind != "loss_scale" else "fp16")
        assert (s.mode == "stochastic") == name.endswith("_sr")
    with pytest.raises(ValueError, match="unknown scheme 'fp8'.*did you mean"):
        get_scheme("fp8")
    with pytest.raises(ValueError, match="unknown scheme 'fp16_loss_scale_sr'"):
        get_scheme("fp16_loss_scale_sr")


@pytest.mark.parametrize("name", list(BLOCK_VARIANT_KINDS))
def test_the_block_variants_store_what_their_entry_says(name):
    """Each E2M1 block variant: its block, bits and values are lowprec.nvfp4.quantize's
    with the entry's block size, scale format and tensor scale (or none)."""
    from lowprec import nvfp4

    block, scale_format, tensor_scale = BLOCK_VARIANT_KINDS[name]
    s = get_scheme(name)
    assert (s.kind, s.block_size, s.bits, s.element.name) == (name, block, 4 + 8 / block,
                                                              "fp4_e2m1")
    x = _x((3, 96), 7) * 1000
    t = nvfp4.quantize(x, block_size=block, scale_format=scale_format,
                       global_scale=None if tensor_scale else 1.0)
    out = apply(s, x)
    assert np.array_equal(out.q, t.dequantize())
    assert out.block_size == block and np.array_equal(out.block_scales, t.scales)
    assert math.isnan(out.scale) != tensor_scale  # the FP32 tensor scale, or none
    row = quant_error.compare_schemes(x, [name])[0]
    assert row.bits_per_value == pytest.approx(8.0 * t.nbytes / x.size - (0 if tensor_scale
                                                                          else 32 / x.size))


@pytest.mark.parametrize("name", NAMES)
def test_every_name_is_measured_chosen_held_and_run_as_measured(name):
    torch = pytest.importorskip("torch")
    import lowprec.torch as lpt

    x = _x()
    rep = inspect.report({"fc/input": x}, [name])
    row = rep.row("fc/input", name)
    assert row["n"] == x.size
    rec = rep.recommend(max_underflow=1.0, min_sqnr_db=-math.inf)
    assert rec.choice("fc", "input").recipe == name
    policy = rec.policy()
    assert policy.layers == (("fc", "input", Quant.from_scheme(name)),)
    fc = torch.nn.Linear(64, 64)
    with torch.no_grad():  # the identity: the output is the rounded input, exactly
        fc.weight.copy_(torch.eye(64))
        fc.bias.zero_()
    model = torch.nn.Sequential(OrderedDict(fc=fc))
    with lpt.emulate(model, policy) as emu, torch.no_grad():
        seen = {"x": model(torch.from_numpy(x)).numpy()}
    assert [(p["layer"], p["role"]) for p in emu.points] == [("fc", "input")]
    if get_scheme(name).mode == "rne":  # bit for bit what the report measured
        want = np.asarray(apply(get_scheme(name), x).q, np.float32)
        np.testing.assert_array_equal(seen["x"], want)
    refused = dict(get_scheme(name).refused)
    if "quant_error" in refused:
        with pytest.raises(ValueError, match="refused here"):
            quant_error.parse_scheme(name)
    else:
        assert quant_error.compare_schemes(x, [name])[0].scheme == name


def test_the_cli_lists_and_accepts_every_name(tmp_path, capsys):
    assert main(["inspect", "--list-recipes"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in SCHEMES) and "NAME_sr" in listed
    path = tmp_path / "t.npz"
    np.savez(path, **{"fc/input": _x()})
    out = tmp_path / "out"
    assert main(["inspect", str(path), "--out", str(out), "--recipes", ",".join(NAMES)]) == 0
    text = (out / "report.csv").read_text()
    assert all(f",{name}," in text for name in NAMES)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_inf_and_nan_inputs_are_counted_under_every_scheme(name):
    finite = _x((2, 64), 3)
    x = finite.copy()
    x[0, 5], x[1, 7], x[1, 40] = np.inf, -np.inf, np.nan
    row = inspect.report({"t/input": x}, [name], loss_scale=1.0).row("t/input", name)
    assert row["inf_in"] == 2 and row["nan_in"] == 1
    assert row["overflow"] >= 2 and row["nan"] >= 1
    if get_scheme(name).kind in ("cast", "loss_scale"):  # elementwise: the rest unchanged
        ref = finite.copy()
        ref[0, 5] = ref[1, 7] = ref[1, 40] = 0.0
        want = inspect.report({"t/input": ref}, [name], loss_scale=1.0).row("t/input", name)
        assert row["sqnr_db"] == want["sqnr_db"]  # over the finite values only
        assert row["overflow"] == 2 + want["overflow"]


def test_current_scaling_counts_an_inf_that_it_saturates():
    x = np.array([1.0, np.inf, 0.5], np.float32)
    row = inspect.report({"t/input": x}, ["fp8_e4m3_current"]).row("t/input", "fp8_e4m3_current")
    out = apply(get_scheme("fp8_e4m3_current"), x).q
    assert out[1] == 448.0  # saturated: the number it became is finite...
    assert (row["overflow"], row["inf_in"], row["sqnr_db"]) == (1, 1, math.inf)  # ...counted


def test_recommend_says_when_nothing_met_and_what_it_fell_back_to():
    rng = np.random.default_rng(0)
    tensors = {"a/input": rng.standard_normal((8, 64)).astype(np.float32),
               "b/input": (rng.standard_normal((8, 64)) * 1e-6).astype(np.float32)}
    rep = inspect.report(tensors, ["fp8_e4m3", "fp8_e4m3_current", "mxfp4"])
    rec = rep.recommend(max_underflow=1e-3, min_sqnr_db=25)
    a, b = rec.choice("a", "input"), rec.choice("b", "input")
    assert a.recipe == "fp8_e4m3"  # b underflows in plain E4M3: it needs the scale
    assert b.recipe == "fp8_e4m3_current"
    for c in (a, b):
        assert c.underflow_frac <= 1e-3 and c.sqnr_db >= 25
    assert dict(((la, k), q.scheme) for la, k, q in rec.policy().layers) == {
        ("a", "input"): "fp8_e4m3", ("b", "input"): "fp8_e4m3_current"}
    strict = rep.recommend(max_underflow=0.0, min_sqnr_db=60)
    assert [(c.layer, c.recipe) for c in strict.unmet] == [("a", None), ("b", None)]
    assert "kept in float32" in strict.choice("a", "input").reason
    assert "no candidate met the thresholds for 2 tensor(s)" in str(strict)
    assert strict.policy().layers == (("a", "input", None), ("b", "input", None))
