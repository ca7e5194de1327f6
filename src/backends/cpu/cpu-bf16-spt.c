/* cpu-bf16-spt.c -- bf16-autocast for SpTransformer's own ops on cpu
 * (docs/precision.md "SpTransformer under CPU autocast"). Under torch's CPU
 * autocast every SpTransformer activation is bf16, and each aten op rounds
 * its result to bf16 (R below: round to nearest, ties to even):
 *  - ATTENTION (p.bf16_stream): s = R(R(q·kᵀ) · scale) (bmm, mul), P =
 *    R(softmax(s)) computed in fp32 (exp(s - max) · (1 / sum)), o = R(P·V);
 *  - BUCKET_ROUTE (the sort net): the bucket means R(R(sum) / bucket), their
 *    scores R(R(mean_q · mean_k) · scale), the softmax rounded, top-1 (the
 *    first of equal probabilities), its bf16 probability;
 *  - BUCKET_GATHER: the routed keys R(p · k) (reorder_buckets' bmm with the
 *    one-hot · p matrix: one rounding of an exact product), own keys as they are;
 *  - AXIAL_POS: x = R(x + R(e0 + e1)).
 * fp32 sums of products of bf16 values throughout. */
#include "cpu-bf16-spt.h"

#include "cpu-bf16.h"
#include "cpu-kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

/* Attention by blocks of NF__SPT_ROWS = 4 query rows (rows past lq repeat the
 * last one and are not written), each element's sums in the order of a row at
 * a time: the block shares the loads of kᵀ and v and keeps its sums in vector
 * registers (GCC's vector extension: 16 floats, one zmm with AVX-512, two ymm
 * with AVX2; -ffp-contract=off keeps a + q · k a product and a sum), and the
 * softmax's serial max and sum run as independent chains. */
#define NF__SPT_ROWS 4
typedef float nf__v16 __attribute__((vector_size(64)));
#define NF__V16_LOAD(v, p) memcpy(&(v), (p), sizeof(nf__v16))
/* d[i] = R(R(a[i]) * scale) (scores, scale != 0) or R(a[i]) (scale 0), i < 16 */
static inline void nf__v16_store_rnd(float * d, const nf__v16 * a, float scale) {
    float t[16];
    memcpy(t, a, sizeof(t));
    if (scale != 0.0f)
        for (int i = 0; i < 16; i++) d[i] = nf__bf16_rnd(nf__bf16_rnd(t[i]) * scale);
    else
        for (int i = 0; i < 16; i++) d[i] = nf__bf16_rnd(t[i]);
}

/* s[r][j] = R(R(sum_e q[r][e] kT[e][j]) * scale), r < 4, j < lk, s at row stride
 * lk; the sums in e order */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_scores(float * restrict s,
                                                                                    const float * const q[NF__SPT_ROWS],
                                                                                    const float * restrict kT,
                                                                                    int64_t E, int64_t lk,
                                                                                    float scale) {
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    int64_t j0 = 0;
    for (; j0 + 16 <= lk; j0 += 16) {
        nf__v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int64_t e = 0; e < E; e++) {
            nf__v16 kv;
            NF__V16_LOAD(kv, kT + e * lk + j0);
            a0 = a0 + q0[e] * kv;
            a1 = a1 + q1[e] * kv;
            a2 = a2 + q2[e] * kv;
            a3 = a3 + q3[e] * kv;
        }
        nf__v16_store_rnd(s + j0, &a0, scale);
        nf__v16_store_rnd(s + lk + j0, &a1, scale);
        nf__v16_store_rnd(s + 2 * lk + j0, &a2, scale);
        nf__v16_store_rnd(s + 3 * lk + j0, &a3, scale);
    }
    for (int r = 0; r < NF__SPT_ROWS; r++)
        for (int64_t j = j0; j < lk; j++) {
            float a = 0.0f;
            for (int64_t e = 0; e < E; e++) a += q[r][e] * kT[e * lk + j];
            s[r * lk + j] = nf__bf16_rnd(nf__bf16_rnd(a) * scale);
        }
}

