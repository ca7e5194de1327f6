/* cpu-kernels.h -- the cpu reference kernels that live outside
 * cpu-kernels.c (one file per op family), for its kernel table. */
#ifndef NF_CPU_KERNELS_H
#define NF_CPU_KERNELS_H

#include "nf-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* an OpenMP loop goes parallel only from this much work (elements touched):
 * below it, waking the team costs more than the loop (microseconds on an
 * idle machine, milliseconds on a loaded one), and every loop here computes
 * each output element in one thread in a fixed order, so the results do not
 * depend on whether it runs in parallel */
#define NF_CPU_PAR_MIN   ((int64_t) 1 << 16)
#define NF_CPU_PAR(work) ((int64_t) (work) >= NF_CPU_PAR_MIN)

/* a thread's scratch in a parallel region: n floats, or NULL with *failed set
 * (the caller's tasks then skip, and it reports NF_ERR_NOMEM after the region) */
static inline float * nf__cpu_team_buf(size_t n, int * failed) {
    float * b = malloc(n * sizeof(float));
    if (!b) {
#pragma omp atomic write
        *failed = 1;
    }
    return b;
}

/* LAYER_NORM's row statistics, shared with LAYER_NORM_BACKWARD: sums in
 * double, two passes, each in 8 interleaved partial sums (element c into
 * lane c % 8, the lanes then added pairwise: a fixed order, whatever the
 * vector width, and no chain of k dependent additions);
 * mu = (float)(sum x / k), var = (float)(sum (x-mu)^2 / k),
 * rstd = 1.0f / sqrtf(var + eps) */
