/* cpu-bf16.h -- the cpu backend's bf16-autocast mode (cpu-bf16.c). */
#ifndef NF_CPU_BF16_H
#define NF_CPU_BF16_H

#include "nf-impl.h"

#include <stdint.h>

/* round to bf16 (nearest, ties to even; NaN stays NaN): the bits, or the value as a float */
uint16_t nf__bf16_bits(float f);
float nf__bf16_round(float f);

/* 1 when oneDNN runs bf16 kernels here (AVX512_BF16 or AMX, not capped by
 * ONEDNN_MAX_CPU_ISA), else 0 with the reason (naming the missing feature) in why */
int nf__cpu_bf16_check(char * why, size_t n);

/* the mode's state (oneDNN engine, matmul primitives by shape, bf16 buffers): the cpu backend's ctx */
struct nf_cpu_bf16;
int nf__cpu_bf16_new(struct nf_cpu_bf16 ** out, nf_err * err);
void nf__cpu_bf16_free(struct nf_cpu_bf16 * c);
/* the implementation oneDNN picked for the last matmul created ("brg:avx512_core_bf16", ...) */
const char * nf__cpu_bf16_impl(const struct nf_cpu_bf16 * c);

/* the cpu backend's launch in this mode: the bf16 kernels for the ops autocast
 * runs in bf16, the exact kernels for its fp32 ops, a refusal for the rest */
int nf__cpu_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err);

#endif
