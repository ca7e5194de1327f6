/* cpu-kernels.h -- the cpu reference kernels that live outside
 * cpu-kernels.c (one file per op family), for its kernel table. */
#ifndef NF_CPU_KERNELS_H
#define NF_CPU_KERNELS_H

#include "nf-impl.h"

#include <math.h>
#include <string.h>

/* an OpenMP loop goes parallel only from this much work (elements touched):
 * below it, waking the team costs more than the loop (microseconds on an
 * idle machine, milliseconds on a loaded one), and every loop here computes
 * each output element in one thread in a fixed order, so the results do not
 * depend on whether it runs in parallel */
#define NF_CPU_PAR_MIN   ((int64_t) 1 << 16)
#define NF_CPU_PAR(work) ((int64_t) (work) >= NF_CPU_PAR_MIN)

/* LAYER_NORM's row statistics, shared with LAYER_NORM_BACKWARD: sums in
 * double, two passes; mu = (float)(sum x / k), var = (float)(sum (x-mu)^2 / k),
 * rstd = 1.0f / sqrtf(var + eps) */
static inline void nf__cpu_ln_stats(const float * xr, int64_t k, float eps, float * mu_out, float * rstd_out) {
    double s = 0.0;
    for (int64_t c = 0; c < k; c++) s += xr[c];
    const float mu = (float) (s / (double) k);
    double s2 = 0.0;
    for (int64_t c = 0; c < k; c++) {
        double d = (double) xr[c] - (double) mu;
        s2 += d * d;
    }
    const float var = (float) (s2 / (double) k);
    *mu_out = mu;
    *rstd_out = 1.0f / sqrtf(var + eps);
}

/* the attention kernels' register tiles: NF__TILE_ROWS rows of NF__LANES
 * floats (cpu-kernels.c, cpu-train-b.c) */
#define NF__LANES     16
#define NF__TILE_ROWS 4
typedef float nf__v16 __attribute__((vector_size(NF__LANES * sizeof(float))));

/* acc[r] = sum over i < n, in order, of a[r lda + i] * b[i ldb .. + 16], for
 * the four rows r: the scores (a = queries, b = transposed keys) and the
 * outputs (a = probabilities, b = values) alike. Inlined into its callers,
 * so it takes their vector width and acc stays in registers. */
static inline __attribute__((always_inline)) void nf__tile4(const float * a, int64_t lda, const float * b, int64_t ldb,
                                                            int64_t n, nf__v16 * acc) {
    nf__v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t i = 0; i < n; i++) {
        nf__v16 bv;
        memcpy(&bv, b + i * ldb, sizeof(bv));
        a0 = a0 + a[i] * bv;
        a1 = a1 + a[lda + i] * bv;
        a2 = a2 + a[2 * lda + i] * bv;
        a3 = a3 + a[3 * lda + i] * bv;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* cpu-kernels.c: y = act(x) over n (NF_ACT_GELU / NF_ACT_RELU) with LINEAR's
 * epilogue code; y may be x */
void nf__cpu_act_row(float * y, const float * x, int64_t n, int act);
/* p[j] = exp(p[j] - mx), nf__exp_f32's values (vectorised) */
void nf__cpu_exp_sub_row(float * p, int64_t n, float mx);
/* dx[i] = dy[i] * GELU'(x[i]), ACT_BACKWARD's formula (vectorised) */
void nf__cpu_gelu_backward_row(float * dx, const float * x, const float * dy, int64_t n);

/* cpu-train.c: the training ops, set A */
int nf__cpu_gemm(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_col_sum(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_act(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_act_backward(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_layer_norm_backward(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_adamw(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_copy(nf_backend * be, const nf_op * op, nf_err * err);

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

/* cpu-train-c.c: the training ops, set C (TabSTAR) */
int nf__cpu_scatter_add_rows(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_clip_grad_norm(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_scale(nf_backend * be, const nf_op * op, nf_err * err);

#endif
