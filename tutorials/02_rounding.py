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
# # 02 · Rounding: six deterministic modes, stochastic rounding, and double rounding
#
# **What you will do.** Round numbers to FP8 and fp16 in every rounding mode lowprec has;
# draw the rounding functions; measure the bias each mode adds to a sum; watch an
# accumulation stall under round-to-nearest and keep moving under stochastic rounding; and
# catch a library rounding twice.
#
# **What you will learn.** What `rne`, `rna`, `rtz`, `rup`, `rdown`, `odd` and `stochastic`
# do; why ties are rare in random data but common when you convert between formats, and why
# "ties to even" matters there; why stochastic rounding is unbiased; what double rounding is,
# why converting float64 -> float32 -> bf16 can give a different answer from float64 -> bf16,
# and how round-to-odd prevents it.
#
# **What you need.** Tutorial 01 (fields, spacing). lowprec, numpy, matplotlib, ml_dtypes
# (installed with lowprec). No GPU, no downloads, about 20 minutes.

# %%
import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Between two neighbours
#
# A real number x that a format cannot hold lies between two neighbouring values of the
# format, lo < x < hi. A rounding mode picks one of them:
#
# | mode | picks |
# |---|---|
# | `rne` | the nearer; on a tie, the one whose last mantissa bit is 0 ("even"). IEEE's default |
# | `rna` | the nearer; on a tie, the one farther from zero (school rounding) |
# | `rtz` | the one nearer zero (truncation) |
# | `rup` / `rdown` | the larger / the smaller (toward +inf / -inf) |
# | `odd` | the one whose last mantissa bit is 1, unless x is exact (explained in section 5) |
# | `stochastic` | hi with probability (x − lo)/(hi − lo), else lo |
#
# FP8 E4M3 is a good format to watch: between 1 and 2 its values are 1, 1.125, 1.25, ...
# (spacing 1/8). Here are a few numbers in every deterministic mode:

# %%
e4m3 = lp.get_format("fp8_e4m3")
deterministic = [m for m in lp.MODES if m != "stochastic"]
xs = [1.0625, 1.1875, 1.07, 1.1, -1.0625, -1.07]
print(f"{'x':>8} " + " ".join(f"{m:>7}" for m in deterministic))
for x in xs:
    print(f"{x:>8} " + " ".join(f"{float(lp.round_to(x, e4m3, m)):>7}" for m in deterministic))

# %% [markdown]
# Let lowprec's codes tell us which neighbour is "even", and put the table into words:

# %%
for x in [1.0625, 1.1875]:
    lo = float(lp.round_to(x, e4m3, "rdown"))
    hi = float(lp.round_to(x, e4m3, "rup"))
    lo_code, hi_code = int(lp.encode(lo, e4m3)), int(lp.encode(hi, e4m3))
    print(f"{x} is exactly halfway between {lo} (code {lo_code:08b}) and {hi} "
          f"(code {hi_code:08b}): rne picks {float(lp.round_to(x, e4m3, 'rne'))}, the one "
          f"ending in 0; rna picks {float(lp.round_to(x, e4m3, 'rna'))}, away from zero.")
x = 1.07
print(f"{x} is not a tie: both nearest modes give {float(lp.round_to(x, e4m3))}, rtz and rdown "
      f"give {float(lp.round_to(x, e4m3, 'rtz'))}, rup gives {float(lp.round_to(x, e4m3, 'rup'))}.")
print(f"For -1.07, rtz ({float(lp.round_to(-1.07, e4m3, 'rtz'))}) follows rup "
      f"({float(lp.round_to(-1.07, e4m3, 'rup'))}), not rdown "
      f"({float(lp.round_to(-1.07, e4m3, 'rdown'))}): toward zero is upward for negatives.")

# %% [markdown]
# ## 2. The rounding functions, drawn
#
# Each mode is a staircase from the real line onto the format's values. The nearest modes
# jump halfway between two values; the directed modes jump at the values themselves.

# %%
grid = np.linspace(0.95, 1.55, 2001)
fig, axes = plt.subplots(2, 3, figsize=(10, 5.5), sharex=True, sharey=True)
for ax, mode in zip(axes.flat, deterministic):
    ax.plot(grid, lp.round_to(grid, e4m3, mode), color="tab:blue", lw=1.5, label=mode)
    ax.plot(grid, grid, color="0.6", lw=0.8, ls="--", label="y = x")
    ax.set_title(f"{mode}: {lp.MODES[mode].split(' (')[0]}", fontsize=9)
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("x")
for ax in axes[:, 0]:
    ax.set_ylabel("x rounded to FP8 E4M3")
