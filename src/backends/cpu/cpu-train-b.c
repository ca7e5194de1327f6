/* cpu-train-b.c -- the reference kernels of the training ops, set B
 * (nf-ops.def): ATTENTION_BACKWARD, EMBED_FEATURES_BACKWARD,
 * LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS.
 *
 * Exact fp32 as cpu-kernels.c (-ffp-contract=off, the correctly rounded
 * exp nf__exp_f32 of the forward's softmax); the sums over rows in double.
 * Each output element is computed by one thread in a fixed order, so the
 * results do not depend on the thread count. */
#include "cpu-gemm.h"
#include "cpu-kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

/* ---- ATTENTION_BACKWARD ------------------------------------------------------------ */

/* a row's dS_j = P_j (M_j dP_j - delta), then P_j = P_j M_j (the forward's dropped-out probabilities, for
 * dv), M_j the forward's mask factor of elements base + j (nf-ops.def ATTENTION_BACKWARD) */
static void nf__abw_drop_row(const struct nf_attention_backward_params * p, float * P, float * dS, int64_t n,
                             int64_t base, float delta) {
    for (int64_t j = 0; j < n; j++) {
        const float m = nf__dropout_keep((uint64_t) p->drop_seed, (uint64_t) (base + j), p->drop_threshold)
                            ? p->drop_scale
                            : 0.0f;
        dS[j] = P[j] * (m * dS[j] - delta);
        P[j] = P[j] * m;
    }
}

/* plain float dot product, e ascending (the forward's score sum) */
static inline float nf__dot(const float * a, const float * b, int64_t n) {
    float acc = 0.0f;
    for (int64_t e = 0; e < n; e++) acc = acc + a[e] * b[e];
    return acc;
}

/* The tiled kernel for small problems (lk <= NF__ABW_TILE_K, lq <=
 * NF__ABW_TILE_Q: Mitra's feature attention, 17 x 17 keys at 20 features,
 * where the blocked kernel's five sgemm calls per (group, head) cost more
 * than their arithmetic). One (group, head) per task, all five products in
 * the forward's register tiles (nf__tile4: four rows by sixteen columns,
 * each element the plain sum in order of its index): S = scale Q Kᵀ and
 * dP = dO Vᵀ (sums over e), the softmax of each row as the blocked kernel's
 * (max, exp, their sum in order, times 1/sum), dS = P (dP - delta), then
 * dQ = scale dS K (sums over j), dK = scale dSᵀ Q and dV = Pᵀ dO (sums over
 * i). Every sum's order is fixed, so the result does not depend on the
 * vector width, the thread count or the machine. Buffers, rows padded to 4
 * and columns to 16 with zeros: qp, dop (lq4 x E16), kp (lk x E16),
 * kt, vt (E x lk16), S, D (lq4 x lk16), St, Dt (lk4 x lq). */
#define NF__ABW_TILE_K 64
#define NF__ABW_TILE_Q 256

struct nf__abw_tile {
    int64_t lq4, lk4, lk16, E16;
    float *qp, *dop, *kp, *kt, *vt, *S, *D, *St, *Dt;
};

static size_t nf__abw_tile_init(struct nf__abw_tile * t, int64_t lq, int64_t lk, int64_t E, float * buf) {
    t->lq4 = (lq + NF__TILE_ROWS - 1) / NF__TILE_ROWS * NF__TILE_ROWS;
    t->lk4 = (lk + NF__TILE_ROWS - 1) / NF__TILE_ROWS * NF__TILE_ROWS;
    t->lk16 = (lk + NF__LANES - 1) / NF__LANES * NF__LANES;
    t->E16 = (E + NF__LANES - 1) / NF__LANES * NF__LANES;
    const size_t sizes[9] = {(size_t) (t->lq4 * t->E16),  (size_t) (t->lq4 * t->E16), (size_t) (lk * t->E16),
                             (size_t) (E * t->lk16),      (size_t) (E * t->lk16),     (size_t) (t->lq4 * t->lk16),
                             (size_t) (t->lq4 * t->lk16), (size_t) (t->lk4 * lq),     (size_t) (t->lk4 * lq)};
    float ** ptrs[9] = {&t->qp, &t->dop, &t->kp, &t->kt, &t->vt, &t->S, &t->D, &t->St, &t->Dt};
    size_t off = 0;
    for (int i = 0; i < 9; i++) {
        *ptrs[i] = buf ? buf + off : NULL;
        off += sizes[i];
    }
    return off;
}

