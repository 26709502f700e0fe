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
# # 04 · Loss scaling: static, dynamic, and how to choose the scale
#
# **What you will do.** Shift real gradients into fp16's range by scaling the loss; scan
# scales to find the window between underflow and overflow; train with scales that are too
# small, right and too large; and watch PyTorch's dynamic `GradScaler` find a scale by itself.
#
# **What you will learn.** Why multiplying the loss by S multiplies every gradient by S;
# why the scale is removed again before the weight update; how static and dynamic loss
# scaling differ; how to read a loss-scale trace (halving and a skipped step on overflow,
# doubling after a run of good steps).
#
# **What you need.** Tutorial 03 (gradient underflow). lowprec with `lowprec.train` and
# `lowprec.plot`; no GPU, no downloads; about 15 minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.train import get_policy, train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Shifting the histogram
#
# Backpropagation is linear in the loss: multiply the loss by S and every gradient,
# activation and weight gradients alike, is multiplied by S. If S is a power of two the
# multiplication is exact, and in the histogram of log2 |g| everything moves log2 S binades
# to the right, away from fp16's underflow. Before the optimizer uses the weight gradients
# they are divided by S again, in fp32, so the update is what it would have been.
#
# We take the gradients of the same fp32 run as in tutorial 03 and draw the histogram with
# a loss scale of 2^16, PyTorch's starting value.

# %%
run = train("fp32", steps=100, seed=0, eval_every=50)
act = lplot.gradient_samples(run, "act_grad")
wgt = lplot.gradient_samples(run, "weight_grad")
fig, ax = plt.subplots(figsize=(9, 4.5))
lplot.underflow_histogram(act, "fp16", loss_scale=2.0**16, label="activation gradient", ax=ax,
                          title="Activation gradients, with and without a loss scale of 2^16")
show(fig, "04_scaled_histogram")
for scale in [1.0, 2.0**16]:
    s = lplot.underflow_shares(act, "fp16", loss_scale=scale)
    print(f"S = 2^{int(np.log2(scale)):2d}: {s['zero']:6.1%} of the activation gradients round to "
          f"zero in fp16, {s['subnormal']:6.1%} subnormal, {s['normal']:6.1%} normal")

# %% [markdown]
# ## 2. The window of good scales
#
# Too small a scale leaves gradients below fp16's range; too large a scale pushes the
# largest ones past 65504, where they become inf. Scan the powers of two and look at both
# ends at once, for activation and weight gradients:

# %%
exponents = np.arange(0, 48)
rows = {}
for name, g in [("activation", act), ("weight", wgt)]:
    under = [lplot.underflow_shares(g, "fp16", loss_scale=2.0**e)["zero"] for e in exponents]
    over = [lplot.underflow_shares(g, "fp16", loss_scale=2.0**e)["overflow"] for e in exponents]
    rows[name] = (np.array(under), np.array(over))

fig, ax = plt.subplots(figsize=(8, 4))
for (name, (under, over)), color in zip(rows.items(), ["tab:blue", "tab:orange"]):
    ax.plot(exponents, 100 * under, color=color, label=f"{name} gradients: lost to zero")
    ax.plot(exponents, 100 * over, color=color, ls="--", label=f"{name} gradients: overflow")
ax.set_xlabel("log2 of the loss scale S")
ax.set_ylabel("% of non-zero gradient values")
ax.set_title("fp16: underflow falls and overflow rises as the loss scale grows")
ax.legend(fontsize=8)
show(fig, "04_scale_window")

under_all = np.maximum(rows["activation"][0], rows["weight"][0])
over_any = np.maximum(rows["activation"][1], rows["weight"][1])
good = exponents[(under_all <= 0.01) & (over_any == 0)]
print(f"scales with at most 1% underflow and no overflow: 2^{good.min()} .. 2^{good.max()} "
      f"({good.size} powers of two)")
largest = np.max(np.abs(np.concatenate([act, wgt])))
print(f"the largest gradient seen is {largest:.3g} = 2^{np.log2(largest):.1f}; fp16's max is "
      f"2^{np.log2(lp.get_format('fp16').max):.2f}, so overflow starts near "
      f"S = 2^{np.log2(lp.get_format('fp16').max / largest):.1f}")

# %%
logs = np.log2(np.abs(np.concatenate([act, wgt])[np.concatenate([act, wgt]) != 0]))
lo, hi = np.percentile(logs, [1, 99])
print(f"98% of these gradients lie within {hi - lo:.0f} binades (2^{lo:.0f} .. 2^{hi:.0f}); "
      f"fp16 spans {lp.get_format('fp16').dynamic_range_binades:.0f} binades")

