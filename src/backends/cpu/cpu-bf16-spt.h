/* cpu-bf16-spt.h -- bf16-autocast kernels for SpTransformer's ops on cpu (cpu-bf16-spt.c) */
#ifndef NF_CPU_BF16_SPT_H
#define NF_CPU_BF16_SPT_H

#include "nf-impl.h"

int nf__bf16_spt_attention(const nf_op * op, nf_err * err);
/* the rule's scores and softmax over nr <= NF__SPT_SM_ROWS rows of n fp32 sums S (rows ld
 * apart): s = R(R(S) · scale), P = R(softmax(s)) into S, or as bits into pb (rows n apart)
 * where pb is not NULL (cpu-bf16-spt.c) */
#define NF__SPT_SM_ROWS 8
void nf__spt_softmax_rows(float * restrict S, int64_t ld, int64_t n, int nr, float scale, uint16_t * restrict pb);
int nf__bf16_spt_bucket_route(const nf_op * op, nf_err * err);
int nf__bf16_spt_axial_pos(const nf_op * op);

#endif
