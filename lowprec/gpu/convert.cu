// convert.cu -- the GPU's own conversions between float32/float64 and the
// low-precision formats, as elementwise kernels and as exhaustive sweeps.
//
// One device function per conversion, `lp_<name>(source bits) -> code`, is
// listed once in LP_F32_CONVERSIONS / LP_F64_CONVERSIONS; the macros at the
// bottom turn each into
//   cvt_<name>(in, out, n)        elementwise: n source bit patterns -> codes
//   sweep_<name>(...)             (float32 sources) every input from its index,
//                                 checked on the device against the emulator's
//                                 step table (see lp_common.cuh); NaN inputs
//                                 against the conversion's hardware NaN rule
//                                 (lowprec/nan_rules.py), indexed by sign and
//                                 fraction bit 21 (all a rule here depends on),
//                                 counters[5] += NaN results that follow the
//                                 rule but differ from lowprec's default NaN
// and each back conversion `lp_back_<name>(code) -> bits` into
//   back_<name>(in, out, n).
//
// Which instruction runs (Hopper, sm_90):
// * fp16/bf16: `cvt.{rn,rz,rm,rp}.{f16,bf16}.{f32,f64}` -- the instructions
//   behind __float2half_rn/_rz/_rd/_ru, __float2bfloat16_rn/_rz/_rd/_ru and
//   __double2half/__double2bfloat16 (inline PTX here, so that every mode is
//   available from double too and no compiler flag can change them).
// * FP8 E4M3/E5M2, __NV_SATFINITE from float32: the sm_89+ hardware instruction
//   `cvt.rn.satfinite.e4m3x2.f32` (through __nv_cvt_float_to_fp8).
// * FP8 __NV_NOSAT, fp6, fp4 from float32: the results of CUDA's software
//   conversions (hardware instructions exist only on sm_100+), computed fast as
//   lp_fast_convert.cuh explains (satfinite hardware + fix-up; integer rounding).
// * e8m0, and FP8 from float64: CUDA's software conversions in
//   cuda_fp8.hpp (hardware instructions exist
//   only on sm_100+). The float32 versions of those helpers widen with a plain
//   `(double)x`, which -ftz=true turns into a flushing `cvt.ftz.f64.f32`; we
//   widen exactly ourselves (lp_f32_to_f64) and call the double versions, which
//   is what the float32 versions do after their widening.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_fp6.h>
#include <cuda_fp4.h>
#include "lp_common.cuh"
#include "lp_fast_convert.cuh"

// ----- float32 -> fp16 / bf16, the four IEEE directed and nearest modes -----
#define LP_CVT_PTX(NAME, INSTR, SRC_T, SRC_REG, FROM_BITS)                     \
    __device__ __forceinline__ lp_u32 lp_##NAME(SRC_T u) {                   \
        lp_u16 r;                                                             \
        asm(INSTR " %0, %1;" : "=h"(r) : SRC_REG (FROM_BITS(u)));              \
        return r;                                                             \
    }
LP_CVT_PTX(f32_fp16_rn, "cvt.rn.f16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_fp16_rz, "cvt.rz.f16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_fp16_rd, "cvt.rm.f16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_fp16_ru, "cvt.rp.f16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_bf16_rn, "cvt.rn.bf16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_bf16_rz, "cvt.rz.bf16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_bf16_rd, "cvt.rm.bf16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f32_bf16_ru, "cvt.rp.bf16.f32", lp_u32, "f", lp_bits_f32)
LP_CVT_PTX(f64_fp16_rn, "cvt.rn.f16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_fp16_rz, "cvt.rz.f16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_fp16_rd, "cvt.rm.f16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_fp16_ru, "cvt.rp.f16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_bf16_rn, "cvt.rn.bf16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_bf16_rz, "cvt.rz.bf16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_bf16_rd, "cvt.rm.bf16.f64", lp_u64, "d", lp_bits_f64)
LP_CVT_PTX(f64_bf16_ru, "cvt.rp.bf16.f64", lp_u64, "d", lp_bits_f64)

// ----- FP8 (round to nearest even; saturating or not) -----
// __NV_NOSAT from float32: the hardware satfinite instruction plus a fix-up of the
// out-of-range and NaN inputs (lp_fast_convert.cuh), equal to CUDA's software path.
#define LP_CVT_FP8(NAME, SAT, KIND)                                            \
    __device__ __forceinline__ lp_u32 lp_f32_##NAME(lp_u32 u) {              \
        return (SAT == __NV_SATFINITE)                                        \
                   ? __nv_cvt_float_to_fp8(lp_bits_f32(u), SAT, KIND)         \
                   : lp_fast_fp8_nosat(u, KIND == __NV_E5M2);                 \
    }                                                                         \
    __device__ __forceinline__ lp_u32 lp_f64_##NAME(lp_u64 u) {              \
        return __nv_cvt_double_to_fp8(lp_bits_f64(u), SAT, KIND);             \
    }