fig.suptitle("The six deterministic rounding modes on FP8 E4M3 (values 1, 1.125, 1.25, ...)")
fig.tight_layout()
show(fig, "02_rounding_modes")

# %% [markdown]
# ## 3. Why ties matter
#
# In random real data an exact tie almost never happens. But converting numbers from one
# format to a narrower one produces ties all the time, because the wider format's values sit
# on a finer grid that *contains* the narrower grid's midpoints. Take every E4M3 value in
# [1, 4) and round it to FP4 E2M1 (values 1, 1.5, 2, 3, 4, ...), as an MX quantizer does when
# it requantizes FP8 data:

# %%
e4m3_values = lp.decode(np.arange(0x38, 0x48, dtype=np.uint8), e4m3)  # all E4M3 in [1, 4)
down = lp.round_to(e4m3_values, "fp4_e2m1", "rdown")
up = lp.round_to(e4m3_values, "fp4_e2m1", "rup")
ties = (e4m3_values - down == up - e4m3_values) & (up != down)
print(f"{e4m3_values.size} E4M3 values in [1, 4); {ties.sum()} of them are exact ties in FP4: "
      f"{e4m3_values[ties]}")
print(f"{'mode':>10}  mean error (signed)  rounded values")
for mode in ["rne", "rna", "rtz", "stochastic"]:
    rng = np.random.default_rng(0) if mode == "stochastic" else None
    r = lp.round_to(e4m3_values, "fp4_e2m1", mode, rng=rng)
    print(f"{mode:>10}  {np.mean(r - e4m3_values):+19.5f}  {r}")

# %% [markdown]
# Read the signed mean error: round-to-nearest-even sends half the ties up and half down, so
# its errors cancel exactly (mean 0 here). Ties-away sends every positive tie up: a
# systematic upward bias, however small each step. Truncation's bias is far larger. On one
# conversion this is small, but an error that always has the same sign grows linearly when
# you add up many rounded numbers, while unbiased errors grow only like a square root:

# %%
rng = np.random.default_rng(1)
data = lp.round_to(rng.uniform(1, 4, size=100_000), e4m3)  # E4M3 data, e.g. activations
exact_sum = data.sum()
for mode in ["rne", "rna", "rtz"]:
    total = lp.round_to(data, "fp4_e2m1", mode).sum()
    print(f"{mode:>4}: sum of the FP4 values {total:12.1f}, exact {exact_sum:12.1f}, "
          f"relative error {(total - exact_sum) / exact_sum:+.2%}")

# %% [markdown]
# ## 4. Stochastic rounding
#
# Stochastic rounding (SR) rounds x up with probability (x − lo)/(hi − lo) and down
# otherwise, so the *expected* result is exactly x. One rounding is noisier than
# round-to-nearest, but the noise averages out instead of piling up. lowprec draws one 64-bit
# random word per element from the numpy Generator you pass, so a seed fixes the result.

# %%
x = 1.03125  # a quarter of the way from 1.0 to 1.125 in E4M3
draws = lp.round_to(np.full(10_000, x), e4m3, "stochastic", rng=np.random.default_rng(2))
values, counts = np.unique(draws, return_counts=True)
for v, c in zip(values, counts):
    print(f"{x} -> {v}: {c} times ({c / draws.size:.1%})")
print(f"mean of the 10,000 rounded values: {draws.mean():.5f} (x = {x}); "
      f"round-to-nearest always gives {float(lp.round_to(x, e4m3))}")

fig, ax = plt.subplots(figsize=(6, 3.2))
ax.bar([str(v) for v in values], counts / draws.size, color=["tab:blue", "tab:orange"])
ax.axhline(0.75, color="0.3", ls=":", lw=1)
ax.axhline(0.25, color="0.3", ls=":", lw=1)
ax.set_ylabel("share of 10,000 roundings")
ax.set_xlabel(f"result of stochastically rounding x = {x} to FP8 E4M3")
ax.set_title("Stochastic rounding: down 3/4 of the time, up 1/4 (dotted lines)")
show(fig, "02_stochastic_shares")

# %% [markdown]
# ### Stagnation: adding something small, 5,000 times
#
# Now the effect that makes SR matter for training. Start at 1.0 in fp16 and add the fp16
# number nearest 2 × 10^−4, 5,000 times, rounding after each addition. Both operands are fp16
# numbers, so their exact sum is a float64 and `round_to(s + inc, "fp16", mode)` is exactly
# the fp16 addition in that mode. The increment is less than half of fp16's spacing at 1.0
# (2^−10 ≈ 0.00098), so round-to-nearest throws it away every time.

