/* cpu-kernels.h -- the cpu reference kernels that live outside
 * cpu-kernels.c (one file per op family), for its kernel table. */
#ifndef NF_CPU_KERNELS_H
#define NF_CPU_KERNELS_H

#include "nf-impl.h"

/* cpu-seq.c: the sequence ops */
int nf__cpu_conv1d(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_batch_norm(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_fill(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_axial_pos(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_gather_rows(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_bucket_route(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err);

#endif