/* gh: the (group, head) pair, g * n_heads + h: its dropout mask's rows */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) static void nf__attn_bwd_tile(
    const struct nf_attention_backward_params * p, const float * q, const float * k, const float * v, const float * o,
    const float * dout, float * dq, float * dk, float * dv, float * stats, const struct nf__abw_tile * t, int64_t gh) {
    const int64_t lq = p->lq, lk = p->lk, E = p->head_dim, lq4 = t->lq4, lk4 = t->lk4, lk16 = t->lk16, E16 = t->E16;
    const float scale = p->scale;
    for (int64_t i = 0; i < lq4; i++)
        for (int64_t e = 0; e < E16; e++) {
            const int in = i < lq && e < E;
            t->qp[i * E16 + e] = in ? q[i * p->q_ss + e] : 0.0f;
            t->dop[i * E16 + e] = in ? dout[i * p->o_ss + e] : 0.0f;
        }
    for (int64_t j = 0; j < lk; j++)
        for (int64_t e = 0; e < E16; e++) t->kp[j * E16 + e] = e < E ? k[j * p->kv_ss + e] : 0.0f;
    for (int64_t e = 0; e < E; e++)
        for (int64_t j = 0; j < lk16; j++) {
            t->kt[e * lk16 + j] = j < lk ? k[j * p->kv_ss + e] : 0.0f;
            t->vt[e * lk16 + j] = j < lk ? v[j * p->kv_ss + e] : 0.0f;
        }
    /* S = scale Q Kᵀ, dP = dO Vᵀ */
    for (int64_t i0 = 0; i0 < lq4; i0 += NF__TILE_ROWS)
        for (int64_t jb = 0; jb < lk16; jb += NF__LANES) {
            nf__v16 acc[NF__TILE_ROWS];
            nf__tile4(t->qp + i0 * E16, E16, t->kt + jb, lk16, E, acc);
            for (int64_t r = 0; r < NF__TILE_ROWS; r++) {
                const nf__v16 sc = scale * acc[r];
                memcpy(t->S + (i0 + r) * lk16 + jb, &sc, sizeof(sc));
            }
            nf__tile4(t->dop + i0 * E16, E16, t->vt + jb, lk16, E, acc);
            for (int64_t r = 0; r < NF__TILE_ROWS; r++) memcpy(t->D + (i0 + r) * lk16 + jb, &acc[r], sizeof(acc[r]));
        }
    /* P, dS, and their transposes */
    for (int64_t i = 0; i < lq4; i++) {
        float * P = t->S + i * lk16;
        float * dS = t->D + i * lk16;
        if (i >= lq) {
            memset(P, 0, (size_t) lk16 * sizeof(float));
            memset(dS, 0, (size_t) lk16 * sizeof(float));
            continue;
        }
        const float mx = nf__cpu_max_row(P, lk);
        nf__cpu_exp_sub_row(P, lk, mx);
        float sum = 0.0f;
        for (int64_t j = 0; j < lk; j++) sum = sum + P[j];
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < lk; j++) P[j] = P[j] * inv;
        stats[2 * i] = mx;
        stats[2 * i + 1] = sum;
        float delta = 0.0f;
        for (int64_t e = 0; e < E; e++) delta = delta + dout[i * p->o_ss + e] * o[i * p->o_ss + e];
        if (p->drop_threshold > 0)
            nf__abw_drop_row(p, P, dS, lk, (gh * lq + i) * lk, delta);
        else
            for (int64_t j = 0; j < lk; j++) dS[j] = P[j] * (dS[j] - delta);
        for (int64_t j = lk; j < lk16; j++) P[j] = dS[j] = 0.0f;
    }
    for (int64_t j = 0; j < lk4; j++)
        for (int64_t i = 0; i < lq; i++) {
            t->St[j * lq + i] = j < lk ? t->S[i * lk16 + j] : 0.0f;
            t->Dt[j * lq + i] = j < lk ? t->D[i * lk16 + j] : 0.0f;
        }
    /* dQ = scale dS K */
    for (int64_t i0 = 0; i0 < lq4; i0 += NF__TILE_ROWS) {
        const int64_t nr = lq - i0 < NF__TILE_ROWS ? lq - i0 : NF__TILE_ROWS;
        for (int64_t eb = 0; eb < E16; eb += NF__LANES) {
            nf__v16 acc[NF__TILE_ROWS];
            nf__tile4(t->D + i0 * lk16, lk16, t->kp + eb, E16, lk, acc);
            const int64_t ne = E - eb < NF__LANES ? E - eb : NF__LANES;
            for (int64_t r = 0; r < nr; r++) {
                const nf__v16 g = scale * acc[r];
                memcpy(dq + (i0 + r) * p->q_ss + eb, &g, (size_t) ne * sizeof(float));
            }
        }
    }
    /* dK (+)= scale dSᵀ Q, dV (+)= Pᵀ dO */
    const int accum = p->accumulate_kv != 0;
    for (int64_t j0 = 0; j0 < lk4; j0 += NF__TILE_ROWS) {
        const int64_t nr = lk - j0 < NF__TILE_ROWS ? lk - j0 : NF__TILE_ROWS;
        for (int64_t eb = 0; eb < E16; eb += NF__LANES) {
            nf__v16 gk[NF__TILE_ROWS], gv[NF__TILE_ROWS];
            nf__tile4(t->Dt + j0 * lq, lq, t->qp + eb, E16, lq, gk);
            nf__tile4(t->St + j0 * lq, lq, t->dop + eb, E16, lq, gv);
            const int64_t ne = E - eb < NF__LANES ? E - eb : NF__LANES;
            for (int64_t r = 0; r < nr; r++) {
                float tk[NF__LANES], tv[NF__LANES];
                const nf__v16 sk = scale * gk[r];
                memcpy(tk, &sk, sizeof(tk));
                memcpy(tv, &gv[r], sizeof(tv));
                float * dkj = dk + (j0 + r) * p->kv_ss + eb;
                float * dvj = dv + (j0 + r) * p->kv_ss + eb;
                for (int64_t e = 0; e < ne; e++) {
                    dkj[e] = accum ? dkj[e] + tk[e] : tk[e];
                    dvj[e] = accum ? dvj[e] + tv[e] : tv[e];
                }
            }
        }
    }
}

