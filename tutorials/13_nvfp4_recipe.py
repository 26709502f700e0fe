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
# # 13 · The NVFP4 training recipe, one ingredient at a time
#
# **What you will do.** Take NVIDIA's NVFP4 training recipe (Transformer Engine's
# `NVFP4BlockScaling`) apart: 16x16 weight blocks, the random Hadamard transform (RHT) on
# the weight-gradient GEMM, stochastic rounding (SR) of gradients with 8 random bits,
# 4over6, and the last layer kept in bf16. For each one you measure what it does on this
# tutorial's own task, first on the GEMMs of a trained network, then on training runs
# with the ingredient taken out.
#
# **What you will learn.** That a linear layer runs *three* GEMMs (fprop, dgrad, wgrad),
# each reducing along a different axis, and why the recipe quantizes each operand on its
# own (`Policy.gemms`); what each ingredient fixes (a weight that differs between forward
# and backward, a biased gradient, blocks whose scale is set by one outlier, the coarse top
# of the E2M1 grid); and how to read an ablation honestly on a small model.
#
# **What you need.** Tutorials 05 (master weights), 08 (MX and NVFP4) and 12 (the trainer
# on this task). No GPU, no downloads; about 20 minutes (the runs take a second or two
# each).

# %%
import matplotlib.pyplot as plt
import numpy as np

from lowprec import exercises
from lowprec.hadamard import rht
from lowprec.recipes import nvfp4 as recipe
from lowprec.recipes.measure import flushed_share, rel_error, wgrad
from lowprec.train import get_policy, get_task, train
from lowprec.tutorials import show

# %% [markdown]
# ## 1. Three GEMMs, six operands
#
# A linear layer `Z = X W` (X: tokens x K, W: K x N) runs one GEMM forward and two
# backward:
#
# | GEMM  | computes        | reduces along | operands |
# |-------|-----------------|---------------|----------|
# | fprop | `Z = X W`       | K             | X, W     |
# | dgrad | `dX = dZ W^T`   | N             | dZ, W    |
# | wgrad | `dW = X^T dZ`   | tokens        | X, dZ    |
#
# A block format scales blocks *along the reduction axis* (a GEMM multiplies a block of one
# operand with a block of the other and applies both scales once). So X is blocked along K
# for fprop but along the tokens for wgrad: two different quantizations of the same tensor.
# The trainer's `nvfp4` preset names each of the six operands (`Policy.gemms`, the names of
# `lowprec.schemes`), stores the tensors themselves in bf16, and keeps the last layer out
# (`keep_last`):

# %%
policy = get_policy("nvfp4")
for operand, q in policy.gemms:
    print(f"{operand:<18} {q}")
print("last layers kept in bf16:", policy.keep_last)

# %% [markdown]
# ## 2. The task and its tensors
#
# The task of tutorial 12 (a 10-class Gaussian mixture, MLP 32-64-64-10). We train it in
# FP32 for 200 steps and take one batch of 256 examples through the trained network by
# hand, keeping what the GEMMs of the last two layers read: the activations `h1`, `h2`,
# the weights, and the output gradients `dz2`, `dlogits`.

# %%
task = get_task("underflow", 0, grad_exp=0)
W1, b1, W2, b2, W3, b3 = train("fp32", task, steps=200, seed=0, record=False).params
x, y = task.x_train[:256], task.y_train[:256]
h1 = np.maximum(x @ W1 + b1, 0)
h2 = np.maximum(h1 @ W2 + b2, 0)
logits = h2 @ W3 + b3
p = np.exp(logits - logits.max(axis=1, keepdims=True))
p /= p.sum(axis=1, keepdims=True)
dlogits = p.copy()
dlogits[np.arange(len(y)), y] -= 1
dlogits = (dlogits / len(y)).astype(np.float32)
dz2 = ((dlogits @ W3.T) * (h2 > 0)).astype(np.float32)


