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
# # 01 · Anatomy of a floating-point format
#
# **What you will do.** Take numbers apart into their sign, exponent and mantissa bits;
# decode bit patterns by hand; find each format's largest, smallest and finest values; draw
# the number line of an 8-bit format; and put fp32, fp16, bf16, FP8 and FP4 side by side.
#
# **What you will learn.** Why fp16 stops at 65504; why bf16 reaches as far as fp32 but is
# much coarser; what subnormal numbers are; why FP8 E4M3 has no infinity; and how the gap
# between neighbouring values grows with their size while the *relative* gap stays put.
#
# **What you need.** Python with lowprec installed (it brings numpy and matplotlib). No GPU,
# no downloads, about 20 minutes. Run it as a script (`python tutorials/01_anatomy.py`,
# figures go to `tutorial_figures/`) or open it in Jupyter with jupytext. Exercises are at
# the end; `lowprec.exercises` checks your answers.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises
from lowprec import plot as lplot
from lowprec.tutorials import show

# %% [markdown]
# ## 1. A float is three fields
#
# A binary floating-point number is stored as three fields, most significant bit first:
#
#     [sign: 1 bit] [exponent field E: e bits] [mantissa field M: m bits]
#
# For a *normal* number (exponent field neither all zeros nor reserved) the value is
#
#     (-1)^sign × (1 + M / 2^m) × 2^(E − bias)
#
# The leading `1.` is not stored (the *implicit bit*), and the bias lets the exponent be
# negative without a sign of its own. fp16 has e = 5, m = 10, bias = 15. Let us encode a few
# numbers and look at the bits.

# %%
fp16 = lp.get_format("fp16")
print(f"fp16: {fp16.exponent_bits} exponent bits, {fp16.mantissa_bits} mantissa bits, "
      f"bias {fp16.bias}")
for x in [1.0, -2.5, 0.1, 1000.0]:
    code = int(lp.encode(x, fp16))
    bits = format(code, "016b")
    sign, e_field, m_field = int(bits[0]), int(bits[1:6], 2), int(bits[6:], 2)
    value = (-1) ** sign * (1 + m_field / 2**10) * 2.0 ** (e_field - fp16.bias)
    print(f"{x:>7}: code 0x{code:04X} = {bits[0]} {bits[1:6]} {bits[6:]}   "
          f"sign {sign}, E = {e_field:2d}, M = {m_field:4d}  ->  "
          f"(1 + {m_field}/1024) * 2^({e_field}-15) = {value!r}")

# %% [markdown]
# Read the last column: 1.0, −2.5 and 1000.0 come back exactly, but 0.1 does not. 0.1 has no
# finite binary expansion, so fp16 stores the nearest value it has. `lp.explain` tells the
# whole story of one number: the exact input, the code and its fields, the two neighbours,
# and the exact rounding error (in ulps, the gap between neighbours).

# %%
print(lp.explain(0.1, fp16))
stored = float(lp.round_to(0.1, fp16))
exact = fp16.exact_value(int(lp.encode(0.1, fp16)))
print(f"\n0.1 in fp16 is {stored!r} = {exact} exactly; "
      f"relative error {abs(stored - 0.1) / 0.1:.2e}")

# %% [markdown]
# ## 2. The special codes
#
# Two exponent field values are special. **All zeros** holds zero and the *subnormal*
# numbers, `(−1)^sign × (M / 2^m) × 2^(1 − bias)`: no implicit 1, so they fill the gap
# between zero and the smallest normal number with evenly spaced values (gradual underflow).
# **All ones** holds infinity (M = 0) and NaN (M ≠ 0) in IEEE formats such as fp16.

# %%
for label, code in [("+0", 0x0000), ("-0", 0x8000), ("smallest subnormal", 0x0001),
                    ("largest subnormal", 0x03FF), ("smallest normal", 0x0400),
                    ("one", 0x3C00), ("largest finite", 0x7BFF), ("+inf", 0x7C00),
                    ("a NaN", 0x7E00)]:
    print(f"{label:>19}: 0x{code:04X} = {format(code, '016b')}  ->  "
          f"{float(lp.decode(np.uint16(code), fp16))!r}")

