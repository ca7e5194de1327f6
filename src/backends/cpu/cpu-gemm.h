/* cpu-gemm.h -- the cpu backend's GEMM (oneDNN sgemm) and its identification. */
#ifndef NF_CPU_GEMM_H
#define NF_CPU_GEMM_H

#include "nf-impl.h"

/* C (m, n) = alpha * A (m, k) · op(B), row-major, op(B) = Bᵀ (B is (n, k))
 * when trans_b, else B (k, n). Callable inside an OpenMP parallel region
 * (it then runs on the calling thread alone). */
int nf__cpu_sgemm(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float * a, int64_t lda,
                  const float * b, int64_t ldb, float * c, int64_t ldc, nf_err * err);
/* the same with C (m, n) = C + alpha * A · op(B) */
int nf__cpu_sgemm_acc(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float * a, int64_t lda,
                      const float * b, int64_t ldb, float * c, int64_t ldc, nf_err * err);

/* C (m, n) = op(A) · op(B) + beta * C, row-major, op(X) = Xᵀ when trans_x
 * (A stored (k, m), B stored (n, k)); beta 0 or 1 (GEMM) */
int nf__cpu_sgemm_tt(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float * a, int64_t lda,
                     const float * b, int64_t ldb, float beta, float * c, int64_t ldc, nf_err * err);

enum { NF_SIMD_NONE = 0, NF_SIMD_SSE41, NF_SIMD_AVX, NF_SIMD_AVX2, NF_SIMD_AVX512 };

struct nf_cpu_gemm_info {
    char cpu_model[64];        /* CPUID brand string                                   */
    char cpu_simd[16];         /* widest fp32 SIMD the CPU offers ("AVX-512", ...)     */
    char library[160];         /* "oneDNN 2.6.3 dnnl_sgemm, JIT kernels for avx512_core_bf16, fp32" */
    int cpu_level, gemm_level; /* NF_SIMD_*                                      */
    char warning[256];         /* non-empty when the GEMM's kernels are below the CPU's */
};
void nf__cpu_gemm_info(struct nf_cpu_gemm_info * out);

#endif
