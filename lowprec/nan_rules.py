"""Which code a NaN input becomes: lowprec's rule and the rules of NVIDIA's conversions.

IEEE 754 leaves a converted NaN's payload and sign to the implementation, and
real converters differ. lowprec's own rule (``encode(x, fmt)``) keeps the sign
and gives the format's one quiet NaN. ``encode(x, fmt, nan=RULE)`` gives another
rule's codes instead, so an emulated result can equal a GPU's bit for bit, NaNs
included. The rules:

``"lowprec"``
    The default: sign kept, the quiet NaN with only the top mantissa bit set
    (fp16 ``0x7e00``/``0xfe00``, bf16 ``0x7fc0``/``0xffc0``, E5M2 ``0x7e``/``0xfe``,
    E4M3 ``0x7f``/``0xff``).
``"canonical"``
    One positive NaN whatever the input: every exponent and mantissa bit set
    (fp16 and bf16 ``0x7fff``, E4M3 and E5M2 ``0x7f``, e8m0 ``0xff``). PTX's
    hardware conversions (``cvt.rn.f16.f32``, ``cvt.{rn,rz,rm,rp}.bf16.f32``,
    ``cvt.rn.satfinite.e4m3x2.f32``/``e5m2x2``) return NVIDIA's canonical NaN.
``"truncate"``
    CUDA's software FP8 conversion (``__nv_cvt_double_to_fp8`` in
    ``cuda_fp8.hpp``, used for ``__NV_NOSAT``): sign kept, the input's fraction
    cut to the format's mantissa bits, quiet bit set (E5M2: ``sign | 0x7e |
    the second fraction bit``; E4M3 has one NaN per sign, ``sign | 0x7f``). A
    float32 input is first widened to float64 as ``cvt.f64.f32`` does on the GPU
    (payload kept), so its fraction bit 21 decides E5M2's last bit.
``"max"``
    ``+max`` finite, whatever the sign (CUDA's fp6/fp4 conversions; the formats
    have no NaN).

>>> import numpy as np
>>> x = np.array([np.nan, -np.nan], np.float32)
>>> [hex(c) for c in encode_nan_rule(x, "fp16", "canonical")]
['0x7fff', '0x7fff']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .formats import FloatFormat, get_format

#: Rule name -> one line saying what it gives and which hardware uses it.
NAN_RULES: dict[str, str] = {
    "lowprec": "sign kept, the format's quiet NaN (lowprec's default)",
    "canonical": "one positive NaN, every exponent and mantissa bit set (PTX hardware cvt: "
                 "fp16/bf16 0x7fff, FP8 0x7f)",
    "truncate": "sign kept, fraction truncated to the format, quiet bit set (CUDA's "
                "software __nv_cvt_double_to_fp8)",
    "max": "+max finite whatever the sign (CUDA's fp6/fp4 conversions)",
}


def check_rule(rule: str) -> str:
    """The rule name, or a ValueError listing the rules."""
    if rule not in NAN_RULES:
        raise ValueError(f"unknown NaN rule {rule!r}; known: {', '.join(NAN_RULES)}")
    return rule


def _fraction64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sign bits and fraction fields of float64 NaNs ``x``."""
    u = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    return u >> np.uint64(63), u & np.uint64((1 << 52) - 1)


def nan_codes(x: np.ndarray, fmt: FloatFormat | str, rule: str) -> np.ndarray:
    """The codes of ``fmt`` that NaN inputs ``x`` (float32 or float64) get under ``rule``."""
    from .rounding import decode, encode

    fmt = get_format(fmt)
    rule = check_rule(rule)
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    n = x.shape
    ones = (1 << (fmt.exponent_bits + fmt.mantissa_bits)) - 1
    if rule == "max":
        return np.full(n, fmt.max_code_magnitude, dtype=fmt.code_dtype)
    if not fmt.has_nan:
        raise ValueError(f"{fmt.name} has no NaN code: use nan='max' (CUDA's rule) or remove "
                         "the NaNs before converting")
    if rule == "lowprec":
        return np.asarray(encode(x, fmt), dtype=fmt.code_dtype).reshape(n)
    with np.errstate(invalid="ignore"):
        if not np.isnan(decode(np.array([ones], dtype=fmt.code_dtype), fmt))[0]:
            raise ValueError(f"{fmt.name}: the all-ones code is not a NaN, so rule {rule!r} "
                             "does not apply (use nan='lowprec')")
    if rule == "canonical":
        return np.full(n, ones, dtype=fmt.code_dtype)
    if x.dtype == np.float32:  # widened as cvt.f64.f32: float32 fraction bits on top
        u = np.ascontiguousarray(x).view(np.uint32)
        sign, top_bits, shift = u >> np.uint32(31), u, 23
    else:
        (sign, top_bits), shift = _fraction64(x), 52
    sbit = (sign << sign.dtype.type(fmt.width - 1)) if fmt.signed else sign.dtype.type(0)
    if fmt.nan == "ieee":  # truncate: sign | exponent all ones | quiet bit | top fraction
        m = fmt.mantissa_bits
        t = top_bits.dtype.type
        top = ((top_bits >> t(shift - m)) & t((1 << m) - 1)) | t(1 << (m - 1))
        code = sbit | t(((1 << fmt.exponent_bits) - 1) << m) | top
    else:  # one NaN per sign (OCP "fn" formats, e8m0)
        code = sbit | sbit.dtype.type(ones)
    return code.astype(fmt.code_dtype)


def encode_nan_rule(x: Any, fmt: FloatFormat | str, rule: str, mode: str = "rne", *,
                    saturate: bool = False, subnormals: bool = True) -> Any:
    """``encode(x, fmt, mode, ...)`` with NaN inputs coded by ``rule`` (see :data:`NAN_RULES`).

    What ``encode(..., nan=rule)`` runs.
    """
    from .rounding import encode

    rule = check_rule(rule)
    arr = np.asarray(x)
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    isnan = np.isnan(arr)
    clean = np.where(isnan, arr.dtype.type(0), arr) if isnan.any() else arr
    codes = np.array(encode(clean, fmt, mode, saturate=saturate, subnormals=subnormals))
    if isnan.any():
        codes[isnan] = nan_codes(arr[isnan], fmt, rule)
    return codes[()] if codes.ndim == 0 else codes