/* The blocked kernel (larger problems: Mitra's row attention, where
 * the scalar loops above took three quarters of a fine-tuning step): per
 * (group, head), blocks of NF__ABW_BQ query rows, each block's scores
 * S = scale Q Kᵀ and dP = dO Vᵀ by sgemm (nb x lk, never lq x lk), the
 * softmax of each row as above (stats), dS = P (dP - delta), then
 * dQ = scale dS K (overwritten), and dK += dSᵀ Q, dV += Pᵀ dO into the
 * task's lk x E sums (the first block writes them, the next ones add, in
 * block order). The sgemm calls run single-threaded inside the parallel
 * region (oneDNN's OpenMP build), so the result does not depend on the
 * thread count. */
#define NF__ABW_BQ 64

struct nf__abw_task {
    float *S, *D, *dk, *dv;
};

static int nf__attn_bwd_blocked(const struct nf_attention_backward_params * p, const float * q, const float * k,
                                const float * v, const float * o, const float * dout, float * dq, float * dk,
                                float * dv, float * stats, const struct nf__abw_task * b, int64_t gh, nf_err * err) {
    const int64_t lq = p->lq, lk = p->lk, E = p->head_dim;
    const float scale = p->scale;
    for (int64_t i0 = 0; i0 < lq; i0 += NF__ABW_BQ) {
        const int64_t nb = lq - i0 < NF__ABW_BQ ? lq - i0 : NF__ABW_BQ;
        const float * qb = q + i0 * p->q_ss;
        const float * db = dout + i0 * p->o_ss;
        NF_TRY(nf__cpu_sgemm(1, nb, lk, E, scale, qb, p->q_ss, k, p->kv_ss, b->S, lk, err));
        NF_TRY(nf__cpu_sgemm(1, nb, lk, E, 1.0f, db, p->o_ss, v, p->kv_ss, b->D, lk, err));
        for (int64_t r = 0; r < nb; r++) {
            float * P = b->S + r * lk;
            float * dS = b->D + r * lk;
            const float mx = nf__cpu_max_row(P, lk);
            nf__cpu_exp_sub_row(P, lk, mx);
            float sum = 0.0f;
            for (int64_t j = 0; j < lk; j++) sum = sum + P[j];
            const float inv = 1.0f / sum;
            for (int64_t j = 0; j < lk; j++) P[j] = P[j] * inv;
            stats[2 * (i0 + r)] = mx;
            stats[2 * (i0 + r) + 1] = sum;
            const float delta = nf__dot(db + r * p->o_ss, o + (i0 + r) * p->o_ss, E);
            if (p->drop_threshold > 0)
                nf__abw_drop_row(p, P, dS, lk, (gh * lq + i0 + r) * lk, delta);
            else
                for (int64_t j = 0; j < lk; j++) dS[j] = P[j] * (dS[j] - delta);
        }
        NF_TRY(nf__cpu_sgemm(0, nb, E, lk, scale, b->D, lk, k, p->kv_ss, dq + i0 * p->q_ss, p->q_ss, err));
        const float beta = i0 == 0 ? 0.0f : 1.0f;
        NF_TRY(nf__cpu_sgemm_tt(1, 0, lk, E, nb, b->D, lk, qb, p->q_ss, beta, b->dk, E, err));
        NF_TRY(nf__cpu_sgemm_tt(1, 0, lk, E, nb, b->S, lk, db, p->o_ss, beta, b->dv, E, err));
    }
    const int acc = p->accumulate_kv != 0;
    for (int64_t j = 0; j < lk; j++) {
        float * dkj = dk + j * p->kv_ss;
        float * dvj = dv + j * p->kv_ss;
        for (int64_t e = 0; e < E; e++) {
            const float tk = scale * b->dk[j * E + e], tv = b->dv[j * E + e];
            dkj[e] = acc ? dkj[e] + tk : tk;
            dvj[e] = acc ? dvj[e] + tv : tv;
        }
    }
    return NF_OK;
}

