"""One compiled pass over a tensor and its quantized values: the counts of
:mod:`lowprec.inspect.stats`, and per-block sums for the block forensics (moved here
from ``lowprec/inspect/_kernels.py``: every numba kernel lives under ``_kernels/``;
``route_compiled`` names them).

The array is seen as ``rows x cols`` (its last axis is ``cols``), cut into blocks of
``bs`` along the last axis as MX and NVFP4 cut it (the last block of a row may be short;
padding would be zeros, which change no count and no sum).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_jit = njit(cache=True, nogil=True)


@_jit
def measure_pass(x, q, e, codes, table, factor, clip, clip_mode, tiny, rows, cols, bs,
                 blocks_out):
    """Counts and sums over ``x`` (float32/64, ``rows*cols``), ``q`` (float64) and the
    stored elements ``e`` (float64), or, when ``codes`` is not empty, ``e = table[code]``
    and ``q = e * factor`` (one factor, or one per block); the clip threshold ``clip``
    (``clip_mode`` 0: ``clip[0]`` for all; 1: one per block). ``blocks_out`` (n_blocks x 5,
    float64, or 0 rows): per block noise, signal, clipped, flushed, amax.

    Returns (zeros, nonzero, underflow, subnormal, overflow, clipped, nan, nan_in,
    n_finite, signal, noise, max_rel, sum_rel, n_rel, inf_in): ``overflow`` counts the
    finite inputs only, ``inf_in`` the ±inf inputs; ``nan`` counts NaN results and NaN
    inputs whose result is not NaN.
    """
    zeros = nonzero = underflow = subnormal = overflow = clipped = 0
    nan = nan_in = n_finite = n_rel = inf_in = 0
    signal = noise = max_rel = sum_rel = 0.0
    nb = (cols + bs - 1) // bs
    want_blocks = blocks_out.shape[0] > 0
    from_codes = codes.shape[0] > 0
    one_factor = factor.shape[0] == 1
    for r in range(rows):
        for b in range(nb):
            blk = r * nb + b
            lim = clip[0] if clip_mode == 0 else clip[blk]
            f = factor[0] if one_factor else factor[blk]
            b_noise = b_signal = b_amax = 0.0
            b_clip = b_flush = 0
            start = r * cols + b * bs
            stop = min(start + bs, r * cols + cols)
            for i in range(start, stop):
                xi = np.float64(x[i])
                if from_codes:
                    ei = table[codes[i]]
                    qi = ei * f
                else:
                    ei = e[i]
                    qi = q[i]
                ae = abs(ei)
                if ae < tiny and ae > 0:
                    subnormal += 1
                q_nan = qi != qi
                if q_nan:
                    nan += 1
                if xi != xi:
                    nan_in += 1
                    if not q_nan:  # a NaN that came out as a number is still counted
                        nan += 1
                    b_amax = math.nan
                    continue
                ax = abs(xi)
                if ax > b_amax:
                    b_amax = ax
                if ax == math.inf:
                    inf_in += 1
                    continue
                n_finite += 1
                if ax == 0:
                    zeros += 1
                else:
                    nonzero += 1
                if q_nan or abs(qi) == math.inf:
                    overflow += 1
                    b_signal += xi * xi
                    continue
                if ax >= lim:
                    clipped += 1
                    b_clip += 1
                d = qi - xi
                noise += d * d
                signal += xi * xi
                b_noise += d * d
                b_signal += xi * xi
                if ax != 0:
                    if qi == 0:
                        underflow += 1
                        b_flush += 1
                    rel = abs(d) / ax
                    sum_rel += rel
                    n_rel += 1
                    if rel > max_rel:
                        max_rel = rel
            if want_blocks:
                blocks_out[blk, 0] = b_noise
                blocks_out[blk, 1] = b_signal
                blocks_out[blk, 2] = b_clip
                blocks_out[blk, 3] = b_flush
                blocks_out[blk, 4] = b_amax
    return (zeros, nonzero, underflow, subnormal, overflow, clipped, nan, nan_in, n_finite,
            signal, noise, max_rel, sum_rel, n_rel, inf_in)


@_jit
def field_counts(bits, mant_bits, n_fields):
    """How many of the floats with bit patterns ``bits`` (the int32/int64 view of a
    float32/float64 array, ``mant_bits`` fraction bits) have each exponent field
    (``n_fields`` of them), and how many subnormals have their highest set fraction
    bit at each position (their binade is ``position - (bias - 1) - mant_bits``)."""
    counts = np.zeros(n_fields, np.int64)
    sub = np.zeros(mant_bits, np.int64)
    frac_mask = (np.int64(1) << mant_bits) - 1
    for i in range(bits.shape[0]):
        b = np.int64(bits[i])
        field = (b >> mant_bits) & (n_fields - 1)
        counts[field] += 1
        frac = b & frac_mask
        if field == 0 and frac != 0:  # rare: find the highest set bit
            top = 0
            while frac >> (top + 1):
                top += 1
            sub[top] += 1
    return counts, sub


@_jit
def finite_amax(x):
    """The largest finite ``|x|`` (float64; 0.0 when there is none)."""
    m = 0.0
    for i in range(x.shape[0]):
        a = abs(np.float64(x[i]))
        a = a if a < math.inf else 0.0  # inf and NaN left out
        m = a if a > m else m
    return m
