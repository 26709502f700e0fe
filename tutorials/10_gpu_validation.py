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
# # 10 · Validating a GPU against the emulator
#
# **What you will do.** Learn what it means to check hardware "bit for bit"; see what a
# failed check looks like on a pretend device; then read a real validation: run on this
# machine's GPU if it has one, otherwise read the report of a real GPU stored in the
# repository (or, if none is stored yet, run the emulator-side half of the validation).
#
# **What you will learn.** Why exhaustive testing is possible for conversions and 16-bit
# arithmetic (2^32 inputs take seconds on a GPU); how mismatches are counted and explained
# (codes, fields, distance in ulps); and what the emulator is checked against when there is
# no GPU at all.
#
# **What you need.** Tutorials 01 and 02. lowprec with `lowprec.validate`; a GPU with CuPy
# is optional (`pip install "lowprec[gpu]"`). About 10 minutes; the GPU run takes a few
# minutes more.

# %%
import json

import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
from lowprec import exercises, gpu, validate
from lowprec.tutorials import hardware_reports, show

# %% [markdown]
# ## 1. Bit for bit
#
# A GPU's `__float2half_rn` and lowprec's `encode(x, "fp16", "rne")` both claim to round a
# float32 to the nearest fp16, ties to even. Validation runs both on the same inputs and
# compares the resulting *codes* (not values within a tolerance): either every bit agrees or
# the input is a mismatch. For a float32 -> 16-bit conversion there are only 2^32 inputs, so
# the GPU can try all of them in seconds; for fp16 and bf16 addition and multiplication all
# 2^32 operand pairs; for GEMMs, where inputs cannot be exhausted, the question is which of
# the emulator's accumulation models (tutorial 09) reproduces every output.
#
# ## 2. What a mismatch looks like
#
# To see a failed check without broken hardware we pretend: our "device" converts float32 to
# fp16 by *truncation* (`rtz`), and we validate it against the emulator's round-to-nearest.
# A mismatch is explained by its codes, their fields, and the distance in ulps (how many
# representable values lie between the two results).

# %%
rng = np.random.default_rng(0)
x = (rng.standard_normal(1_000_000) * 100).astype(np.float32)
device = lp.encode(x, "fp16", "rtz")      # the pretend device
emulator = lp.encode(x, "fp16", "rne")    # what the format says
bad = device != emulator
dist = validate.ulp_distance(device[bad], emulator[bad], lp.get_format("fp16"))
print(f"{int(bad.sum())} mismatches in {x.size} inputs ({bad.mean():.1%})")
values, counts = np.unique(dist, return_counts=True)
print("ulp distance device - emulator:", dict(zip(values.tolist(), counts.tolist())))
for xi, d, e in list(zip(x[bad], device[bad], emulator[bad]))[:3]:
    print(f"  x = {float(xi)!r}: device {validate.explain_code(int(d), 'fp16')}; "
          f"emulator {validate.explain_code(int(e), 'fp16')}")

fig, ax = plt.subplots(figsize=(7, 3.5))
for sign, color, label in [(1, "tab:blue", "x > 0"), (-1, "tab:orange", "x < 0")]:
    d = dist[np.sign(x[bad]) == sign]
    v, c = np.unique(d, return_counts=True)
    ax.bar(v, c, width=0.5, color=color, label=f"{label}: {d.size} mismatches")
ax.set_xticks([-2, -1, 0, 1, 2])
ax.set_xlabel("ulp distance, device minus emulator (signed by value)")
ax.set_ylabel("mismatches")
ax.set_title("The pretend device truncates: always one ulp toward zero")
ax.set_ylim(0, 1.25 * max(np.unique(dist, return_counts=True)[1]))
ax.legend(fontsize=8, loc="upper center")
show(fig, "10_pretend_device")

# %% [markdown]
# About half the inputs mismatch (those whose discarded bits were past the midpoint), always
# by one ulp and always toward zero (−1 for positive inputs, +1 for negative ones, since the
# distance is signed by value): the signature of truncation. A real report lists these counts per kernel, with the first mismatches
# explained the same way, so a disagreement can be traced to a rounding mode, a flush of
# subnormals, a NaN encoding or a saturation rule.
#
# ## 3. This machine, or the stored report of a real GPU

