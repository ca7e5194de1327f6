/* cpu-seq.c -- the reference kernels of the sequence ops (nf-ops.def:
 * CONV1D, BATCH_NORM, FILL, AXIAL_POS, BUCKET_ROUTE, BUCKET_GATHER), which
 * SpTransformer's forward runs. Position-major tensors: a row is one
 * position, its columns the channels.
 *
 * Exact fp32 as the rest of the cpu backend (-ffp-contract=off, expf,
 * sqrtf); loops are parallel over independent rows and never split a
 * reduction, so results are identical run to run and thread count to
 * thread count. CONV1D is one sgemm per tap and block of rows, reading x
 * in place. */
#include "cpu-gemm.h"
#include "cpu-bf16.h"
#include "cpu-kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

/* ---- CONV1D ------------------------------------------------------------------------- */

/* rows of one output block: its partial sums (rows x cout floats) stay in
 * the L2 cache while the taps' GEMMs add into them */
#define NF__CONV_BLOCK 1024

/* d[c] = w[c K] for c < cin: one tap's row of the tap-major weights */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__conv_tap_row(float * restrict d,
                                                                                      const float * restrict w,
                                                                                      int64_t K, int64_t cin) {
    for (int64_t c = 0; c < cin; c++) d[c] = w[c * K];
}

/* one output row from the block's partial sums t: y = t + bias, or
 * y = y + (t + bias) when accumulating (the residual); vectorised, the
 * same operations per element in the same order */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__conv_out_row(float * restrict y,
                                                                                      const float * restrict t,
                                                                                      const float * restrict bias,
                                                                                      int64_t n, int acc) {
    if (acc) {
        if (bias)
            for (int64_t o = 0; o < n; o++) y[o] = y[o] + (t[o] + bias[o]);
        else
            for (int64_t o = 0; o < n; o++) y[o] = y[o] + t[o];
    } else {
        if (bias)
            for (int64_t o = 0; o < n; o++) y[o] = t[o] + bias[o];
        else
            memcpy(y, t, (size_t) n * sizeof(float));
    }
}

/* y = bias + sum over taps k of x[rows shifted by k*dilation - pad] · W_kᵀ:
 * one GEMM per tap reading x in place (no im2col), each adding into the
 * block's partial sums, tap 0 first; a tap's rows that would read outside
 * the sequence are left out of its GEMM (they read zeros). */
int nf__cpu_conv1d(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_conv1d_params * p = &op->p.conv1d;
    if (p->n_seq == 0 || p->len == 0) return NF_OK;
    const float * x = NF__PTR(&op->src[0]);
    const float * W = NF__PTR(&op->src[1]);
    const float * bias = op->n_src == 3 ? NF__PTR(&op->src[2]) : NULL;
    float * y = NF__PTR(&op->dst[0]);
    const int64_t cin = p->cin, cout = p->cout, K = p->ksize, L = p->len;
    const int64_t blk = L < NF__CONV_BLOCK ? L : NF__CONV_BLOCK;
    /* scratch: W tap-major (K, cout, cin), one output block */
    const size_t nw = (size_t) (K * cout * cin), nt = (size_t) (blk * cout);
    float * Wt = nf__backend_host_scratch(be, (nw + nt) * sizeof(float));
    if (!Wt) return nf__err_set(err, NF_ERR_NOMEM, "CONV1D %s: out of memory", op->label ? op->label : "");
    float * t = Wt + nw;
    /* tap-major order written contiguously, W's row o (cin x K floats) read
     * from the cache K times */
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(nw))
    for (int64_t o = 0; o < cout; o++)
        for (int64_t k = 0; k < K; k++) nf__conv_tap_row(Wt + (k * cout + o) * cin, W + o * cin * K + k, K, cin);
    for (int64_t s = 0; s < p->n_seq; s++) {
        const float * xs = x + s * p->x_gs;
        float * ys = y + s * p->y_gs;
        for (int64_t t0 = 0; t0 < L; t0 += blk) {
            const int64_t nr = L - t0 < blk ? L - t0 : blk;
            memset(t, 0, (size_t) (nr * cout) * sizeof(float));
            for (int64_t k = 0; k < K; k++) {
                const int64_t sh = k * p->dilation - p->pad; /* output row r reads input row r + sh */
                const int64_t lo = t0 > -sh ? t0 : -sh, hi = t0 + nr < L - sh ? t0 + nr : L - sh;
                if (hi <= lo) continue;
                NF_TRY(nf__cpu_sgemm_acc(1, hi - lo, cout, cin, 1.0f, xs + (lo + sh) * p->ldx, p->ldx,
                                         Wt + k * cout * cin, cin, t + (lo - t0) * cout, cout, err));
            }
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(nr * cout))
            for (int64_t r = 0; r < nr; r++)
                nf__conv_out_row(ys + (t0 + r) * p->ldy, t + r * cout, bias, cout, p->accumulate);
        }
    }
    return NF_OK;
}