#define NF__LN_LANES 8
static inline void nf__cpu_ln_stats(const float * xr, int64_t k, float eps, float * mu_out, float * rstd_out) {
    double s[NF__LN_LANES] = {0}, s2[NF__LN_LANES] = {0};
    int64_t c = 0;
    for (; c + NF__LN_LANES <= k; c += NF__LN_LANES)
        for (int l = 0; l < NF__LN_LANES; l++) s[l] += (double) xr[c + l];
    for (int l = 0; c + l < k; l++) s[l] += (double) xr[c + l];
    for (int w = NF__LN_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] = s[l] + s[l + w];
    const float mu = (float) (s[0] / (double) k);
    const double mud = (double) mu;
    for (c = 0; c + NF__LN_LANES <= k; c += NF__LN_LANES)
        for (int l = 0; l < NF__LN_LANES; l++) {
            const double d = (double) xr[c + l] - mud;
            s2[l] += d * d;
        }
    for (int l = 0; c + l < k; l++) {
        const double d = (double) xr[c + l] - mud;
        s2[l] += d * d;
    }
    for (int w = NF__LN_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s2[l] = s2[l] + s2[l + w];
    const float var = (float) (s2[0] / (double) k);
    *mu_out = mu;
    *rstd_out = 1.0f / sqrtf(var + eps);
}

/* LAYER_NORM's rows; with bits (not NULL) also each output row's bf16 bits,
 * m x k contiguous, written as the row is (bf16-autocast, cpu-bf16.c) */
void nf__cpu_layer_norm_rows(const nf_op * op, uint16_t * bits);

/* the ISAs the vectorised row kernels are compiled for, picked at load time
 * (target_clones): AVX-512 (GCC's avx512f implies FMA), AVX2 + FMA
 * (x86-64-v3), and the baseline. The same IEEE operations in each -- no FMA
 * contraction (-ffp-contract=off); the exp's and erf's explicit fma() calls
 * are libm's correctly rounded fma in the baseline clone -- so only the
 * speed differs. */
#define NF__CPU_CLONES "avx512f", "arch=x86-64-v3", "default"

/* the attention kernels' register tiles: NF__TILE_ROWS rows of NF__LANES
 * floats (cpu-kernels.c, cpu-train-b.c) */
#define NF__LANES     16
#define NF__TILE_ROWS 4
typedef float nf__v16 __attribute__((vector_size(NF__LANES * sizeof(float))));

/* the max of s[0..n), n > 0, bit for bit the serial loop's (m = s[0], then m =
 * s[j] > m ? s[j] : m): a NaN at s[0] gives NaN, later NaNs are passed over,
 * and of equal maxima the first in j order is the one returned (which tells
 * only +0 from -0 apart, hence the scan). In 16 lanes: 16 independent chains,
 * vectorised in the callers' clones. */
static inline __attribute__((always_inline)) float nf__cpu_max_row(const float * s, int64_t n) {
    float lm[NF__LANES];
    for (int l = 0; l < NF__LANES; l++) lm[l] = s[0];
    int64_t j = 0;
    for (; j + NF__LANES <= n; j += NF__LANES)
        for (int l = 0; l < NF__LANES; l++) lm[l] = s[j + l] > lm[l] ? s[j + l] : lm[l];
    for (; j < n; j++) lm[j % NF__LANES] = s[j] > lm[j % NF__LANES] ? s[j] : lm[j % NF__LANES];
    float mx = lm[0];
    for (int l = 1; l < NF__LANES; l++) mx = lm[l] > mx ? lm[l] : mx;
    if (mx == 0.0f)
        for (j = 0;; j++)
            if (s[j] == 0.0f) return s[j];
    return mx;
}

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

/* nf__tile4 over 32 columns when cols (the columns left from b on, a multiple
 * of 16) has them, else 16: acc[c * 4 + r] is row r's sum for columns 16 c ..
 * 16 c + 15. Each sum is nf__tile4's, in the same order (a product and an
 * add); the eight accumulators are independent chains, enough to keep two
 * vector ports busy through the add latency. Returns the vectors written, 1
 * or 2. */
static inline __attribute__((always_inline)) int nf__tile4n(const float * a, int64_t lda, const float * b, int64_t ldb,
                                                            int64_t n, int64_t cols, nf__v16 * acc) {
    if (cols < 2 * NF__LANES) {
        nf__tile4(a, lda, b, ldb, n, acc);
        return 1;
    }
    nf__v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    for (int64_t i = 0; i < n; i++) {
        nf__v16 bv, bw;
        memcpy(&bv, b + i * ldb, sizeof(bv));
        memcpy(&bw, b + i * ldb + NF__LANES, sizeof(bw));
        const float x0 = a[i], x1 = a[lda + i], x2 = a[2 * lda + i], x3 = a[3 * lda + i];
        a0 = a0 + x0 * bv;
        c0 = c0 + x0 * bw;
        a1 = a1 + x1 * bv;
        c1 = c1 + x1 * bw;
        a2 = a2 + x2 * bv;
        c2 = c2 + x2 * bw;
        a3 = a3 + x3 * bv;
        c3 = c3 + x3 * bw;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    acc[4] = c0;
    acc[5] = c1;
    acc[6] = c2;
    acc[7] = c3;
    return 2;
}

/* The small-problem attention tiles (cpu-kernels.c's exact kernel,
 * cpu-bf16-spt.c's bf16 rule): one (group, head) at a time, its keys
 * transposed and zero-padded to lk16 columns (kt), its values padded to E16
 * channels where E is not whole vectors (vp), four query rows at a time (qb,
 * rows past lq zero) against the register tiles of nf__tile4n; s holds the
 * four rows' scores. Each thread has its own buffers. */
struct nf__attn_tile {
    int64_t lq, lk, E, lk16, E16;
    float scale;
    float *kt, *vp, *s, *qb; /* E x lk16 keys transposed; lk x E16 padded values; 4 x lk16 scores; 4 x E queries */
    const struct nf_attention_params * p; /* its layout and dropout (drop_threshold 0: none) */
};

/* one (group, head): q, k, v, o at its first row, gh = g * n_heads + h */
typedef void (*nf__attn_tile_fn)(const struct nf__attn_tile * t, const float * q, int64_t q_ss, const float * k,
                                 const float * v, int64_t kv_ss, float * o, int64_t o_ss, int64_t gh);

/* cpu-kernels.c: runs fn over every (group, head) of op (ATTENTION), spread
 * over the OpenMP threads, each task computed in one thread; while a task
 * computes, the next one's q, k, v rows are asked into cache (they sit at the
 * stride of a LINEAR's output row or the gathered buckets', which the
 * hardware prefetchers do not follow) */
int nf__cpu_attn_tiles(const nf_op * op, nf__attn_tile_fn fn, nf_err * err);

/* the keys into t->kt, transposed and zero-padded; returns the values as the
 * tiles read them -- in place when a row is whole vectors, else t->vp's
 * padded copies -- and their row stride in *v_ss */
static inline __attribute__((always_inline)) const float * nf__attn_tile_layout(const struct nf__attn_tile * t,
                                                                                const float * k, const float * v,
                                                                                int64_t kv_ss, int64_t * v_ss) {
    const int64_t lk = t->lk, E = t->E, lk16 = t->lk16, E16 = t->E16;
    for (int64_t j = 0; j < lk16; j++)
        for (int64_t e = 0; e < E; e++) t->kt[e * lk16 + j] = j < lk ? k[j * kv_ss + e] : 0.0f;
    *v_ss = kv_ss;
    if (E16 == E) return v;
    for (int64_t j = 0; j < lk; j++)
        for (int64_t e = 0; e < E16; e++) t->vp[j * E16 + e] = e < E ? v[j * kv_ss + e] : 0.0f;
    *v_ss = E16;
    return t->vp;
}

/* query rows i0 .. i0 + 3 into t->qb (rows past lq zero); returns how many
 * are real */
static inline __attribute__((always_inline)) int64_t nf__attn_tile_qblock(const struct nf__attn_tile * t,
                                                                          const float * q, int64_t q_ss, int64_t i0) {
    const int64_t nr = t->lq - i0 < NF__TILE_ROWS ? t->lq - i0 : NF__TILE_ROWS, E = t->E;
    for (int64_t r = 0; r < NF__TILE_ROWS; r++)
        for (int64_t e = 0; e < E; e++) t->qb[r * E + e] = r < nr ? q[(i0 + r) * q_ss + e] : 0.0f;
    return nr;
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
/* the kernels with a bf16-autocast twin: bf16 = 1 rounds where upstream's autocast does
 * (cpu-bf16.c), bf16 = 0 is the exact kernel */
int nf__cpu_batch_norm_r(const nf_op * op, int bf16, nf_err * err);
int nf__cpu_embed_features_r(const nf_op * op, int bf16);
int nf__cpu_label_tokens_r(const nf_op * op, int bf16, nf_err * err);
int nf__cpu_bucket_gather_r(const nf_op * op, int bf16);
int nf__cpu_fill(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_axial_pos(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_gather_rows(nf_backend * be, const nf_op * op, nf_err * err);
int nf__cpu_bucket_route(nf_backend * be, const nf_op * op, nf_err * err);
void nf__cpu_route_pick(const float * R, int64_t nb, int32_t * sel, float * prob);
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
int nf__cpu_dropout(nf_backend * be, const nf_op * op, nf_err * err);
/* DROPOUT over elements base .. base + n - 1 (cpu-train-b.c, vectorised) */
void nf__cpu_dropout_row(const float * x, float * y, int64_t n, int64_t base, uint64_t seed, int32_t thr, float s,
                         int acc);

#endif