static int nf__cpu_attention_backward_blocked(const nf_op * op, nf_err * err) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]), *v = NF__PTR(&op->src[2]);
    const float *o = NF__PTR(&op->src[3]), *dout = NF__PTR(&op->src[4]);
    float *dq = NF__PTR(&op->dst[0]), *dk = NF__PTR(&op->dst[1]), *dv = NF__PTR(&op->dst[2]);
    float * stats = NF__PTR(&op->dst[3]);
    const int64_t bq = lq < NF__ABW_BQ ? lq : NF__ABW_BQ;
    const size_t nfl = (size_t) (2 * bq * lk + 2 * lk * E);
    int failed = 0, gemm_failed = 0;
#pragma omp parallel
    {
        float * buf = nf__cpu_team_buf(nfl, &failed);
        const struct nf__abw_task b = {buf, buf + bq * lk, buf + 2 * bq * lk, buf + 2 * bq * lk + lk * E};
#pragma omp for schedule(dynamic, 1)
        for (int64_t gh = 0; gh < G * H; gh++) {
            if (!buf) continue;
            const int64_t g = gh / H, h = gh % H;
            const int64_t qo = g * p->q_gs + h * E, ko = g * p->kv_gs + h * E, oo = g * p->o_gs + h * E;
            nf_err terr;
            terr.code = NF_OK;
            terr.msg[0] = '\0';
            const int rc = nf__attn_bwd_blocked(p, q + qo, k + ko, v + ko, o + oo, dout + oo, dq + qo, dk + ko, dv + ko,
                                                stats + gh * lq * 2, &b, gh, &terr);
            if (rc != NF_OK) {
#pragma omp critical(nf__attention_backward_err)
                if (!gemm_failed) {
                    gemm_failed = rc;
                    if (err) *err = terr;
                }
            }
        }
        free(buf);
    }
    if (failed)
        return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION_BACKWARD: out of memory (%lld x %lld scores)", (long long) bq,
                           (long long) lk);
    if (gemm_failed) return nf__err_prefix(err, "ATTENTION_BACKWARD %s", op->label ? op->label : "");
    return NF_OK;
}