print("h1", h1.shape, " dz2", dz2.shape, " W2", W2.shape)

# %% [markdown]
# ## 3. 16x16 weight blocks: one weight for forward and backward
#
# fprop reads W blocked along K, dgrad reads it blocked along N. With 1x16 blocks these
# are two different sets of blocks, so the backward pass differentiates a *different*
# weight from the one the forward pass used (the chain rule no longer holds exactly).
# 16x16 blocks are the same tiles either way: one quantized weight.

# %%
w = np.ascontiguousarray(W2.T)  # N x K, the layout Transformer Engine quantizes
along_k = recipe.fake_quantize(w, axis=1)             # 1x16 blocks along K (fprop)
along_n = recipe.fake_quantize(w, axis=0)             # 1x16 blocks along N (dgrad)
tile_k = recipe.fake_quantize(w, (16, 16), axis=1)
tile_n = recipe.fake_quantize(w, (16, 16), axis=0)
print(f"1x16  : {np.count_nonzero(along_k != along_n)} of {w.size} weights differ "
      f"between fprop and dgrad")
print(f"16x16 : {np.count_nonzero(tile_k != tile_n)} differ")
print(f"cost  : weight error {rel_error(along_k, w):.4f} (1x16) -> "
      f"{rel_error(tile_k, w):.4f} (16x16)")

# %% [markdown]
# The price is a coarser scale (one per 256 weights instead of per 16), a slightly larger
# weight error; weights are smooth enough to afford it, activations and gradients are not,
# so they keep 1x16 blocks.
#
# ## 4. Stochastic rounding of gradients: unbiased on average
#
# Round-to-nearest makes the *same* error every time it meets the same value: the error of
# a gradient is a bias that training accumulates step after step. Stochastic rounding
# rounds up with a probability that makes the expected result the value itself, so the
# errors average out over steps. The recipe draws 8 random bits per element (`rbits`, or a
# generator): the probability is `floor(256 * frac) / 256`, unbiased up to 1/256 of a grid
# step.
#
# We measure it on the wgrad GEMM of layer 2, holding its other operand fixed: the mean of
# n stochastically rounded GEMMs against the GEMM of the unrounded gradient, next to the
# (fixed) error of round-to-nearest.

# %%
xq = recipe.fake_quantize(h1, axis=0)  # h1 along the tokens, to nearest: held fixed
target = xq.T @ dz2.astype(np.float64)
rne_err = rel_error(wgrad(h1, dz2, hadamard=False), target)
draws, acc, sr_err = 64, np.zeros_like(target), {}
for d in range(draws):
    acc += wgrad(h1, dz2, hadamard=False, rounding="stochastic", rng=d)
    if d + 1 in (1, 4, 16, 64):
        sr_err[d + 1] = rel_error(acc / (d + 1), target)
