# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Your own model: capture its tensors, replay them through every format
#
# **What you will do.** Train a small PyTorch network on the scikit-learn digits as you
# would train any model, with `lowprec.torch.capture` around the loop; replay what it
# recorded through every format and recipe with `lowprec.inspect.report`; read per-layer
# underflow in fp16 with and without loss scaling, and MXFP4's per-block forensics; let
# `recommend` choose a format per layer; and train the model again under the recommended
# recipe, emulated bit-exactly on the CPU.
#
# **What you will learn.** Which of a real model's tensors (inputs, weights, gradients
# with respect to outputs, weight gradients) are at risk in which format, and why; what
# "underflow" means exactly (a non-zero value that became zero); how a loss scale moves
# gradients into fp16's range; how block formats fail block by block; how measured
# statistics become a precision choice.
#
# **What you need.** Tutorials 03 (gradient underflow), 04 (loss scaling) and 08 (MX and
# NVFP4). lowprec with the `torch` and `data` extras (PyTorch and scikit-learn; a CPU is
# enough); no GPU, no downloads; about 20 minutes to read, and the script runs in well
# under a minute.

# %%
import numpy as np
import torch
from sklearn.datasets import load_digits

import lowprec as lp
import lowprec.torch as lpt
from lowprec import exercises, inspect
from lowprec.plot import inspect_heatmap, inspect_histograms
from lowprec.tutorials import show

# %% [markdown]
# ## 1. An ordinary model and an ordinary training loop
#
# The digits are 8x8 images with 16 grey levels; we scale them to [0, 1] and keep 397 of
# the 1797 aside for testing. The network is a plain multi-layer perceptron,
# 64 -> 128 -> 64 -> 10, trained with SGD and momentum on batches of 64.
#
# Nothing in the loop knows about lowprec except the `with` line. `capture` hooks every
# module that holds parameters and records, every 50th step, each layer's input, its
# weight, the gradient with respect to its output and the weight's gradient (biases too
# with `params=None`). Each recorded tensor is a bounded sample (at most `max_values` values, whole
# rows, so MX blocks stay intact) plus the full tensor's amax, so what a capture holds does
# not grow with the model. And it only reads: the model trains bit for bit as it would
# without it.

