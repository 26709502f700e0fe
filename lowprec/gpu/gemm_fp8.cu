// gemm_fp8.cu -- FP8 (E4M3, E5M2) matrix products on tensor cores with fp32
// accumulation, through the warp-level instruction
//     mma.sync.aligned.m16n8k32.row.col.f32.<e4m3|e5m2>.<same>.f32
// (PTX ISA 8.4+, sm_89 and later). On Hopper (sm_90) this instruction exists,
// but ptxas lowers it to HMMA.16816.F32, the fp16 tensor-core path (SASS of the
// 2026-12-04 H200 run); Hopper's own FP8 tensor cores are reached by wgmma
// (gemm_fp8_wgmma.cu, sm_90a). So this kernel answers "what does mma.sync give
// for FP8 on this GPU", not "what does cuBLASLt's FP8 GEMM give". Its fragment
// loads, stores and k-block chaining are checked against the PTX ISA layout on
// the CPU (tests/test_gpu_fragments.py): the kernel is right; the HMMA path
// needs its own model, not yet found (Hopper's FP16 rule on the FP8 values is
// ruled out by the record's statistics); validate --gpu searches for it.
//
// C[M][N] (float32) = A[M][K] @ B[K][N] with A, B given as row-major uint8
// codes; M % 16 == 0, N % 8 == 0, K % 32 == 0 (the Python side pads with +0).
// One warp computes one 16x8 tile of C, walking K in steps of 32: each step's
// mma adds a 16x8x32 product to the fp32 accumulators of the previous step, so
// the order of accumulation is fixed: k-blocks of 32 in increasing order.
//
// Fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k32" with 8-bit
// types), with g = lane / 4 and t = lane % 4:
//   A: reg0 = A[g][4t..4t+3]      reg1 = A[g+8][4t..4t+3]
//      reg2 = A[g][16+4t..+3]     reg3 = A[g+8][16+4t..+3]
//   B: reg0 = B[4t..4t+3][g]      reg1 = B[16+4t..16+4t+3][g]
//   C: c0, c1 = C[g][2t], C[g][2t+1];  c2, c3 = C[g+8][2t], C[g+8][2t+1]
// (lower bytes hold lower k). The kernel loads fragments straight from global
// memory: it is written to be checked, not to be fast.
#include "lp_common.cuh"

__device__ __forceinline__ lp_u32 lp_pack4(lp_u32 a, lp_u32 b, lp_u32 c, lp_u32 d) {
    return a | (b << 8) | (c << 16) | (d << 24);
}

#define LP_GEMM_FP8(NAME, KIND)                                                            \
    extern "C" __global__ void NAME(const lp_u8* __restrict__ A, const lp_u8* __restrict__ B, \
                                    float* __restrict__ C, int M, int N, int K) {           \
        const int lane = threadIdx.x & 31;                                                  \
        const int g = lane >> 2, t = lane & 3;                                              \
        const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;                            \
        if (row0 >= M || col0 >= N) return;                                                 \
        float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;                                       \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                \
            const lp_u8* a_lo = A + (size_t)(row0 + g) * K + k0 + 4 * t;                    \
            const lp_u8* a_hi = A + (size_t)(row0 + g + 8) * K + k0 + 4 * t;                \
            const lp_u32 a0 = lp_pack4(a_lo[0], a_lo[1], a_lo[2], a_lo[3]);                 \
            const lp_u32 a1 = lp_pack4(a_hi[0], a_hi[1], a_hi[2], a_hi[3]);                 \
            const lp_u32 a2 = lp_pack4(a_lo[16], a_lo[17], a_lo[18], a_lo[19]);             \
            const lp_u32 a3 = lp_pack4(a_hi[16], a_hi[17], a_hi[18], a_hi[19]);             \
            const lp_u8* bc = B + (size_t)(k0 + 4 * t) * N + col0 + g;                      \
            const lp_u32 b0 = lp_pack4(bc[0], bc[N], bc[2 * N], bc[3 * N]);                 \
            const lp_u32 b1 = lp_pack4(bc[16 * N], bc[17 * N], bc[18 * N], bc[19 * N]);     \
            asm volatile(                                                                   \
                "mma.sync.aligned.m16n8k32.row.col.f32." KIND "." KIND ".f32 "              \
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"           \
                : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)                                    \
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                    \
        }                                                                                   \
        float* c_lo = C + (size_t)(row0 + g) * N + col0 + 2 * t;                            \
        float* c_hi = C + (size_t)(row0 + g + 8) * N + col0 + 2 * t;                        \
        c_lo[0] = c0; c_lo[1] = c1; c_hi[0] = c2; c_hi[1] = c3;                             \
    }

LP_GEMM_FP8(gemm_e4m3_f32, "e4m3")
LP_GEMM_FP8(gemm_e5m2_f32, "e5m2")