int nf__cpu_attention_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    if (G == 0 || lq == 0) return NF_OK;
    if (lk > NF__ABW_TILE_K || lq > NF__ABW_TILE_Q) return nf__cpu_attention_backward_blocked(op, err);
    const float *q = NF__PTR(&op->src[0]), *k = NF__PTR(&op->src[1]), *v = NF__PTR(&op->src[2]);
    const float *o = NF__PTR(&op->src[3]), *dout = NF__PTR(&op->src[4]);
    float *dq = NF__PTR(&op->dst[0]), *dk = NF__PTR(&op->dst[1]), *dv = NF__PTR(&op->dst[2]);
    float * stats = NF__PTR(&op->dst[3]);
    struct nf__abw_tile t0;
    const size_t nfl = nf__abw_tile_init(&t0, lq, lk, E, NULL);
    int failed = 0;
#pragma omp parallel if (NF_CPU_PAR(G * H * lq * lk * E))
    {
        float * buf = nf__cpu_team_buf(nfl, &failed);
        struct nf__abw_tile t;
        nf__abw_tile_init(&t, lq, lk, E, buf);
#pragma omp for schedule(dynamic, 1)
        for (int64_t gh = 0; gh < G * H; gh++) {
            if (!buf) continue;
            const int64_t g = gh / H, h = gh % H;
            const int64_t qo = g * p->q_gs + h * E, ko = g * p->kv_gs + h * E, oo = g * p->o_gs + h * E;
            nf__attn_bwd_tile(p, q + qo, k + ko, v + ko, o + oo, dout + oo, dq + qo, dk + ko, dv + ko,
                              stats + gh * lq * 2, &t, gh);
        }
        free(buf);
    }
    if (failed) return nf__err_set(err, NF_ERR_NOMEM, "ATTENTION_BACKWARD: out of memory");
    return NF_OK;
}

/* ---- EMBED_FEATURES_BACKWARD / LABEL_TOKENS_BACKWARD ---------------------------------- */

#define NF__COLS 256 /* columns per task: the double sums of a task stay in cache */

/* dw[d] += (float) sum_{r,j} z*dtok, db[d] += (float) sum_{r,j} dtok, rows in
 * order, one task per block of NF__COLS columns */
int nf__cpu_embed_features_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const float * z = NF__PTR(&op->src[0]);
    const float * dtok = NF__PTR(&op->src[1]);
    float *dw = NF__PTR(&op->dst[0]), *db = NF__PTR(&op->dst[1]);
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1], T = F + 1, D = op->src[1].ne[2];
    const int64_t nblk = (D + NF__COLS - 1) / NF__COLS;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n * F * D))
    for (int64_t blk = 0; blk < nblk; blk++) {
        const int64_t d0 = blk * NF__COLS, nd = D - d0 < NF__COLS ? D - d0 : NF__COLS;
        double aw[NF__COLS], ab[NF__COLS];
        for (int64_t c = 0; c < nd; c++) aw[c] = ab[c] = 0.0;
        for (int64_t r = 0; r < n; r++) {
            for (int64_t j = 0; j < F; j++) {
                const double zz = (double) z[r * F + j];
                const float * t = dtok + (r * T + 1 + j) * D + d0;
                for (int64_t c = 0; c < nd; c++) {
                    aw[c] += zz * (double) t[c];
                    ab[c] += (double) t[c];
                }
            }
        }
        for (int64_t c = 0; c < nd; c++) {
            dw[d0 + c] = dw[d0 + c] + (float) aw[c];
            db[d0 + c] = db[d0 + c] + (float) ab[c];
        }
    }
    return NF_OK;
}

/* token 0 of each row, in row order: class mode into the row of y[r] of dE,
 * value mode y[r] * token into dw and the token into db, mask mode into dM */