# %%
torch.set_num_threads(1)  # a model this small runs fastest on one thread
digits = load_digits()
X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
Y = torch.tensor(digits.target)
perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
train_idx, test_idx = perm[:1400], perm[1400:]
STEPS = 300

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
gen = torch.Generator().manual_seed(1)
with lpt.capture(model, every=50, max_values=4096) as cap:
    for _ in range(STEPS):
        batch = train_idx[torch.randint(0, len(train_idx), (64,), generator=gen)]
        loss = torch.nn.functional.cross_entropy(model(X[batch]), Y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    fp32_acc = float((model(X[test_idx]).argmax(1) == Y[test_idx]).float().mean())
print(f"float32 training: final loss {loss.item():.3f}, test accuracy {fp32_acc:.1%}")
print(f"captured {len(cap.samples)} tensors over {cap.steps} steps, {cap.nbytes / 1e6:.2f} MB "
      f"(layers: {', '.join(cap.layers)})")

# %% [markdown]
# The layers are named as PyTorch names them: `0`, `2` and `4` are the three `Linear`
# modules of the `Sequential` (the ReLUs hold no parameters and are not hooked). Every
# recorded tensor has a key `LAYER/KIND@STEP`, such as `4/output_grad@100`.
#
# ## 2. Every tensor through every recipe
#
# `cap.report()` hands the samples to `lowprec.inspect.report`, which quantizes each of
# them with lowprec's own engine under each recipe and counts exactly what happened:
#
# * **underflow**: finite non-zero values that became ±0 (zeros that were zero already do
#   not count; -0 counts as zero);
# * **subnormal**: stored values that are subnormals of the element format;
# * **overflow**: finite values that became inf or NaN; **clipped**: values saturated to
#   the format's maximum;
# * **SQNR**: signal-to-quantization-noise ratio in dB.
#
# `fp16_loss_scale` is fp16 after multiplying the gradients by the loss scale that
# PyTorch's `GradScaler` would settle on for these gradients (the largest power of two at
# which none of them overflows).

# %%
recipes = ["fp16", "fp16_loss_scale", "bf16", "fp8_e4m3", "fp8_e4m3_delayed",
           "fp8_e5m2_delayed", "mxfp8_e4m3", "mxfp4", "mxfp4_rceil", "nvfp4"]
rep = cap.report(recipes)
print(f"{len(rep.rows)} rows: {len(rep.tensors)} tensors x {len(recipes)} recipes; "
      f"loss scale for fp16: 2^{np.log2(rep.loss_scale):.0f}")
last = [r for r in rep.rows if r["step"] == 250 and r["recipe"] in ("fp16", "mxfp4")]
print(inspect.Report(last, ["fp16", "mxfp4"]))

# %%
fig = inspect_heatmap(rep)
show(fig, "11_heatmap")

# %% [markdown]
# ## 3. fp16 with and without a loss scale, layer by layer
#
# The rows of the heatmap that go dark under `fp16` are gradients. We add up the counts
# over the captured steps for each layer's gradient with respect to its output.

# %%
for layer in cap.layers:
    plain = rep.where(layer=layer, kind="output_grad", recipe="fp16")
    scaled = rep.where(layer=layer, kind="output_grad", recipe="fp16_loss_scale")
    nz = sum(r["nonzero"] for r in plain)
    u0 = sum(r["underflow"] for r in plain) / nz
    u1 = sum(r["underflow"] for r in scaled) / nz
    sub = sum(r["subnormal"] for r in plain) / nz
    print(f"layer {layer}: {u0:.2%} of the output gradients flush to zero in fp16 and "
          f"{sub:.1%} are subnormal; with the loss scale {u1:.2%} flush")

# %% [markdown]
# One loss scale serves every gradient of the model, and `GradScaler` settles on the
# largest power of two at which *no* gradient overflows: the largest gradient anywhere
# caps it. A layer whose gradients span more binades than fp16 holds keeps some underflow
# even then.

# %%
grad_amax = {k: a for k, a in rep.amax.items() if "grad" in k}
top = max(grad_amax, key=grad_amax.get)
print(f"the largest gradient magnitude is {grad_amax[top]:.3g} ({top}); times "
      f"2^{np.log2(rep.loss_scale) + 1:.0f} it would pass fp16's maximum "
      f"{lp.get_format('fp16').max:g}, so the scale stops at 2^{np.log2(rep.loss_scale):.0f}")

# %% [markdown]
# The histograms show why gradients are the problem: the gradients sit a few binades above fp16's smallest
# subnormal (the dotted line), while the weights and inputs sit comfortably inside every
# 8-bit format's normal range. Multiplying the gradients by the loss scale moves them
# right by log2 S binades, into the normal range.

# %%
fig = inspect_histograms(rep, ["fp16", "fp8_e4m3", "fp8_e5m2"], ncols=5)
show(fig, "11_histograms")

# %% [markdown]
# ## 4. MXFP4, block by block
#
# MXFP4 stores 32 values with one shared power-of-two scale and four bits each (E2M1:
# magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6). The scale is set by the block's largest value,
# so a block fails in one of two ways: small values next to a large one flush to zero,
# and (with the spec's floor rule) the largest value itself can be clipped. The report
# keeps per-block forensics for every block recipe.

# %%
w_key = "2/weight@250"
for recipe in ("mxfp4", "mxfp4_rceil"):
    b = rep.blocks[w_key, recipe]
    row = rep.row(w_key, recipe)
    worst = b.worst[0]
    print(f"{recipe}: of the {b.n_blocks} blocks of {w_key}, {b.clipped_frac:.1%} clip and "
          f"{b.flushed_frac:.1%} flush; block scales span 2^{min(b.scale_exponents)} .. "
          f"2^{max(b.scale_exponents)}; SQNR {row['sqnr_db']:.1f} dB; worst block "
          f"{worst['block']} (amax {worst['amax']:.3f}): relative error "
          f"{worst['rel_error']:.2f}")

# %% [markdown]
# The `rceil` rule (what cuBLAS and Transformer Engine use) never clips: it rounds the
# scale up. The price is a coarser grid for every block, so more small values flush. Which
# is better depends on the tensor; here the numbers above decide, not a rule of thumb.
#
# ## 5. A format per layer, from the measurements
#
# `recommend` looks at each layer's tensors of each kind over all captured steps and
# picks the narrowest candidate recipe with at most `max_underflow` of the non-zero values
# flushed, nothing overflowed and an SQNR of at least `min_sqnr_db` at every step. Each
# choice comes with its reason. Any recipe the report measured can be a candidate, and
# `policy()` holds every choice, layer by layer and kind by kind (`policy.layers`); a
# tensor no candidate fits would stay float32, and the recommendation would say so. Here
# we offer a handful of them.

# %%
candidates = ["fp16", "fp16_loss_scale", "bf16", "fp8_e4m3_delayed", "fp8_e5m2_delayed",
              "mxfp8_e4m3", "mxfp4"]
rec = rep.recommend(max_underflow=1e-3, min_sqnr_db=15, candidates=candidates)
print(rec)
policy = rec.policy()
print(f"\nas one policy: {policy.description}")

# %% [markdown]
# ## 6. Training under the recommended recipe
#
# `lowprec.torch.emulate` makes every layer round its input, weight and output gradient
# (and weight gradient) as a policy says, per layer, with the same rounders as lowprec's
# own trainer (delayed scaling keeps its amax history per rounding point). It sees
# functional calls too, so convolutions, attention, `torch.matmul` and `einsum` in your
# own code are rounded the same way (docs/schemes-and-pytorch.md). The policy asks for
# dynamic loss scaling where a gradient chose `fp16_loss_scale`; under `emulate` that is
# your `torch.amp.GradScaler`'s job (this short run leaves it out). We train the same
# model from the same initial weights under the recommendation, and under MXFP4
# everywhere for contrast.

# %%
results = {}
for name in ("recommended", "mxfp4"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    with lpt.emulate(model, policy if name == "recommended" else "mxfp4") as emu:
        for _ in range(STEPS):
            batch = train_idx[torch.randint(0, len(train_idx), (64,), generator=gen)]
            loss = torch.nn.functional.cross_entropy(model(X[batch]), Y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            acc = float((model(X[test_idx]).argmax(1) == Y[test_idx]).float().mean())
    results[name] = acc
    print(f"{name}: {len(emu.points)} rounding points, final loss {loss.item():.3f}, "
          f"test accuracy {acc:.1%} (float32: {fp32_acc:.1%})")

# %%
for name, acc in results.items():
    print(f"{name}: {acc - fp32_acc:+.1%} test accuracy against float32")

# %% [markdown]
# ## 7. The same three steps on a CNN and on a transformer
#
# Nothing above is specific to `Linear` layers. A small CNN (Conv2d, BatchNorm,
# max-pooling, Linear) reads each digit as an 8x8 image; a one-layer
# `nn.TransformerEncoderLayer` reads it as a sequence of 8 rows of 8 pixels, under bf16
# autocast. Both are plain `Sequential`s; each trains 60 steps under `capture`, then 30
# more under the recommendation. `capture` records the convolution's and the attention's tensors (the
# in-projection's packed weight, the scores' Q and K, V, the out-projection), `recommend`
# picks per tensor, and `emulate` rounds the convolution, the attention matmuls and the
# projections; BatchNorm, LayerNorm and softmax run as PyTorch runs them (`emu.stated`).


# %%
nets = {
    "cnn": (torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10)),
        X.view(-1, 1, 8, 8), False),
    "transformer": (torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
        torch.nn.Flatten(), torch.nn.Linear(8 * 16, 10)),
        X.view(-1, 8, 8), True),
}
for name, (net, inputs, autocast) in nets.items():
    net_opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    batches = [train_idx[torch.randint(0, len(train_idx), (64,), generator=g)]
               for _ in range(90)]
    with lpt.capture(net, every=20) as net_cap:
        for batch in batches[:60]:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = net(inputs[batch])
            loss = torch.nn.functional.cross_entropy(out.float(), Y[batch])
            net_opt.zero_grad()
            loss.backward()
            net_opt.step()
    net_rec = net_cap.report(["bf16", "fp8_e4m3_current", "mxfp8_e4m3", "mxfp4"]).recommend(
        max_underflow=1e-3, min_sqnr_db=20)
    with lpt.emulate(net, net_rec.policy()) as emu:
        for batch in batches[60:]:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = net(inputs[batch])
            loss = torch.nn.functional.cross_entropy(out.float(), Y[batch])
            net_opt.zero_grad()
            loss.backward()
            net_opt.step()
    print(f"{name}: sites {', '.join(sorted({c.layer for c in net_rec.choices}))}; "
          f"{len(emu.points)} rounding points, {len(net_rec.unmet)} tensors kept in "
          f"float32; not rounded: {', '.join(sorted(emu.stated))}; loss after "
          f"30 emulated steps {loss.item():.3f}")

