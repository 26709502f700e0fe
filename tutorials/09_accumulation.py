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
# # 09 · Accumulation: how hardware adds up a dot product
#
# **What you will do.** Add up long dot products in different ways (in order in fp16 or
# fp32, as a tree, and the way NVIDIA tensor cores do it) and compare each with the exact
# result; then measure the error of FP8 GEMMs on an H100-like accumulator as K grows, with
# and without DeepSeek-V3's promotion to FP32 every 128 products.
#
# **What you will learn.** Why the accumulator's precision matters more than the inputs';
# what a tensor core's block FMA does (exact products, alignment, truncation); why Hopper's
# FP8 tensor cores, which keep only about 14 bits of the sum, lose accuracy on long dot
# products; and why adding partial sums into FP32 every 128 products fixes it.
#
# **What you need.** Tutorials 01 and 02. lowprec with `lowprec.matmul` and `lowprec.plot`;
# no GPU, no downloads; about 15 minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.matmul import list_models
from lowprec.tutorials import show

# %% [markdown]
# ## 1. The accumulator decides
#
# A dot product multiplies pairs and adds the products. Products of fp16 (or FP8) numbers are
# exact in fp32, so the error comes from the additions, and it depends on the format of the
# running sum (the *accumulator*) and the order. The simplest case: add 1.0 four thousand
# times.

# %%
ones = np.ones((1, 4096))
for acc in ["fp16", "bf16", "fp32"]:
    total = lp.matmul(ones, ones.T, inputs="fp16", accumulate=acc, model="sequential")[0, 0]
    print(f"4096 × 1.0 summed in order in a {acc} accumulator: {total:g}")

# %% [markdown]
# fp16's sum sticks at 2048: there the gap between fp16 numbers is 2, so 2048 + 1 is a tie,
# and round-to-nearest-even keeps 2048 (the lost-update effect of tutorial 05 again). bf16,
# with 3 fewer bits, sticks at 256. This is why GEMMs on fp16 inputs accumulate in fp32.
#
# ## 2. The accumulation models
#
# `lowprec.matmul` emulates several ways of adding: `exact` (round once at the end),
# `sequential` (one fused multiply-add per product, rounded each time), `pairwise` (a tree),
# `blocked`, and models of NVIDIA tensor cores (`v100`, `a100`, `ada`, `h100`, `b200`) that
# reproduce measurements of real GPUs bit for bit (Fasi, Higham, Mikaitis & Pranesh 2021;
# Khattak & Mikaitis 2025). A tensor core computes a *block FMA*: a few products (4 on V100,
# 8 on A100, 16 on H100 for fp16) plus the accumulator C, all exact, are aligned to the
# largest *nominal* exponent (C's, or e_a + e_b for a product), every term keeps a fixed
# number of bits below it (23 on V100, 24 on A100, 25 on H100) and loses the rest by
# truncation, and the exact sum is normalised once, truncating into fp32.

# %%
for name, text in list_models().items():
    print(f"{name:>12}: {text.split(': ', 1)[1].split(' Source')[0]}")

# %% [markdown]
# A worked example in the style of Fasi et al.: 1 plus three tiny products 2^−12 × 2^−12 =
# 2^−24 of fp16 inputs. Exactly, the sum is 1 + 3 × 2^−24; fp32 can hold 1 + 2 × 2^−24 or
# 1 + 4 × 2^−24 but not that.

# %%
a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])
b = a.T.copy()
for model in ["exact", "sequential", "pairwise", "v100", "a100", "h100"]:
    r = lp.matmul(a, b, inputs="fp16", accumulate="fp32", model=model)[0, 0]
    print(f"{model:>10}: 1 + {(r - 1) / 2.0**-24:g} × 2^-24")