/* ---- BATCH_NORM, FILL, AXIAL_POS ------------------------------------------------------ */

/* one BATCH_NORM row: y = x a + sh, then the ReLU; vectorised, the same two
 * roundings per element (no contraction); y may alias x. bf16 (autocast): y =
 * R(R(x) a + sh) (R: round to bf16), then the ReLU (it commutes with R) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bn_row(float * y, const float * x,
                                                                                const float * restrict a,
                                                                                const float * restrict sh, int64_t n,
                                                                                int relu, int bf16) {
    if (bf16)
        for (int64_t c = 0; c < n; c++) {
            const float v = nf__bf16_rnd(nf__bf16_rnd(x[c]) * a[c] + sh[c]);
            y[c] = relu && v < 0.0f ? 0.0f : v;
        }
    else if (relu)
        for (int64_t c = 0; c < n; c++) {
            const float v = x[c] * a[c] + sh[c];
            y[c] = v < 0.0f ? 0.0f : v;
        }
    else
        for (int64_t c = 0; c < n; c++) y[c] = x[c] * a[c] + sh[c];
}

int nf__cpu_batch_norm_r(const nf_op * op, int bf16, nf_err * err) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    const float * x = NF__PTR(&op->src[0]);
    const float *w = NF__PTR(&op->src[1]), *b = NF__PTR(&op->src[2]);
    const float *mean = NF__PTR(&op->src[3]), *var = NF__PTR(&op->src[4]);
    float * y = NF__PTR(&op->dst[0]);
    const int64_t C = p->c;
    float * a = malloc((size_t) C * 2 * sizeof(float));
    if (!a) return nf__err_set(err, NF_ERR_NOMEM, "BATCH_NORM %s: out of memory", op->label ? op->label : "");
    float * sh = a + C;
    for (int64_t c = 0; c < C; c++) {
        a[c] = (1.0f / sqrtf(var[c] + p->eps)) * w[c];
        sh[c] = b[c] - mean[c] * a[c];
    }
    const int relu = p->relu;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->m * C))
    for (int64_t r = 0; r < p->m; r++) {
        const float * xr = x + r * p->ldx;
        float * yr = y + r * p->ldy;
        nf__bn_row(yr, xr, a, sh, C, relu, bf16);
    }
    free(a);
    return NF_OK;
}

int nf__cpu_batch_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    return nf__cpu_batch_norm_r(op, 0, err);
}

int nf__cpu_fill(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_fill_params * p = &op->p.fill;
    float * y = NF__PTR(&op->dst[0]);
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->m * p->k))
    for (int64_t r = 0; r < p->m; r++)
        for (int64_t c = 0; c < p->k; c++) y[r * p->ld + c] = p->value;
    return NF_OK;
}

int nf__cpu_axial_pos(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    const float *e0 = NF__PTR(&op->src[0]), *e1 = NF__PTR(&op->src[1]);
    float * x = NF__PTR(&op->dst[0]);
    const int64_t D = p->dim;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n_seq * p->len * D))
    for (int64_t st = 0; st < p->n_seq * p->len; st++) {
        const int64_t s = st / p->len, t = st % p->len;
        float * xr = x + s * p->gs + t * p->ld;
        const float *a = e0 + (t / p->n1) * D, *b = e1 + (t % p->n1) * D;
        for (int64_t c = 0; c < D; c++) xr[c] = xr[c] + (a[c] + b[c]);
    }
    return NF_OK;
}

/* ---- BUCKET_ROUTE, BUCKET_GATHER ---------------------------------------------------------- */