LP_CVT_FP8(e4m3_sat, __NV_SATFINITE, __NV_E4M3)
LP_CVT_FP8(e4m3_nosat, __NV_NOSAT, __NV_E4M3)
LP_CVT_FP8(e5m2_sat, __NV_SATFINITE, __NV_E5M2)
LP_CVT_FP8(e5m2_nosat, __NV_NOSAT, __NV_E5M2)

// ----- fp6 / fp4 (always saturating; CUDA turns NaN into +MAXNORM) -----
// Integer rounding on the float32 bits (lp_fast_convert.cuh), equal to CUDA's
// __nv_cvt_double_to_fp6/fp4 (software before sm_100) on every input.
#define LP_CVT_SHORT(NAME, E, M, RN)                                           \
    __device__ __forceinline__ lp_u32 lp_f32_##NAME(lp_u32 u) {              \
        return lp_fast_small(u, E, M, RN);                                    \
    }
LP_CVT_SHORT(e2m1_rn, 2, 1, true)
LP_CVT_SHORT(e2m1_rz, 2, 1, false)
LP_CVT_SHORT(e2m3_rn, 2, 3, true)
LP_CVT_SHORT(e2m3_rz, 2, 3, false)
LP_CVT_SHORT(e3m2_rn, 3, 2, true)
LP_CVT_SHORT(e3m2_rz, 3, 2, false)

// ----- e8m0 scales (|x| rounded to a power of two; toward zero or up) -----
#define LP_CVT_E8M0(NAME, SAT, MODE)                                           \
    __device__ __forceinline__ lp_u32 lp_f32_##NAME(lp_u32 u) {              \
        return __nv_cvt_double_to_e8m0(lp_f32_to_f64(lp_bits_f32(u)), SAT, MODE); \
    }
LP_CVT_E8M0(e8m0_rz_sat, __NV_SATFINITE, cudaRoundZero)
LP_CVT_E8M0(e8m0_rz_nosat, __NV_NOSAT, cudaRoundZero)
LP_CVT_E8M0(e8m0_ru_sat, __NV_SATFINITE, cudaRoundPosInf)
LP_CVT_E8M0(e8m0_ru_nosat, __NV_NOSAT, cudaRoundPosInf)

// ----- back to a wide format: every code -> float32 / fp16 / bf16 bits -----
__device__ __forceinline__ lp_u32 lp_back_fp16_f32(lp_u32 c) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((lp_u16)c));
    return __float_as_uint(f);
}
__device__ __forceinline__ lp_u32 lp_back_bf16_f32(lp_u32 c) { return c << 16; }
__device__ __forceinline__ lp_u32 lp_back_e4m3_fp16(lp_u32 c) {
    return __half_raw(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3)).x;
}
__device__ __forceinline__ lp_u32 lp_back_e5m2_fp16(lp_u32 c) {
    return __half_raw(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E5M2)).x;
}
__device__ __forceinline__ lp_u32 lp_back_e2m1_fp16(lp_u32 c) {
    return __half_raw(__nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)c, __NV_E2M1)).x;
}
__device__ __forceinline__ lp_u32 lp_back_e2m3_fp16(lp_u32 c) {
    return __half_raw(__nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)c, __NV_E2M3)).x;
}
__device__ __forceinline__ lp_u32 lp_back_e3m2_fp16(lp_u32 c) {
    return __half_raw(__nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)c, __NV_E3M2)).x;
}
__device__ __forceinline__ lp_u32 lp_back_e8m0_bf16(lp_u32 c) {
    return __nv_bfloat16_raw(__nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)c)).x;
}

