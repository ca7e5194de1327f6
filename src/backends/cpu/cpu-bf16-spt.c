/* cpu-bf16-spt.c -- bf16-autocast for SpTransformer's own ops on cpu
 * (docs/precision.md "SpTransformer under CPU autocast"). Under torch's CPU
 * autocast every SpTransformer activation is bf16, and each aten op rounds
 * its result to bf16 (R below: round to nearest, ties to even):
 *  - ATTENTION (p.bf16_stream): s = R(R(q·kᵀ) · scale) (bmm, mul), P =
 *    R(softmax(s)) computed in fp32 (exp(s - max) · (1 / sum)), o = R(P·V)
 *    (here the small problems' tiles; from 64 query rows and keys on
 *    cpu-bf16.c's batched oneDNN matmuls; both with nf__spt_softmax_rows);
 *  - BUCKET_ROUTE (the sort net): the bucket means R(R(sum) / bucket), their
 *    scores R(R(mean_q · mean_k) · scale), the softmax rounded, top-1 (the
 *    first of equal probabilities), its bf16 probability;
 *  - BUCKET_GATHER (cpu-seq.c's kernel, bf16 = 1): the routed keys R(p · k)
 *    (reorder_buckets' bmm with the one-hot · p matrix: one rounding of an
 *    exact product), own keys as they are;
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

_Static_assert(NF__TILE_ROWS <= NF__SPT_SM_ROWS, "a tile's rows go through nf__spt_softmax_rows at once");

/* the rule's scores and softmax for nr <= NF__SPT_SM_ROWS rows of n fp32 sums S = q·kᵀ
 * (rows ld apart): s = R(R(S) · scale), the serial max (nf__cpu_max_row's value), fp32
 * exp(s - max) (nf__exp_f32's values, vectorised), the sum in j order (the rows' sums
 * interleaved), P = R(s · (1 / sum)) -- into S, or (pb not NULL) as bf16 bits into pb
 * (rows n apart). The attention's tiles and matmuls and the sort net all use it. */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) void nf__spt_softmax_rows(float * restrict S, int64_t ld,
                                                                                   int64_t n, int nr, float scale,
                                                                                   uint16_t * restrict pb) {
    float sum[NF__SPT_SM_ROWS];
    for (int r = 0; r < nr; r++) {
        float * s = S + r * ld;
        for (int64_t j = 0; j < n; j++) s[j] = nf__bf16_rnd(nf__bf16_rnd(s[j]) * scale);
        nf__cpu_exp_sub_row(s, n, nf__cpu_max_row(s, n));
        sum[r] = 0.0f;
    }
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < nr; r++) sum[r] += S[r * ld + j];
    for (int r = 0; r < nr; r++) {
        const float inv = 1.0f / sum[r];
        float * s = S + r * ld;
        if (pb)
            for (int64_t j = 0; j < n; j++) pb[r * n + j] = (uint16_t) (nf__bf16_u32(s[j] * inv) >> 16);
        else
            for (int64_t j = 0; j < n; j++) s[j] = nf__bf16_rnd(s[j] * inv);
    }
}

/* one (group, head) in the exact kernel's register tiles (cpu-kernels.h
 * struct nf__attn_tile, nf__tile4n): each score the sum over e in order, each
 * output the sum over j in order (-ffp-contract=off: a product and a sum).
 * q, k and v hold bf16 values (the outputs of the to_q+to_kv LINEAR and of
 * BUCKET_GATHER, both rounded), so the products are taken as they are. */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__spt_attn_run(const struct nf__attn_tile * t,
                                                                                      const float * q, int64_t q_ss,
                                                                                      const float * k, const float * v,
                                                                                      int64_t kv_ss, float * o,
                                                                                      int64_t o_ss, int64_t gh) {
    (void) gh;
    const int64_t lq = t->lq, lk = t->lk, E = t->E, lk16 = t->lk16, E16 = t->E16;
    float *s = t->s, *qb = t->qb;
    int64_t v_ss;
    const float * vr = nf__attn_tile_layout(t, k, v, kv_ss, &v_ss);
    for (int64_t i0 = 0; i0 < lq; i0 += NF__TILE_ROWS) {
        const int64_t nr = nf__attn_tile_qblock(t, q, q_ss, i0);
        float a[NF__LANES];
        for (int64_t jb = 0; jb < lk16;) { /* the sums q·kᵀ */
            nf__v16 acc[2 * NF__TILE_ROWS];
            const int nv = nf__tile4n(qb, E, t->kt + jb, lk16, E, lk16 - jb, acc);
            for (int c = 0; c < nv; c++, jb += NF__LANES)
                for (int64_t r = 0; r < NF__TILE_ROWS; r++)
                    memcpy(s + r * lk16 + jb, &acc[c * NF__TILE_ROWS + r], NF__LANES * sizeof(float));
        }
        nf__spt_softmax_rows(s, lk16, lk, NF__TILE_ROWS, t->scale, NULL); /* s = R(R(·) scale), P */
        for (int64_t eb = 0; eb < E16;) {                                 /* o = R(P·V) */
            nf__v16 acc[2 * NF__TILE_ROWS];
            const int nv = nf__tile4n(s, lk16, vr + eb, v_ss, lk, E16 - eb, acc);
            for (int c = 0; c < nv; c++, eb += NF__LANES) {
                const int64_t ne = E - eb < NF__LANES ? E - eb : NF__LANES;
                for (int64_t r = 0; r < nr; r++) {
                    memcpy(a, &acc[c * NF__TILE_ROWS + r], sizeof(a));
                    for (int64_t l = 0; l < ne; l++) o[(i0 + r) * o_ss + eb + l] = nf__bf16_rnd(a[l]);
                }
            }
        }
    }
}

int nf__bf16_spt_attention(const nf_op * op, nf_err * err) { return nf__cpu_attn_tiles(op, nf__spt_attn_run, err); }

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
        float * qb = nf__cpu_team_buf((size_t) (2 * nb * E + nb), &failed);
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
                    R[v] = d;
                }
                nf__spt_softmax_rows(R, nb, nb, 1, p->scale, NULL); /* R(R(d) scale), P */
                const int64_t i = (s * H + h) * nb + u;
                nf__cpu_route_pick(R, nb, sel + i, prob + 2 * i);
            }
        }
        free(qb);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "BUCKET_ROUTE %s: out of memory", op->label ? op->label : "");
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
