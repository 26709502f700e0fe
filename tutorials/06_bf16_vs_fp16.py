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
# # 06 · bfloat16 against fp16, and stochastic rounding for pure-bf16 training
#
# **What you will do.** Compare bf16 and fp16 on range and precision with real gradients;
# train the same network in fp16 and bf16, with and without fp32 master weights; and make
# pure-bf16 training work again by rounding the weight update stochastically.
#
# **What you will learn.** Why bf16 needs no loss scaling; why it still needs *something*
# for the weight update; and why stochastic rounding keeps small updates alive on average,
# so pure-bf16 training can do without a master copy.
#
# **What you need.** Tutorials 02 (stochastic rounding), 03 (underflow) and 05 (master
# weights). lowprec with `lowprec.train` and `lowprec.plot`; no GPU, no downloads; about 15
# minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.train import train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Same 16 bits, different split
#
# fp16 spends its 15 non-sign bits as 5 exponent + 10 mantissa bits, bf16 as 8 + 7: bf16 is
# fp32 with the lowest 16 bits cut off. It has fp32's range, but 3 mantissa bits fewer than
# fp16, which makes its spacing 2^3 = 8 times coarser.

# %%
fp16, bf16 = lp.get_format("fp16"), lp.get_format("bf16")
for f in (fp16, bf16):
    print(f"{f.name}: max {f.max:.3g}, smallest normal {f.smallest_normal:.3g}, smallest "
          f"subnormal {f.smallest_subnormal:.3g}, eps {f.eps:g}, unit roundoff "
          f"{f.unit_roundoff:g}, {f.dynamic_range_binades:.0f} binades")
fig, ax = plt.subplots(figsize=(8, 3.5))
lplot.format_comparison(["fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"], ax=ax,
                        title="Range (binades) and precision of the training formats")
show(fig, "06_format_comparison")

# %% [markdown]
# Now apply both to real data: the gradients of an fp32 training run (the task of tutorials
# 03-05, whose gradients are small), and the weights of the trained network, which are of
# order one.

# %%
run = train("fp32", steps=100, seed=0, eval_every=50)
act = lplot.gradient_samples(run, "act_grad")
act = act[act != 0]
for f in (fp16, bf16):
    shares = lplot.underflow_shares(act, f)
    print(f"{f.name}: {shares['zero']:6.1%} of the activation gradients round to zero, "
          f"{shares['subnormal']:6.1%} become subnormal")
rng = np.random.default_rng(0)
w = rng.standard_normal(100_000) * 0.2  # weights of order one (a typical initialisation)
for f in (fp16, bf16):
    rel = np.abs(lp.round_to(w, f) - w) / np.abs(w)
    print(f"{f.name}: rounding the weights errs by {np.median(rel):.2e} (median relative error), "
          f"at most {rel[np.abs(w) >= f.smallest_normal].max():.2e} in the normal range")

# %% [markdown]
# bf16 loses none of these gradients: no loss scaling is needed. But each weight is held
# about 8 times less precisely than in fp16, and (tutorial 05) an update smaller than half
# the gap to the next value is lost: at a weight of 1 that is 2^−9 ≈ 0.002 in bf16 but
# 2^−12 ≈ 0.00024 in fp16.
#
# ## 2. Training in bf16
#
# Five policies, 300 steps each, same seed:
#
# * `fp32` — the baseline;
# * `fp16-amp` — fp16 with fp32 master weights and dynamic loss scaling (PyTorch AMP);
# * `bf16-master` — bf16 compute, fp32 master weights, *no* loss scaling;
# * `bf16-pure` — everything in bf16, the optimizer writes bf16 weights with round-to-nearest;
# * `bf16-pure-sr` — the same, but the weight write rounds *stochastically*.

# %%
runs = {}
for policy in ["fp32", "fp16-amp", "bf16-master", "bf16-pure", "bf16-pure-sr"]:
    r = train(policy, steps=300, seed=0, eval_every=50)
    runs[policy] = r
    s = r.summary
    print(f"{policy:>13}: final loss {s['final_loss']:.4f}, accuracy {s['final_acc']:.1%}, "
          f"gradients underflowed {s['grad_underflow_pct']:5.2f}%, updates lost "
          f"{s['lost_update_pct']:5.1f}%, loss scale {s['final_loss_scale']:g}")

# %%
ref = runs["fp32"].summary["final_loss"]
gap = {p: runs[p].summary["final_loss"] - ref for p in runs}
print(f"Against fp32: bf16-master ends {gap['bf16-master']:+.4f}, bf16-pure {gap['bf16-pure']:+.4f}, "
      f"bf16-pure-sr {gap['bf16-pure-sr']:+.4f} in held-out loss.")
print(f"Stochastic rounding closes {1 - gap['bf16-pure-sr'] / gap['bf16-pure']:.1%} of "
      f"pure bf16's gap, although it still leaves {runs['bf16-pure-sr'].summary['lost_update_pct']:.0f}% "
      f"of the individual updates unchanged (against {runs['bf16-pure'].summary['lost_update_pct']:.0f}% "
      f"with round-to-nearest).")

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
lplot.training_curves(runs, "loss", ax=axes[0], title="Held-out loss, 300 steps")
lplot.training_curves(runs, "acc", ax=axes[1], title="Held-out accuracy")
fig.tight_layout()
show(fig, "06_bf16_training")

# %% [markdown]
# The printed sentences carry the result. bf16 with a master copy needs no loss scaling and
# tracks fp32. Pure bf16 with round-to-nearest falls behind because most weight updates are
# lost. With stochastic rounding the share of weights left unchanged at a given step hardly
# drops (an update much smaller than the gap still usually rounds back), but the rare
# roundings up to the next value happen exactly often enough that the *expected* weight
# moves by the full update (tutorial 02, section 4). Over many steps that is what matters,
# and the network trains like the master-copy version without storing an fp32 copy of the
# weights.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: bf16's unit roundoff
# What is the largest relative error of rounding a number in bf16's normal range to the
# nearest bf16? Store it in `u`.

# %% tags=["solution"]
# Exercise 1: bf16's unit roundoff
# BEGIN SOLUTION
u = 2.0**-7 / 2  # half of eps = 2^-7
# END SOLUTION

# %%
exercises.check_unit_roundoff("bf16", u)

# %% [markdown]
# ### Exercise 2: the odds of a small update
# A bf16 weight of 1.0 receives the update +0.001, and the exact sum 1.001 is rounded
# stochastically to bf16. With what probability does the stored weight become the next bf16
# above 1.0? Store it in `p_up`.

# %% tags=["solution"]
# Exercise 2: the odds of a small update
# BEGIN SOLUTION
gap = 2.0**-7  # bf16 spacing in [1, 2)
p_up = 0.001 / gap
# END SOLUTION

# %%
exercises.check_stochastic_probability(1.0 + 0.001, "bf16", p_up)