print(f"round to nearest: {rne_err:.4f}, whatever the step")
for n, e in sr_err.items():
    print(f"mean of {n:>2} stochastic roundings: {e:.4f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.plot(list(sr_err), list(sr_err.values()), "o-", label="stochastic rounding (mean of n)")
ax.axhline(rne_err, color="tab:red", ls="--", label="round to nearest (any n)")
ax.set_xscale("log", base=2)
ax.set_xlabel("stochastic roundings of the same gradient averaged (n)")
ax.set_ylabel("relative error of the wgrad GEMM")
ax.set_title("A biased and an unbiased gradient, layer 2 of the task")
ax.legend(fontsize=8)
show(fig, "13_sr_bias")

# %% [markdown]
# One stochastic rounding errs *more* than round-to-nearest (it adds noise); averaged over
# steps, as the optimizer's momentum and the many steps of training average, it falls
# below, and keeps falling until what is left is the part no rounding of the gradient
# removes (the 8-bit truncation, and blocks whose maximum is clamped at 6). That is why
# the recipe rounds gradients stochastically and weights and activations to nearest
# (those are read, not accumulated).
#
# ## 5. The random Hadamard transform on wgrad
#
# Before the wgrad GEMM quantizes its operands, the recipe multiplies every 16 consecutive
# values along the tokens by the orthogonal matrix `R = diag(s) H / 4`. R cancels in the
# product (`(R X)^T (R dZ) = X^T dZ`), so in exact arithmetic nothing changes; what
# changes is the distribution a block sees: an outlier is spread over its 16 values.

# %%
block = np.zeros((1, 16), np.float32)
block[0, 0] = 8.0
print("an outlier of 8 becomes", sorted(set(np.abs(rht(block)).ravel().tolist())))


for name, (xa, ga) in {"layer 2 (h1, dz2)": (h1, dz2),
                       "layer 3 (h2, dlogits)": (h2, dlogits)}.items():
    exact = xa.astype(np.float64).T @ ga
    print(f"{name}: wgrad error {rel_error(wgrad(xa, ga, hadamard=False), exact):.4f} "
          f"without RHT, {rel_error(wgrad(xa, ga), exact):.4f} with; gradient values "
          f"flushed to zero {flushed_share(ga):.1%} -> {flushed_share(ga, hadamard=True):.1%}")

# %% [markdown]
# Read the numbers as they are. The rotation leaves far fewer gradient values flushed to
# zero (a value far below its block's maximum is lost without it; with it every output
# mixes all 16). Whether the GEMM gets more accurate depends on the tensors: on layer 3,
# whose gradient `dlogits` has one large entry per example among small ones, the error
# drops; on layer 2 it rises a little, because rotated values sit near the top of their
# blocks, where E2M1's grid is coarsest (4, 6). NVIDIA's ablations at scale (12B
# parameters, 10T tokens) found the RHT helps the wgrad GEMM and does nothing or harm for
# fprop and dgrad: which is why the recipe applies it to wgrad only. `Policy` refuses an
# RHT on one operand of a GEMM: the rotation cancels only when both are rotated.
#
# ## 6. 4over6: a second candidate scale per block
#
# The block scale maps the block's maximum to 6, the top of E2M1. Between 4 and 6 the grid
# has one step of 2, so values near the top are rounded coarsely. 4over6 also tries the
# scale that maps the maximum to 4 (finer steps for the rest, the maximum itself exact) and
# keeps, block by block, whichever errs less.

# %%
h2f = h2.astype(np.float32)
err6 = rel_error(recipe.fake_quantize(h2f), h2)
err46 = rel_error(recipe.fake_quantize(h2f, four_over_six=True), h2)
print(f"activations of layer 3: error {err6:.4f} (max to 6) -> {err46:.4f} (4over6)")

# %% [markdown]
# ## 7. The last layer in bf16
#
# The logits feed the softmax directly; an error there is an error in the loss. The
# recipe keeps the last layers in bf16 (`keep_last=1` here):

# %%
xf = recipe.fake_quantize(h2f)                      # 1x16 along K
wf = recipe.fake_quantize(W3, (16, 16), axis=0)    # 16x16, K x N
print(f"logits error with the last layer in NVFP4: {rel_error(xf @ wf, h2 @ W3):.4f}")

# %% [markdown]
# ## 8. Training with each ingredient taken out
#
# Now the same ablation on training: the full preset, and the preset with one ingredient
# removed (`Policy.with_gemms` replaces named operands), 300 steps on the task of section
# 2, with two seeds (the seed draws the initial weights, the batches and the random bits);
# bf16-master (the same bf16 tensors, no NVFP4 GEMMs) is the reference.

# %%
variants = {
    "bf16-master (no NVFP4)": get_policy("bf16-master"),
    "nvfp4 (the recipe)": policy,
    "without RHT": policy.with_gemms("wgrad.input=nvfp4_1x16,wgrad.output_grad=nvfp4_1x16_sr",
                                     name="no-rht"),
    "without SR": policy.with_gemms("dgrad.output_grad=nvfp4_1x16,"
                                    "wgrad.output_grad=nvfp4_rht", name="no-sr"),
    "with 4over6": policy.with_gemms("fprop.input=nvfp4_1x16_4over6,"
                                     "weight=nvfp4_16x16_4over6", name="4over6"),
    "last layer in NVFP4 too": policy.replace(keep_last=0, name="all-nvfp4"),
}
seeds, results = (0, 1), {}
for label, pol in variants.items():
    results[label] = [train(pol, task, steps=300, seed=s, record=False,
                            eval_every=300).summary["final_loss"] for s in seeds]
    print(f"{label:<24} held-out loss " + "  ".join(f"{v:.4f}" for v in results[label]))
full = results["nvfp4 (the recipe)"]
print("\nagainst the recipe, per seed (negative: better than the recipe):")
for label, losses in results.items():
    if label != "nvfp4 (the recipe)":
        print(f"{label:<24} " + "  ".join(f"{v - f:+.4f}" for v, f in zip(losses, full)))

# %%
fig, ax = plt.subplots(figsize=(7, 3.6))
labels = list(results)
for k, s in enumerate(seeds):
    ax.barh(np.arange(len(labels)) + 0.2 * (1 - 2 * k), [results[lb][k] for lb in labels],
            0.4, label=f"seed {s}")
ax.set_yticks(np.arange(len(labels)), labels)
ax.invert_yaxis()
lo = min(min(v) for v in results.values())
ax.set_xlim(0.95 * lo, 1.05 * max(max(v) for v in results.values()))
ax.set_xlabel("held-out loss after 300 steps (lower is better; axis cut)")
ax.set_title("The NVFP4 recipe with one ingredient out")
ax.legend(fontsize=8)
show(fig, "13_ablation")

# %% [markdown]
# Every run is bit-reproducible (seeded generators, a fixed order of additions), so these
# are the numbers you got too. bf16 beats the recipe at both seeds: four bits cost
# something even here. Among the variants, taking out SR, adding 4over6 or putting the
# last layer in NVFP4 moves the loss by less than 0.01, in a direction that flips from one
# seed to the other; taking out the RHT is a little better at both seeds, by less than
# 0.005. Two seeds on a network this small cannot tell such differences from noise, and
# reading a ranking of the ingredients into them would be wrong. The GEMM-level
# measurements of sections 3 to 7 are the part this task can show: what each ingredient
# does to the numbers the GEMMs read. The recipe's own ablations needed models large and
# long enough for a bias or an outlier to compound over many steps.
#
# ## Exercises
#
# ### Exercise 1: the recipe's stochastic rounding
# A gradient value, already scaled into E2M1's range, is 2.3 (between the E2M1 values 2
# and 3). With the recipe's 8 random bits, what is the probability that it rounds up to
# 3? Store it in `p_up`.

# %% tags=["solution"]
# Exercise 1: the recipe's stochastic rounding
# BEGIN SOLUTION
frac = np.float32(2.3) - 2  # the fraction of the gap (gap 1), in float32 as the value is
p_up = np.floor(256 * float(frac)) / 256
# END SOLUTION

# %%
exercises.check_sr8_probability(float(np.float32(2.3)), p_up)

# %% [markdown]
# ### Exercise 2: an outlier under the Hadamard transform
# A block holds one value of 12 and fifteen zeros. What is the largest magnitude after the
# recipe's random Hadamard transform? Store it in `amax_after`.

# %% tags=["solution"]
# Exercise 2: an outlier under the Hadamard transform
# BEGIN SOLUTION
amax_after = 12 / 4  # every output is +-(the sum of the signed inputs) / sqrt(16)
# END SOLUTION

# %%
exercises.check_rht_amax([12.0] + [0.0] * 15, amax_after)