# %% [markdown]
# The window is wide (the printed range), because fp16's range is much wider than the bulk
# of these gradients. But the gradients move during training, and a bigger network has a
# wider spread, so the scale has to be chosen with care or adjusted as training goes.
#
# ## 3. Static loss scaling
#
# A *static* scale is chosen once. The `fp16-static` policy uses S = 2^12 with an fp32 master
# copy; we also try 1 (no scaling) and a scale beyond the window. A step whose gradients hold
# inf or NaN is skipped (the weights are not touched), as in PyTorch.

# %%
static_runs = {}
for e in [0, 12, 40]:
    policy = get_policy("fp16-static").replace(name=f"static 2^{e}", static_scale=2.0**e)
    r = train(policy, steps=100, seed=0, eval_every=50)
    static_runs[r.policy] = r
    s = r.summary
    print(f"{r.policy:>11}: final loss {s['final_loss']:.4f}, gradients lost "
          f"{s['grad_underflow_pct']:5.2f}%, skipped steps {s['skipped_steps']:3d} of {r.steps}")
print(f"{'fp32':>11}: final loss {run.summary['final_loss']:.4f}")

# %% [markdown]
# Without scaling, underflow costs a lot of loss (tutorial 03). With 2^12, almost nothing
# underflows and the run matches fp32 closely. With 2^40 the gradients overflow: every step
# is skipped, the weights never change, and the held-out loss is that of the untrained
# network.
#
# ## 4. Dynamic loss scaling: the GradScaler
#
# PyTorch's `GradScaler` (and `lowprec.train.GradScaler`, with the same defaults) starts at
# S = 2^16, **halves** S and skips the step whenever a gradient is inf or NaN, and
# **doubles** S after 2000 consecutive good steps. It probes for the largest scale that does
# not overflow. To see it work within a few hundred steps we start it far too high (2^40)
# and let it grow every 25 good steps.

# %%
amp = get_policy("fp16-amp").replace(name="fp16-amp (start 2^40, grow every 25)",
                                     init_scale=2.0**40, growth_interval=25)
dyn = train(amp, steps=300, seed=0, eval_every=50)
scales = np.array(dyn.history["loss_scale"])
skipped = np.array(dyn.history["skipped"])
first_good = int(np.argmax(~skipped))
print(f"the first {first_good} steps overflow and are skipped while S halves from 2^40 to "
      f"2^{np.log2(scales[first_good]):.0f}")
print(f"after that S moves between 2^{np.log2(scales[first_good:].min()):.0f} and "
      f"2^{np.log2(scales[first_good:].max()):.0f}; {int(skipped[first_good:].sum())} more "
      f"steps are skipped when a doubling overshoots; {int(skipped.sum())} skipped in all")
print(f"final loss {dyn.summary['final_loss']:.4f} (fp32 300 steps: "
      f"{train('fp32', steps=300, seed=0, eval_every=50).summary['final_loss']:.4f})")

fig, ax = plt.subplots(figsize=(8, 4))
lplot.loss_scale_trace({"GradScaler": dyn}, ax=ax,
                       title="Dynamic loss scale: halve and skip on overflow, grow after 25 good steps")
show(fig, "04_grad_scaler_trace")

# %% [markdown]
# The trace is a sawtooth: S climbs one doubling per 25 good steps until a doubling makes
# some gradient overflow, then that step is skipped and S falls back by half. The cost is the
# handful of skipped steps (marked ×); the gain is that nobody had to choose S. With
# PyTorch's default growth interval of 2000 the probing is 80 times rarer.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: choosing a static scale
# For the activation gradients `act`, what is the smallest power-of-two loss scale with at
# most 1% of the non-zero values rounding to zero in fp16 and none overflowing? Find it with
# `lp.round_to` (or `lplot.underflow_shares`) and store it in `scale`.

# %% tags=["solution"]
# Exercise 1: choosing a static scale
# BEGIN SOLUTION
nonzero = act[act != 0]
for k in range(64):
    with np.errstate(over="ignore"):
        r = lp.round_to(nonzero * 2.0**k, "fp16")
    if np.mean(r == 0) <= 0.01 and np.all(np.isfinite(r)):
        scale = 2.0**k
        break
# END SOLUTION

# %%
exercises.check_smallest_loss_scale(act, "fp16", scale)

# %% [markdown]
# ### Exercise 2: predict the GradScaler
# A GradScaler starts at 2^16 with a growth interval of 3. The steps' gradients are
# finite, finite, **inf**, finite, finite, finite, finite, finite, finite, **inf** (in that
# order). What is the scale after the last update? Store it in `final_scale`.

# %% tags=["solution"]
# Exercise 2: predict the GradScaler
# BEGIN SOLUTION
# 2^16, 2^16 (2 good), inf -> 2^15 (count reset), 3 good -> 2^16, 3 good -> 2^17, inf -> 2^16
final_scale = 2.0**16
# END SOLUTION

# %%
exercises.check_grad_scaler_scale(
    [False, False, True, False, False, False, False, False, False, True], final_scale,
    init_scale=2.0**16, growth_interval=3)
