// arith.cu -- fp16 and bf16 arithmetic as the GPU does it, elementwise and as
// on-device sweeps over all operand pairs.
//
// Operations (<fmt> is fp16 or bf16; operands and results are uint16 codes):
//   add, sub, mul  __hadd_rn, __hsub_rn, __hmul_rn: the _rn forms are never
//                  contracted into an fma by the compiler;
//   fma            __hfma (one rounding);
//   div, sqrt      __hdiv and hsqrt as CUDA ships them: float32 approximations
//                  (rcp.approx / div.approx / sqrt.approx) rounded to the format,
//                  so they are not guaranteed to be correctly rounded -- which is
//                  exactly what validation measures;
//   div_rn, sqrt_rn  correctly rounded versions written here: div.rn.f32 /
//                  sqrt.rn.f32 then cvt.rn to the format. Rounding twice is
//                  harmless because float32 has at least 2p+2 bits for p = 11
//                  (fp16) and p = 8 (bf16) (Figueroa's theorem for + - * / sqrt).
//
// CuPy's -ftz=true (cupy issue 9576) does not reach the add/sub/mul/fma
// instructions (inline PTX in cuda_fp16.hpp/cuda_bf16.hpp), nor div_rn/sqrt_rn
// (inline PTX here). It does reach the C++ float code inside CUDA's bf16
// __hdiv/hsqrt, which then flushes float32-subnormal (= bf16-subnormal)
// operands and results: validation reports that as hardware-vs-emulator
// mismatches of `div`/`sqrt` for bf16, which is what a CuPy user gets.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "lp_common.cuh"

// ----- codes <-> CUDA types -----
__device__ __forceinline__ __half lp_h(lp_u32 c) { __half_raw r; r.x = (lp_u16)c; return __half(r); }
__device__ __forceinline__ lp_u32 lp_c(__half h) { return __half_raw(h).x; }
__device__ __forceinline__ __nv_bfloat16 lp_b(lp_u32 c) {
    __nv_bfloat16_raw r; r.x = (lp_u16)c; return __nv_bfloat16(r);
}
__device__ __forceinline__ lp_u32 lp_c(__nv_bfloat16 h) { return __nv_bfloat16_raw(h).x; }

// ----- exact widening to double (inline PTX: no .ftz) -----
__device__ __forceinline__ double lp_fp16_to_f64(lp_u32 c) {
    double d;
    asm("cvt.f64.f16 %0, %1;" : "=d"(d) : "h"((lp_u16)c));
    return d;
}
__device__ __forceinline__ double lp_bf16_to_f64(lp_u32 c) {
    return lp_f32_to_f64(__uint_as_float(c << 16));
}

// ----- the GPU operations -----
#define LP_OPS(F, T, TO)                                                                   \
    __device__ __forceinline__ lp_u32 lp_##F##_add(lp_u32 a, lp_u32 b) { return lp_c(__hadd_rn(TO(a), TO(b))); } \
    __device__ __forceinline__ lp_u32 lp_##F##_sub(lp_u32 a, lp_u32 b) { return lp_c(__hsub_rn(TO(a), TO(b))); } \
    __device__ __forceinline__ lp_u32 lp_##F##_mul(lp_u32 a, lp_u32 b) { return lp_c(__hmul_rn(TO(a), TO(b))); } \
    __device__ __forceinline__ lp_u32 lp_##F##_div(lp_u32 a, lp_u32 b) { return lp_c(__hdiv(TO(a), TO(b))); }    \
    __device__ __forceinline__ lp_u32 lp_##F##_fma(lp_u32 a, lp_u32 b, lp_u32 c) {                          \
        return lp_c(__hfma(TO(a), TO(b), TO(c)));                                                             \
    }                                                                                                        \
    __device__ __forceinline__ lp_u32 lp_##F##_sqrt(lp_u32 a) { return lp_c(hsqrt(TO(a))); }

LP_OPS(fp16, __half, lp_h)
LP_OPS(bf16, __nv_bfloat16, lp_b)

