"""Per-GEMM-direction formats (fprop / dgrad / wgrad, Transformer Engine's recipes).

The trainer's GEMM node (lowprec.train.gemm) and lowprec.torch.emulate must round
exactly the operands that a hand-written reference rounds with the recipe functions
(lowprec.recipes.nvfp4.quantize_operand, lowprec.recipes.fp8.mxfp8_operands,
lowprec.scaling), each along its GEMM's reduction axis, and multiply them in the
layout each GEMM has: bit for bit. The vocabulary (schemes.parse_gemms, Policy.gemms,
Policy.layers) accepts the same names everywhere and refuses what cannot work.
"""

from __future__ import annotations

import numpy as np
import pytest

from lowprec import scaling
from lowprec._kernels.gemm import matmul_in_order
from lowprec.autograd import Tensor
from lowprec.recipes import fp8
from lowprec.recipes import nvfp4 as R
from lowprec.schemes import GEMM_OPERANDS, get_scheme, parse_gemms
from lowprec.train import Policy, Quant, get_policy, train
from lowprec.train.gemm import gemm, gemm_rounders
from lowprec.train.model import Network

F32 = np.float32
M, K, N = 32, 64, 32  # tokens (a multiple of 16: the RHT runs along it), in, out
HYBRID = "input=fp8_e4m3_current,weight=fp8_e4m3_current,output_grad=fp8_e5m2_current"


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, K)).astype(F32)
    w = (rng.standard_normal((K, N)) * 0.2).astype(F32)  # the trainer's layout: K x N
    g = (rng.standard_normal((M, N)) * 1e-3).astype(F32)
    g[3, :16] *= F32(40)  # one outlier block: what the RHT spreads
    return x, w, g


def _trainer(policy: Policy, x, w, g, seed: int):
    rounders = gemm_rounders(policy.gemm_quants(), np.random.default_rng(seed))
    h, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    z = gemm(h, wt, rounders)
    z.backward(g)
    return z.data, h.grad, wt.grad


def _deq(t) -> np.ndarray:
    """The trainer's convention: the exact (float64) dequantized value, rounded once to
    float32."""
    return np.asarray(t.dequantize(), F32)


def _nvfp4_reference(x, w_nk, g, seed: int):
    """The recipe's six operands in TE's layout (X: M x K, W: N x K, dY: M x N), with the
    stochastic rounding bytes drawn in the documented order: dgrad's dY, then wgrad's."""
    rng = np.random.default_rng(seed)
    xf = _deq(R.quantize_operand(x, "fprop_input"))
    wq = _deq(R.quantize_operand(w_nk, "weight"))  # fprop and dgrad: the same 16x16 blocks
    gd = _deq(R.quantize_operand(g, "dgrad_grad", rng=rng))
    gw = _deq(R.quantize_operand(g, "wgrad_grad", rng=rng))  # N x M, rotated along M
    xw = _deq(R.quantize_operand(x, "wgrad_input"))  # K x M, rotated along M
    return xf, wq, gd, gw, xw


def test_trainer_gemms_read_the_nvfp4_recipe_operands_bit_for_bit():
    x, w, g = _data()
    z, dx, dw = _trainer(get_policy("nvfp4"), x, w, g, seed=5)
    xf, wq, gd, gw, xw = _nvfp4_reference(x, w.T.copy(), g, seed=5)
    np.testing.assert_array_equal(z, matmul_in_order(xf, wq.T))           # fprop
    np.testing.assert_array_equal(dx, matmul_in_order(gd, wq))            # dgrad
    np.testing.assert_array_equal(dw, matmul_in_order(xw, gw.T))          # wgrad
    # not vacuous: every GEMM differs from the plain one, and the rotated wgrad is still
    # an estimate of dW (the rotation cancels in the product)
    exact = x.astype(np.float64).T @ g
    assert not np.array_equal(z, matmul_in_order(x, w))
    assert not np.array_equal(dx, matmul_in_order(g, w.T))
    assert np.linalg.norm(dw - exact) < 0.3 * np.linalg.norm(exact)
    # the stochastic rounding draws from the run's generator: another seed, another dgrad
    assert not np.array_equal(dx, _trainer(get_policy("nvfp4"), x, w, g, seed=6)[1])


