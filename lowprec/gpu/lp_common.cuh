// lp_common.cuh -- helpers shared by lowprec's CUDA sources.
//
// Every kernel in lowprec takes and returns raw bit patterns ("codes"):
// uint32 for float32, uint64 for float64, uint16 for fp16/bf16, one uint8 per
// code for the 8-, 6- and 4-bit formats (sub-byte codes in the low bits, as
// ml_dtypes stores them). CuPy has no fp8/bf16 dtype, and moving bits keeps
// the compiler from touching values on the way in and out.
//
// Why inline PTX for widening float -> double:
// CuPy compiles every RawModule with -ftz=true (appended after the user's
// options, so it cannot be overridden; cupy issue 9576). With that flag a
// plain C++ `(double)f` becomes `cvt.ftz.f64.f32`, which flushes float32
// subnormal inputs to zero before CUDA's software conversions (fp8 __NV_NOSAT,
// fp6, fp4, e8m0) ever see them. `cvt.f64.f32` written as inline PTX carries
// no .ftz and is exact, so the results do not depend on the compiler flag.
// tests/test_gpu_compile.py compiles convert.cu with -ftz=true and checks
// that its PTX contains no .ftz instruction.
#pragma once

typedef unsigned char lp_u8;
typedef unsigned short lp_u16;
typedef unsigned int lp_u32;
typedef unsigned long long lp_u64;

// Exact float32 -> float64 widening that keeps subnormals (no .ftz).
__device__ __forceinline__ double lp_f32_to_f64(float x) {
    double d;
    asm("cvt.f64.f32 %0, %1;" : "=d"(d) : "f"(x));
    return d;
}

__device__ __forceinline__ float lp_bits_f32(lp_u32 u) { return __uint_as_float(u); }
__device__ __forceinline__ double lp_bits_f64(lp_u64 u) {
    return __longlong_as_double((long long)u);
}

// Grid-stride loop over [0, n).
#define LP_GRID_LOOP(i, n)                                                        \
    for (lp_u64 i = (lp_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);       \
         i += (lp_u64)gridDim.x * blockDim.x)

// ---------------------------------------------------------------------------
// Checking a result code against the emulator's step table.
//
// For a fixed conversion or operation and a fixed sign, the emulator's result
// code is a monotone step function of the magnitude of the exact input: code c
// is the right answer exactly for magnitudes in [lo[c], hi[c]] (magnitudes as
// unsigned bit patterns, which order like the values). lowprec.validate builds
// the tables from the emulator on the CPU (bisection) and checks them there on
// random inputs; the kernels only look up the code the hardware returned, so
// checking one input costs two loads, whatever the format.
//
// counters[0] += inputs checked
// counters[1] += mismatches (result code outside its range, or wrong NaN)
// counters[2] += mismatches where hardware and emulator both gave a NaN but
//                with different bits (payload or sign)
// counters[3] += hardware result larger in magnitude than the emulator's
// counters[4]  = slots taken for the first mismatches (may exceed cap a little)
// ---------------------------------------------------------------------------
template <typename M>
__host__ __device__ inline bool lp_in_range(const M* lo, const M* hi, lp_u32 ncodes,
                                            lp_u32 sign, lp_u32 code, M mag, bool* too_big) {
    if (code >= ncodes) { *too_big = false; return false; }
    const lp_u32 k = sign * ncodes + code;
    const M l = lo[k], h = hi[k];
    *too_big = mag < l;
    return l <= mag && mag <= h;
}

__device__ __forceinline__ void lp_flush_counts(lp_u64* counters, lp_u64 checked, lp_u64 bad,
                                                lp_u64 nan_bits, lp_u64 big) {
    atomicAdd(&counters[0], checked);
    if (bad) atomicAdd(&counters[1], bad);
    if (nan_bits) atomicAdd(&counters[2], nan_bits);
    if (big) atomicAdd(&counters[3], big);
}

// Records a mismatching input (a 64-bit key) in the first free slot. Once the
// slots are full it returns after one plain read, so a kernel that mismatches
// everywhere does not serialise on this counter (counters[1] still counts all).
__device__ __forceinline__ void lp_record(lp_u64* counters, lp_u64* first, lp_u32 cap,
                                          lp_u64 key) {
    if (*(volatile lp_u64*)&counters[4] >= cap) return;
    const lp_u64 slot = atomicAdd(&counters[4], 1ULL);
    if (slot < cap) first[slot] = key;
}