// ---------------------------------------------------------------------------
// Kernel generators.
// ---------------------------------------------------------------------------
__device__ __forceinline__ void lp_store4(lp_u8* p, lp_u32 a, lp_u32 b, lp_u32 c, lp_u32 d) {
    *reinterpret_cast<uchar4*>(p) = make_uchar4(a, b, c, d);
}
__device__ __forceinline__ void lp_store4(lp_u16* p, lp_u32 a, lp_u32 b, lp_u32 c, lp_u32 d) {
    *reinterpret_cast<ushort4*>(p) = make_ushort4(a, b, c, d);
}

// float32 -> codes. Four elements per thread and iteration: one 16-byte load,
// one 4- or 8-byte store (the Python side passes fresh, 256-byte aligned arrays).
#define LP_F32_KERNELS(NAME, OUT_T)                                            \
    extern "C" __global__ void cvt_##NAME(const lp_u32* __restrict__ in,      \
                                          OUT_T* __restrict__ out, lp_u64 n) { \
        const lp_u64 n4 = n / 4;                                              \
        const uint4* in4 = reinterpret_cast<const uint4*>(in);                \
        LP_GRID_LOOP(i, n4) {                                                 \
            const uint4 v = in4[i];                                           \
            lp_store4(out + 4 * i, lp_##NAME(v.x), lp_##NAME(v.y),            \
                      lp_##NAME(v.z), lp_##NAME(v.w));                        \
        }                                                                     \
        LP_GRID_LOOP(j, n - 4 * n4) { out[4 * n4 + j] = (OUT_T)lp_##NAME(in[4 * n4 + j]); } \
    }                                                                         \
    extern "C" __global__ void sweep_##NAME(                                  \
        lp_u64 start, lp_u64 count, const lp_u32* __restrict__ lo,            \
        const lp_u32* __restrict__ hi, lp_u32 ncodes,                         \
        const lp_u32* __restrict__ nan_expect, const lp_u8* __restrict__ is_nan, \
        lp_u64* counters, lp_u64* first, lp_u32 cap,                          \
        const lp_u32* __restrict__ nan_default) {                             \
        lp_u64 checked = 0, bad = 0, nan_bits = 0, big = 0, nan_explained = 0; \
        LP_GRID_LOOP(i, count) {                                              \
            const lp_u32 u = (lp_u32)(start + i);                             \
            const lp_u32 code = lp_##NAME(u);                                 \
            const lp_u32 sign = u >> 31, mag = u & 0x7FFFFFFFu;               \
            bool ok, too_big = false;                                         \
            if (mag > 0x7F800000u) { /* NaN input: the hardware NaN rule's code */ \
                ok = code == nan_expect[(sign << 1) | ((u >> 21) & 1u)];      \
                if (ok && code != nan_default[sign]) nan_explained++;         \
                if (!ok && code < ncodes && is_nan[code]) nan_bits++;         \
            } else {                                                          \
                ok = lp_in_range<lp_u32>(lo, hi, ncodes, sign, code, mag, &too_big); \
            }                                                                 \
            checked++;                                                        \
            if (!ok) {                                                        \
                bad++;                                                        \
                big += too_big;                                               \
                lp_record(counters, first, cap, ((lp_u64)code << 32) | u);    \
            }                                                                 \
        }                                                                     \
        lp_flush_counts(counters, checked, bad, nan_bits, big);              \
        if (nan_explained) atomicAdd(&counters[5], nan_explained);            \
    }

#define LP_F64_KERNELS(NAME, OUT_T)                                            \
    extern "C" __global__ void cvt_##NAME(const lp_u64* __restrict__ in,      \
                                          OUT_T* __restrict__ out, lp_u64 n) { \
        LP_GRID_LOOP(i, n) { out[i] = (OUT_T)lp_##NAME(in[i]); }              \
    }

#define LP_BACK_KERNEL(NAME, IN_T, OUT_T)                                      \
    extern "C" __global__ void back_##NAME(const IN_T* __restrict__ in,       \
                                           OUT_T* __restrict__ out, lp_u64 n) { \
        LP_GRID_LOOP(i, n) { out[i] = (OUT_T)lp_back_##NAME(in[i]); }          \
    }

LP_F32_KERNELS(f32_fp16_rn, lp_u16)
LP_F32_KERNELS(f32_fp16_rz, lp_u16)
LP_F32_KERNELS(f32_fp16_rd, lp_u16)
LP_F32_KERNELS(f32_fp16_ru, lp_u16)
LP_F32_KERNELS(f32_bf16_rn, lp_u16)
LP_F32_KERNELS(f32_bf16_rz, lp_u16)
LP_F32_KERNELS(f32_bf16_rd, lp_u16)
LP_F32_KERNELS(f32_bf16_ru, lp_u16)
LP_F32_KERNELS(f32_e4m3_sat, lp_u8)
LP_F32_KERNELS(f32_e4m3_nosat, lp_u8)
LP_F32_KERNELS(f32_e5m2_sat, lp_u8)
LP_F32_KERNELS(f32_e5m2_nosat, lp_u8)
LP_F32_KERNELS(f32_e2m1_rn, lp_u8)
LP_F32_KERNELS(f32_e2m1_rz, lp_u8)
LP_F32_KERNELS(f32_e2m3_rn, lp_u8)
LP_F32_KERNELS(f32_e2m3_rz, lp_u8)
LP_F32_KERNELS(f32_e3m2_rn, lp_u8)
LP_F32_KERNELS(f32_e3m2_rz, lp_u8)
LP_F32_KERNELS(f32_e8m0_rz_sat, lp_u8)
LP_F32_KERNELS(f32_e8m0_rz_nosat, lp_u8)
LP_F32_KERNELS(f32_e8m0_ru_sat, lp_u8)
LP_F32_KERNELS(f32_e8m0_ru_nosat, lp_u8)

LP_F64_KERNELS(f64_fp16_rn, lp_u16)
LP_F64_KERNELS(f64_fp16_rz, lp_u16)
LP_F64_KERNELS(f64_fp16_rd, lp_u16)
LP_F64_KERNELS(f64_fp16_ru, lp_u16)
LP_F64_KERNELS(f64_bf16_rn, lp_u16)
LP_F64_KERNELS(f64_bf16_rz, lp_u16)
LP_F64_KERNELS(f64_bf16_rd, lp_u16)
LP_F64_KERNELS(f64_bf16_ru, lp_u16)
LP_F64_KERNELS(f64_e4m3_sat, lp_u8)
LP_F64_KERNELS(f64_e4m3_nosat, lp_u8)
LP_F64_KERNELS(f64_e5m2_sat, lp_u8)
LP_F64_KERNELS(f64_e5m2_nosat, lp_u8)

LP_BACK_KERNEL(fp16_f32, lp_u16, lp_u32)
LP_BACK_KERNEL(bf16_f32, lp_u16, lp_u32)
LP_BACK_KERNEL(e4m3_fp16, lp_u8, lp_u16)
LP_BACK_KERNEL(e5m2_fp16, lp_u8, lp_u16)
LP_BACK_KERNEL(e2m1_fp16, lp_u8, lp_u16)
LP_BACK_KERNEL(e2m3_fp16, lp_u8, lp_u16)
LP_BACK_KERNEL(e3m2_fp16, lp_u8, lp_u16)
LP_BACK_KERNEL(e8m0_bf16, lp_u8, lp_u16)
