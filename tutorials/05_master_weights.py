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
# # 05 · Master weights and lost updates
#
# **What you will do.** Nudge a single fp16 weight of 256 by −0.009, 200 times, with and
# without an fp32 master copy, and watch where it ends up. Then train the same network with
# and without master weights and count the updates that were lost.
#
# **What you will learn.** Why an update smaller than half the gap between a weight and its
# neighbour vanishes; why that gap grows with the weight; how a master copy in fp32 keeps the
# small updates and hands the low-precision copy only what it can hold; and how to read the
# lost-update fraction of a training run.
#
# **What you need.** Tutorials 01 (spacing) and 02 (rounding). lowprec with its trainer
# (`lowprec.train`); no GPU, no downloads; about 15 minutes (the training runs take a few
# seconds each).

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.train import get_policy, train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. One weight, 200 small updates
#
# An optimizer step is `w <- w - lr * g`. Suppose the weight is 256 and every step the
# update `lr * g` is 0.009 (the weight should drift down by 200 × 0.009 = 1.8 over 200
# steps). First, how far apart are the fp16 numbers around 256?

# %%
fp16 = lp.get_format("fp16")
w0, update, steps = 256.0, -0.009, 200
below = float(lp.decode(np.uint16(int(lp.encode(w0, fp16)) - 1), fp16))
above = float(lp.decode(np.uint16(int(lp.encode(w0, fp16)) + 1), fp16))
print(f"fp16 neighbours of {w0}: {below} below (gap {w0 - below}), {above} above "
      f"(gap {above - w0})")
print(f"an update of {abs(update)} is {abs(update) / ((w0 - below) / 2):.0%} of half the gap "
      f"below, so {w0} - {abs(update)} rounds to "
      f"{float(lp.round_to(w0 + update, fp16))}")

# %% [markdown]
# Every single step rounds back to 256. Now run the 200 steps three ways:
#
# * **pure fp16**: the weight lives in fp16, each update is applied and rounded to fp16;
# * **fp32 master**: an fp32 copy receives the updates (rounded to fp32 each step); the fp16
#   copy that the forward pass would use is the master rounded to fp16;
# * **fp16 with stochastic rounding**: no master, but each update is rounded stochastically.

# %%
rng = np.random.default_rng(0)
pure = [w0]
master = [w0]
sr = [w0]
u32 = float(lp.round_to(update, "fp32"))
for _ in range(steps):
    pure.append(float(lp.round_to(pure[-1] + update, fp16)))
    master.append(float(lp.round_to(master[-1] + u32, "fp32")))
    sr.append(float(lp.round_to(sr[-1] + update, fp16, "stochastic", rng=rng)))
pure, master, sr = np.array(pure), np.array(master), np.array(sr)
master_fp16 = lp.round_to(master, fp16)
print(f"exact after {steps} steps        : {w0 + steps * update:.4f}")
print(f"pure fp16                       : {pure[-1]}")
print(f"fp32 master                     : {master[-1]:.4f} (its fp16 copy: {master_fp16[-1]})")
print(f"fp16 with stochastic rounding   : {sr[-1]}")
first = int(np.argmax(master_fp16 != w0))
print(f"with the master copy the fp16 weight first moves at step {first}, when the master "
      f"reaches {master[first]:.4f}")

# %%
fig, ax = plt.subplots(figsize=(7, 4))
k = np.arange(steps + 1)
ax.plot(k, w0 + k * update, color="black", lw=2, label="exact")
ax.plot(k, pure, color="tab:red", lw=1.5, label="pure fp16 (rne)")
ax.plot(k, master, color="tab:blue", lw=1.2, label="fp32 master")
ax.step(k, master_fp16, where="post", color="tab:cyan", lw=1.2, label="fp16 copy of the master")
ax.plot(k, sr, color="tab:orange", lw=1, alpha=0.8, label="fp16, stochastic rounding")
ax.set_xlabel("optimizer step")
ax.set_ylabel("weight")
ax.set_title("256 nudged by -0.009 per step")
ax.legend(fontsize=8)
show(fig, "05_single_weight")

# %% [markdown]
# Pure fp16 never moves: the whole drift of −1.8 is lost, one invisible step at a time. The
# fp32 master follows the exact line (fp32's gap at 256 is 2^−15, so each step's rounding
# error is tiny), and its fp16 copy steps down by 0.125 whenever the master has moved far
# enough. Stochastic rounding, without any master copy, also follows the line on average.
#
# The size of the problem depends on the *ratio* of update to weight: fp16's gap is
# 2^−10 relative, so an update smaller than about 2^−11 ≈ 0.05 % of the weight is lost.
# Learning rates times gradients are often that small late in training, which is why mixed
# precision keeps an fp32 master copy. Here is the same count for other weights and formats:

# %%
for name in ["fp16", "bf16", "fp8_e4m3"]:
    f = lp.get_format(name)
    for w in [1.0, 16.0, 256.0]:
        below_w = float(lp.decode(np.uint32(int(lp.encode(w, f)) - 1), f))
        moved = float(lp.round_to(w + update, f)) != w
        print(f"{name:>8}, w = {w:5}: w - 0.009 {'moves  ' if moved else 'is lost'} "
              f"(half the gap below w: {(w - below_w) / 2:g})")