/* the bucket means of one head: out (nb, E); each element's sum in row
 * order, vectorised across the E elements */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__bucket_means(const float * restrict x,
                                                                                      int64_t ss, int64_t nb,
                                                                                      int64_t bkt, int64_t E,
                                                                                      float * restrict out) {
    for (int64_t u = 0; u < nb; u++) {
        float * o = out + u * E;
        for (int64_t e = 0; e < E; e++) o[e] = 0.0f;
        for (int64_t i = 0; i < bkt; i++) {
            const float * r = x + (u * bkt + i) * ss;
            for (int64_t e = 0; e < E; e++) o[e] += r[e];
        }
        for (int64_t e = 0; e < E; e++) o[e] = o[e] / (float) bkt;
    }
}

/* R[v] = scale * sum over e, in order, of q[e] kT[e nb + v] for v < nb: the
 * scores of one query bucket against every key bucket, kT the key means
 * transposed (E, nb); vectorised across v, each sum in the same order */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__route_scores(
    float * restrict R, const float * restrict q, const float * restrict kT, int64_t nb, int64_t E, float scale) {
    for (int64_t v = 0; v < nb; v++) R[v] = 0.0f;
    for (int64_t e = 0; e < E; e++) {
        const float qe = q[e];
        const float * kr = kT + e * nb;
        for (int64_t v = 0; v < nb; v++) R[v] += qe * kr[v];
    }
    for (int64_t v = 0; v < nb; v++) R[v] = R[v] * scale;
}

/* BUCKET_ROUTE's choice from one query bucket's probabilities R[0 .. nb-1]:
 * the first argmax (*sel), its probability and its margin over the second
 * largest (prob[0], prob[1]; 0 with a single bucket) */
void nf__cpu_route_pick(const float * R, int64_t nb, int32_t * sel, float * prob) {
    int64_t best = 0;
    for (int64_t v = 1; v < nb; v++)
        if (R[v] > R[best]) best = v;
    float second = 0.0f;
    int have2 = 0;
    for (int64_t v = 0; v < nb; v++) {
        if (v == best) continue;
        if (!have2 || R[v] > second) second = R[v];
        have2 = 1;
    }
    *sel = (int32_t) best;
    prob[0] = R[best];
    prob[1] = have2 ? R[best] - second : 0.0f;
}

int nf__cpu_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]);
    int32_t * sel = NF__IPTR(&op->dst[0]);
    float * prob = NF__PTR(&op->dst[1]);
    const int64_t nb = p->n_buckets, E = p->head_dim, H = p->n_heads;
    int failed = 0;
#pragma omp parallel
    {
        float * qb = nf__cpu_team_buf((size_t) (3 * nb * E + nb), &failed);
#pragma omp for schedule(static)
        for (int64_t sh = 0; sh < p->n_seq * H; sh++) {
            if (!qb) continue;
            const int64_t s = sh / H, h = sh % H;
            float *kb = qb + nb * E, *kT = kb + nb * E, *R = kT + nb * E;
            nf__bucket_means(q + s * p->q_gs + h * E, p->q_ss, nb, p->bucket, E, qb);
            nf__bucket_means(k + s * p->k_gs + h * E, p->k_ss, nb, p->bucket, E, kb);
            for (int64_t v = 0; v < nb; v++)
                for (int64_t e = 0; e < E; e++) kT[e * nb + v] = kb[v * E + e];
            for (int64_t u = 0; u < nb; u++) {
                nf__route_scores(R, qb + u * E, kT, nb, E, p->scale);
                float mx = R[0];
                for (int64_t v = 1; v < nb; v++) mx = R[v] > mx ? R[v] : mx;
                float sum = 0.0f;
                for (int64_t v = 0; v < nb; v++) {
                    R[v] = expf(R[v] - mx);
                    sum += R[v];
                }
                for (int64_t v = 0; v < nb; v++) R[v] = R[v] / sum;
                const int64_t i = (s * H + h) * nb + u;
                nf__cpu_route_pick(R, nb, sel + i, prob + 2 * i);
            }
        }
        free(qb);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "BUCKET_ROUTE %s: out of memory", op->label ? op->label : "");
    return NF_OK;
}