def test_trainer_gemms_read_te_hybrid_fp8_operands():
    """E4M3 forward tensors, E5M2 gradients, current scaling (TE's HYBRID format)."""
    x, w, g = _data(1)
    policy = Policy("hybrid", "").with_gemms(HYBRID)
    z, dx, dw = _trainer(policy, x, w, g, seed=0)

    def q(a, fmt):
        return np.asarray(scaling.quantize_per_tensor(a, fmt).dequantize(), F32)

    x4, w4, g5 = q(x, "fp8_e4m3"), q(w, "fp8_e4m3"), q(g, "fp8_e5m2")
    np.testing.assert_array_equal(z, matmul_in_order(x4, w4))
    np.testing.assert_array_equal(dx, matmul_in_order(g5, w4.T))
    np.testing.assert_array_equal(dw, matmul_in_order(x4.T, g5))
    assert not np.array_equal(g5, q(g, "fp8_e4m3"))  # the gradient's format mattered


def test_trainer_gemms_read_mxfp8_along_each_reduction_axis_as_torchao():
    x, w, g = _data(2)
    z, dx, dw = _trainer(get_policy("mxfp8-torchao"), x, w, g, seed=0)
    ops = fp8.mxfp8_operands(x, w.T.copy(), g, scale_rule="floor")  # torchao's MXLinear
    (xf, wf), (gd, wd), (gw, xw) = ([_deq(t) for t in ops[k]] for k in ("fprop", "dgrad",
                                                                       "wgrad"))
    np.testing.assert_array_equal(z, matmul_in_order(xf, wf.T))
    np.testing.assert_array_equal(dx, matmul_in_order(gd, wd))
    np.testing.assert_array_equal(dw, matmul_in_order(xw.T, gw))
    assert not np.array_equal(wf, wd)  # W is quantized once per direction (1x32 blocks)


def test_the_network_places_gemm_formats_and_keeps_the_last_layer():
    policy = get_policy("nvfp4")
    assert policy.keep_last == 1
    net = Network((64, 32, 32, 10), policy, np.random.default_rng(0))
    gemms = [layer.train_rounds.gemm for layer in net.layers]
    assert [r is not None for r in gemms] == [True, True, False]
    assert [layer.eval_rounds.gemm is not None for layer in net.layers] == [True, True, False]
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(F32)
    node, products = net(x), []
    while node.parents:  # down the first parents, from the output to the input
        if node.op in ("matmul", "gemm"):
            products.append(node.op)
        node = node.parents[0]
    # the last layer multiplies its bf16 operands; the first two run the NVFP4 GEMMs
    assert products == ["matmul", "gemm", "gemm"]


def test_the_presets_train_close_to_fp32_and_their_gemm_formats_matter():
    def run(p):
        return train(p, steps=150, seed=0, eval_every=150, record=False)

    ref, bf16 = run("fp32").summary["final_loss"], run("bf16-master")
    for preset in ("nvfp4", "mxfp8-torchao"):
        r = run(preset)
        assert r.summary["final_loss"] < 1.1 * ref  # 1.106 / 1.076 against 1.051
        # the same roles as bf16-master; only the GEMM formats differ, and they count
        assert r.summary["final_loss"] != bf16.summary["final_loss"]
        assert Policy.from_dict(r.policy_config) == get_policy(preset)  # run.json round trip


