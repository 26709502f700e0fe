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
# # 08 · MX block formats and NVFP4: scale rules, block size, outliers
#
# **What you will do.** Quantize small blocks to MXFP4 by hand and with `lowprec.mx`; compare
# the scale rules of the OCP spec, cuBLAS and torchao; measure how the error of MXFP4 and
# NVFP4 grows with the block size; and see what one outlier does to its block.
#
# **What you will learn.** How an MX tensor is stored (one E8M0 power-of-two scale per 32
# values, narrow elements); why the spec's `floor` rule can clip a block's largest value
# and `rceil` cannot; what NVFP4 changes (blocks of 16, an FP8 E4M3 scale per block and an
# fp32 scale per tensor); and what each costs in bits per value.
#
# **What you need.** Tutorials 01 and 07. lowprec with `lowprec.mx`, `lowprec.nvfp4`,
# `lowprec.quant_error` and `lowprec.plot`; no GPU, no downloads; about 20 minutes.

# %%
import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises, mx, nvfp4
from lowprec import plot as lplot
from lowprec.quant_error import compare_schemes, format_table
from lowprec.tutorials import show

# %% [markdown]
# ## 1. One block, by hand
#
# An MX block is `block_size` numbers (32 in the OCP spec) that share one scale X = 2^k,
# stored as an E8M0 byte (just an exponent); each number keeps only a narrow element P, and
# its value is X × P. For MXFP4 the elements are FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
# their negatives. Its largest binade is 2^2 (emax_elem = 2). The OCP spec's rule chooses
#
#     k = floor(log2(amax)) − emax_elem
#
# so the block's largest magnitude lands in the element format's top binade. Take the block
# [7, 1, −2, 0]: floor(log2 7) = 2, so k = 0 and X = 1; but 7 > 6, the largest element, so it
# **clips** to 6. cuBLAS and Transformer Engine use `rceil` instead: the smallest power of
# two with amax / X ≤ 6, here X = 2, and nothing clips (7 / 2 = 3.5 rounds to 4, i.e. 8).

# %%
block = np.array([7.0, 1.0, -2.0, 0.0])
print("elements of FP4 E2M1:", lp.decode(np.arange(8, dtype=np.uint8), "fp4_e2m1"))
for rule in mx.SCALE_RULES:
    t = mx.quantize(block, "mxfp4", block_size=4, scale_rule=rule)
    print(f"{rule:>6}: scale {t.scales.ravel()[0]:g}, elements {t.elements.ravel()}, "
          f"dequantized {t.dequantize().ravel()}")

# %% [markdown]
# Note the trade: `floor` clips 7 to 6 (error 1) but keeps the small values fine; `rceil`
# represents 7 as 8 (error 1 too, here) and doubles the spacing for everything else in the
# block (1 is still exact, but 0.5-steps are gone).
#
# ## 2. What the formats cost
#
# Storage per value is the element's bits plus the scale's share. Here is the whole family on
# one tensor, with per-tensor FP8 (tutorial 07) for comparison. The tensor is
# heavy-tailed, like real activations: most values are small, a few are large.

# %%
rng = np.random.default_rng(0)
x = rng.standard_t(df=3, size=(256, 256)).astype(np.float32)
schemes = ["per_tensor:fp8_e4m3", "mxfp8_e4m3", "mxfp8_e4m3:rule=rceil", "mxfp8_e5m2",
           "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxfp4:rule=rceil", "nvfp4",
           "per_tensor:fp4_e2m1"]
results = compare_schemes(x, schemes)
print(format_table(results))

# %%
r = {res.scheme: res for res in results}
print(f"MXFP4 costs {r['mxfp4'].bits_per_value:g} bits per value and reaches "
      f"{r['mxfp4'].sqnr_db:.1f} dB; NVFP4 ({r['nvfp4'].bits_per_value:.3g} bits) reaches "
      f"{r['nvfp4'].sqnr_db:.1f} dB; one FP4 scale for the whole tensor only "
      f"{r['per_tensor:fp4_e2m1'].sqnr_db:.1f} dB, flushing {r['per_tensor:fp4_e2m1'].frac_flushed:.1%} "
      f"of the values to zero.")
print(f"MXFP8 E4M3 ({r['mxfp8_e4m3'].bits_per_value:g} bits) reaches {r['mxfp8_e4m3'].sqnr_db:.1f} dB "
      f"with the spec's floor rule, which clips {r['mxfp8_e4m3'].frac_clipped:.2%} of the values, "
      f"and {r['mxfp8_e4m3:rule=rceil'].sqnr_db:.1f} dB with rceil (clipping "
      f"{r['mxfp8_e4m3:rule=rceil'].frac_clipped:.2%}); per-tensor E4M3 reaches "
      f"{r['per_tensor:fp8_e4m3'].sqnr_db:.1f} dB on this tensor.")
print(f"For MXFP4 the rules give {r['mxfp4'].sqnr_db:.1f} dB (floor) and "
      f"{r['mxfp4:rule=rceil'].sqnr_db:.1f} dB (rceil).")

# %% [markdown]
# With 4-bit elements, one scale per tensor is hopeless: the 8 element magnitudes span only
# 3.6 binades, so everything far below the tensor's largest value flushes to zero. Per-block
# scales bring each block's values into the element range. The `floor` rule clips the
# largest value of some blocks (whenever amax's mantissa is above the element format's
# largest, e.g. above 1.75 × 2^k for E4M3), which costs the MX formats part of their accuracy
# here; `rceil` never clips but gives every block a coarser grid; compare the printed
# numbers. NVFP4 does better than MXFP4 at
# the same element width for two reasons: blocks of 16 instead of 32, and an E4M3 block
# scale (3 mantissa bits) instead of a power of two, so the block's amax maps close to 6
# rather than anywhere in [4, 8).
#
# ## 3. Block size
#
# Smaller blocks follow the data more closely but store more scales. Measure the error of
# MXFP4 and MXFP8 against the block size on the same tensor:

# %%
sizes = [8, 16, 32, 64, 128, 256]
errors = {}
for kind in ["mxfp4", "mxfp8_e4m3"]:
    res = compare_schemes(x, [f"{kind}:block={b}" for b in sizes])
    errors[kind] = {b: float(np.sqrt(10 ** (-e.sqnr_db / 10))) for b, e in zip(sizes, res)}
nv = compare_schemes(x, [f"nvfp4:block={b}" for b in [16]])[0]
errors["nvfp4 (block 16)"] = float(np.sqrt(10 ** (-nv.sqnr_db / 10)))
errors["per-tensor FP8 E4M3"] = float(np.sqrt(10 ** (-r["per_tensor:fp8_e4m3"].sqnr_db / 10)))
fig, ax = plt.subplots(figsize=(7, 4))
lplot.scheme_errors(errors, metric="relative RMS error", ax=ax,
                    title="Error against block size (heavy-tailed 256x256 tensor)")
show(fig, "08_block_size")
for kind in ["mxfp4", "mxfp8_e4m3"]:
    e = errors[kind]
    clip = {b: c.frac_clipped for b, c in zip(sizes, compare_schemes(
        x, [f"{kind}:block={b}" for b in sizes]))}
    print(f"{kind}: relative RMS error {e[8]:.4f} with blocks of 8, {e[32]:.4f} with 32, "
          f"{e[256]:.4f} with 256 ({e[256] / e[8]:.2f} times the error of blocks of 8); "
          f"clipped: {clip[8]:.2%} with blocks of 8, {clip[256]:.2%} with 256")

# %% [markdown]
# (The relative RMS error is the square root of the noise-to-signal power ratio,
# 10^(−SQNR/20).) Two effects pull in opposite directions. A larger block is more likely to
# hold a value far above the rest, whose scale then costs the small values their bits: that
# dominates for MXFP4, whose elements span only 3.6 binades, and its error grows with the
# block size. But every block's largest value risks clipping under the `floor` rule, and
# smaller blocks have more largest values: that dominates for MXFP8, whose E4M3 elements span
# 18 binades, so its error even shrinks a little with larger blocks (the printed clipped
# shares fall).
#
# ## 4. One outlier in a block
#
# An outlier forces a large scale on its block; the small values in the same block lose
# their bits. The damage stays within the block, which is the point of blocks:

# %%
row = (rng.standard_normal(128) * 0.1).astype(np.float32)
row[40] = 20.0  # an outlier in the second block of 32
quantized = {"MXFP4 (blocks of 32)": mx.quantize(row, "mxfp4").dequantize(),
             "NVFP4 (blocks of 16)": nvfp4.quantize(row).dequantize()}
fig, ax = plt.subplots(figsize=(9, 4))
lplot.outlier_scaling(row, quantized, block_size=32, ax=ax,
                      title="An outlier at index 40: only its block loses precision")
show(fig, "08_outlier")
mx_row = quantized["MXFP4 (blocks of 32)"]
lost = [np.mean(mx_row[b * 32:(b + 1) * 32][row[b * 32:(b + 1) * 32] != 0] == 0)
        for b in range(4)]
t_row = mx.quantize(row, "mxfp4")
print("MXFP4 block scales:", t_row.scales.ravel(), "  share of each block flushed to zero:",
      [f"{v:.0%}" for v in lost])

# %% [markdown]
# Block 1 (indices 32 to 63), which holds the outlier, needs a scale large enough for 20, so
# its smallest non-zero element (0.5 × scale) is far above values of order 0.1, and nearly
# all of them flush to zero. The other blocks keep their own small scales and lose only their
# smallest values (FP4 has just one step, 0.5, between 0 and 1 at any scale).

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the spec's example
# An MXFP8 E4M3 block has amax 957 (E4M3's largest binade is 2^8, its max 448). What scale
# does the `floor` rule give? Store it in `scale`. What does 957 become?

# %% tags=["solution"]
# Exercise 1: the spec's example
# BEGIN SOLUTION
scale = 2.0 ** (np.floor(np.log2(957)) - 8)  # 2^(9 - 8) = 2, and 957 / 2 clips to 448 -> 896
# END SOLUTION

# %%
exercises.check_mx_scale([957.0, 1.0, -3.0], "mxfp8_e4m3", scale)

# %% [markdown]
# ### Exercise 2: the rceil rule
# For the block [7, 1, −2, 0] in MXFP4, what scale does the `rceil` rule give? Store it in
# `rceil_scale`.

# %% tags=["solution"]
# Exercise 2: the rceil rule
# BEGIN SOLUTION
rceil_scale = 2.0 ** np.ceil(np.log2(7 / 6))  # smallest power of two with 7 / X <= 6
# END SOLUTION

# %%
exercises.check_mx_scale([7.0, 1.0, -2.0, 0.0], "mxfp4", rceil_scale, scale_rule="rceil")

# %% [markdown]
# ### Exercise 3: bits per value
# How many bits per value does MXFP6 E3M2 with blocks of 32 need? Store it in `bits`.

# %% tags=["solution"]
# Exercise 3: bits per value
# BEGIN SOLUTION
bits = 6 + 8 / 32
# END SOLUTION

# %%
exercises.check_bits_per_value("mxfp6_e3m2", bits)
