/* cpu-bf16-spt.h -- bf16-autocast kernels for SpTransformer's ops on cpu (cpu-bf16-spt.c) */
#ifndef NF_CPU_BF16_SPT_H
#define NF_CPU_BF16_SPT_H

#include "nf-impl.h"

int nf__bf16_spt_attention(const nf_op * op, nf_err * err);
/* R(softmax(s)) in place over n values (the attention's rule; cpu-bf16.c's matmul path too) */
void nf__spt_softmax_row(float * restrict s, int64_t n);
/* the same over nr <= NF__SPT_SM_ROWS rows of scores S (n apart), scaled and rounded first
 * (s = R(R(S) · scale)), the probabilities' bits into pb (cpu-bf16-spt.c) */
#define NF__SPT_SM_ROWS 8
void nf__spt_softmax_bits(float * restrict S, int64_t n, float scale, int nr, uint16_t * restrict pb);
int nf__bf16_spt_bucket_route(const nf_op * op, nf_err * err);
int nf__bf16_spt_axial_pos(const nf_op * op);

#endif