def test_emulate_gemms_read_the_nvfp4_recipe_operands_bit_for_bit():
    torch = pytest.importorskip("torch")
    import lowprec.torch as lpt

    x, _, g = _data(3)
    fc = torch.nn.Linear(K, N)
    with torch.no_grad():
        fc.weight.copy_(torch.from_numpy(_data(4)[1].T.copy()))
    model = torch.nn.Sequential(fc)
    policy = Policy("nvfp4-gemms", "", gemms=get_policy("nvfp4").gemms)
    xt = torch.from_numpy(x).requires_grad_(True)
    with lpt.emulate(model, policy, seed=7) as emu:
        y = model(xt)
        y.backward(torch.from_numpy(g))
    assert {p["role"] for p in emu.points} == set(GEMM_OPERANDS)
    w_nk = fc.weight.detach().numpy()
    xf, wq, gd, gw, xw = _nvfp4_reference(x, w_nk, g, seed=7)
    t = torch.from_numpy

    def c(a):
        return t(np.ascontiguousarray(a))

    with torch.no_grad():
        y_ref = torch.nn.functional.linear(c(xf), c(wq), fc.bias)
        dx_ref = c(gd) @ c(wq)
        dw_ref = c(gw.T).T @ c(xw.T)
    np.testing.assert_array_equal(y.detach().numpy(), y_ref.numpy())
    np.testing.assert_array_equal(xt.grad.numpy(), dx_ref.numpy())
    np.testing.assert_array_equal(fc.weight.grad.numpy(), dw_ref.numpy())
    np.testing.assert_array_equal(fc.bias.grad.numpy(), t(g).sum(0).numpy())


def test_emulate_keeps_the_last_linear_layers_and_takes_per_layer_gemm_entries():
    torch = pytest.importorskip("torch")
    import lowprec.torch as lpt

    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8))
    x = torch.randn(16, 32)
    with lpt.emulate(model, "nvfp4") as emu:
        model(x).sum().backward()
    layers = {p["layer"] for p in emu.points if p["role"] in GEMM_OPERANDS}
    assert layers == {"0", "2"}  # the last Linear ("4") stays bf16
    # a per-layer entry overrides the policy's GEMM format for that layer only
    policy = get_policy("bf16-master").replace(
        layers=(("2", "wgrad.input", Quant.from_scheme("nvfp4_rht")),
                ("2", "wgrad.output_grad", Quant.from_scheme("nvfp4_rht_sr"))))
    with lpt.emulate(model, policy) as emu:
        model(x).sum().backward()
    assert sorted((p["layer"], p["role"]) for p in emu.points if "." in p["role"]) == [
        ("2", "wgrad.input"), ("2", "wgrad.output_grad")]


def test_the_vocabulary_and_its_refusals():
    g = parse_gemms("fprop=nvfp4_1x16,weight=nvfp4_16x16,dgrad.output_grad=nvfp4_1x16_sr")
    # "weight" names the weight in fprop and dgrad; wgrad does not read the weight
    assert {k: v.name for k, v in g.items()} == {
        "fprop.input": "nvfp4_1x16", "fprop.weight": "nvfp4_16x16",
        "dgrad.weight": "nvfp4_16x16", "dgrad.output_grad": "nvfp4_1x16_sr"}
    later = parse_gemms("output_grad=fp8_e5m2_current,wgrad.output_grad=nvfp4_rht_sr")
    assert later["dgrad.output_grad"].name == "fp8_e5m2_current"  # later entries win
    assert later["wgrad.output_grad"].name == "nvfp4_rht_sr"
    assert parse_gemms({"wgrad": None}) == {"wgrad.output_grad": None, "wgrad.input": None}
    with pytest.raises(ValueError, match="unknown operand 'bgrad'.*fprop, dgrad, wgrad"):
        parse_gemms("bgrad=fp8_e4m3")
    with pytest.raises(ValueError, match="needs '=SCHEME'"):
        parse_gemms("fprop")
    with pytest.raises(ValueError, match="unknown scheme 'fp9'"):
        parse_gemms("fprop=fp9")
    with pytest.raises(ValueError, match="unknown scheme 'nvfp4_1x16_4over6_sr'"):
        get_scheme("nvfp4_1x16_4over6_sr")  # 4over6 chooses between RNE candidates
    with pytest.raises(ValueError, match="rotates one operand.*both"):
        Policy("x", "").with_gemms("wgrad.input=nvfp4_rht")
    with pytest.raises(ValueError, match="rotates one operand"):
        get_policy("nvfp4").replace(layers=(("fc1", "wgrad.input", None),)).gemm_quants("fc1")
    with pytest.raises(ValueError, match="gemms holds"):
        Policy("x", "", gemms=(("fprop.bias", Quant("bf16")),))
    with pytest.raises(ValueError, match="keep_last"):
        Policy("x", "", keep_last=-1)
    with pytest.raises(ValueError, match="mode must be 'rne'"):
        Quant("nvfp4", "stochastic", "nvfp4_1x16_4over6")
    # the transform's groups of 16 along the tokens: a batch of 5 is refused, clearly
    r = gemm_rounders(get_policy("nvfp4").gemm_quants(), np.random.default_rng(0))
    z = gemm(Tensor(np.ones((5, 16), F32)), Tensor(np.ones((16, 16), F32),
                                                   requires_grad=True), r)
    with pytest.raises(ValueError, match=r"multiple of 16 \(for a wgrad operand: the tokens"):
        z.backward(np.ones((5, 16), F32))


