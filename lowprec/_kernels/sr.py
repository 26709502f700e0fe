"""The uniform 64-bit words of stochastic rounding, made in the kernels in 32-bit lanes.

Stochastic rounding needs one uniform 64-bit word per element: x rounds away
from zero iff its word is below the dropped part of x (in units of its
quantum) times 2**64. Drawing the words from numpy in the main thread was the
bottleneck once, so they are made inside the kernels from a counter-based
generator: the input is cut into blocks of SR_BLOCK elements, block k gets one
64-bit seed S_k drawn from the user's numpy Generator (in order), and element
j of a block seeded with S = k1 * 2**32 + k0 gets the word ``hi * 2**32 + lo``,

    z  = k0 + (j + 1) * G32          (mod 2**32: a Weyl sequence, G32 = 0x9E3779B9)
    hi = mix32(z XOR k1)
    lo = mix32(k1 + hi)              (mod 2**32)

where mix32 is C. Wellons' "lowbias32" integer hash (hash-prospector, 2018,
public domain): ``x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B;
x ^= x >> 16``, a bijection of 32-bit words with two 32-bit multiplies.

Why this shape:

* Every word is exactly uniform over the 2**64 words when its block's seed is:
  for a fixed j the map S -> (hi, lo) is a bijection (hi gives z XOR k1, then
  lo gives k1, then z gives k0). So the rounding is exactly unbiased, with the
  same 2**-64 resolution the reference engine's rule has.
* In the formats' own range only ``hi`` matters: a float32 significand drops
  s <= 23 bits there, so ``w < D * 2**(64 - s)`` is decided by w's top s bits.
  The fastest kernels make ``hi`` alone, in 32-bit SIMD lanes (eight a vector
  on AVX2, which has no 64-bit multiply: SplitMix64, the generator before
  this one, cost three 32-bit multiplies per 64-bit one and ran at about a
  third of this speed), and finish an element with ``lo`` only when ``hi``
  alone cannot decide (``hi`` equal to the threshold's top half, about once in
  2**32 tiny inputs).
* The result depends on the seed and the element index only, never on the
  number of threads. SR_BLOCK words of a block come from one seed, and each
  block's seed from the user's Generator, so the weak spots of a 32-bit hash
  of a counter never span more than 4096 words.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .u32 import U, add, mul, shr

_jit = njit(cache=True, nogil=True)
_kernel = njit(cache=True, nogil=True)

SR_BLOCK = 4096
#: The Weyl sequence's step (2**32 / golden ratio, odd): z_j = k0 + (j + 1) * G32.
G32 = U(0x9E3779B9)
_MIX1 = U(0x7FEB352D)
_MIX2 = U(0x846CA68B)
_LO32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def mix32(x):
    """lowbias32 (Wellons): a bijection of 32-bit words with good avalanche."""
    x = mul(U(x ^ shr(x, U(16))), _MIX1)
    x = mul(U(x ^ shr(x, U(15))), _MIX2)
    return U(x ^ shr(x, U(16)))


@njit(cache=True, nogil=True, inline="always")
def sr_keys(seed):
    """(k0, k1): a block seed's low and high halves. A loop over a block keeps
    ``z = k0``, then per element ``z = sr_step(z)`` and ``hi = sr_hi(z, k1)``."""
    seed = np.uint64(seed)
    return U(seed & _LO32), U(seed >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def sr_step(z):
    """The next element's Weyl state, ``z + G32`` (mod 2**32). A 32-bit add
    outright (:func:`.u32.add`): as ``U(z + G32)``, numba's 64-bit sum, the
    counter a loop carries stays in 64-bit lanes, which cost the generator a
    third of its speed."""
    return add(z, G32)


@njit(cache=True, nogil=True, inline="always")
def sr_hi(z, k1):
    """A word's top half from the Weyl state ``z`` of its element."""
    return mix32(U(z ^ k1))


@njit(cache=True, nogil=True, inline="always")
def sr_lo(hi, k1):
    """A word's bottom half from its top half."""
    return mix32(U(k1 + hi))


@njit(cache=True, nogil=True, inline="always")
def sr_word_at(z, k1):
    """The whole 64-bit word of the element whose Weyl state is ``z``."""
    hi = sr_hi(z, k1)
    return (np.uint64(hi) << np.uint64(32)) | np.uint64(sr_lo(hi, k1))


@_jit
def sr_word(seed, j):
    """The ``j``-th stochastic-rounding word of a block seeded with ``seed``."""
    k0, k1 = sr_keys(seed)
    return sr_word_at(U(k0 + mul(U(j + 1), G32)), k1)


@_kernel
def sr_fill(seed, words, n):
    """words[j] = sr_word(seed, j) for j < n."""
    k0, k1 = sr_keys(seed)
    z = k0
    for j in range(n):
        z = sr_step(z)
        words[j] = sr_word_at(z, k1)


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
