// lp_fast_convert.cuh -- float32 -> FP8 __NV_NOSAT, fp6 and fp4 at memory speed on
// sm_89/sm_90, with the exact results of CUDA's software conversions.
//
// Before sm_100 CUDA converts these in software, in double arithmetic
// (__nv_cvt_double_to_fp8/fp6/fp4 in cuda_fp8.hpp, cuda_fp6.hpp, cuda_fp4.hpp), which
// ran at 0.60-0.62x (FP8 __NV_NOSAT), 0.70-0.76x (fp6 rn) and 0.84x (fp4 rn) of the
// H200's copy bandwidth. Here:
// * FP8 __NV_NOSAT = the hardware __NV_SATFINITE conversion (cvt.rn.satfinite.*x2.f32,
//   what __nv_cvt_float_to_fp8 runs on sm_89+), which rounds every in-range input like
//   the software path, plus a fix-up of the inputs where the two differ: |x| beyond the
//   overflow threshold and infinities (E4M3: NaN code sign|0x7f; E5M2: infinity
//   sign|0x7c) and NaN inputs (the software path's NaN: E4M3 sign|0x7f, E5M2
//   sign|0x7e|fraction bit 21 -- see lowprec/nan_rules.py, rule "truncate").
// * fp6 / fp4 = round to nearest even (or toward zero) in 32-bit integer arithmetic on
//   the float32 bits, saturating to +-max, NaN -> +max (CUDA's rule).
// Both are __host__ __device__: tests/test_gpu_fast_convert.py builds them for the host
// and compares them with CUDA's own software functions on every exponent, sign and
// rounding case, plus random inputs.
#pragma once
#include <cuda_fp8.h>
#include <string.h>

typedef unsigned int lp_fc_u32;

__host__ __device__ __forceinline__ float lp_fc_float(lp_fc_u32 u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// E4M3 / E5M2 from float32, __NV_NOSAT semantics (round to nearest even).
__host__ __device__ __forceinline__ lp_fc_u32 lp_fast_fp8_nosat(lp_fc_u32 u, bool e5m2) {
    const lp_fc_u32 mag = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u;
    const lp_fc_u32 sat = __nv_cvt_float_to_fp8(lp_fc_float(u), __NV_SATFINITE,
                                                e5m2 ? __NV_E5M2 : __NV_E4M3);
    if (!e5m2) {  // above 464 = 448 + half an ulp (and inf, NaN): NaN 0x7f
        return mag > 0x43E80000u ? (sign | 0x7Fu) : sat;
    }
    if (mag >= 0x47700000u) {  // 61440 = 57344 + half an ulp rounds to infinity
        return mag > 0x7F800000u ? (sign | 0x7Eu | ((u >> 21) & 1u)) : (sign | 0x7Cu);
    }
    return sat;
}

// fp6 / fp4 (E exponent bits, M mantissa bits, bias 2^(E-1) - 1, no inf/NaN) from
// float32: round to nearest even (rn) or toward zero, saturating; NaN -> +max.
__host__ __device__ __forceinline__ lp_fc_u32 lp_fast_small(lp_fc_u32 u, int E, int M, bool rn) {
    const lp_fc_u32 mag = u & 0x7FFFFFFFu;
    const lp_fc_u32 max_mag = (1u << (E + M)) - 1u;
    if (mag > 0x7F800000u) return max_mag;  // NaN: +max
    const lp_fc_u32 sign = (u >> 31) << (E + M);
    const int e = (int)(mag >> 23) - 127;         // float32 subnormals: tiny, give 0
    const int emin = 2 - (1 << (E - 1));          // 1 - bias
    if (e > emin + (1 << E)) return sign | max_mag;  // far above max (inf included)
    const int eq = e > emin ? e : emin;           // exponent of the target's quantum + M
    const int s = 23 - M + (eq - e);              // bits below the quantum
    if (mag < 0x00800000u || s > 25) return sign; // below a quarter quantum: zero
    const lp_fc_u32 sig = (mag & 0x7FFFFFu) | 0x800000u;
    lp_fc_u32 n = sig >> s;
    if (rn) {
        const lp_fc_u32 rem = sig & ((1u << s) - 1u), half = 1u << (s - 1);
        n += (rem > half) || (rem == half && (n & 1u));
    }
    const lp_fc_u32 code = e >= emin ? ((lp_fc_u32)(e - emin + 1) << M) + n - (1u << M) : n;
    return sign | (code > max_mag ? max_mag : code);
}
