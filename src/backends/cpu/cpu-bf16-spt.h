/* cpu-bf16-spt.h -- bf16-autocast kernels for SpTransformer's ops on cpu (cpu-bf16-spt.c) */
#ifndef NF_CPU_BF16_SPT_H
#define NF_CPU_BF16_SPT_H

#include "nf-impl.h"

int nf__bf16_spt_attention(const nf_op * op, nf_err * err);
int nf__bf16_spt_bucket_route(const nf_op * op, nf_err * err);
int nf__bf16_spt_bucket_gather(const nf_op * op);
int nf__bf16_spt_axial_pos(const nf_op * op);

#endif
