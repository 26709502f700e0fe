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
# # 12 · Quantization-aware training: where training and inference meet
#
# **What you will do.** Train a small classifier in FP32 and quantize its weights to 4 bits
# afterwards (post-training quantization, PTQ); then train the same network, same data,
# same seed, with the 4-bit rounding inside the forward pass (quantization-aware training,
# QAT), and compare both at the same inference format: MXFP4, NVFP4 and FP8.
#
# **What you will learn.** What "fake quantization" and the straight-through gradient are;
# why QAT recovers most of what 4-bit PTQ loses (the optimizer sees the loss of the
# *rounded* network); when it does not help (FP8 weights lose almost nothing, so there is
# nothing to recover); and what QAT costs in memory while training compared with the model
# it produces.
#
# **What you need.** Tutorials 05 (master weights) and 08 (MX and NVFP4). lowprec with its
# trainer (`lowprec.train`); no GPU, no downloads; about 15 minutes (the training runs take
# a few seconds each).

# %%
import matplotlib.pyplot as plt
import numpy as np

from lowprec import exercises, mx
from lowprec.train import get_task, memory, train, transformer_layer
from lowprec.train.qat import compare_qat_ptq, evaluate, fake_quantize, qat_policy
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Fake quantization: the 4-bit grid, in float32
#
# An MXFP4 tensor stores each value as a 4-bit E2M1 number (0, 0.5, 1, 1.5, 2, 3, 4, 6 and
# their negatives) times one power-of-two scale shared by a block of 32 values. *Fake*
# quantization rounds to that grid and immediately converts back to float32: the values
# are those of the 4-bit model, the arithmetic stays in float32. `fake_quantize` does it
# for a weight matrix, with blocks running along the input axis (as a matmul reads them).

# %%
rng = np.random.default_rng(0)
w = (rng.standard_normal((32, 1)) * 0.2).astype(np.float32)
wq = fake_quantize(w, "mxfp4")
scale = float(mx.quantize(w, "mxfp4", axis=0).scales.ravel()[0])
print(f"block amax {np.abs(w).max():.4f} -> shared scale {scale}; grid step near 0: "
      f"{0.5 * scale}")
print("distinct values after rounding:", np.unique(wq).size, "of", w.size)
print("largest change:", float(np.abs(wq - w).max()))

# %% [markdown]
# 32 different weights become a handful of grid values; a weight near zero may move by a
# quarter of the scale. That is what PTQ does to every weight of a trained network at once.
#
# ## 2. Post-training quantization
#
# We train the tutorials' default task (a 10-class Gaussian mixture, MLP 32-64-64-10) in
# FP32 for 300 steps, then evaluate it on the held-out set twice: as trained, and with every
# weight matrix fake-quantized to MXFP4 (biases and activations stay float32: weight-only
# quantization).

# %%
task = get_task("underflow", 0, grad_exp=0)
steps = 300
fp32 = train("fp32", task, steps=steps, seed=0, record=False)
loss_fp32, acc_fp32 = evaluate(fp32.params, task)
loss_ptq, acc_ptq = evaluate(fp32.params, task, "mxfp4")
print(f"FP32 model            : held-out loss {loss_fp32:.4f}, accuracy {acc_fp32:.1%}")
print(f"same weights in MXFP4 : held-out loss {loss_ptq:.4f}, accuracy {acc_ptq:.1%}  (PTQ)")

# %% [markdown]
# ## 3. Quantization-aware training
#
# QAT trains with the rounding in the loop. Each step:
#
# 1. the forward pass uses `fake_quantize(W_master)`, so the loss is the loss of the
#    4-bit network;
# 2. the backward pass needs the derivative of the rounding. A staircase is flat almost
#    everywhere: its true derivative is 0 and no gradient would reach the weights. The
#    **straight-through estimator** pretends the rounding is the identity on the way back
#    (`lowprec.autograd.round_value` does exactly that);
# 3. the optimizer adds the update to an **FP32 master copy**. A 4-bit weight could not
#    take a small update (tutorial 05: it would be lost), the master can, and after enough
#    small steps the rounded weight flips to the neighbouring grid point.
#
# `qat_policy("mxfp4")` is the trainer's precision policy for that: master FP32, weights
# MXFP4, everything else FP32.

# %%
policy = qat_policy("mxfp4")
print(policy.description)
qat = train(policy, task, steps=steps, seed=0, record=False)
loss_qat, acc_qat = evaluate(qat.params, task, "mxfp4")
print(f"QAT model in MXFP4    : held-out loss {loss_qat:.4f}, accuracy {acc_qat:.1%}")
print(f"PTQ lost {loss_ptq - loss_fp32:+.4f} in loss against FP32; QAT is at "
      f"{loss_qat - loss_fp32:+.4f}: it recovers "
      f"{(loss_ptq - loss_qat) / (loss_ptq - loss_fp32):.0%} of the gap.")

# %% [markdown]
# The QAT master weights themselves, evaluated *without* rounding, are not a better FP32
# model: QAT optimises the rounded network, not the master.

# %%
print(f"QAT master, unrounded : held-out loss {evaluate(qat.params, task)[0]:.4f}")

