/* cpu-kernels.h -- the cpu reference kernels that live outside
 * cpu-kernels.c (one file per op family), for its kernel table. */
#ifndef NF_CPU_KERNELS_H
#define NF_CPU_KERNELS_H

#include "nf-impl.h"

/* an OpenMP loop goes parallel only from this much work (elements touched):
 * below it, waking the team costs more than the loop (microseconds on an
 * idle machine, milliseconds on a loaded one), and every loop here computes
 * each output element in one thread in a fixed order, so the results do not
 * depend on whether it runs in parallel */
#define NF_CPU_PAR_MIN   ((int64_t) 1 << 16)
#define NF_CPU_PAR(work) ((int64_t) (work) >= NF_CPU_PAR_MIN)

/* cpu-seq.c: the sequence ops */
int nf__cpu_conv1d(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_batch_norm(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_fill(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_axial_pos(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_gather_rows(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_bucket_route(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err);

/* cpu-train-b.c: the training ops, set B */
int nf__cpu_attention_backward(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_embed_features_backward(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_label_tokens_backward(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_cross_entropy(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_mse_loss(nf_backend * be, const nf_op * op, nf_err * err);

#endif