# %% [markdown]
# ## 3. Formats side by side
#
# Every property in the next table is *derived* from the fields (exponent bits, mantissa bits,
# bias, and how the format spends its special codes), never typed in. `eps` is the gap
# between 1 and the next larger value, 2^−m; "binades" counts the powers of two between the
# smallest positive value and the largest.

# %%
names = ["fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]
formats = [lp.get_format(n) for n in names]
print(f"{'format':>9} {'bits':>4} {'E':>2} {'M':>2} {'max':>10} {'min normal':>10} "
      f"{'min subnorm':>11} {'eps':>9} {'binades':>7} {'finite values':>13}")
for f in formats:
    print(f"{f.name:>9} {f.width:>4} {f.exponent_bits:>2} {f.mantissa_bits:>2} {f.max:>10.4g} "
          f"{f.smallest_normal:>10.4g} {f.smallest_subnormal:>11.4g} {f.eps:>9.3g} "
          f"{f.dynamic_range_binades:>7.1f} {f.num_finite:>13,}")

# %% [markdown]
# The table shows the trade every format makes between **range** (exponent bits) and
# **precision** (mantissa bits). Here it is in words, computed from the table:

# %%
fp32, bf16 = lp.get_format("fp32"), lp.get_format("bf16")
e4m3, e5m2 = lp.get_format("fp8_e4m3"), lp.get_format("fp8_e5m2")
print(f"- bf16 and fp32 share 8 exponent bits, so bf16 reaches {bf16.max:.3g} "
      f"(fp32: {fp32.max:.3g}), about 2^{math.log2(bf16.max / fp16.max):.0f} times "
      f"farther than fp16's {fp16.max:g}.")
print(f"- But bf16 keeps {bf16.mantissa_bits} mantissa bits to fp16's {fp16.mantissa_bits}: its "
      f"eps {bf16.eps:g} is {bf16.eps / fp16.eps:.0f} times coarser than fp16's {fp16.eps:g}.")
print(f"- fp16 covers {fp16.dynamic_range_binades:.0f} binades, bf16 "
      f"{bf16.dynamic_range_binades:.0f}: gradients as small as {fp16.smallest_subnormal:.2g} "
      f"survive in fp16, as small as {bf16.smallest_subnormal:.2g} in bf16.")
print(f"- The two FP8 formats split 7 bits differently: E4M3 has eps {e4m3.eps} and max "
      f"{e4m3.max:g}; E5M2 has eps {e5m2.eps} and max {e5m2.max:g}. That is why training "
      f"recipes use E4M3 for weights and activations and E5M2 for gradients.")

# %% [markdown]
# ## 4. The number line of an 8-bit format
#
# An 8-bit format has few enough values to draw all of them. Below are all non-negative
# finite values of FP8 E4M3, on a linear axis and on a logarithmic one. Decoding every code
# `0x00 .. 0x7F` gives them in increasing order.

# %%
codes = np.arange(0x80, dtype=np.uint8)
values = lp.decode(codes, e4m3)
values = values[np.isfinite(values)]
gaps = np.diff(values)
print(f"E4M3 has {values.size} non-negative finite values, from {values[1]} to {values[-1]:g}.")
for lo, hi in [(values[1], e4m3.smallest_normal), (1.0, 2.0), (256.0, e4m3.max)]:
    inside = values[(values >= lo) & (values < hi)]
    spacing = np.unique(np.diff(values[(values >= lo) & (values <= hi)]))
    print(f"  in [{lo:g}, {hi:g}): {inside.size} values, spaced {', '.join(f'{s:g}' for s in spacing)}")

fig, axes = plt.subplots(2, 1, figsize=(10, 5.5))
lplot.number_line(e4m3, scale="linear", ax=axes[0],
                  title="All positive FP8 E4M3 values: dense near 0, sparse near the max (448)")
lplot.number_line(e4m3, scale="log2", ax=axes[1],
                  title="The same values on a log2 axis: 8 per binade, subnormals shaded")
fig.tight_layout()
show(fig, "01_e4m3_number_line")

# %% [markdown]
# On the linear axis almost every value crowds against zero; on the log axis each binade
# holds the same number of values (2^m = 8 for E4M3) and the subnormals (shaded) trail off
# below the smallest normal number with *fixed* spacing. So the absolute gap grows with the
# value while the relative gap stays between 2^−m and 2^−(m+1). The next plots show the gap
# to the next value against the value for three formats (bf16's would span 260 binades), and
# the range and precision of all six formats side by side.

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
lplot.spacing(["fp8_e4m3", "fp8_e5m2", "fp16"], ax=ax)
show(fig, "01_spacing")
fig, ax = plt.subplots(figsize=(11, 4))
lplot.format_comparison(["fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"],
                        ax=ax, title="Range (binades, log2 axis) and precision")
show(fig, "01_format_comparison")

# %% [markdown]
# ## 5. Rounding error is relative
#
# Since the gap grows with the value, rounding to nearest makes an error of at most half a
# gap, which is at most `eps / 2` *relative* to the value (the *unit roundoff* u), as long as
# the value lies in the normal range. Let us check that on random numbers spread over many
# binades.

# %%
rng = np.random.default_rng(0)
x = 2.0 ** rng.uniform(-10, 10, size=100_000)  # log-uniform in [2^-10, 2^10]
for name in ["fp16", "bf16", "fp8_e4m3"]:
    f = lp.get_format(name)
    inside = x[(x >= f.smallest_normal) & (x <= f.max)]
    rel = np.abs(lp.round_to(inside, f) - inside) / inside
    print(f"{name:>8}: largest relative error {rel.max():.3e}, unit roundoff u = eps/2 = "
          f"{f.unit_roundoff:.3e} ({'within u' if rel.max() <= f.unit_roundoff else 'ABOVE u'});"
          f" mean {rel.mean():.2e} = {rel.mean() / f.unit_roundoff:.2f} u")

# %% [markdown]
# The largest relative error sits just under u in each format, and the mean is a bit over
# a third of u. The error is at most half a gap in absolute terms, and a gap is twice as
# large *relative* to a value at the bottom of its binade as to one at the top, so the
# relative error is largest just above each power of two.
#
# ## 6. What happens beyond the largest value
#
# fp16 and E5M2 spend their all-ones exponent on infinity and NaN, like fp32. The OCP FP8
# E4M3 format ("fn": **f**inite and **N**aN) has no infinity and only one NaN pattern per
# sign, `S.1111.111`, so its top binade holds numbers, and its max is 448 rather than the
# 240 of an IEEE-style E4M3 (lowprec's `fp8_e4m3_ieee`, checked below).
# The price: an overflow has nowhere to go but NaN, unless you ask for saturation.

# %%
print("IEEE-style E4M3 max:", lp.get_format("fp8_e4m3_ieee").max, "  OCP E4M3 max:", e4m3.max)
print(lp.explain(500.0, e4m3))
big = np.array([300.0, 500.0, 1e5])
print("x                     :", big)
print("E4M3                  :", lp.round_to(big, "fp8_e4m3"))
print("E4M3, saturate=True   :", lp.round_to(big, "fp8_e4m3", saturate=True))
print("E5M2                  :", lp.round_to(big, "fp8_e5m2"))
print("fp16                  :", lp.round_to(big, "fp16"))
print("FP4 E2M1 values       :", lp.decode(np.arange(8, dtype=np.uint8), "fp4_e2m1"))

# %% [markdown]
# 500 is beyond E4M3's 448, and rounds to NaN unless we saturate (then it becomes 448), while
# E5M2 still holds it (as 512). FP4 E2M1 has only eight non-negative values, 0 to 6, and no
# special codes at all: that format only makes sense with a scale factor per small block of
# numbers (tutorial 08).

# %% [markdown]
# ## Exercises
#
# Solve each one in the cell marked `Exercise N` (replace the `raise NotImplementedError`
# line) and run the next cell, which checks your answer and explains what went wrong if it is
# not right.
#
# ### Exercise 1: the largest fp16
# fp16 has 5 exponent bits (bias 15) and 10 mantissa bits, and reserves the all-ones exponent
# for inf and NaN. Work out its largest finite value from those facts (do not use
# `fp16.max`) and store it in `fp16_max`.

# %% tags=["solution"]
# Exercise 1: the largest fp16
# BEGIN SOLUTION
top_exponent_field = 2**5 - 2  # 31 (all ones) is reserved for inf and NaN
largest_mantissa = 1 + (2**10 - 1) / 2**10  # 1.1111111111b
fp16_max = largest_mantissa * 2.0 ** (top_exponent_field - 15)
# END SOLUTION

# %%
exercises.check_fp16_max(fp16_max)

# %% [markdown]
# ### Exercise 2: decode by hand
# What value does the FP8 E4M3 code `0b0_1010_101` hold (sign, 4 exponent bits with bias 7,
# 3 mantissa bits)? Compute it with the formula of section 1 and store it in `value`.

# %% tags=["solution"]
# Exercise 2: decode by hand
# BEGIN SOLUTION
value = (1 + 0b101 / 8) * 2.0 ** (0b1010 - 7)
# END SOLUTION

# %%
exercises.check_decode(0b0_1010_101, "fp8_e4m3", value)

# %% [markdown]
# ### Exercise 3: a subnormal
# Decode the E4M3 code `0b0_0000_011` the same way. Careful: its exponent field is zero.

# %% tags=["solution"]
# Exercise 3: a subnormal
# BEGIN SOLUTION
value = (0b011 / 8) * 2.0 ** (1 - 7)  # no implicit 1, exponent 1 - bias
# END SOLUTION

# %%
exercises.check_decode(0b0_0000_011, "fp8_e4m3", value)

# %% [markdown]
# ### Exercise 4: the smallest positive bf16
# bf16 has 8 exponent bits (bias 127) and 7 mantissa bits. What is the smallest positive
# value it can hold? Store it in `tiny`.

# %% tags=["solution"]
# Exercise 4: the smallest positive bf16
# BEGIN SOLUTION
tiny = 2.0 ** (1 - 127) * 2.0**-7  # smallest subnormal: 0.0000001b * 2^emin
# END SOLUTION

# %%
exercises.check_smallest_subnormal("bf16", tiny)

# %% [markdown]
# ### Exercise 5: counting values
# How many distinct finite numbers does FP8 E5M2 have (count +0 and −0 once)? Store it in
# `count`. Hint: which codes are inf or NaN in an IEEE-style format?

# %% tags=["solution"]
# Exercise 5: counting values
# BEGIN SOLUTION
codes_total = 2**8
non_finite = 2 * 2**2  # exponent all ones: 4 mantissa patterns (inf + 3 NaNs), both signs
count = codes_total - non_finite - 1  # +0 and -0 are one number
# END SOLUTION

# %%
exercises.check_num_finite("fp8_e5m2", count)

# %% [markdown]
# ### Exercise 6: the gap at 256
# What is the gap between 256 and the next larger bf16? Store it in `gap`. Then compare with
# fp16 (you can check that one with `exercises.check_spacing("fp16", 256.0, ...)`).

# %% tags=["solution"]
# Exercise 6: the gap at 256
# BEGIN SOLUTION
gap = 256.0 * 2.0**-7  # 2^8 * eps(bf16)
# END SOLUTION

# %%
exercises.check_spacing("bf16", 256.0, gap)

# %% [markdown]
# ### Exercise 7: the largest E4M3
# Why is the largest FP8 E4M3 number 448 and not 480? Compute it from the fields and store
# it in `e4m3_max`.

# %% tags=["solution"]
# Exercise 7: the largest E4M3
# BEGIN SOLUTION
# Exponent field 15 is an ordinary binade (2^(15-7) = 2^8); only mantissa 111 there is NaN,
# so the largest mantissa is 110b: 1.75 * 256.
e4m3_max = (1 + 0b110 / 8) * 2.0 ** (15 - 7)
# END SOLUTION

# %%
exercises.check_max("fp8_e4m3", e4m3_max)