// Correctly rounded division and square root through float32 (see the header).
__device__ __forceinline__ float lp_fp16_to_f32(lp_u32 c) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((lp_u16)c));
    return f;
}
__device__ __forceinline__ float lp_bf16_to_f32(lp_u32 c) { return __uint_as_float(c << 16); }
#define LP_RN_OPS(F, CVT)                                                                  \
    __device__ __forceinline__ lp_u32 lp_##F##_div_rn(lp_u32 a, lp_u32 b) {                \
        float q; lp_u16 r;                                                                 \
        asm("div.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(lp_##F##_to_f32(a)), "f"(lp_##F##_to_f32(b))); \
        asm(CVT " %0, %1;" : "=h"(r) : "f"(q));                                            \
        return r;                                                                          \
    }                                                                                      \
    __device__ __forceinline__ lp_u32 lp_##F##_sqrt_rn(lp_u32 a) {                         \
        float s; lp_u16 r;                                                                 \
        asm("sqrt.rn.f32 %0, %1;" : "=f"(s) : "f"(lp_##F##_to_f32(a)));                    \
        asm(CVT " %0, %1;" : "=h"(r) : "f"(s));                                            \
        return r;                                                                          \
    }
LP_RN_OPS(fp16, "cvt.rn.f16.f32")
LP_RN_OPS(bf16, "cvt.rn.bf16.f32")

// ---------------------------------------------------------------------------
// The emulator's answer for a sweep, computed exactly on the device.
//
// The exact result x of a+b, a-b, a*b, fma(a,b,c) or a/b is carried as a
// double rounded to odd (truncate, then set the last bit if anything was
// lost). Rounding that double to the 11- or 8-bit format then gives the same
// code as rounding x itself, in every mode (53 >= p + 2), so the emulator's
// step table for double -> format (built from lowprec.encode on the CPU)
// tells us the emulator's correctly rounded code for x.
//   a*b: exact in double (at most 22 significant bits, exponents in range);
//   a+b, a*b+c: TwoSum gives the rounding error of the double sum exactly;
//   a/b: the remainder a - q*b is exact (one fma) and its sign says where
//        the true quotient lies.
// ---------------------------------------------------------------------------
// The same functions run on the host in tests/test_gpu_compile.py (a host
// program built with nvcc checks them against exact fractions), so the plain
// double operations below go through LP_DADD etc.: __dadd_rn & co. on the
// device (never contracted into an fma), volatile IEEE doubles on the host.
#ifdef __CUDA_ARCH__
#define LP_DADD(x, y) __dadd_rn(x, y)
#define LP_DSUB(x, y) __dsub_rn(x, y)
#define LP_DMUL(x, y) __dmul_rn(x, y)
#define LP_DDIV(x, y) __ddiv_rn(x, y)
#define LP_DFMA(x, y, z) __fma_rn(x, y, z)
#else
static inline double lp_h_add(double x, double y) { volatile double r = x + y; return r; }
static inline double lp_h_mul(double x, double y) { volatile double r = x * y; return r; }
static inline double lp_h_div(double x, double y) { volatile double r = x / y; return r; }
#define LP_DADD(x, y) lp_h_add(x, y)
#define LP_DSUB(x, y) lp_h_add(x, -(y))
#define LP_DMUL(x, y) lp_h_mul(x, y)
#define LP_DDIV(x, y) lp_h_div(x, y)
#define LP_DFMA(x, y, z) fma(x, y, z)
#endif

__host__ __device__ inline double lp_round_odd(double s, int direction) {
    // direction: sign of (exact - s); 0 when s is exact.
    if (direction == 0 || !isfinite(s)) return s;
    lp_u64 b;
    memcpy(&b, &s, sizeof b);
    if (b & 1ULL) return s;  // already odd: truncation keeps it
    const bool away = (direction > 0) == (s > 0.0);  // exact is farther from zero
    b = away ? b + 1 : b - 1;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}
__host__ __device__ inline double lp_sum_odd(double x, double y) {
    // TwoSum (Knuth): s + e == x + y exactly.
    const double s = LP_DADD(x, y);
    const double yy = LP_DSUB(s, x);
    const double e = LP_DADD(LP_DSUB(x, LP_DSUB(s, yy)), LP_DSUB(y, yy));
    return lp_round_odd(s, (e > 0.0) - (e < 0.0));
}
// op: 0 add, 1 sub, 2 mul, 3 fma, 4 div.
__host__ __device__ inline double lp_exact_odd(int op, double a, double b, double c) {
    switch (op) {
    case 0: return lp_sum_odd(a, b);
    case 1: return lp_sum_odd(a, -b);
    case 2: return LP_DMUL(a, b);                      // exact
    case 3: return lp_sum_odd(LP_DMUL(a, b), c);       // a*b exact, then TwoSum
    default: {
        const double q = LP_DDIV(a, b);
        if (!isfinite(q) || q == 0.0) return q;
        const double r = LP_DFMA(-q, b, a);            // exact remainder a - q*b
        const int dir = ((r > 0.0) - (r < 0.0)) * ((b > 0.0) - (b < 0.0));
        return lp_round_odd(q, dir);
    }
    }
}

// splitmix64: operands for the random-triple sweeps, from (seed, index).
__device__ __forceinline__ lp_u64 lp_mix(lp_u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// ---------------------------------------------------------------------------
// Kernel generators.
//   <F>_<op>(a, b, out, n)            elementwise on uint16 codes
//   sweep_<F>_<op>(start, count, seed, ...)
//       seed == 0: input i is the pair (a, b) = (i >> 16, i & 0xFFFF), so
//                  start = 0, count = 2^32 covers every pair;
//       seed != 0: input i is a random (a, b, c) from lp_mix(seed ^ i).
//   Mismatch keys: code << 48 | c << 32 | a << 16 | b.
// ---------------------------------------------------------------------------
#define LP_SWEEP_BODY(F, OPNUM, HW_EXPR)                                                   \
    lp_u64 checked = 0, bad = 0, nan_bits = 0, big = 0;                                    \
    LP_GRID_LOOP(i, count) {                                                               \
        lp_u32 a, b, c = 0;                                                                \
        if (seed == 0) {                                                                   \
            const lp_u64 k = start + i;                                                    \
            a = (lp_u32)(k >> 16) & 0xFFFFu;                                               \
            b = (lp_u32)k & 0xFFFFu;                                                       \
        } else {                                                                           \
            const lp_u64 r = lp_mix(seed ^ (start + i));                                   \
            a = (lp_u32)r & 0xFFFFu; b = (lp_u32)(r >> 16) & 0xFFFFu;                       \
            c = (lp_u32)(r >> 32) & 0xFFFFu;                                               \
        }                                                                                  \
        const lp_u32 code = HW_EXPR;                                                       \
        const double x = lp_exact_odd(OPNUM, lp_##F##_to_f64(a), lp_##F##_to_f64(b),       \
                                      lp_##F##_to_f64(c));                                 \
        const lp_u64 xb = (lp_u64)__double_as_longlong(x);                                 \
        bool ok, too_big = false;                                                          \
        if (isnan(x)) {                                                                    \
            ok = code < ncodes && is_nan[code];                                            \
        } else {                                                                           \
            ok = lp_in_range<lp_u64>(lo, hi, ncodes, (lp_u32)(xb >> 63), code,             \
                                     xb & 0x7FFFFFFFFFFFFFFFULL, &too_big);                \
        }                                                                                  \
        checked++;                                                                         \
        if (!ok) {                                                                         \
            bad++;                                                                         \
            big += too_big;                                                                \
            lp_record(counters, first, cap,                                                \
                      ((lp_u64)code << 48) | ((lp_u64)c << 32) | ((lp_u64)a << 16) | b);  \
        }                                                                                  \
    }                                                                                      \
    lp_flush_counts(counters, checked, bad, nan_bits, big);

#define LP_SWEEP_ARGS                                                                      \
    lp_u64 start, lp_u64 count, lp_u64 seed, const lp_u64* __restrict__ lo,                \
        const lp_u64* __restrict__ hi, lp_u32 ncodes, const lp_u8* __restrict__ is_nan,     \
        lp_u64 *counters, lp_u64 *first, lp_u32 cap

#define LP_BINARY(F, OP, OPNUM)                                                            \
    extern "C" __global__ void F##_##OP(const lp_u16* __restrict__ a, const lp_u16* __restrict__ b, \
                                        lp_u16* __restrict__ out, lp_u64 n) {              \
        LP_GRID_LOOP(i, n) { out[i] = (lp_u16)lp_##F##_##OP(a[i], b[i]); }                 \
    }                                                                                      \
    extern "C" __global__ void sweep_##F##_##OP(LP_SWEEP_ARGS) {                           \
        LP_SWEEP_BODY(F, OPNUM, lp_##F##_##OP(a, b))                                       \
    }

#define LP_FMA(F)                                                                          \
    extern "C" __global__ void F##_fma(const lp_u16* __restrict__ a, const lp_u16* __restrict__ b, \
                                       const lp_u16* __restrict__ c, lp_u16* __restrict__ out, lp_u64 n) { \
        LP_GRID_LOOP(i, n) { out[i] = (lp_u16)lp_##F##_fma(a[i], b[i], c[i]); }            \
    }                                                                                      \
    extern "C" __global__ void sweep_##F##_fma(LP_SWEEP_ARGS) {                            \
        LP_SWEEP_BODY(F, 3, lp_##F##_fma(a, b, c))                                         \
    }

#define LP_UNARY(F, OP)                                                                    \
    extern "C" __global__ void F##_##OP(const lp_u16* __restrict__ a, lp_u16* __restrict__ out, lp_u64 n) { \
        LP_GRID_LOOP(i, n) { out[i] = (lp_u16)lp_##F##_##OP(a[i]); }                       \
    }

#define LP_ALL_OPS(F)        \
    LP_BINARY(F, add, 0)     \
    LP_BINARY(F, sub, 1)     \
    LP_BINARY(F, mul, 2)     \
    LP_BINARY(F, div, 4)     \
    LP_BINARY(F, div_rn, 4)  \
    LP_FMA(F)                \
    LP_UNARY(F, sqrt)        \
    LP_UNARY(F, sqrt_rn)

LP_ALL_OPS(fp16)
LP_ALL_OPS(bf16)