# %% [markdown]
# ## 4. Three inference formats
#
# `compare_qat_ptq` runs the whole experiment per format: one FP32 run shared by the PTQ
# rows, one QAT run per format, all on the same task, seed and number of steps.

# %%
result = compare_qat_ptq(task, formats=("mxfp4", "nvfp4", "fp8"), steps=steps, seed=0)
print(result)

# %%
fig, ax = plt.subplots(figsize=(7, 4))
names = [r.format for r in result.rows]
x = np.arange(len(names))
ax.bar(x - 0.2, [r.ptq_loss for r in result.rows], 0.4, label="PTQ (train FP32, round once)",
       color="tab:red")
ax.bar(x + 0.2, [r.qat_loss for r in result.rows], 0.4, label="QAT (round while training)",
       color="tab:blue")
ax.axhline(result.fp32_loss, color="black", ls="--", lw=1, label="FP32 model, unrounded")
ax.set_xticks(x, names)
lo = min(result.fp32_loss, *(r.qat_loss for r in result.rows))
ax.set_ylim(lo - 0.03, max(r.ptq_loss for r in result.rows) + 0.02)
ax.set_ylabel("held-out loss (lower is better; axis cut)")
ax.set_title(f"Weights in each format at inference ({steps} steps, seed 0)")
ax.legend(fontsize=8, loc="upper right")
show(fig, "12_qat_vs_ptq")

# %% [markdown]
# Read the table: at 4 bits PTQ loses loss and accuracy, NVFP4 less than MXFP4 (blocks of
# 16 with an E4M3 scale fit the weights more closely than blocks of 32 with a power-of-two
# scale), and QAT wins most of the gap back. At FP8 the PTQ model is already as good as
# FP32: E4M3 keeps 3 mantissa bits, a relative error of at most 2^-4, far below what this
# network is sensitive to. There is nothing left to recover, and QAT's result differs from
# PTQ's only by the noise of a different training trajectory.
#
# **When QAT does not help** (and why): when the format is fine enough that PTQ already
# works (FP8 here, often INT8 in practice); when the model is robust to the rounding (try
# `compare_qat_ptq("digits")`: on scikit-learn's digits this small network shrugs off even
# 4-bit weights, so PTQ is as good as QAT); and when the rounding is so coarse that the
# straight-through gradient points the wrong way (the estimator ignores the staircase, so it
# is a good guide only while a step moves a weight by less than a grid step). QAT also needs
# the training data and a training run, where PTQ needs only the trained weights.
#
# ## 5. What QAT costs while training
#
# QAT "blurs the line between low-precision training and inference": it trains with an FP32
# master copy and FP32 gradients, so the training memory per parameter is *more* than plain
# FP32 training, to produce a model that needs about an eighth of FP32's bytes. For one
# transformer layer (d_model 4096, d_ff 16384), with Adam:

# %%
layer = transformer_layer(4096, 16384, 2048)
for name in ("fp32", qat_policy("mxfp4")):
    t = memory(layer, name, optimizer="adam")
    print(f"training {t.policy:>10}: {float(t.weight_side_per_param()):.5g} bytes per "
          f"parameter on the weight side")
print(f"the MXFP4 inference model: {4 + 8 / 32} bits = {(4 + 8 / 32) / 8} bytes per weight")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: one weight on the grid
# In an MXFP4 block whose largest magnitude is 6 the shared scale is 1, so each weight is
# rounded to E2M1 (format `"fp4_e2m1"`, round to nearest even) as it is. What does the
# weight 0.3 become? Store it in `w_03`.

# %% tags=["solution"]
# Exercise 1: one weight on the grid
# BEGIN SOLUTION
w_03 = 0.5  # E2M1's neighbours of 0.3 are 0 and 0.5 (the smallest subnormal); 0.3 > 0.25
# END SOLUTION

# %%
exercises.check_rounding(0.3, "fp4_e2m1", "rne", w_03)

# %% [markdown]
# ### Exercise 2: bits per weight of the inference model
# How many bits does one weight of an MXFP4 tensor take, its share of the block scale
# included? Store it in `bits`.

# %% tags=["solution"]
# Exercise 2: bits per weight of the inference model
# BEGIN SOLUTION
bits = 4 + 8 / 32  # a 4-bit element plus 1/32 of an 8-bit E8M0 scale
# END SOLUTION

# %%
exercises.check_bits_per_value("mxfp4", bits)

# %% [markdown]
# ### Exercise 3: bytes per parameter while training with QAT
# For the transformer layer of section 5 with Adam, work out by hand the weight-side bytes
# per parameter of QAT for MXFP4: the FP32 master, the MXFP4 copy the forward pass reads,
# FP32 weight gradients, Adam's two FP32 moments. Store the total in `qat_bytes`.

# %% tags=["solution"]
# Exercise 3: bytes per parameter while training with QAT
# BEGIN SOLUTION
qat_bytes = 4 + (4 + 8 / 32) / 8 + 4 + 2 * 4  # d_model and d_ff are multiples of 32
# END SOLUTION

# %%
exercises.check_bytes_per_param(layer, qat_policy("mxfp4"), "adam", qat_bytes)
