/* cpu-bf16.h -- the cpu backend's bf16-autocast mode (cpu-bf16.c). */
#ifndef NF_CPU_BF16_H
#define NF_CPU_BF16_H

#include "nf-impl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* f rounded to bf16 (nearest, ties to even; a NaN stays a quiet NaN, torch's
 * conversion), as the fp32 bit pattern with the low 16 bits zero. Branch-free
 * (the NaN case is a bit blend), so loops over it vectorise. */
static inline uint32_t nf__bf16_u32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    const uint32_t nan = (uint32_t) 0 - (uint32_t) ((u & 0x7fffffffu) > 0x7f800000u);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return (r & ~nan) | ((u | 0x00400000u) & 0xffff0000u & nan);
}
static inline float nf__bf16_rnd(float f) {
    const uint32_t u = nf__bf16_u32(f);
    float r;
    memcpy(&r, &u, sizeof(r));
    return r;
}

/* exp(x) for Mitra's bf16 attention softmax (cpu-bf16.c), x = s - max <= 0, in fp32
 * arithmetic as torch's vectorised exp (its flash attention's) is, not exact mode's
 * correctly rounded nf__exp_f32: the numerators are rounded to bf16 next, so the last
 * fp32 bit only decides a bf16 rounding at its midpoints. n = rint(x log2 e) (the
 * 1.5 2^23 trick: n in t's low bits), r = x - n ln2 (ln2 in two parts, fma), e^r by its
 * degree-7 Taylor polynomial on |r| <= ln2 / 2 (Horner, fma; truncation under 2^-27),
 * times 2^n by the exponent bits; 0 below -87.33, where exp(x) < 2^-126 (beside the row
 * max's 1 it changes no fp32 sum). On every float in [-87.33, 0] against expl: worst
 * 0.94 ulp, bitwise the same compiled for AVX-512, AVX2 + FMA and the baseline (libm's
 * correctly rounded fmaf); test-bf16-ops checks a sample. NaN stays NaN. Not for
 * SpTransformer's attention (cpu-bf16-spt.c keeps nf__exp_f32): there the sort net turns
 * the rare flips of a bf16 rounding into other bucket choices, and with this exp its
 * L8001 logits moved from 3.2e-3 to 3.7e-3 mean from upstream's autocast (bound 4.7e-3). */
static inline float nf__bf16_expf(float x) {
    const float t = x * 1.44269504f + 12582912.0f;
    const float n = t - 12582912.0f;
    float r = fmaf(-n, 0.693145751953125f, x);
    r = fmaf(-n, 1.428606765330187e-06f, r);
    float p = 1.98412698e-4f;
    p = fmaf(p, r, 1.38888889e-3f);
    p = fmaf(p, r, 8.33333333e-3f);
    p = fmaf(p, r, 4.16666667e-2f);
    p = fmaf(p, r, 1.66666667e-1f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t tb;
    memcpy(&tb, &t, sizeof(tb));
    const uint32_t sb = (tb + 127u) << 23; /* (n + 127) << 23 */
    float sc;
    memcpy(&sc, &sb, sizeof(sc));
    const float y = p * sc;
    return x < -87.33f ? 0.0f : y;
}

/* the same, out of line: the bits, or the value as a float */
uint16_t nf__bf16_bits(float f);
float nf__bf16_round(float f);
/* d[i] = the bf16 bits of s[i], i < n (vectorised) */
void nf__bf16_bits_row(uint16_t * restrict d, const float * restrict s, int64_t n);

/* 1 when oneDNN runs bf16 kernels here (AVX512_BF16 or AMX, not capped by
 * ONEDNN_MAX_CPU_ISA), else 0 with the reason (naming the missing feature) in why */
int nf__cpu_bf16_check(char * why, size_t n);

/* the mode's state (oneDNN engine, matmul primitives by shape, bf16 buffers): the cpu backend's ctx */
struct nf_cpu_bf16;
int nf__cpu_bf16_new(struct nf_cpu_bf16 ** out, nf_err * err);
void nf__cpu_bf16_free(struct nf_cpu_bf16 * c);
/* a write to bytes [lo, hi) of the buffer at handle: the bf16 copies of it are dropped
 * (every op's destinations, uploads and frees: no copy is ever stale) */
void nf__cpu_bf16_forget(struct nf_cpu_bf16 * c, const void * handle, size_t lo, size_t hi);
/* the implementation oneDNN picked for the last matmul created ("brg:avx512_core_bf16", ...) */
const char * nf__cpu_bf16_impl(const struct nf_cpu_bf16 * c);

/* the cpu backend's launch in this mode: the bf16 kernels for the ops autocast
 * runs in bf16, the exact kernels for its fp32 ops, a refusal for the rest */
int nf__cpu_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err);

#endif
