// gemm_fp8_wgmma.cu -- FP8 (E4M3, E5M2) products on Hopper's own FP8 tensor cores
// (SASS: QGMMA.64x8x32.F32.E4M3.E4M3; on an H200, 2026-12-04, it reproduced the h100
// model on 100% of 20,608 outputs per format) through
//     wgmma.mma_async.sync.aligned.m64n8k32.f32.<e4m3|e5m2>.<same>
// which exists only for the sm_90a target (compile with -arch=sm_90a; CuPy's
// RawModule cannot ask for it, so lowprec.gpu compiles this file with NVRTC
// itself and loads the cubin). The FP8 kernel in gemm_fp8.cu uses mma.sync,
// which Hopper runs through its fp16 path; this one is what cuBLASLt-style FP8
// GEMMs use, and its accumulation is what the validation wants to model.
//
// C[M][N] (float32) = A[M][K] @ B[K][N]; A row-major (M x K) and B given
// TRANSPOSED, row-major N x K ("K-major", the only layout wgmma takes for
// 8-bit inputs); M % 64 == 0, N % 8 == 0, K % 32 == 0. One warpgroup (128
// threads) per 64x8 tile of C; k-blocks of 32 accumulate in order into the same
// fp32 registers.
//
// Shared-memory layout, no swizzle ("interleaved" core matrices): a core matrix
// is 8 rows x 16 bytes (16 k-values), stored row after row in 128 bytes.
//   A tile 64x32: core matrix (i, j), i = row/8 (0..7), j = k/16 (0..1), at
//                 byte (2*i + j) * 128: LBO (next core matrix along K) = 128,
//                 SBO (next 8 rows along M) = 256.
//   B tile 8x32:  core matrix j at byte j * 128: LBO = 128, SBO = 256 (unused).
// Descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address >> 4,
// 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0), 62-63 swizzle (0).
// Accumulator fragment of m64n8 f32 (per warp w of the group, g = lane/4,
// t = lane%4): d0, d1 = C[16w+g][2t, 2t+1]; d2, d3 = C[16w+g+8][2t, 2t+1].
#include "lp_common.cuh"

__device__ __forceinline__ lp_u64 lp_desc(const void* smem, lp_u32 lbo, lp_u32 sbo) {
    const lp_u32 addr = (lp_u32)__cvta_generic_to_shared(smem);
    return (lp_u64)((addr >> 4) & 0x3FFF) | ((lp_u64)((lbo >> 4) & 0x3FFF) << 16)
           | ((lp_u64)((sbo >> 4) & 0x3FFF) << 32);
}

#define LP_WGMMA_FP8(NAME, KIND)                                                           \
    extern "C" __global__ void __launch_bounds__(128, 1)                                   \
    NAME(const lp_u8* __restrict__ A, const lp_u8* __restrict__ Bt, float* __restrict__ C, \
         int M, int N, int K) {                                                            \
        __shared__ __align__(128) lp_u8 sa[64 * 32];                                       \
        __shared__ __align__(128) lp_u8 sb[8 * 32];                                        \
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;                     \
        const int g = lane >> 2, t = lane & 3;                                             \
        const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 8;                           \
        float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;                                      \
        for (int k0 = 0; k0 < K; k0 += 32) {                                               \
            /* A: 64 rows x 32 bytes = 128 threads x 16 bytes. */                          \
            {                                                                              \
                const int r = tid >> 1, j = tid & 1;                                       \
                const uint4 v = *reinterpret_cast<const uint4*>(A + (size_t)(row0 + r) * K \
                                                                + k0 + 16 * j);           \
                *reinterpret_cast<uint4*>(sa + (2 * (r >> 3) + j) * 128 + (r & 7) * 16) = v; \
            }                                                                              \
            if (tid < 16) { /* B^T: 8 rows x 32 bytes */                                   \
                const int r = tid >> 1, j = tid & 1;                                       \
                const uint4 v = *reinterpret_cast<const uint4*>(Bt + (size_t)(col0 + r) * K \
                                                                + k0 + 16 * j);           \
                *reinterpret_cast<uint4*>(sb + j * 128 + r * 16) = v;                      \
            }                                                                              \
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                   \
            __syncthreads();                                                               \
            const lp_u64 da = lp_desc(sa, 128, 256), db = lp_desc(sb, 128, 256);           \
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                        \
            asm volatile(                                                                  \
                "wgmma.mma_async.sync.aligned.m64n8k32.f32." KIND "." KIND " "             \
                "{%0, %1, %2, %3}, %4, %5, 1, 1, 1;"                                       \
                : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                   \
                : "l"(da), "l"(db)                                                         \
                : "memory");                                                               \
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                 \
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                 \
            __syncthreads();                                                               \
        }                                                                                  \
        float* c_lo = C + (size_t)(row0 + 16 * warp + g) * N + col0 + 2 * t;              \
        float* c_hi = c_lo + (size_t)8 * N;                                                \
        c_lo[0] = d0; c_lo[1] = d1; c_hi[0] = d2; c_hi[1] = d3;                            \
    }

LP_WGMMA_FP8(wgmma_e4m3_f32, "e4m3")
LP_WGMMA_FP8(wgmma_e5m2_f32, "e5m2")