# %%
fp16 = lp.get_format("fp16")
inc = float(lp.round_to(2e-4, fp16))
steps = 5_000
trajectories = {}
for mode in ["rne", "stochastic", "rup"]:
    rng = np.random.default_rng(3) if mode == "stochastic" else None
    s = 1.0
    path = np.empty(steps + 1)
    path[0] = s
    for k in range(steps):
        s = float(lp.round_to(s + inc, fp16, mode, rng=rng))
        path[k + 1] = s
    trajectories[mode] = path
exact = 1.0 + inc * np.arange(steps + 1)
print(f"increment {inc!r}; half the fp16 spacing at 1.0 is {fp16.eps / 2!r}")
for mode, path in trajectories.items():
    print(f"{mode:>10}: after {steps} additions s = {path[-1]:.6g} (exact {exact[-1]:.6g}, "
          f"off by {(path[-1] - exact[-1]) / exact[-1]:+.1%})")
stuck = int(np.sum(np.diff(trajectories["rne"]) == 0))
print(f"Round-to-nearest lost {stuck} of {steps} additions; rounding up ended "
      f"{trajectories['rup'][-1] / exact[-1]:.0f} times too high; stochastic rounding ended "
      f"{abs(trajectories['stochastic'][-1] - exact[-1]) / exact[-1]:.1%} from the exact sum.")

fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(exact, color="black", lw=2, label="exact")
for (mode, path), color in zip(trajectories.items(), ["tab:blue", "tab:orange", "tab:green"]):
    ax.plot(path, color=color, lw=1.2, label=f"fp16, {mode}")
ax.set_xlabel("number of additions")
ax.set_ylabel("running sum s")
ax.set_ylim(0.9, 2.6)
ax.set_title(f"Adding {inc:.3g} to 1.0 in fp16, {steps:,} times")
ax.legend()
show(fig, "02_stagnation")

# %% [markdown]
# Round-to-nearest never moves: every sum rounds back to 1.0, so all the updates are lost.
# Rounding up moves one full spacing per step, whatever the increment, and runs off the top
# of the plot. Stochastic rounding follows the exact sum to within a few percent: each
# addition rounds up with probability inc/spacing, so on average it adds exactly `inc`, and
# the random walk around the exact sum is the price (another seed gives another path; their
# average is the exact sum). That is the lost-update problem of low-precision training
# (tutorial 05) and the reason stochastic rounding rescues pure-bf16 training (tutorial 06).
#
# ## 5. Double rounding
#
# Rounding twice, first to an intermediate format and then to the target, is not the same
# as rounding once. If the first rounding lands exactly on a midpoint of the target format,
# the second sees a tie that the original number was not. Here is a float64 number just
# *above* the midpoint between the bf16 neighbours 1 and 1 + 2^−7:

# %%
x = 1 + 2**-8 + 2**-40
direct = float(lp.round_to(x, "bf16"))
via_fp32 = float(lp.round_to(lp.round_to(x, "fp32"), "bf16"))
ml = float(np.array([x]).astype(ml_dtypes.bfloat16)[0])
print(f"x = 1 + 2^-8 + 2^-40 = {x!r}")
print(f"  rounded once to bf16          : {direct!r}")
print(f"  to fp32 ({float(lp.round_to(x, 'fp32'))!r}), then bf16: {via_fp32!r}")
print(f"  ml_dtypes x.astype(bfloat16)  : {ml!r}")
x16 = 1 + 2**-11 + 2**-40  # the same trap for fp16: just above the midpoint of 1 and 1 + 2^-10
print(f"and for fp16, x = 1 + 2^-11 + 2^-40: numpy's x.astype(float16) gives "
      f"{float(np.float16(x16))!r}, lowprec {float(lp.round_to(x16, 'fp16'))!r}, "
      f"via fp32 {float(lp.round_to(lp.round_to(x16, 'fp32'), 'fp16'))!r}")

# %% [markdown]
# The first rounding to fp32 drops the 2^−40 and leaves exactly the midpoint 1 + 2^−8, which
# rne then sends down to the even 1.0. The correct answer, 1 + 2^−7 = 1.0078125, is the
# nearer neighbour of x. **ml_dtypes' float64 -> bfloat16 cast gives 1.0**: it converts through
# float32, so it rounds twice. numpy's float64 -> float16 cast rounds once and is correct
# (the last line: only the detour through fp32 gets the fp16 case wrong).
# How often does it happen? Count over a million random float64 numbers:

# %%
rng = np.random.default_rng(4)
x = rng.uniform(1, 2, size=1_000_000)
for fmt, dtype in [("bf16", ml_dtypes.bfloat16), ("fp8_e4m3", ml_dtypes.float8_e4m3fn)]:
    once = lp.round_to(x, fmt)
    ml = x.astype(dtype).astype(np.float64)
    twice = lp.round_to(lp.round_to(x, "fp32"), fmt)
    odd_first = lp.round_to(lp.round_to(x, "fp32", "odd"), fmt)
    print(f"{fmt:>8}: ml_dtypes differs from rounding once in {(ml != once).sum()} of {x.size:,}; "
          f"via fp32 (rne) in {(twice != once).sum()}; via fp32 with round-to-odd in "
          f"{(odd_first != once).sum()}")

# %% [markdown]
# Rare (a few per million: the fp32 rounding must land exactly on a target midpoint) but
# real, and exactly the kind of discrepancy that breaks a bit-for-bit comparison with
# hardware. The last column shows the fix. **Round-to-odd** for the first step sets the last
# bit whenever it discards anything, so an inexact intermediate can never look like an exact
# tie to the second rounding. With at least two extra bits in the intermediate format (fp32
# has 16 more than bf16), rounding to odd and then to nearest equals rounding once. lowprec
# never takes the shortcut: float64 input is rounded once, directly.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: ties in E4M3
# 1.3125 lies between the E4M3 values 1.25 and 1.375. Work out by hand what it becomes in
# `rne` and in `rna`, and store the results in `rne_result` and `rna_result` (hint: write
# both neighbours' mantissa bits).

# %% tags=["solution"]
# Exercise 1: ties in E4M3
# BEGIN SOLUTION
# 1.25 = 1.010b, 1.375 = 1.011b, 1.3125 is exactly halfway: rne -> the even 1.010b.
rne_result = 1.25
rna_result = 1.375  # ties away from zero
# END SOLUTION

# %%
exercises.check_rounding(1.3125, "fp8_e4m3", "rne", rne_result)
exercises.check_rounding(1.3125, "fp8_e4m3", "rna", rna_result)

# %% [markdown]
# ### Exercise 2: the largest lost update
# In fp16 (round to nearest even), what is the largest d such that 1024 + d rounds back to
# 1024? Store it in `d`.

# %% tags=["solution"]
# Exercise 2: the largest lost update
# BEGIN SOLUTION
spacing = 1024 * 2.0**-10  # fp16 spacing in [1024, 2048) is 1
d = spacing / 2  # the tie 1024.5 goes to the even 1024
# END SOLUTION

# %%
exercises.check_largest_lost_increment(1024.0, "fp16", d)

# %% [markdown]
# ### Exercise 3: stochastic odds
# With what probability does stochastic rounding send 1.09375 *up* in FP8 E4M3? Store it in
# `p_up`.

# %% tags=["solution"]
# Exercise 3: stochastic odds
# BEGIN SOLUTION
lo, hi = 1.0, 1.125
p_up = (1.09375 - lo) / (hi - lo)
# END SOLUTION

# %%
exercises.check_stochastic_probability(1.09375, "fp8_e4m3", p_up)

# %% [markdown]
# ### Exercise 4: make your own double rounding
# Find a float64 number `x` that rounds to FP8 E4M3 differently directly and through fp16
# (rounding to nearest even both times).

# %% tags=["solution"]
# Exercise 4: make your own double rounding
# BEGIN SOLUTION
# Just above the E4M3 midpoint 1 + 2^-4, by less than half an fp16 spacing (2^-11):
x = 1 + 2**-4 + 2**-20
# END SOLUTION

# %%
exercises.check_double_rounding(x, "fp8_e4m3", via="fp16")

# %% [markdown]
# ### Exercise 5: in your own words
# Why does round-to-odd in the first step prevent double rounding? Write two sentences.

# %% [markdown] tags=["solution"]
# An exact tie in the second rounding needs the intermediate to end in 1 followed by
# zeros at the target's precision. Round-to-odd makes every inexact intermediate end in a
# 1 bit *below* that position (its last bit), so only an input that really was a tie can look
# like one, and an input slightly off the midpoint stays visibly off it.