/* o[r][e] = R(sum_j P[r][j] v[j][e]), e < E, for the first nr rows of the block
 * (P at row stride lk); the sums in j order */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_pv(float * const o[NF__SPT_ROWS], int nr,
                                                                                const float * restrict P,
                                                                                const float * restrict v, int64_t ss,
                                                                                int64_t E, int64_t lk) {
    const float *P0 = P, *P1 = P + lk, *P2 = P + 2 * lk, *P3 = P + 3 * lk;
    int64_t e0 = 0;
    for (; e0 + 16 <= E; e0 += 16) {
        nf__v16 a[NF__SPT_ROWS] = {{0}};
        nf__v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int64_t j = 0; j < lk; j++) {
            nf__v16 vj;
            NF__V16_LOAD(vj, v + j * ss + e0);
            a0 = a0 + P0[j] * vj;
            a1 = a1 + P1[j] * vj;
            a2 = a2 + P2[j] * vj;
            a3 = a3 + P3[j] * vj;
        }
        a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
        for (int r = 0; r < nr; r++) nf__v16_store_rnd(o[r] + e0, &a[r], 0.0f);
    }
    for (int r = 0; r < nr; r++)
        for (int64_t e = e0; e < E; e++) {
            float a = 0.0f;
            for (int64_t j = 0; j < lk; j++) a += P[r * lk + j] * v[j * ss + e];
            o[r][e] = nf__bf16_rnd(a);
        }
}

/* R(softmax(s)) in place over n values: fp32 exp(s - max) (nf__exp_f32's
 * values, vectorised), times 1 / sum (the sum in j order), rounded */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_softmax_row(float * restrict s,
                                                                                         int64_t n) {
    float mx = s[0];
    for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    nf__cpu_exp_sub_row(s, n, mx);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += s[j];
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) s[j] = nf__bf16_rnd(s[j] * inv);
}

/* the same for each row of the block (s at row stride n), the rows' serial max
 * and sum interleaved */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_softmax_rnd(float * restrict s,
                                                                                         int64_t n) {
    float mx[NF__SPT_ROWS], sum[NF__SPT_ROWS];
    for (int r = 0; r < NF__SPT_ROWS; r++) mx[r] = s[r * n];
    for (int64_t j = 1; j < n; j++)
        for (int r = 0; r < NF__SPT_ROWS; r++) mx[r] = s[r * n + j] > mx[r] ? s[r * n + j] : mx[r];
    for (int r = 0; r < NF__SPT_ROWS; r++) nf__cpu_exp_sub_row(s + r * n, n, mx[r]);
    for (int r = 0; r < NF__SPT_ROWS; r++) sum[r] = 0.0f;
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < NF__SPT_ROWS; r++) sum[r] += s[r * n + j];
    for (int r = 0; r < NF__SPT_ROWS; r++) {
        const float inv = 1.0f / sum[r];
        for (int64_t j = 0; j < n; j++) s[r * n + j] = nf__bf16_rnd(s[r * n + j] * inv);
    }
}

/* q, k and v hold bf16 values (the outputs of the to_q+to_kv LINEAR and of
 * BUCKET_GATHER, both rounded), so the products are taken as they are */
int nf__bf16_spt_attention(const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]), *v = NF__PTR(&op->src[2]);
    float * o = NF__PTR(&op->dst[0]);
    const int64_t E = p->head_dim, lk = p->lk, lq = p->lq;
    if (lk == 0 || lq == 0) return NF_OK;
    int failed = 0;
#pragma omp parallel
    {
        float * s = malloc((size_t) (NF__SPT_ROWS * lk + E * lk) * sizeof(float));
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t gh = 0; gh < p->n_groups * p->n_heads; gh++) {
            if (!s) continue;
            const int64_t g = gh / p->n_heads, h = gh % p->n_heads;
            float * kT = s + NF__SPT_ROWS * lk;
            for (int64_t j = 0; j < lk; j++) {
                const float * kj = k + g * p->kv_gs + j * p->kv_ss + h * E;
                for (int64_t e = 0; e < E; e++) kT[e * lk + j] = kj[e];
            }
            for (int64_t i0 = 0; i0 < lq; i0 += NF__SPT_ROWS) {
                const int nr = lq - i0 < NF__SPT_ROWS ? (int) (lq - i0) : NF__SPT_ROWS;
                const float * qr[NF__SPT_ROWS];
                float * orow[NF__SPT_ROWS];
                for (int r = 0; r < NF__SPT_ROWS; r++) {
                    const int64_t i = i0 + (r < nr ? r : nr - 1);
                    qr[r] = q + g * p->q_gs + i * p->q_ss + h * E;
                    orow[r] = o + g * p->o_gs + i * p->o_ss + h * E;
                }
                nf__spt_scores(s, qr, kT, E, lk, p->scale);
                nf__spt_softmax_rnd(s, lk);
                nf__spt_pv(orow, nr, s, v + g * p->kv_gs + h * E, p->kv_ss, E, lk);
            }
        }
        free(s);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION %s: out of memory", op->label ? op->label : "");
    return NF_OK;
}