# %% [markdown]
# Below a power of two w the gap is w × eps / 2, so half of it is w × eps / 4, the number
# in brackets: an update is lost when it is no larger than that. fp16 keeps the update of
# 0.009 up to a weight of 16 but not at 256; bf16, with 3 fewer mantissa bits, already loses
# it at 16; FP8 E4M3 loses it even at 1.
#
# ## 2. In training
#
# The trainer of `lowprec.train` counts, at every step and in every layer, the weights
# whose update was non-zero but which the rounded write left unchanged: the **lost-update
# fraction**. We train the default task (a small classifier) with PyTorch-AMP-style fp16
# (`fp16-amp`: fp32 master weights and dynamic loss scaling), then the same policy with the
# master copy removed, and the same pair in bf16.

# %%
no_master = get_policy("fp16-amp").replace(
    name="fp16-amp-no-master", description="fp16-amp without the fp32 master copy", master=None)
runs = {}
for policy in ["fp32", "fp16-amp", no_master, "bf16-master", "bf16-pure"]:
    r = train(policy, steps=300, seed=0, eval_every=50)
    runs[r.policy] = r
    s = r.summary
    print(f"{r.policy:>20}: final loss {s['final_loss']:.4f}, accuracy {s['final_acc']:.1%}, "
          f"updates lost {s['lost_update_pct']:5.1f}%")

# %%
fp16_gap = runs["fp16-amp-no-master"].summary["lost_update_pct"]
bf16_gap = runs["bf16-pure"].summary["lost_update_pct"]
d16 = runs["fp16-amp-no-master"].summary["final_loss"] - runs["fp16-amp"].summary["final_loss"]
d_bf = runs["bf16-pure"].summary["final_loss"] - runs["bf16-master"].summary["final_loss"]
print(f"Without its master copy, fp16 loses {fp16_gap:.1f}% of the weight updates and ends "
      f"{d16:+.4f} in loss against fp16-amp; bf16, with 3 fewer mantissa bits, loses "
      f"{bf16_gap:.1f}% and ends {d_bf:+.4f} against bf16-master.")
print(f"With master copies, both ({runs['fp16-amp'].summary['final_loss']:.4f} and "
      f"{runs['bf16-master'].summary['final_loss']:.4f}) end within "
      f"{max(abs(runs[p].summary['final_loss'] - runs['fp32'].summary['final_loss']) for p in ['fp16-amp', 'bf16-master']):.4f} of fp32 "
      f"({runs['fp32'].summary['final_loss']:.4f}).")

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
lplot.training_curves({p: runs[p] for p in runs}, "loss", ax=axes[0],
                      title="Held-out loss: master copies track fp32")
lplot.lost_updates(runs["bf16-pure"], ax=axes[1],
                   title="bf16-pure: share of non-zero updates lost, per layer")
fig.tight_layout()
show(fig, "05_training")

# %% [markdown]
# Read the two sentences printed above the plots: the lost-update fraction tells how much
# of each step never reached the weights. fp16 has enough mantissa bits that losing part of
# the updates costs this small network only a little loss, while bf16 loses most of them and
# falls visibly behind; with a master copy, both track fp32. The right panel shows that the
# share of lost updates differs from layer to layer and grows as training goes on (the
# updates shrink while the weights do not).
# Tutorial 06 shows that stochastic rounding recovers pure-bf16 training without the master
# copy's extra memory.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the threshold at 256
# Going *down* from 256 in fp16 (round to nearest even), what is the largest update size d
# for which 256 − d still rounds to 256? Store it in `d`. Careful: which binade is 256 − d in?

# %% tags=["solution"]
# Exercise 1: the threshold at 256
# BEGIN SOLUTION
gap_below = 128 * 2.0**-10  # [128, 256) has spacing 2^7 * 2^-10 = 0.125
d = gap_below / 2  # the tie 255.9375 goes to the even 256
# END SOLUTION

# %%
exercises.check_largest_lost_increment(256.0, "fp16", d, direction="down")

# %% [markdown]
# ### Exercise 2: when does the fp16 copy first move?
# With an fp32 master copy starting at 256 and an update of −0.009 per step, after how many
# steps does the fp16 copy of the master first differ from 256? Work it out from your answer
# to Exercise 1 (not by reading the plot) and store it in `n_steps`.

# %% tags=["solution"]
# Exercise 2: when does the fp16 copy first move?
# BEGIN SOLUTION
n_steps = int(d // 0.009) + 1  # the master must move *more* than d = 0.0625
# END SOLUTION

# %%
exercises.check_steps_until_visible(256.0, -0.009, "fp16", n_steps)

# %% [markdown]
# ### Exercise 3: bf16 at 1.0
# In bf16, what is the largest update d that is lost when *added* to 1.0? Store it in
# `d_bf16`, and compare with the 0.009 of this tutorial.

# %% tags=["solution"]
# Exercise 3: bf16 at 1.0
# BEGIN SOLUTION
d_bf16 = 2.0**-7 / 2  # bf16 gap above 1 is eps = 2^-7
# END SOLUTION

# %%
exercises.check_largest_lost_increment(1.0, "bf16", d_bf16)