def test_the_recipe_schemes_measure_the_recipe_quantizers():
    """inspect's apply (what report measures and emulate rounds) against the recipe's
    functions called directly; nvfp4_1x16 equals lowprec.nvfp4 on a finite tensor."""
    from lowprec import nvfp4
    from lowprec.hadamard import rht
    from lowprec.inspect.recipes import apply

    x = (np.random.default_rng(9).standard_normal((32, 64))
         * np.exp2(np.random.default_rng(10).integers(-6, 7, (32, 64)))).astype(F32)

    def q(name):
        return apply(get_scheme(name), x).q

    np.testing.assert_array_equal(q("nvfp4_1x16"), R.quantize(x).dequantize())
    np.testing.assert_array_equal(q("nvfp4_1x16"), nvfp4.quantize(x).dequantize())
    np.testing.assert_array_equal(q("nvfp4_16x16"), R.quantize(x, (16, 16)).dequantize())
    np.testing.assert_array_equal(q("nvfp4_16x16_4over6"),
                                  R.quantize(x, (16, 16), four_over_six=True).dequantize())
    np.testing.assert_array_equal(q("nvfp4_rht"),
                                  R.unrotate(R.quantize(rht(x)).dequantize()))
    sr = apply(get_scheme("nvfp4_1x16_sr"), x, rng=np.random.default_rng(4)).q
    np.testing.assert_array_equal(sr, R.quantize(x, rounding="stochastic",
                                                 rng=np.random.default_rng(4)).dequantize())
    # the rotated-back values approximate x about as well as the unrotated quantizer
    err = [np.linalg.norm(q(n) - x) / np.linalg.norm(x) for n in ("nvfp4_1x16", "nvfp4_rht")]
    assert 0 < err[1] < 2 * err[0]


def test_lowprec_train_takes_gemm_formats(tmp_path, capsys):
    from lowprec.cli import main
    from lowprec.train import load_run

    out = tmp_path / "runs"
    assert main(["train", "--policy", "bf16-master", "--gemms", HYBRID, "--steps", "3",
                 "--out", str(out)]) == 0
    run = load_run(out / "bf16-master+gemms")
    got = Policy.from_dict(run.policy_config)
    assert got == get_policy("bf16-master").with_gemms(HYBRID, name="bf16-master+gemms")
    assert dict(got.gemms)["wgrad.output_grad"] == Quant("fp8_e5m2", scaling="current")
    capsys.readouterr()
    assert main(["train", "--policy", "nvfp4", "--gemms", "bgrad=fp8_e4m3"]) == 2
    err = capsys.readouterr().err
    assert "unknown operand 'bgrad'" in err and "Traceback" not in err
    assert main(["train", "--policy", "nvfp4", "--gemms", "wgrad.input=nvfp4_1x16"]) == 2
    assert "rotates one operand" in capsys.readouterr().err


def test_cost_classes_the_gemms_by_what_they_read():
    from lowprec.train.cost import estimate

    nv = estimate((64, 64, 64, 10), "nvfp4", batch=64)
    assert [r.compute_class for r in nv.rows] == ["fp4", "fp4", "fp16"]  # last: bf16
    bf16 = estimate((64, 64, 64, 10), "bf16-master", batch=64)
    assert [r.compute_class for r in bf16.rows] == ["fp16"] * 3
    assert nv.rows[0].bytes_moved < bf16.rows[0].bytes_moved  # 4.5-bit operands, not 16
    roles = estimate((64, 64, 64, 10), get_policy("nvfp4").replace(gemms=()), batch=64)
    assert nv.rows[2] == roles.rows[2]  # the kept layer: its stored (bf16) operands
