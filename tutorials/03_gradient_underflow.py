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
# # 03 · Gradient underflow
#
# **What you will do.** Find where fp16's range ends at the small end; train a small network
# in fp32 and look at the histogram of its real gradients against the ranges of fp16, bf16
# and FP8; then train it in pure fp16 and watch the gradients vanish layer by layer.
#
# **What you will learn.** Which numbers round to zero (only those up to *half* the
# smallest subnormal: everything between that and the smallest subnormal rounds up to it);
# how to read an underflow histogram (the figure of Micikevicius et al., *Mixed Precision
# Training*, 2018); why gradients are so small; and what underflow does to training.
#
# **What you need.** Tutorials 01 and 02. lowprec with its trainer (`lowprec.train`) and
# plots (`lowprec.plot`); no GPU, no downloads; about 15 minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.train import train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. The bottom of fp16
#
# fp16's smallest normal number is 2^−14 ≈ 6.1e−5; below it, the subnormals continue with a
# fixed spacing of 2^−24 ≈ 6e−8 down to the smallest subnormal 2^−24 itself. A number
# rounds to **zero** when zero is its nearest fp16 value: below half the smallest subnormal.

# %%
fp16 = lp.get_format("fp16")
for x in [2.0**-14, 2.0**-20, 2.0**-24, 1.5 * 2.0**-25, 2.0**-25, 0.9 * 2.0**-25, 2.0**-30]:
    r = float(lp.round_to(x, fp16))
    kind = "zero" if r == 0 else ("subnormal" if r < fp16.smallest_normal else "normal")
    print(f"x = 2^{np.log2(x):7.3f} = {x:.3e} -> {r:.3e}  ({kind})")

# %% [markdown]
# 2^−25 is exactly halfway between 0 and 2^−24, a tie, and round-to-nearest-even picks 0.
# Anything smaller is lost; a bit more than 2^−25 survives as the smallest subnormal, with a
# relative error of up to 50 %. Subnormals keep tiny values alive but with few significant
# bits.
#
# ## 2. Real gradients
#
# `lowprec.train` trains a small multi-layer perceptron (32 inputs, two hidden layers of 64,
# 10 classes) on a synthetic task and records, for a few steps, samples of every layer's
# gradients *before* they are rounded. The default task has a knob, `grad_exp = 18`: it
# multiplies the loss by 2^−18 and the learning rate by 2^18, which changes nothing in fp32
# (a power of two is exact) but makes every gradient 2^18 times smaller. Small loss weights,
# losses averaged over many tokens and deep networks do the same in practice. First the
# claim that fp32 does not notice:

# %%
base = train("fp32", steps=100, seed=0, eval_every=50, grad_exp=0)
run = train("fp32", steps=100, seed=0, eval_every=50)  # grad_exp = 18, the default
same = base.history["loss"] == run.history["loss"]
print(f"grad_exp = {run.task_config['grad_exp']}: final loss {run.summary['final_loss']!r}; "
      f"grad_exp = 0: {base.summary['final_loss']!r}; every step's loss identical: {same}")

# %% [markdown]
# Now the histogram of log2 |g| of the activation gradients (the gradients that flow
# backward between layers) over the three recorded steps, with the regions of fp16 and bf16
# drawn on top as rounding to nearest makes them: values up to half a format's smallest
# subnormal are lost to zero, values from there to (almost) the smallest normal become
# subnormal. The largest of these gradients sit at exactly 2^−24: the task is built that way
# (the output gradient |softmax − one-hot| ≤ 1, divided by the batch of 64 = 2^6 and
# multiplied by the loss weight 2^−18, is at most 2^−24).

# %%
act = lplot.gradient_samples(run, "act_grad")
wgt = lplot.gradient_samples(run, "weight_grad")
fig, axes = plt.subplots(2, 1, figsize=(9, 7))
lplot.underflow_histogram(act, ["fp16", "bf16"], label="activation gradient", ax=axes[0],
                          title="Activation gradients of an fp32 run (grad_exp = 18)")
lplot.underflow_histogram(wgt, ["fp16", "bf16"], label="weight gradient", ax=axes[1],
                          title="Weight gradients of the same run")