# %%
stored = hardware_reports()
if gpu.available():
    print("A GPU is available: running the quick validation on it (a few minutes).")
    report = validate.run(gpu=True, quick=True, log=lambda s: None)
    source = "this machine's GPU"
elif stored:
    print(f"No GPU here ({gpu.unavailable_reason()}); reading the stored report {stored[-1].name}.")
    report = json.loads(stored[-1].read_text())
    source = f"the stored report {stored[-1].name}"
else:
    print(f"No GPU here ({gpu.unavailable_reason()}), and no hardware report is stored in this "
          "checkout yet (docs/hardware/ has none). Showing the emulator-only validation: the "
          "half of the check that needs no GPU.")
    report = validate.run(gpu=False, quick=True, log=lambda s: None)
    source = "the emulator-only validation"
print(f"\nReport from {source}:")
print(validate.to_markdown(report)[:4000])

# %% [markdown]
# Whatever the source, the report starts with the emulator-side checks, which run
# everywhere: the *step tables* (for each conversion, the sorted list of float32 inputs at
# which the output code changes, which the GPU sweep compares against, checked here against
# the emulator itself) and the emulator against ml_dtypes' casts. When a GPU part is present,
# the further sections give, per kernel, the inputs tried, the mismatches (NaN payload
# differences counted apart: the formats leave NaN bits open) and the first mismatches
# explained, and for GEMMs the accumulation model that matched.

# %%
rows = report["ml_dtypes_check"]["rows"]
total = sum(r["mismatches"] for r in rows)
print(f"{total} mismatches in {sum(r['inputs'] for r in rows)} comparisons with ml_dtypes "
      f"across {len(rows)} formats ({source}).")
if "conversion_sweeps" in report:
    sweeps = report["conversion_sweeps"]
    clean = [s["name"] for s in sweeps if s["mismatches_not_nan_bits"] == 0]
    print(f"GPU conversion sweeps: {len(clean)} of {len(sweeps)} kernels agree with the emulator "
          f"on every float32 input (NaN payloads aside).")

# %% [markdown]
# From float32 inputs, ml_dtypes and lowprec agree: ml_dtypes converts through float32, and
# for float32 input there is nothing to round twice (tutorial 02 showed the float64 case
# where they differ). That agreement is also what makes ml_dtypes a fair independent
# reference for the GPU's float32 conversions.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: counting ulps
# A device returns the fp16 code `0x3C03` where the emulator says `0x3C00`. How many ulps
# apart are they (device minus emulator, signed)? Store it in `d1`. Then: the codes `0x0001`
# and `0x8001` (device and emulator): store their signed distance in `d2`.

# %% tags=["solution"]
# Exercise 1: counting ulps
# BEGIN SOLUTION
d1 = 0x3C03 - 0x3C00  # same sign: the codes are in value order
d2 = 1 - (-1)  # +smallest subnormal is one step above 0, -smallest one step below
# END SOLUTION

# %%
exercises.check_ulp_distance(0x3C03, 0x3C00, "fp16", d1)
exercises.check_ulp_distance(0x0001, 0x8001, "fp16", d2)

# %% [markdown]
# ### Exercise 2: diagnose a device
# For x = 1 + 2^−11 + 2^−20 (a float32 number just above the midpoint between the fp16 values
# 1 and 1 + 2^−10), a device returns the fp16 code `0x3C00` (that is, 1.0). Name a rounding
# mode that explains it; store the name in `mode`.

# %% tags=["solution"]
# Exercise 2: diagnose a device
# BEGIN SOLUTION
mode = "rtz"  # nearest would give 1 + 2^-10 (x is above the midpoint); toward zero gives 1
# END SOLUTION

# %%
exercises.check_device_mode(1 + 2**-11 + 2**-20, "fp16", 0x3C00, mode)
