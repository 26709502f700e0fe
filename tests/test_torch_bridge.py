"""lowprec.torch: capture leaves training bit-identical and records what a manual hook
records; round_to equals lowprec.round_to bit for bit; emulate trains; memory is bounded."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lowprec as lp  # noqa: E402
import lowprec.torch as lpt  # noqa: E402


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def _data(n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)


def _train(model, steps: int, ctx=None, scaler=None, lr: float = 0.05):
    x, y = _data()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, grads = [], []
    with ctx if ctx is not None else contextlib.nullcontext():
        for s in range(steps):
            idx = slice((s * 32) % 256, (s * 32) % 256 + 32)
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            (scaler.scale(loss) if scaler else loss).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            losses.append(loss.item())
    return losses, grads


def _hook_count(model) -> int:
    n = 0
    for m in model.modules():
        n += len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
        for p in m.parameters(recurse=False):
            n += len(p._backward_hooks or {})
    return n


def test_training_is_bit_identical_with_capture_and_hooks_are_removed() -> None:
    plain = _model()
    base_losses, base_grads = _train(plain, 12)
    model = _model()
    cap = lpt.capture(model, every=1)
    losses, grads = _train(model, 12, cap)
    assert losses == base_losses
    for a, b in zip(base_grads, grads):
        assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert _hook_count(model) == 0
    # 2 layers x (input, output_grad, weight, weight_grad)
    assert cap.steps == 12 and len(cap.samples) == 12 * 8
    with lpt.capture(_model(), params=None) as everything:
        _train(everything.model, 1)
    assert {k.split("/")[1] for k in everything.samples} == {
        "input@0", "output_grad@0", "weight@0", "weight_grad@0", "bias@0", "bias_grad@0"}


def test_captured_tensors_equal_a_manual_hook() -> None:
    model = _model()
    manual: dict[str, torch.Tensor] = {}
    lin = model[2]

    def fwd(mod, args, out):
        manual["input"] = args[0].detach().clone()
        out.register_hook(lambda g: manual.__setitem__("output_grad", g.detach().clone()))
    h1 = lin.register_forward_hook(fwd)
    h2 = lin.weight.register_hook(lambda g: manual.__setitem__("weight_grad", g.clone()))
    with lpt.capture(model, every=1, max_values=1 << 16) as cap:
        _train(model, 1)
    h1.remove()
    h2.remove()
    for kind in ("input", "output_grad", "weight_grad"):
        np.testing.assert_array_equal(cap.tensors()[f"2/{kind}@0"], manual[kind].numpy())
    assert cap.samples["2/weight@0"].values.shape == (4, 32)


def test_grad_scaler_scale_is_read_and_removed() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1000)
    m1, m2 = _model(), _model()
    with lpt.capture(m1, scaler=scaler) as scaled:
        _train(m1, 3, scaler=scaler)
    with lpt.capture(m2) as plain:
        _train(m2, 3)
    key = "0/weight_grad@2"
    assert scaled.loss_scales()[key] == 2.0**10
    np.testing.assert_array_equal(scaled.samples[key].values / 2.0**10, plain.tensors()[key])
    np.testing.assert_array_equal(scaled.tensors()[key], plain.tensors()[key])
    r = scaled.report(["fp16_loss_scale"])
    assert r.row(key, "fp16_loss_scale")["scale"] == "2^10"


def test_memory_is_bounded_over_many_steps() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 4))
    x = torch.randn(128, 64)
    with lpt.capture(model, every=1, max_values=64, max_steps=5) as cap:
        for _ in range(200):
            model(x).sum().backward()
    assert cap.steps == 200
    kept = {int(k.rsplit("@", 1)[1]) for k in cap.samples}
    assert kept == set(range(195, 200))
    assert all(s.values.size <= 64 for s in cap.samples.values())
    assert 0 < cap.nbytes <= cap.bound_bytes
    w = cap.samples["0/weight@199"].values  # rows of 64: one whole row
    assert w.shape == (1, 64) and any(np.array_equal(w[0], r) for r in
                                      model[0].weight.detach().numpy())
    g = cap.samples["2/input@199"].values  # rows of 256 > 64: an aligned run of one row
    assert g.shape == (1, 64)


def test_every_n_captures_only_those_steps() -> None:
    model = _model()
    with lpt.capture(model, every=5) as cap:
        _train(model, 12)
    assert {int(k.rsplit("@", 1)[1]) for k in cap.samples} == {0, 5, 10}
    rep = cap.report(["fp16", "mxfp4"])
    assert {r["step"] for r in rep.rows} == {0, 5, 10}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16,
                                   torch.float16])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp6_e3m2"])
def test_round_to_equals_lowprec_bit_for_bit(dtype, fmt: str) -> None:
    if dtype in (torch.float16, torch.bfloat16):  # every value of the dtype
        t = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)
    else:
        t = torch.from_numpy(np.random.default_rng(0).standard_normal(1 << 14)
                             * np.exp2(np.random.default_rng(1).integers(-30, 12, 1 << 14)))
        t = t.to(dtype)
    src = t.float().numpy() if dtype in (torch.float16, torch.bfloat16) else t.numpy()
    if not lp.get_format(fmt).has_nan:
        keep = ~np.isnan(src)
        t, src = t[torch.from_numpy(keep)], src[keep]
    got = lpt.round_to(t, fmt)
    assert got.dtype == dtype
    want = np.asarray(lp.round_to(src, fmt), dtype=np.float64)
    np.testing.assert_array_equal(got.double().numpy(), want)


def test_round_to_gradient_is_identity_or_rounded() -> None:
    t = torch.tensor([0.1, 3.0, 1e-6], requires_grad=True)
    (lpt.round_to(t, "fp8_e4m3") * torch.tensor([0.3, 1.0, 7.0])).sum().backward()
    assert t.grad.tolist() == torch.tensor([0.3, 1.0, 7.0]).tolist()
    t.grad = None
    (lpt.round_to(t, "fp8_e4m3", grad="same") * torch.tensor([0.3, 1.0, 7.0])).sum().backward()
    want = lp.round_to(np.array([0.3, 1.0, 7.0], dtype=np.float32), "fp8_e4m3")
    assert t.grad.numpy().tolist() == want.tolist()


def test_round_to_refuses_what_it_cannot_do() -> None:
    with pytest.raises(TypeError, match="int64"):
        lpt.round_to(torch.arange(3), "fp16")
    with pytest.raises(ValueError, match="do not all fit"):
        lpt.round_to(torch.ones(2, dtype=torch.bfloat16), "fp16")
    with pytest.raises(ValueError, match="unknown"):
        lpt.round_to(torch.ones(2), "fp9")


def test_emulate_trains_lists_its_points_and_is_removable() -> None:
    model = _model()
    x, _ = _data(32)
    before = model(x).detach()
    with lpt.emulate(model, "fp8") as emu:
        roles = {(p["layer"], p["role"]) for p in emu.points}
        assert roles == {(lay, r) for lay in ("0", "2")
                         for r in ("input", "weight", "output_grad")}
        out = model(x).detach()
        assert not torch.equal(out, before)
        losses, _ = _train(model, 30, lr=0.1)
    assert losses[-1] < losses[0]
    after = model(x).detach()
    lin = model[0]
    np.testing.assert_array_equal(
        model[2](torch.relu(lin(x))).detach().numpy(), after.numpy())
    assert "forward" not in lin.__dict__
    # Under emulation the inputs of a layer are rounded exactly as lowprec rounds them.
    seen = {}
    h = model[0].register_forward_hook(lambda m, a, o: seen.setdefault("o", o.detach()))
    with lpt.emulate(model, "bf16-master"):
        model(x)
    h.remove()
    w = lp.round_to(model[0].weight.detach().numpy(), "bf16")
    xin = lp.round_to(x.numpy(), "bf16")
    ref = torch.nn.functional.linear(torch.from_numpy(xin), torch.from_numpy(w), model[0].bias)
    np.testing.assert_array_equal(seen["o"].numpy(), ref.detach().numpy())


def test_bad_models_and_empty_captures() -> None:
    with pytest.raises(ValueError, match="no parameters"):
        lpt.capture(torch.nn.ReLU())
    with pytest.raises(ValueError, match=r"not emulated: 0 \(LSTM\)"):
        lpt.emulate(torch.nn.Sequential(torch.nn.LSTM(2, 2)), "fp16-amp", strict=True)
    with pytest.warns(UserWarning, match=r"not emulated: 0 \(LSTM\)"):
        lpt.emulate(torch.nn.Sequential(torch.nn.LSTM(2, 2)), "fp16-amp").remove()
    # run, the LSTM's own op is the module already listed, not a second entry
    lstm = torch.nn.Sequential(torch.nn.LSTM(2, 2))
    with pytest.warns(UserWarning) as warned:
        with lpt.emulate(lstm, "fp16-amp") as emu:
            lstm(torch.ones(3, 1, 2))
    assert emu.not_emulated == ["0 (LSTM)"]
    assert [str(w.message).split(" (lowprec")[0] for w in warned] == ["not emulated: 0 (LSTM)"]
    with pytest.raises(ValueError, match="nothing was captured"):
        with lpt.capture(_model()) as cap:
            pass
        cap.report()
    with pytest.raises(ValueError, match="every"):
        lpt.capture(_model(), every=0)
    with pytest.raises(ValueError, match="do not all fit"):
        lpt.emulate(_model().to(torch.bfloat16), "fp16-amp")


def test_report_takes_torch_tensors_nan_filled_and_bf16() -> None:
    r = lp_inspect_report({"a/output_grad": torch.full((4, 32), float("nan")),
                           "b/weight": torch.ones(3, 32, dtype=torch.bfloat16)})
    assert r.row("a/output_grad", "fp16")["nan"] == 128
    assert r.row("b/weight", "fp8_e4m3")["sqnr_db"] == float("inf")


def lp_inspect_report(tensors):
    from lowprec import inspect

    return inspect.report(tensors)


def test_import_lowprec_does_not_import_torch() -> None:
    code = "import sys, lowprec, lowprec.inspect; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