fig.tight_layout()
show(fig, "03_underflow_histogram")

# %%
print(f"{act.size} activation-gradient samples, median |g| = 2^{np.median(np.log2(np.abs(act[act != 0]))):.1f}")
for name in ["fp16", "bf16", "fp8_e5m2", "fp8_e4m3"]:
    s_act = lplot.underflow_shares(act, name)
    s_wgt = lplot.underflow_shares(wgt, name)
    print(f"{name:>8}: activation gradients {s_act['zero']:6.1%} to zero, "
          f"{s_act['subnormal']:6.1%} subnormal | weight gradients {s_wgt['zero']:6.1%} to zero, "
          f"{s_wgt['subnormal']:6.1%} subnormal")

# %% [markdown]
# The numbers printed above say it without the picture: in fp16 nearly all activation
# gradients of this run round to zero and the rest become subnormal; bf16, whose range is
# fp32's, keeps every one of them as a normal number. The FP8 formats, with even less range,
# lose them all: FP8 only works with scaling (tutorials 07 and 08). The weight gradients
# are sums over the batch of products of activations and activation gradients, so they are
# larger; fewer of them vanish.
#
# ## 3. Training in fp16 without any protection
#
# The `fp16-naive` policy keeps everything in fp16, rounds every gradient to fp16 where it is
# produced, and uses no loss scaling. The trainer counts, per layer and per step, the
# gradient values that were non-zero before rounding and zero after.

# %%
naive = train("fp16-naive", steps=100, seed=0, eval_every=50)
for r in (run, naive):
    s = r.summary
    print(f"{r.policy:>11}: final loss {s['final_loss']:.4f}, accuracy {s['final_acc']:.1%}, "
          f"gradients lost to underflow {s['grad_underflow_pct']:.1f}%")
for layer in naive.layers:
    all_frac = np.mean(naive.history["grad_underflow"][layer])
    act_frac = np.mean(naive.history["act_grad_underflow"][layer])
    med = np.median(np.log2(np.abs(g := lplot.gradient_samples(run, "act_grad", layer))[g != 0]))
    print(f"  {layer}: {all_frac:5.1%} of all its gradient values lost per step (the plotted "
          f"line), {act_frac:5.1%} of its output gradient; in fp32 that gradient's median "
          f"|g| is 2^{med:.1f}")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
lplot.training_curves({"fp32": run, "fp16-naive": naive}, "loss", ax=axes[0],
                      title="fp16 without loss scaling trains more slowly")
lplot.underflow_per_layer(naive, ax=axes[1], title="fp16-naive: gradients lost per layer")
fig.tight_layout()
show(fig, "03_fp16_naive")

# %% [markdown]
# Read the per-layer lines: each layer loses most of its output gradient (fp32 medians far
# below fp16's 2^−24), and the weight gradients, larger, survive more often, which is why the
# plotted share (all gradient values of the layer) is lower. A gradient value of zero means
# no learning signal through that path at that step, and the fp16 run falls behind fp32.
# Tutorial 04 shifts the gradients back into fp16's range by scaling the loss.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the edge of zero
# What is the largest positive number that rounds to zero in bf16? Store it in `edge`.

# %% tags=["solution"]
# Exercise 1: the edge of zero
# BEGIN SOLUTION
smallest_subnormal = 2.0 ** (1 - 127 - 7)
edge = smallest_subnormal / 2  # the tie goes to the even neighbour, zero
# END SOLUTION

# %%
exercises.check_largest_flushed("bf16", edge)

# %% [markdown]
# ### Exercise 2: count the underflow
# For the activation gradients `act` of the fp32 run above, what *fraction* of the non-zero
# values rounds to zero in FP8 E5M2 when multiplied by 2^16 first? Compute it with
# `lp.round_to` and store it in `fraction`.

# %% tags=["solution"]
# Exercise 2: count the underflow
# BEGIN SOLUTION
nonzero = act[act != 0] * 2.0**16
fraction = np.mean(lp.round_to(nonzero, "fp8_e5m2") == 0)
# END SOLUTION

# %%
exercises.check_underflow_fraction(act, "fp8_e5m2", fraction, loss_scale=2.0**16)
