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
# # 07 · FP8 with per-tensor scaling: current, delayed, and per tile
#
# **What you will do.** Quantize tensors to FP8 E4M3 and E5M2 without and with a scale;
# compute the scale the way NVIDIA Transformer Engine does; follow delayed scaling's amax
# history through a run whose values grow and spike; give tiles of a matrix their own scales
# as DeepSeek-V3 does; and train a network with FP8 activations, weights and gradients.
#
# **What you will learn.** Why FP8 is unusable without scaling; what `scale = max / amax`
# achieves; why delayed scaling uses *past* amaxes and what that costs when values jump; why
# one outlier hurts a per-tensor scale and how smaller tiles contain it.
#
# **What you need.** Tutorials 01 and 03. lowprec with `lowprec.scaling`,
# `lowprec.quant_error` and `lowprec.train`; no GPU, no downloads; about 20 minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

from lowprec import exercises
from lowprec import plot as lplot
from lowprec.quant_error import compare_schemes, format_table
from lowprec.scaling import DelayedScaling, current_scale, quantize_per_tensor, quantize_tiles
from lowprec.train import train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Why FP8 needs a scale
#
# FP8 E4M3 covers only about 18 binades (2^−9 to 448), E5M2 about 32. A tensor of
# activations or gradients rarely sits where those binades are. Transformer Engine's answer
# is one float32 **scale** per tensor, multiplied in before rounding and divided out after:
#
#     codes = round(x × scale),   x̂ = decode(codes) × scale_inv,   scale = fmt.max / amax
#
# where amax is the largest magnitude in the tensor: the largest value lands exactly on the
# format's largest value, and everything else keeps its place relative to it. Here is a
# tensor of small values (standard deviation 10^−3, like many activations' gradients):

# %%
rng = np.random.default_rng(0)
x = (rng.standard_normal(8192) * 1e-3).astype(np.float32)
amax = float(np.max(np.abs(x)))
print(f"amax = {amax:.4g}; E4M3 scale = 448 / amax = {current_scale(amax, 'fp8_e4m3'):.6g}")
results = compare_schemes(x, ["cast:fp8_e4m3", "per_tensor:fp8_e4m3",
                              "per_tensor:fp8_e4m3:pow2", "cast:fp8_e5m2",
                              "per_tensor:fp8_e5m2", "cast:bf16"])
print(format_table(results))

# %%
r = {res.scheme: res for res in results}
print(f"Unscaled, E4M3 flushes {r['cast:fp8_e4m3'].frac_flushed:.0%} of the values to zero "
      f"(SQNR {r['cast:fp8_e4m3'].sqnr_db:.1f} dB); with a per-tensor scale it flushes "
      f"{r['per_tensor:fp8_e4m3'].frac_flushed:.0%} and reaches "
      f"{r['per_tensor:fp8_e4m3'].sqnr_db:.1f} dB.")
print(f"A power-of-two scale gives {r['per_tensor:fp8_e4m3:pow2'].sqnr_db:.1f} dB here. E5M2 "
      f"loses less without a scale ({r['cast:fp8_e5m2'].frac_flushed:.1%} flushed) thanks to its "
      f"range, but scaled it stays at {r['per_tensor:fp8_e5m2'].sqnr_db:.1f} dB: one mantissa bit "
      f"less is about 6 dB less.")

# %% [markdown]
# SQNR is the signal-to-quantization-noise ratio, higher is better; every 6 dB is one bit.
# A scale moves the tensor into the format's binades; after that, the mantissa bits decide
# the accuracy. A power-of-two scale (`pow2`) does not put the largest value exactly on 448,
# but it makes the multiplication by the scale exact, and costs nothing measurable here.
#
# ## 2. One outlier, and tiles
#
# The per-tensor scale is set by a single number. If one value is 1000 times larger than
# the rest, the scale shrinks 1000 times and the small values fall toward E4M3's subnormals
# and zero. DeepSeek-V3 gives every 1×128 tile of an activation matrix its own scale, so an
# outlier only affects its own tile.

# %%
m = (rng.standard_normal((64, 512)) * 1e-2).astype(np.float32)
m[5, 77] = 1000.0  # one outlier, 100,000 times the typical magnitude
per_tensor = quantize_per_tensor(m, "fp8_e4m3")
tiles = quantize_tiles(m, "fp8_e4m3", tile=(1, 128))
for name, t in [("per tensor", per_tensor), ("1x128 tiles", tiles)]:
    q = t.dequantize()
    rel = np.abs(q - m)[m != 0] / np.abs(m[m != 0])
    print(f"{name:>12}: {t.scale.size:4d} scale(s), values flushed to zero "
          f"{np.mean(q[m != 0] == 0):6.2%}, median relative error {np.median(rel):.3%}")
print(format_table(compare_schemes(m, ["per_tensor:fp8_e4m3", "tiles:fp8_e4m3:tile=1x128",
                                       "tiles:fp8_e4m3:tile=128x128"])))

fig, ax = plt.subplots(figsize=(9, 4))
row = m[5]
lplot.outlier_scaling(row, {"per-tensor scale": per_tensor.dequantize()[5],
                            "1x128 tiles": tiles.dequantize()[5]},
                      block_size=128, ax=ax,
                      title="Row 5 (it holds the outlier): relative error per element")
show(fig, "07_outlier_tiles")

# %% [markdown]
# Read the row plot and the table: with one scale for the whole matrix, the typical values
# land in E4M3's subnormal range or below it, where few bits (or none) are left; with 1×128
# tiles only the tile holding the outlier suffers, at the price of one fp32 scale per 128
# values (8.25 bits per value). The 128×128 blocks DeepSeek uses for weights sit in between.
#
# ## 3. Delayed scaling
#
# Computing amax needs a pass over the tensor before quantizing it. Transformer Engine's
# *delayed* scaling avoids that by using amaxes recorded in earlier steps: each step
# quantizes with the scale computed after the previous step from an **amax history** (by
# default the maximum over the last 1024 steps), and records its own amax for the future.
# We feed it a tensor whose magnitude grows slowly, then spikes once at step 40:

# %%
steps = 80
growth = 1.03 ** np.arange(steps)
growth[40] *= 8  # a one-step spike
histories = {"history 1 (most recent)": DelayedScaling("fp8_e4m3", history_len=1),
             "history 16 (max)": DelayedScaling("fp8_e4m3", history_len=16)}
trace = {name: {"scale": [], "clipped": []} for name in histories}
amaxes = []
data_rng = np.random.default_rng(1)
for k in range(steps):
    xk = (data_rng.standard_normal(4096) * growth[k]).astype(np.float32)
    amaxes.append(float(np.max(np.abs(xk))))
    for name, ds in histories.items():
        t = ds.quantize(xk)
        trace[name]["scale"].append(float(t.scale))
        trace[name]["clipped"].append(float(np.mean(np.abs(xk) * t.scale > 448)))
        ds.update()

fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
axes[0].semilogy(448 / np.array(amaxes), color="black", lw=2, label="ideal: 448 / this step's amax")
for name, color in zip(trace, ["tab:blue", "tab:orange"]):
    axes[0].semilogy(trace[name]["scale"], color=color, label=f"delayed, {name}")
    axes[1].plot(4096 * np.array(trace[name]["clipped"]), color=color, label=name)
axes[0].set_ylabel("scale (log axis)")
axes[0].legend(fontsize=8)
axes[0].set_title("Delayed scaling follows amax one step late (step 0 uses TE's initial scale 1)")
axes[1].set_ylabel("values clipped to ±448\n(of 4096; symlog axis)")
axes[1].set_yscale("symlog", linthresh=1)
axes[1].set_xlabel("step")
axes[1].legend(fontsize=8)
fig.tight_layout()
show(fig, "07_delayed_scaling")

summary = {}
for name in trace:
    c = np.array(trace[name]["clipped"])
    sc = np.array(trace[name]["scale"])
    low = int(np.sum(sc[41:] < 0.5 * 448 / np.array(amaxes[41:])))
    summary[name] = (int(np.count_nonzero(c > 0)), low)
    print(f"{name}: values clipped at {summary[name][0]} of {steps} steps (worst {c.max():.1%}, "
          f"step {int(np.argmax(c))}); after the spike the scale is more than 2x too small for "
          f"{low} step(s)")

# %% [markdown]
# With a history of one step the scale follows amax a step late: whenever this step's amax
# is larger than the last one's (the values grow, and amax also fluctuates from sample to
# sample), the largest values clip (saturate at 448), and the spike at step 40 clips hard
# because no delayed scale can see it coming. A window of 16 steps takes the largest recent
# amax, which absorbs the fluctuations, so it clips at fewer steps (the printed counts); but
# after the spike it keeps a scale 8 times too small for 16 steps, spending three of E4M3's
# 18 binades on headroom nobody needs. The window (and the `margin` option) trades clipping
# against resolution.
#
# ## 4. Training in FP8
#
# The `fp8` policy follows Transformer Engine: E4M3 weights and activations, E5M2 activation
# gradients, each tensor with its own delayed scale, an fp32 master copy.

# %%
runs = {p: train(p, steps=200, seed=0, eval_every=50) for p in ["fp32", "fp8"]}
for p, r in runs.items():
    print(f"{p:>5}: final loss {r.summary['final_loss']:.4f}, accuracy {r.summary['final_acc']:.1%}")
fig, ax = plt.subplots(figsize=(7, 4))
lplot.training_curves(runs, "loss", ax=ax, title="FP8 with delayed scaling against fp32")
show(fig, "07_fp8_training")

# %% [markdown]
# With scaling, the FP8 run trains: its loss (printed above) stays close to fp32's, though
# not equal, since E4M3 keeps only 3 mantissa bits of every weight and activation. Without
# scaling, the same gradients would mostly vanish in E5M2 (tutorial 03's table).

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: a current scale
# A tensor's largest magnitude is 3.5. What scale does current scaling to FP8 E4M3 use?
# Store it in `scale`.

# %% tags=["solution"]
# Exercise 1: a current scale
# BEGIN SOLUTION
scale = 448 / 3.5
# END SOLUTION

# %%
exercises.check_current_scale(3.5, "fp8_e4m3", scale)

# %% [markdown]
# ### Exercise 2: a power-of-two scale for E5M2
# Same question for amax = 3.0, FP8 E5M2, with the scale rounded down to a power of two.
# Store it in `scale_pow2`.

# %% tags=["solution"]
# Exercise 2: a power-of-two scale for E5M2
# BEGIN SOLUTION
scale_pow2 = 2.0 ** np.floor(np.log2(57344 / 3.0))
# END SOLUTION

# %%
exercises.check_current_scale(3.0, "fp8_e5m2", scale_pow2, power_of_two=True)

# %% [markdown]
# ### Exercise 3: delayed scaling after a spike
# Delayed scaling with a history of 4 steps (maximum over the window) has seen the amaxes
# 1, 2, 8, 4, 2 in five steps. What scale does step 6 use for E4M3? Store it in `next_scale`.

# %% tags=["solution"]
# Exercise 3: delayed scaling after a spike
# BEGIN SOLUTION
window = [2, 8, 4, 2]  # the last 4 steps
next_scale = 448 / max(window)
# END SOLUTION

# %%
exercises.check_delayed_scale([1, 2, 8, 4, 2], "fp8_e4m3", next_scale, history_len=4)