# %% [markdown]
# The digits are an easy problem, so even a poor recipe learns them; what matters is the
# method. The formats were chosen from the model's own tensors, layer by layer, with the
# measured reason for each, and the model was trained in them without leaving PyTorch.
# For a model of yours, run the same three steps: capture, report and recommend, emulate.
#
# ## Exercises
#
# ### Exercise 1: count underflow yourself
# Take the gradient with respect to the output of the last layer at step 250,
# `g = cap.tensors()["4/output_grad@250"]`, and count with `lp.round_to` how many of its
# values underflow in fp16 (were non-zero, became zero). Store the count in `n_under`.

# %% tags=["solution"]
# Exercise 1: count underflow yourself
g = cap.tensors()["4/output_grad@250"]
# BEGIN SOLUTION
q = lp.round_to(g, "fp16")
n_under = int(np.count_nonzero((g != 0) & (q == 0)))
# END SOLUTION

# %%
exercises.check_underflow_count(g, "fp16", n_under)

# %% [markdown]
# ### Exercise 2: blocks that flush
# For the weight sample `w = cap.tensors()["2/weight@250"]`, what share of its MXFP4 blocks
# (32 consecutive values along the last axis) contain at least one non-zero value that
# became zero? Quantize with `lp.mx.quantize(w, "mxfp4")` and compare with `w`. Store the
# fraction (between 0 and 1) in `share`.

# %% tags=["solution"]
# Exercise 2: blocks that flush
w = cap.tensors()["2/weight@250"]
# BEGIN SOLUTION
wq = lp.mx.quantize(w, "mxfp4").dequantize()
flushed = ((w != 0) & (wq == 0)).reshape(w.shape[0], -1, 32)
share = float(flushed.any(axis=-1).mean())
# END SOLUTION

# %%
exercises.check_block_flush_share(w, share)

# %% [markdown]
# ### Exercise 3: your own model
# Put `with lowprec.torch.capture(model, every=50) as cap:` around the training loop of a
# model of your own, then `print(cap.report().recommend())`. Which of its layers could live
# in 8 bits, and which gradients need a loss scale? (No checker: the model is yours.)