/* row j of one bucket's BUCKET_GATHER output, every head h < H (E floats each): the
 * chosen bucket's row scaled by that head's pu (kd, vd: row j; rounded to bf16 where bf16),
 * the bucket's own row copied (kd2, vd2: row B + j); rs[h] the chosen row's offset, ro the
 * own row's */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__gather_row(
    float * restrict kd, float * restrict vd, float * restrict kd2, float * restrict vd2, const float * k,
    const float * vsrc, const float * v, const int64_t * rs, const float * pu, int64_t ro, int64_t H, int64_t E,
    int bf16) {
    for (int64_t h = 0; h < H; h++) {
        const float *a = k + rs[h], *b = vsrc + rs[h];
        if (bf16) {
            for (int64_t e = 0; e < E; e++) kd[h * E + e] = nf__bf16_rnd(pu[h] * a[e]);
            for (int64_t e = 0; e < E; e++) vd[h * E + e] = nf__bf16_rnd(pu[h] * b[e]);
        } else {
            for (int64_t e = 0; e < E; e++) kd[h * E + e] = pu[h] * a[e];
            for (int64_t e = 0; e < E; e++) vd[h * E + e] = pu[h] * b[e];
        }
    }
    for (int64_t e = 0; e < H * E; e++) kd2[e] = k[ro + e];
    for (int64_t e = 0; e < H * E; e++) vd2[e] = v[ro + e];
}

#define NF__GATHER_HEADS 64 /* heads per call of nf__gather_row */

int nf__cpu_bucket_gather_r(const nf_op * op, int bf16) {
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    const float *k = NF__PTR(&op->src[0]), *v = NF__PTR(&op->src[1]);
    const int32_t * sel = NF__IPTR(&op->src[2]);
    const float * prob = NF__PTR(&op->src[3]);
    float *kc = NF__PTR(&op->dst[0]), *vc = NF__PTR(&op->dst[1]);
    const int64_t nb = p->n_buckets, B = p->bucket, H = p->n_heads, E = p->head_dim, Wd = H * E;
    const float * vsrc = p->reuse_keys ? k : v;
    /* each destination row written whole, head after head */
#pragma omp parallel for schedule(static)
    for (int64_t sj = 0; sj < p->n_seq * nb * B; sj++) {
        const int64_t su = sj / B, j = sj % B, s = su / nb, u = su % nb;
        float *kd = kc + su * 2 * B * Wd, *vd = vc + su * 2 * B * Wd;
        for (int64_t h0 = 0; h0 < H; h0 += NF__GATHER_HEADS) {
            const int64_t nh = H - h0 < NF__GATHER_HEADS ? H - h0 : NF__GATHER_HEADS;
            int64_t rs[NF__GATHER_HEADS];
            float pu[NF__GATHER_HEADS];
            for (int64_t h = 0; h < nh; h++) {
                const int64_t i = (s * H + h0 + h) * nb + u;
                int64_t vs = sel[i];
                vs = vs < 0 ? 0 : vs >= nb ? nb - 1 : vs;
                rs[h] = s * p->kv_gs + (vs * B + j) * p->kv_ss + (h0 + h) * E;
                pu[h] = prob[2 * i];
            }
            const int64_t o = j * Wd + h0 * E, o2 = (B + j) * Wd + h0 * E;
            nf__gather_row(kd + o, vd + o, kd + o2, vd + o2, k, vsrc, v, rs, pu,
                           s * p->kv_gs + (u * B + j) * p->kv_ss + h0 * E, nh, E, bf16);
        }
    }
    return NF_OK;
}

int nf__cpu_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    return nf__cpu_bucket_gather_r(op, 0);
}

/* ---- GATHER_ROWS --------------------------------------------------------------------- */

int nf__cpu_gather_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    const int32_t * idx = (const int32_t *) (const void *) NF__PTR(&op->src[0]);
    const float * W = NF__PTR(&op->src[1]);
    float * y = NF__PTR(&op->dst[0]);
    const float scale = p->scale;
    const int acc = p->accumulate;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->m * p->k))
    for (int64_t r = 0; r < p->m; r++) {
        const int64_t i = idx[r];
        float * yr = y + r * p->ldy;
        if (i < 0 || i >= p->n_table) {
            if (!acc)
                for (int64_t c = 0; c < p->k; c++) yr[c] = 0.0f;
            continue;
        }
        const float * w = W + i * p->ldw;
        if (acc)
            for (int64_t c = 0; c < p->k; c++) yr[c] = yr[c] + scale * w[c];
        else
            for (int64_t c = 0; c < p->k; c++) yr[c] = scale * w[c];
    }
    return NF_OK;
}