/* the bucket means of one head, rounded as torch's bf16 mean: R(R(sum) / bkt) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_means(const float * x, int64_t ss,
                                                                                   int64_t nb, int64_t bkt, int64_t E,
                                                                                   float * out) {
    for (int64_t u = 0; u < nb; u++) {
        float * o = out + u * E;
        for (int64_t e = 0; e < E; e++) o[e] = 0.0f;
        for (int64_t i = 0; i < bkt; i++) {
            const float * r = x + (u * bkt + i) * ss;
            for (int64_t e = 0; e < E; e++) o[e] += nf__bf16_rnd(r[e]);
        }
        for (int64_t e = 0; e < E; e++) o[e] = nf__bf16_rnd(nf__bf16_rnd(o[e]) / (float) bkt);
    }
}

int nf__bf16_spt_bucket_route(const nf_op * op, nf_err * err) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]);
    int32_t * sel = NF__IPTR(&op->dst[0]);
    float * prob = NF__PTR(&op->dst[1]);
    const int64_t nb = p->n_buckets, E = p->head_dim, H = p->n_heads;
    int failed = 0;
#pragma omp parallel
    {
        float * qb = malloc((size_t) (2 * nb * E + nb) * sizeof(float));
        if (!qb) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t sh = 0; sh < p->n_seq * H; sh++) {
            if (!qb) continue;
            const int64_t s = sh / H, h = sh % H;
            float *kb = qb + nb * E, *R = kb + nb * E;
            nf__spt_means(q + s * p->q_gs + h * E, p->q_ss, nb, p->bucket, E, qb);
            nf__spt_means(k + s * p->k_gs + h * E, p->k_ss, nb, p->bucket, E, kb);
            for (int64_t u = 0; u < nb; u++) {
                for (int64_t v = 0; v < nb; v++) {
                    float d = 0.0f;
                    for (int64_t e = 0; e < E; e++) d += qb[u * E + e] * kb[v * E + e];
                    R[v] = nf__bf16_rnd(nf__bf16_rnd(d) * p->scale);
                }
                nf__spt_softmax_row(R, nb);
                const int64_t i = (s * H + h) * nb + u;
                nf__cpu_route_pick(R, nb, sel + i, prob + 2 * i);
            }
        }
        free(qb);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "BUCKET_ROUTE %s: out of memory", op->label ? op->label : "");
    return NF_OK;
}

int nf__bf16_spt_bucket_gather(const nf_op * op) {
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    const float *k = NF__PTR(&op->src[0]), *v = NF__PTR(&op->src[1]);
    const int32_t * sel = NF__IPTR(&op->src[2]);
    const float * prob = NF__PTR(&op->src[3]);
    float *kc = NF__PTR(&op->dst[0]), *vc = NF__PTR(&op->dst[1]);
    const int64_t nb = p->n_buckets, B = p->bucket, H = p->n_heads, E = p->head_dim, Wd = H * E;
    const float * vsrc = p->reuse_keys ? k : v;
#pragma omp parallel for schedule(static)
    for (int64_t su = 0; su < p->n_seq * nb; su++) {
        const int64_t s = su / nb, u = su % nb;
        float *kd = kc + su * 2 * B * Wd, *vd = vc + su * 2 * B * Wd;
        for (int64_t h = 0; h < H; h++) {
            const int64_t i = (s * H + h) * nb + u;
            int64_t vs = sel[i];
            vs = vs < 0 ? 0 : vs >= nb ? nb - 1 : vs;
            const float pu = prob[2 * i];
            for (int64_t j = 0; j < B; j++) {
                const int64_t rs = s * p->kv_gs + (vs * B + j) * p->kv_ss + h * E;
                const int64_t ro = s * p->kv_gs + (u * B + j) * p->kv_ss + h * E;
                for (int64_t e = 0; e < E; e++) {
                    kd[j * Wd + h * E + e] = nf__bf16_rnd(pu * k[rs + e]);
                    vd[j * Wd + h * E + e] = nf__bf16_rnd(pu * vsrc[rs + e]);
                }
                memcpy(kd + (B + j) * Wd + h * E, k + ro, (size_t) E * sizeof(float));
                memcpy(vd + (B + j) * Wd + h * E, v + ro, (size_t) E * sizeof(float));
            }
        }
    }
    return NF_OK;
}

int nf__bf16_spt_axial_pos(const nf_op * op) {
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    const float *e0 = NF__PTR(&op->src[0]), *e1 = NF__PTR(&op->src[1]);
    float * x = NF__PTR(&op->dst[0]);
    const int64_t D = p->dim;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n_seq * p->len * D))
    for (int64_t st = 0; st < p->n_seq * p->len; st++) {
        const int64_t s = st / p->len, t = st % p->len;
        float * xr = x + s * p->gs + t * p->ld;
        const float *a = e0 + (t / p->n1) * D, *b = e1 + (t % p->n1) * D;
        for (int64_t c = 0; c < D; c++) xr[c] = nf__bf16_rnd(xr[c] + nf__bf16_rnd(a[c] + b[c]));
    }
    return NF_OK;
}
