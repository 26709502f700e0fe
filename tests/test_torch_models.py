"""lowprec.torch on real model shapes: an MLP, a CNN (Conv2d, BatchNorm, pooling, Linear)
and an nn.TransformerEncoderLayer, under float32 and bfloat16 autocast.

* The README's PyTorch block runs as written on each (capture with a GradScaler, report,
  recommend, policy, emulate).
* Under each preset the emulated forward equals a hand-written reference that rounds the
  same tensors with ``lp.round_to`` / ``mx.quantize`` (bit for bit), and differs from the
  float32 forward.
* Capture of a MultiheadAttention records its in- and out-projection weights, inputs and
  gradients, and training with and without capture is bit-identical.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lowprec as lp  # noqa: E402
import lowprec.torch as lpt  # noqa: E402
from lowprec import mx  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 4 * 4, 4)

    def forward(self, x):
        return self.fc(F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))


class Transformer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.enc(x).mean(1))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


MODELS = {"mlp": (_mlp, (32, 16)), "cnn": (CNN, (16, 1, 8, 8)),
          "transformer": (Transformer, (8, 5, 16))}


def _make(name: str):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    g = torch.Generator().manual_seed(1)
    return make(), torch.randn(*shape, generator=g), torch.randint(0, 4, (shape[0],), generator=g)


def _autocast(on: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=on)


def _train(model, x, y, steps, autocast, scaler=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        with _autocast(autocast):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses


# ------------------------------------------------------------------ the README block
def _readme_block() -> str:
    blocks = re.findall(r"```py\n(.*?)```", README.read_text(), flags=re.DOTALL)
    block = next(b for b in blocks if "lpt.capture" in b)
    assert block.count("...  #") == 2
    return block


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
@pytest.mark.parametrize("name", list(MODELS))
def test_readme_block_runs_as_written(name, autocast):
    model, x, y = _make(name)
    scaler = torch.amp.GradScaler("cpu")
    code = _readme_block().replace("...  #", "train()  #")
    ns = {"model": model, "scaler": scaler,
          "train": lambda: _train(model, x, y, 3, autocast, scaler)}
    exec(compile(code, str(README), "exec"), ns)  # noqa: S102 (our README)
    rec = ns["rec"]
    policy = rec.policy()
    # every tensor measured has its choice in the policy, and the choice met the limits
    assert {(c.layer, c.kind) for c in rec.choices} >= {
        (layer, kind) for layer, kind, _ in policy.layers}
    for c in rec.choices:
        if c.recipe is not None:
            assert c.underflow_frac <= 1e-3 and c.sqnr_db >= 20
    assert all(np.isfinite(p.detach().numpy()).all() for p in model.parameters())


# ---------------------------------------------- emulation against a hand-written reference
def _rounder(preset: str):
    """The rounding each preset applies to a forward tensor, by hand."""
    def r(t):
        a = t.detach().float().numpy()
        if preset == "bf16-master":
            out = lp.round_to(a, "bf16")
        elif preset == "fp8":  # delayed scaling's first step: scale 1, saturating
            out = lp.round_to(a, "fp8_e4m3", saturate=True)
        else:
            out = mx.quantize(a, "mxfp8_e4m3", axis=-1).dequantize()
        return torch.from_numpy(np.asarray(out, np.float32)).to(t.dtype)
    return r


def _ref_forward(name, model, x, preset, autocast):
    """The model's forward written out op by op, rounding what the preset rounds: an
    unscaled format rounds the operand as the op computes it (autocast's dtype); a scaled
    one (fp8's delayed scaling, MX) rounds it in float32 and the product is formed in
    float32, its result cast to the dtype the op gives (an FP8/MX GEMM)."""
    rnd = _rounder(preset)
    low = torch.bfloat16 if autocast else torch.float32
    scaled = preset != "bf16-master"

    def mm(func, a, b, *rest, tb=lambda t: t):
        if scaled and autocast:
            with torch.autocast("cpu", enabled=False):
                extra = [r.float() if isinstance(r, torch.Tensor) else r for r in rest]
                return func(rnd(a.float()), tb(rnd(b.float())), *extra).to(low)
        return func(rnd(a.to(low)), tb(rnd(b.to(low))), *rest)

    if name == "mlp":
        h = torch.relu(mm(F.linear, x, model[0].weight, model[0].bias))
        return mm(F.linear, h, model[2].weight, model[2].bias)
    if name == "cnn":
        c = mm(F.conv2d, x, model.conv.weight, model.conv.bias, 1, 1)
        bn = model.bn
        h = F.batch_norm(c, bn.running_mean.clone(), bn.running_var.clone(), bn.weight, bn.bias,
                         True, bn.momentum, bn.eps)
        h = F.max_pool2d(torch.relu(h), 2).flatten(1)
        return mm(F.linear, h, model.fc.weight, model.fc.bias)
    enc, mha = model.enc, model.enc.self_attn
    N, L, E = x.shape
    H, D = mha.num_heads, E // mha.num_heads
    xt = x.transpose(1, 0)
    proj = mm(F.linear, xt, mha.in_proj_weight, mha.in_proj_bias)
    proj = proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    q, k, v = (proj[i].view(L, N * H, D).transpose(0, 1).view(N, H, L, D) for i in range(3))
    s = mm(torch.matmul, q, k, tb=lambda t: t.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    p = torch.softmax(s, dim=-1)
    o = mm(torch.matmul, p, v).permute(2, 0, 1, 3).reshape(L * N, E)
    sa = mm(F.linear, o, mha.out_proj.weight, mha.out_proj.bias).view(L, N, E).transpose(1, 0)
    h = enc.norm1(x + sa)
    ff = mm(F.linear, torch.relu(mm(F.linear, h, enc.linear1.weight, enc.linear1.bias)),
            enc.linear2.weight, enc.linear2.bias)
    h = enc.norm2(h + ff)
    return mm(F.linear, h.mean(1), model.head.weight, model.head.bias)


# bf16-master under bf16 autocast rounds nothing more than autocast does: left out
CASES = [(n, p, a) for n in MODELS for p in ("bf16-master", "fp8", "mxfp8")
         for a in (False, True) if not (a and p == "bf16-master")]


@pytest.mark.parametrize("name, preset, autocast", CASES)
def test_emulated_forward_equals_a_hand_written_reference(name, preset, autocast):
    model, x, _ = _make(name)
    with torch.no_grad():
        fp32 = model(x)
    ref_model = copy.deepcopy(model)
    with torch.no_grad(), _autocast(autocast):
        want = _ref_forward(name, ref_model, x, preset, autocast)
    with lpt.emulate(model, preset) as emu, _autocast(autocast):
        got = model(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.detach().float().numpy(), want.float().numpy())
    assert not torch.equal(got.detach().float(), fp32)
    layers = {p["layer"] for p in emu.points}
    if name == "transformer":
        assert {"enc.self_attn", "enc.self_attn.out_proj", "enc.self_attn.scores",
                "enc.self_attn.values", "enc.linear1", "enc.linear2", "head"} <= layers
        assert {"softmax", "LayerNorm"} <= emu.stated
    assert emu.not_emulated == []


def test_fp16_autocast_and_formats_that_would_round_twice():
    model, x, _ = _make("mlp")
    ref_model = copy.deepcopy(model)
    with lpt.emulate(model, "bf16-master"), torch.autocast("cpu", dtype=torch.float16):
        with pytest.raises(ValueError, match="bf16 do not all fit torch.float16"):
            model(x)
    with lpt.emulate(model, "fp8"), torch.autocast("cpu", dtype=torch.float16):
        got = model(x)
    with torch.no_grad(), torch.autocast("cpu", enabled=False):  # fp8: a float32 product
        r8 = _rounder("fp8")
        h = torch.relu(F.linear(r8(x), r8(ref_model[0].weight), ref_model[0].bias)
                       .to(torch.float16))
        want = F.linear(r8(h.float()), r8(ref_model[2].weight), ref_model[2].bias)
    assert got.dtype == torch.float16
    np.testing.assert_array_equal(got.detach().float().numpy(),
                                  want.to(torch.float16).float().numpy())
    with pytest.raises(ValueError, match="do not all fit torch.bfloat16"):
        with lpt.emulate(model, "fp16-amp"), _autocast(True):
            model(x)


@pytest.mark.parametrize("conv, shape, fn", [
    (torch.nn.Conv1d(3, 4, 3), (2, 3, 9), F.conv1d),
    (torch.nn.Conv3d(2, 3, 2), (1, 2, 4, 4, 4), F.conv3d),
    (torch.nn.ConvTranspose2d(2, 3, 2), (1, 2, 5, 5), F.conv_transpose2d)],
    ids=["conv1d", "conv3d", "conv_transpose2d"])
def test_convolutions_and_embeddings_round_as_the_policy_says(conv, shape, fn):
    rnd = _rounder("bf16-master")
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = fn(rnd(x), rnd(conv.weight), conv.bias)
        with lpt.emulate(conv, "bf16-master") as emu:
            got = conv(x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not torch.equal(got, conv(x))
    assert {p["role"] for p in emu.points} >= {"input", "weight", "output_grad"}
    emb = torch.nn.Embedding(10, 8)
    idx = torch.tensor([[1, 2, 9]])
    with lpt.emulate(emb, "mxfp8") as emu:
        got = emb(idx)
    table = mx.quantize(emb.weight.detach().numpy(), "mxfp8_e4m3", axis=-1).dequantize()
    np.testing.assert_array_equal(got.detach().numpy(), np.asarray(table, np.float32)[idx])
    assert ("model", "weight") in {(p["layer"], p["role"]) for p in emu.points}


def test_sdpa_in_your_own_code_is_two_rounded_matmuls():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    lin = torch.nn.Linear(8, 8)

    class Attn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = lin

        def forward(self, q, k, v):
            return self.proj(F.scaled_dot_product_attention(q, k, v))

    m = Attn()
    rnd = _rounder("bf16-master")
    with torch.no_grad():
        p = torch.softmax(torch.matmul(rnd(q), rnd(k).transpose(-2, -1)) / math.sqrt(8), -1)
        want = F.linear(rnd(torch.matmul(rnd(p), rnd(v))), rnd(lin.weight), lin.bias)
        with lpt.emulate(m, "bf16-master") as emu:
            got = m(q, k, v)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert {"model.scores", "model.values", "proj"} <= {p["layer"] for p in emu.points}
    with lpt.capture(m) as cap:
        m(q.requires_grad_(), k, v).sum().backward()
    assert {"model.scores/input@0", "model.scores/input_b@0", "model.values/input_b@0",
            "model.values/output_grad@0", "proj/input@0"} <= set(cap.samples)


def test_emulate_sees_functional_calls_and_refuses_what_it_cannot_round():
    w = torch.nn.Parameter(torch.randn(8, 8))

    class Functional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = w

        def forward(self, x):
            h = torch.einsum("ij,kj->ik", x, self.w) @ torch.ones(8, 8)
            return torch.bmm(h.unsqueeze(0), h.t().unsqueeze(0))

    m = Functional()
    x = torch.full((2, 8), 0.1)
    with lpt.emulate(m, "bf16-master") as emu:
        m(x)
    sites = {(p["layer"], p["role"]) for p in emu.points}
    assert {("model", "input"), ("model", "weight"), ("model.matmul", "input"),
            ("model.matmul", "input_b"), ("model.bmm", "input")} <= sites

    class Tensordot(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.tensordot(self.fc(x), x, dims=1)

    t = Tensordot()
    with pytest.raises(ValueError, match="not emulated: tensordot"):
        with lpt.emulate(t, "fp8", strict=True):
            t(torch.ones(4, 4))
    t = Tensordot()
    with pytest.warns(UserWarning, match="not emulated: tensordot"):
        with lpt.emulate(t, "fp8") as emu:
            t(torch.ones(4, 4))
    assert emu.not_emulated == ["tensordot"]

    class Scale(torch.nn.Module):  # a parameter no rounded op reads
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.gain = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.fc(x) * self.gain

    s = Scale()
    with pytest.raises(ValueError, match=r"not emulated: model.gain \(a parameter no"):
        with lpt.emulate(s, "fp8", strict=True):
            s(torch.ones(2, 4))


# ------------------------------------------------------- capture of MultiheadAttention
def test_capture_of_attention_records_projections_and_keeps_training_bit_identical():
    base, x, y = _make("transformer")
    captured = copy.deepcopy(base)
    want = _train(base, x, y, 4, False)
    with lpt.capture(captured, params=None) as cap:
        got = _train(captured, x, y, 4, False)
    assert got == want
    for a, b in zip(base.parameters(), captured.parameters()):
        assert torch.equal(a, b)
    keys = {k.split("@")[0] for k in cap.samples if k.endswith("@3")}
    for site in ("enc.self_attn", "enc.self_attn.out_proj"):
        assert {f"{site}/{k}" for k in ("input", "weight", "output_grad", "weight_grad",
                                        "bias", "bias_grad")} <= keys
    assert {"enc.self_attn.scores/input", "enc.self_attn.scores/input_b",
            "enc.self_attn.values/input_b", "enc.self_attn.values/output_grad"} <= keys
    # the in-projection weight is the packed q/k/v weight as step 3 read it
    third, _, _ = _make("transformer")
    _train(third, x, y, 3, False)
    np.testing.assert_array_equal(cap.samples["enc.self_attn/weight@3"].values,
                                  third.enc.self_attn.in_proj_weight.detach().numpy())


def test_capture_under_autocast_records_what_the_op_computes_with():
    model, x, y = _make("mlp")
    with lpt.capture(model) as cap:
        _train(model, x, y, 1, True)
    np.testing.assert_array_equal(cap.samples["0/input@0"].values,
                                  x.to(torch.bfloat16).float().numpy())
    assert cap.samples["2/output_grad@0"].values.dtype == np.float32
    rep = cap.report(["bf16", "fp8_e4m3"])
    assert rep.row("0/input@0", "bf16")["sqnr_db"] == float("inf")  # already bf16