# %% [markdown]
# Rounded once, the exact sum 1 + 3 × 2^−24 goes to the nearest fp32, 1 + 4 × 2^−24 (it is a
# tie between 1 + 2 × 2^−24 and 1 + 4 × 2^−24, and the latter is even). In order, each
# 1 + 2^−24 is a tie that goes back to 1: everything is lost. The tree adds the small ones
# first and keeps part of them. V100's tensor core aligns all four terms to the exponent of 1
# and truncates everything below fp32's last bit, so the small products vanish; A100 and
# H100 keep 1 and 2 extra alignment bits, so the three small terms survive and their sum is
# truncated to 1 + 2 × 2^−24. Six models, three different answers, all "fp32 accumulation".
#
# ## 3. FP8 on Hopper, and promotion every 128 products
#
# DeepSeek-V3's technical report (Sec. 3.3.2) found that the FP8 GEMMs of H100 tensor cores
# keep only about 14 bits of the running sum. lowprec's `h100` model on FP8 inputs, which
# reproduces every measured H100 FP8 dot product, is a 32-product block FMA that keeps 13
# fraction bits and truncates. Their fix, `promote`: the tensor core accumulates 128
# products (4 block FMAs), then the partial sum is added into a true FP32 accumulator on the
# CUDA cores, and the tensor core starts again from zero (`deepseek_v3` =
# `promote(128, "h100")`).
#
# We measure the relative error of 64 dot products of positive FP8 E4M3 vectors (like
# activations after a ReLU times positive weights, the worst case: no cancellation) against
# the exact result, for K from 64 to 16384:

# %%
rng = np.random.default_rng(0)
ks = [64, 256, 1024, 4096, 16384]
models = ["sequential", "pairwise", "h100", "deepseek_v3"]
errors = {m: [] for m in models}
for k in ks:
    x = lp.round_to(rng.uniform(0, 1, (1, k)), "fp8_e4m3")
    y = lp.round_to(rng.uniform(0, 1, (k, 64)), "fp8_e4m3")
    exact = lp.matmul(x, y, inputs="fp8_e4m3", model="exact", output="fp32")
    for m in models:
        r = lp.matmul(x, y, inputs="fp8_e4m3", accumulate="fp32", model=m)
        errors[m].append(float(np.mean(np.abs(r - exact) / exact)))
fig, ax = plt.subplots(figsize=(7, 4.5))
lplot.accumulation_error(ks, {m: errors[m] for m in models}, ax=ax,
                         ylabel="mean relative error of the dot product",
                         title="FP8 E4M3 dot products: error against length K")
show(fig, "09_accumulation_error")
for m in models:
    print(f"{m:>12}: " + ", ".join(f"K={k}: {e:.2e}" for k, e in zip(ks, errors[m])))

# %%
i = ks.index(4096)
print(f"At K = 4096 the 14-bit accumulator (h100, FP8) is off by {errors['h100'][i]:.1%} on "
      f"average; promoting every 128 products cuts that to {errors['deepseek_v3'][i]:.3%}, "
      f"{errors['h100'][i] / errors['deepseek_v3'][i]:.0f} times less, and once K passes 128 "
      f"its error stops growing ({', '.join(f'{e:.2e}' for e in errors['deepseek_v3'][1:])} "
      f"for K = {', '.join(str(k) for k in ks[1:])}).")
print(f"A plain FP32 sequential loop stays at {errors['sequential'][i]:.1e}: the cost is in the "
      f"tensor core's short accumulator, not in FP8 inputs.")

# %% [markdown]
# Why the error grows: as the running sum s grows, the spacing of a 13-fraction-bit
# accumulator grows with it (2^(e − 13) for s in [2^e, 2^(e+1))), and each block FMA
# truncates its products to that spacing. Products of FP8 values are small (here below 1)
# while the sum reaches thousands, so more and more of every product is cut off, always in
# the same direction. The promoted version never lets the tensor-core sum grow beyond 128
# products, and FP32's 23 fraction bits absorb the partial sums.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: where does the fp16 sum stick?
# Add 0.5 to an fp16 accumulator 10,000 times (round to nearest even after each addition,
# starting from 0). What is the result? Store it in `stuck`.

# %% tags=["solution"]
# Exercise 1: where does the fp16 sum stick?
# BEGIN SOLUTION
# The sum stops when the fp16 gap reaches 2 * 0.5 = 1, i.e. in [1024, 2048): at 1024,
# 1024 + 0.5 is a tie and 1024 is even.
stuck = 1024.0
# END SOLUTION

# %%
exercises.check_sequential_sum(0.5, 10_000, "fp16", stuck)

# %% [markdown]
# ### Exercise 2: what a 13-bit accumulator drops
# Hopper's FP8 accumulator (`model="h100"` on FP8 inputs) keeps 13 fraction bits. When it holds about 3000, what is its
# spacing, i.e. the size below which a product's contribution is truncated away? Store it
# in `spacing`.

# %% tags=["solution"]
# Exercise 2: what a 13-bit accumulator drops
# BEGIN SOLUTION
spacing = 2.0 ** (np.floor(np.log2(3000)) - 13)  # 3000 is in [2^11, 2^12)
# END SOLUTION

# %%
exercises.check_accumulator_spacing(3000.0, 13, spacing)