int nf__cpu_label_tokens_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const int mode = op->p.label_tokens_backward.mode;
    const float * dtok = NF__PTR(&op->src[1]);
    const int64_t n = op->src[1].ne[0], T = op->src[1].ne[1], D = op->src[1].ne[2];
    const int64_t C = mode == NF_LABEL_CLASS ? op->dst[0].ne[0] : 1;
    double * acc = calloc((size_t) ((C + 1) * D), sizeof(double));
    if (!acc) return nf__err_set(err, NF_ERR_NOMEM, "LABEL_TOKENS_BACKWARD: out of memory");
    double * ab = acc + C * D; /* value mode: db's sums */
    for (int64_t r = 0; r < n; r++) {
        const float * t = dtok + r * T * D;
        double * a = acc;
        double yv = 1.0;
        if (mode == NF_LABEL_CLASS) {
            const int32_t y = NF__IPTR(&op->src[0])[r];
            if (y < 0 || y >= C) continue;
            a = acc + (int64_t) y * D;
        } else if (mode == NF_LABEL_VALUE) {
            yv = (double) NF__PTR(&op->src[0])[r];
            for (int64_t d = 0; d < D; d++) ab[d] += (double) t[d];
        }
        for (int64_t d = 0; d < D; d++) a[d] += mode == NF_LABEL_VALUE ? yv * (double) t[d] : (double) t[d];
    }
    float * d0 = NF__PTR(&op->dst[0]);
    for (int64_t i = 0; i < C * D; i++) d0[i] = d0[i] + (float) acc[i];
    if (mode == NF_LABEL_VALUE) {
        float * d1 = NF__PTR(&op->dst[1]);
        for (int64_t d = 0; d < D; d++) d1[d] = d1[d] + (float) ab[d];
    }
    free(acc);
    return NF_OK;
}

/* ---- CROSS_ENTROPY / MSE_LOSS ---------------------------------------------------------- */

/* rows in order; each row's max in float, its exp sum, log and softmax in
 * double (libm exp, log) */
int nf__cpu_cross_entropy(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_cross_entropy_params * p = &op->p.cross_entropy;
    const float * l = NF__PTR(&op->src[0]);
    const int32_t * y = NF__IPTR(&op->src[1]);
    float * dl = op->n_dst == 2 ? NF__PTR(&op->dst[1]) : NULL;
    const double gs = (double) p->grad_scale;
    double total = 0.0;
    for (int64_t r = 0; r < p->n; r++) {
        const float * lr = l + r * p->ldl;
        float mx = lr[0];
        for (int64_t c = 1; c < p->c; c++) mx = lr[c] > mx ? lr[c] : mx;
        double sum = 0.0;
        for (int64_t c = 0; c < p->c; c++) sum += exp((double) lr[c] - (double) mx);
        const int32_t yr = y[r];
        const int ok = yr >= 0 && yr < p->c;
        total += ok ? (double) mx + log(sum) - (double) lr[yr] : NAN;
        if (dl) {
            for (int64_t c = 0; c < p->c; c++) {
                const double sm = exp((double) lr[c] - (double) mx) / sum;
                dl[r * p->c + c] = (float) ((sm - (c == yr ? 1.0 : 0.0)) * gs);
            }
        }
    }
    NF__PTR(&op->dst[0])[0] = (float) (total / (double) p->n);
    return NF_OK;
}

int nf__cpu_mse_loss(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_mse_loss_params * p = &op->p.mse_loss;
    const float *pr = NF__PTR(&op->src[0]), *t = NF__PTR(&op->src[1]);
    float * dp = op->n_dst == 2 ? NF__PTR(&op->dst[1]) : NULL;
    double total = 0.0;
    for (int64_t i = 0; i < p->n; i++) {
        const float x = pr[i * p->ldp];
        const double d = (double) x - (double) t[i];
        total += d * d;
        if (dp) dp[i] = p->grad_scale * (x - t[i]);
    }
    NF__PTR(&op->dst[0])[0] = (float) (total / (double) p->n);
    return NF_OK;
}

/* ---- DROPOUT's row kernel (cpu-train-c.c runs it; here with the other target_clones kernels) ------ */

/* elements base .. base + n - 1 of DROPOUT (nf-ops.def): x, y point at element base. Branch-free, so
 * that the u64 hash vectorises (AVX-512 / AVX2 emulate the 64-bit multiplies) */
__attribute__((target_clones(NF__CPU_CLONES), noinline)) void nf__cpu_dropout_row(const float * x, float * y, int64_t n,
                                                                                  int64_t base, uint64_t seed,
                                                                                  int32_t thr, float s, int acc) {
    const uint64_t t = (uint64_t) thr;
    if (acc) {
        for (int64_t i = 0; i < n; i++) {
            uint64_t z = seed + ((uint64_t) (base + i) + 1) * 0x9E3779B97F4A7C15ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            const float v = (z >> 40) >= t ? x[i] * s : 0.0f;
            y[i] = y[i] + v;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint64_t z = seed + ((uint64_t) (base + i) + 1) * 0x9E3779B97F4A7C15ull;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            y[i] = (z >> 40) >= t ? x[i] * s : 0.0f;
        }
    }
}
