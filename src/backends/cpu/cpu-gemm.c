/* cpu-gemm.c -- the cpu backend's one GEMM: oneDNN's dnnl_sgemm (Debian
 * libdnnl), exact fp32, and what it runs on.
 *
 * Why oneDNN (bench/gemm-candidates.sh, README "CPU GEMM"): it picks its JIT
 * kernels from the CPUID feature flags, not from a table of CPU models, so a
 * CPU newer than the library still gets its AVX-512 / AVX2 kernels (Debian's
 * OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels on Intel Emerald Rapids,
 * about 5x below what the CPU can do; Debian's BLIS 0.9.0 runs "generic" C
 * kernels on AMD Zen 5). dnnl_sgemm has only fp32 kernels: its AMX and bf16
 * paths serve bf16/int8 GEMMs, and the fpmath mode does not apply to it.
 * Results are byte-identical for the same shapes and thread count; another
 * thread count may split a long K differently (README "Determinism"). */
#include "cpu-gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static int nf__sgemm(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float * a, int64_t lda,
                     const float * b, int64_t ldb, float beta, float * c, int64_t ldc, nf_err * err) {
    if (m == 0 || n == 0) return NF_OK;
    const dnnl_status_t st = dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (st == dnnl_success) return NF_OK;
    return nf__err_set(err, st == dnnl_out_of_memory ? NF_ERR_NOMEM : NF_ERR_GENERIC,
                       "cpu: dnnl_sgemm(%c, %lld x %lld x %lld, lda %lld, ldb %lld, ldc %lld) failed with status %d",
                       trans_b ? 'T' : 'N', (long long) m, (long long) n, (long long) k, (long long) lda,
                       (long long) ldb, (long long) ldc, (int) st);
}

int nf__cpu_sgemm(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float * a, int64_t lda,
                  const float * b, int64_t ldb, float * c, int64_t ldc, nf_err * err) {
    return nf__sgemm(trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, err);
}

int nf__cpu_sgemm_acc(int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float * a, int64_t lda,
                      const float * b, int64_t ldb, float * c, int64_t ldc, nf_err * err) {
    return nf__sgemm(trans_b, m, n, k, alpha, a, lda, b, ldb, 1.0f, c, ldc, err);
}

int nf__cpu_sgemm_tt(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float * a, int64_t lda,
                     const float * b, int64_t ldb, float beta, float * c, int64_t ldc, nf_err * err) {
    if (m == 0 || n == 0) return NF_OK;
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta,
                                        c, ldc);
    if (st == dnnl_success) return NF_OK;
    return nf__err_set(
        err, st == dnnl_out_of_memory ? NF_ERR_NOMEM : NF_ERR_GENERIC,
        "cpu: dnnl_sgemm(%c, %c, %lld x %lld x %lld, lda %lld, ldb %lld, ldc %lld) failed with status %d",
        trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (long long) m, (long long) n, (long long) k, (long long) lda,
        (long long) ldb, (long long) ldc, (int) st);
}

static const char * nf__isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
        case dnnl_cpu_isa_sse41: return "sse41";
        case dnnl_cpu_isa_avx: return "avx";
        case dnnl_cpu_isa_avx2: return "avx2";
        case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
        case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
        case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
        case dnnl_cpu_isa_avx512_core: return "avx512_core";
        case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
        case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
        case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
        default: return "none (reference C kernels)";
    }
}

/* The CPU's brand string and the widest fp32 SIMD it offers (what a GEMM
 * should use), from CPUID; "" / NONE elsewhere. */
static void nf__cpu_identify(char * model, size_t n, int * level) {
    model[0] = '\0';
    *level = NF_SIMD_NONE;
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[12], top = __get_cpuid_max(0x80000000u, NULL);
    if (top >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char brand[49];
        memcpy(brand, r, 48);
        brand[48] = '\0';
        const char * s = brand;
        while (*s == ' ') s++;
        snprintf(model, n, "%s", s);
        for (size_t len = strlen(model); len > 0 && model[len - 1] == ' '; len--) model[len - 1] = '\0';
    }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")) {
        *level = NF_SIMD_AVX512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *level = NF_SIMD_AVX2;
    } else if (__builtin_cpu_supports("avx")) {
        *level = NF_SIMD_AVX;
    } else if (__builtin_cpu_supports("sse4.1")) {
        *level = NF_SIMD_SSE41;
    }
#endif
}

/* the SIMD level dnnl_sgemm's f32 kernels reach with this effective ISA */
static int nf__isa_level(dnnl_cpu_isa_t isa) {
    const unsigned v = (unsigned) isa;
    if ((v & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return NF_SIMD_AVX512;
    if ((v & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2) return NF_SIMD_AVX2;
    if ((v & dnnl_cpu_isa_avx) == dnnl_cpu_isa_avx) return NF_SIMD_AVX;
    if ((v & dnnl_cpu_isa_sse41) == dnnl_cpu_isa_sse41) return NF_SIMD_SSE41;
    return NF_SIMD_NONE;
}

static const char * const nf__simd_names[] = {"no SIMD", "SSE4.1", "AVX", "AVX2+FMA", "AVX-512"};

void nf__cpu_gemm_info(struct nf_cpu_gemm_info * out) {
    memset(out, 0, sizeof(*out));
    nf__cpu_identify(out->cpu_model, sizeof(out->cpu_model), &out->cpu_level);
    const dnnl_version_t * v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    out->gemm_level = nf__isa_level(isa);
    snprintf(out->library, sizeof(out->library), "oneDNN %d.%d.%d dnnl_sgemm, JIT kernels for %s, fp32", v->major,
             v->minor, v->patch, nf__isa_name(isa));
    snprintf(out->cpu_simd, sizeof(out->cpu_simd), "%s", nf__simd_names[out->cpu_level]);
    if (out->gemm_level < out->cpu_level) {
        snprintf(out->warning, sizeof(out->warning),
                 "the cpu GEMM runs %s kernels (oneDNN ISA %s) on a CPU with %s: expect it well below this CPU's speed "
                 "(is ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA set?)",
                 nf__simd_names[out->gemm_level], nf__isa_name(isa), nf__simd_names[out->cpu_level]);
    }
}
