"""SplitMix64: the uniform 64-bit words of stochastic rounding, made in the kernels."""

from __future__ import annotations

import numpy as np
from numba import njit

_jit = njit(cache=True, nogil=True)
_kernel = njit(cache=True, nogil=True)

# -------------------------------------------------------- stochastic words
# Stochastic rounding needs one uniform 64-bit word per element. Drawing them
# from numpy in the main thread (random_raw, ~3 ns a word) was the bottleneck,
# so the words are made inside the kernels, in parallel, from a counter-based
# generator: the input is cut into blocks of SR_BLOCK elements, block k gets
# one 64-bit seed s_k drawn from the user's numpy Generator (in order), and
# element j of the block gets
#
#     word(s_k, j) = mix64(s_k + (j + 1) * GOLDEN)
#
# which is exactly the j-th output of SplitMix64 started from state s_k
# (G. Steele, D. Lea, C. Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014; the mixer is D. Stafford's "Mix13" variant, as in
# Java's SplittableRandom and S. Vigna's splitmix64.c). mix64 is a bijection of
# 64-bit words, SplitMix64 passes TestU01's BigCrush, and the result depends on
# the seed and the element index only, never on the number of threads.
SR_BLOCK = 4096
#: SplitMix64's state step: word j of a block is ``mix64(seed + (j + 1) * GOLDEN)``.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, nogil=True, inline="always")
def mix64(z):
    """SplitMix64's output function (a bijection of 64-bit words)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@_jit
def sr_word(seed, j):
    """The ``j``-th stochastic-rounding word of a block seeded with ``seed``.

    Loops over a block's elements keep the state instead, ``z = seed`` and then
    ``z += GOLDEN; w = mix64(z)`` per element: the same words, and one 64-bit
    multiplication fewer per element (the vectorised loop runs twice as fast).
    """
    return mix64(np.uint64(seed) + np.uint64(j + 1) * GOLDEN)


@_kernel
def sr_fill(seed, words, n):
    """words[j] = sr_word(seed, j) for j < n."""
    for j in range(n):
        words[j] = sr_word(seed, j)


@_kernel
def sr_expand(seeds, n):
    """The words of elements 0..n-1 of consecutive blocks seeded by ``seeds``:
    the same words the rounding kernels make, for code (like lowprec.arith's
    integer kernels) that takes one word per element."""
    words = np.empty(n, np.uint64)
    for j in range(n):
        words[j] = sr_word(seeds[j // SR_BLOCK], j % SR_BLOCK)
    return words


@_jit
def sr_words_at(seeds, idx):
    """The stochastic-rounding words of elements ``idx`` (as :func:`sr_expand`)."""
    words = np.empty(idx.shape[0], np.uint64)
    for t in range(idx.shape[0]):
        words[t] = sr_word(seeds[idx[t] // SR_BLOCK], idx[t] % SR_BLOCK)
    return words
