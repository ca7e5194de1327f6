/*
 * cuda-kernels-train-b.cu -- the training ops, set B: ATTENTION_BACKWARD,
 * EMBED_FEATURES_BACKWARD, LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS
 * (the CUDA backend's kernel files: see cuda-kernels-common.h). Sums over
 * rows in double; every reduction in a fixed order, no atomics.
 */
#include "cuda-kernels-common.h"

/* ---- ATTENTION_BACKWARD ------------------------------------------------------ */

#define NF_ABW_T  64                     /* threads per block; keys (queries) per tile */
#define NF_ABW_PT 4                      /* head_dim columns per thread and launch      */
#define NF_ABW_HD (NF_ABW_T * NF_ABW_PT) /* columns per launch: wider heads take several */

/* the forward's score dot (nf_k_attention_small): an fmaf chain over e */
__device__ __forceinline__ float nf_abw_dot(const float * __restrict__ a, const float * __restrict__ b, int64_t n) {
    float s = 0.0f;
    for (int64_t e = 0; e < n; e++) s = fmaf(a[e], b[e], s);
    return s;
}

/* fixed-tree max / double sum over the block's NF_ABW_T threads; every thread gets the result */
__device__ __forceinline__ float nf_abw_max(float v, float * red) {
    const int t = (int) threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int w = NF_ABW_T / 2; w > 0; w >>= 1) {
        if (t < w) red[t] = red[t + w] > red[t] ? red[t + w] : red[t];
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();
    return r;
}
__device__ __forceinline__ double nf_abw_sum(double v, double * red) {
    const int t = (int) threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int w = NF_ABW_T / 2; w > 0; w >>= 1) {
        if (t < w) red[t] = red[t] + red[t + w];
        __syncthreads();
    }
    const double r = red[0];
    __syncthreads();
    return r;
}

struct nf_abw_args {
    const float *q, *k, *v, *o, *dO;
    float *dq, *dk, *dv, *st;
    int64_t G, H, lq, lk, hd, q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss;
    float scale;
    int acc;
    int64_t e0;        /* this launch's columns: e0 .. e0 + NF_ABW_HD */
    int64_t drop_seed; /* the forward's dropout (drop_thr 0: none) */
    int32_t drop_thr;
    float drop_scale;
};

/* Pass 1, item = query row (g, h, i), grid-stride: the row's max and exp
 * sum recomputed as the forward's softmax (max, expf(s - max), double sum,
 * p = e * (1.0f / (float)sum)); dS_j = p_j (dP_j - delta) by tiles of
 * NF_ABW_T keys; dq = scale * sum_j dS_j k_j, each thread summing its
 * columns over j in order. stats of the row: (max, (float)sum). */
__global__ void nf_k_attn_bwd_q(const nf_abw_args a) {
    __shared__ float mred[NF_ABW_T], dS[NF_ABW_T];
    __shared__ double red[NF_ABW_T];
    __shared__ float s_delta;
    const int t = (int) threadIdx.x;
    const int64_t hd = a.hd;
    for (int64_t it = blockIdx.x; it < a.G * a.H * a.lq; it += gridDim.x) {
        const int64_t i = it % a.lq, gh = it / a.lq, h = gh % a.H, g = gh / a.H;
        const float * qi = a.q + g * a.q_gs + i * a.q_ss + h * hd;
        const float * oi = a.o + g * a.o_gs + i * a.o_ss + h * hd;
        const float * di = a.dO + g * a.o_gs + i * a.o_ss + h * hd;
        const float * kb = a.k + g * a.kv_gs + h * hd;
        const float * vb = a.v + g * a.kv_gs + h * hd;
        if (t == 0) s_delta = nf_abw_dot(di, oi, hd);
        float mx = -INFINITY;
        for (int64_t j = t; j < a.lk; j += NF_ABW_T) mx = fmaxf(mx, nf_abw_dot(qi, kb + j * a.kv_ss, hd) * a.scale);
        const float m = nf_abw_max(mx, mred);
        double sum = 0.0;
        for (int64_t j = t; j < a.lk; j += NF_ABW_T) sum += expf(nf_abw_dot(qi, kb + j * a.kv_ss, hd) * a.scale - m);
        const float l = (float) nf_abw_sum(sum, red);
        const float inv = 1.0f / l, delta = s_delta;
        float acc[NF_ABW_PT];
        NF_UNROLL
        for (int r = 0; r < NF_ABW_PT; r++) acc[r] = 0.0f;
        for (int64_t j0 = 0; j0 < a.lk; j0 += NF_ABW_T) {
            const int64_t j = j0 + t;
            float d = 0.0f;
            if (j < a.lk) {
                const float p = expf(nf_abw_dot(qi, kb + j * a.kv_ss, hd) * a.scale - m) * inv;
                const float dp = nf_abw_dot(di, vb + j * a.kv_ss, hd);
                d = a.drop_thr > 0
                        ? p * (nf_attn_drop(a.drop_seed, it * a.lk + j, a.drop_thr, a.drop_scale) * dp - delta)
                        : p * (dp - delta);
            }
            dS[t] = d;
            __syncthreads();
            const int nj = (int) (a.lk - j0 < NF_ABW_T ? a.lk - j0 : NF_ABW_T);
            NF_UNROLL
            for (int r = 0; r < NF_ABW_PT; r++) {
                const int64_t e = a.e0 + t + r * NF_ABW_T;
                if (e < hd)
                    for (int jj = 0; jj < nj; jj++) acc[r] = fmaf(dS[jj], kb[(j0 + jj) * a.kv_ss + e], acc[r]);
            }
            __syncthreads();
        }
        float * dqi = a.dq + g * a.q_gs + i * a.q_ss + h * hd;
        NF_UNROLL
        for (int r = 0; r < NF_ABW_PT; r++) {
            const int64_t e = a.e0 + t + r * NF_ABW_T;
            if (e < hd) dqi[e] = a.scale * acc[r];
        }
        if (t == 0) {
            a.st[2 * it] = m;
            a.st[2 * it + 1] = l;
        }
        __syncthreads(); /* s_delta is rewritten by the next item */
    }
}

/* Pass 2, item = key row (g, h, j), grid-stride: the queries by tiles of
 * NF_ABW_T (p from pass 1's stats, delta recomputed as pass 1 does), each
 * thread summing its columns of dk and dv over i in order. */
__global__ void nf_k_attn_bwd_kv(const nf_abw_args a) {
    __shared__ float Ps[NF_ABW_T], dS[NF_ABW_T];
    const int t = (int) threadIdx.x;
    const int64_t hd = a.hd;
    for (int64_t it = blockIdx.x; it < a.G * a.H * a.lk; it += gridDim.x) {
        const int64_t j = it % a.lk, gh = it / a.lk, h = gh % a.H, g = gh / a.H;
        const float * qb = a.q + g * a.q_gs + h * hd;
        const float * ob = a.o + g * a.o_gs + h * hd;
        const float * db = a.dO + g * a.o_gs + h * hd;
        const float * kj = a.k + g * a.kv_gs + j * a.kv_ss + h * hd;
        const float * vj = a.v + g * a.kv_gs + j * a.kv_ss + h * hd;
        float ak[NF_ABW_PT], av[NF_ABW_PT];
        NF_UNROLL
        for (int r = 0; r < NF_ABW_PT; r++) ak[r] = av[r] = 0.0f;
        for (int64_t i0 = 0; i0 < a.lq; i0 += NF_ABW_T) {
            const int64_t i = i0 + t;
            float p = 0.0f, d = 0.0f;
            if (i < a.lq) {
                const int64_t row = gh * a.lq + i;
                const float m = a.st[2 * row], inv = 1.0f / a.st[2 * row + 1];
                const float * di = db + i * a.o_ss;
                p = expf(nf_abw_dot(qb + i * a.q_ss, kj, hd) * a.scale - m) * inv;
                const float dp = nf_abw_dot(di, vj, hd), delta = nf_abw_dot(di, ob + i * a.o_ss, hd);
                if (a.drop_thr > 0) { /* the forward's dropout: dS = P (M dP - delta), dv from P M */
                    const float mk = nf_attn_drop(a.drop_seed, row * a.lk + j, a.drop_thr, a.drop_scale);
                    d = p * (mk * dp - delta);
                    p = p * mk;
                } else {
                    d = p * (dp - delta);
                }
            }
            Ps[t] = p;
            dS[t] = d;
            __syncthreads();
            const int ni = (int) (a.lq - i0 < NF_ABW_T ? a.lq - i0 : NF_ABW_T);
            NF_UNROLL
            for (int r = 0; r < NF_ABW_PT; r++) {
                const int64_t e = a.e0 + t + r * NF_ABW_T;
                if (e < hd) {
                    for (int ii = 0; ii < ni; ii++) {
                        ak[r] = fmaf(dS[ii], qb[(i0 + ii) * a.q_ss + e], ak[r]);
                        av[r] = fmaf(Ps[ii], db[(i0 + ii) * a.o_ss + e], av[r]);
                    }
                }
            }
            __syncthreads();
        }
        float * dkj = a.dk + g * a.kv_gs + j * a.kv_ss + h * hd;
        float * dvj = a.dv + g * a.kv_gs + j * a.kv_ss + h * hd;
        NF_UNROLL
        for (int r = 0; r < NF_ABW_PT; r++) {
            const int64_t e = a.e0 + t + r * NF_ABW_T;
            if (e < hd) {
                const float tk = a.scale * ak[r];
                dkj[e] = a.acc ? dkj[e] + tk : tk;
                dvj[e] = a.acc ? dvj[e] + av[r] : av[r];
            }
        }
    }
}

/* ---- EMBED_FEATURES_BACKWARD / LABEL_TOKENS_BACKWARD ------------------------------ */

/* Column sums in two steps: NF_TB_CHUNKS chunks of rows, each summed in
 * order per column into part[(c*D + d)*2 + {0, 1}], then the chunks added
 * in order (nf_k_colsum_finalize). */
#define NF_TB_CHUNKS 64

/* EMBED_FEATURES_BACKWARD rows rj = r*F + j: part0 = sum z * dtok[r][1+j], part1 = sum dtok[r][1+j] */
__global__ void nf_k_embed_bwd_part(const float * __restrict__ z, const float * __restrict__ dtok, int64_t nF,
                                    int64_t F, int64_t D, int64_t per, double * __restrict__ part) {
    NF_FOR(cd, NF_TB_CHUNKS * D) {
        const int64_t c = cd / D, d = cd - c * D;
        const int64_t end = (c + 1) * per < nF ? (c + 1) * per : nF;
        double a0 = 0.0, a1 = 0.0;
        for (int64_t rj = c * per; rj < end; rj++) {
            const int64_t r = rj / F, j = rj - r * F;
            const double t = (double) dtok[(r * (F + 1) + 1 + j) * D + d];
            a0 += (double) z[rj] * t;
            a1 += t;
        }
        part[cd * 2] = a0;
        part[cd * 2 + 1] = a1;
    }
}

/* LABEL_TOKENS_BACKWARD value / mask mode, token 0 of the rows: part0 = sum w_r dtok[r][0] (w_r = y[r] or 1), part1 = sum dtok[r][0] */
__global__ void nf_k_label_bwd_part(const float * __restrict__ y, const float * __restrict__ dtok, int64_t n, int64_t T,
                                    int64_t D, int64_t per, double * __restrict__ part) {
    NF_FOR(cd, NF_TB_CHUNKS * D) {
        const int64_t c = cd / D, d = cd - c * D;
        const int64_t end = (c + 1) * per < n ? (c + 1) * per : n;
        double a0 = 0.0, a1 = 0.0;
        for (int64_t r = c * per; r < end; r++) {
            const double t = (double) dtok[r * T * D + d];
            a0 += (y ? (double) y[r] : 1.0) * t;
            a1 += t;
        }
        part[cd * 2] = a0;
        part[cd * 2 + 1] = a1;
    }
}

/* out0[d] += (float)(sum_c part0), out1[d] += (float)(sum_c part1) (out1 may be NULL) */
__global__ void nf_k_colsum_finalize(const double * __restrict__ part, int64_t D, float * out0, float * out1) {
    NF_FOR(d, D) {
        double a0 = 0.0, a1 = 0.0;
        for (int64_t c = 0; c < NF_TB_CHUNKS; c++) {
            a0 += part[(c * D + d) * 2];
            a1 += part[(c * D + d) * 2 + 1];
        }
        out0[d] = out0[d] + (float) a0;
        if (out1) out1[d] = out1[d] + (float) a1;
    }
}

/* class mode: dE[c][d] += (float)(sum_{r: y[r] == c} dtok[r][0][d]), rows in order */
__global__ void nf_k_label_bwd_class(const int32_t * __restrict__ y, const float * __restrict__ dtok, int64_t n,
                                     int64_t T, int64_t D, int64_t C, float * __restrict__ dE) {
    NF_FOR(cd, C * D) {
        const int64_t c = cd / D, d = cd - c * D;
        double a = 0.0;
        for (int64_t r = 0; r < n; r++)
            if (y[r] == c) a += (double) dtok[r * T * D + d];
        dE[cd] = dE[cd] + (float) a;
    }
}

/* ---- CROSS_ENTROPY / MSE_LOSS --------------------------------------------------------- */

/* One block of NF_CUDA_BLOCK threads: thread t takes rows t, t + block, ...
 * in order, then nf_block_sum's fixed tree adds the partial sums. */
__global__ void nf_k_cross_entropy(const float * __restrict__ l, int64_t ldl, const int32_t * __restrict__ y, int64_t n,
                                   int64_t C, float grad_scale, float * __restrict__ loss, float * __restrict__ dl) {
    __shared__ double red[NF_CUDA_BLOCK];
    double tot = 0.0;
    for (int64_t r = threadIdx.x; r < n; r += NF_CUDA_BLOCK) {
        const float * lr = l + r * ldl;
        float mx = lr[0];
        for (int64_t c = 1; c < C; c++) mx = lr[c] > mx ? lr[c] : mx;
        double sum = 0.0;
        for (int64_t c = 0; c < C; c++) sum += exp((double) lr[c] - (double) mx);
        const int32_t yr = y[r];
        tot += (yr >= 0 && yr < C) ? (double) mx + log(sum) - (double) lr[yr] : (double) NAN;
        if (dl)
            for (int64_t c = 0; c < C; c++) {
                const double sm = exp((double) lr[c] - (double) mx) / sum;
                dl[r * C + c] = (float) ((sm - (c == yr ? 1.0 : 0.0)) * (double) grad_scale);
            }
    }
    tot = nf_block_sum(tot, red);
    if (threadIdx.x == 0) loss[0] = (float) (tot / (double) n);
}

__global__ void nf_k_mse_loss(const float * __restrict__ p, int64_t ldp, const float * __restrict__ t, int64_t n,
                              float grad_scale, float * __restrict__ loss, float * __restrict__ dp) {
    __shared__ double red[NF_CUDA_BLOCK];
    double tot = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += NF_CUDA_BLOCK) {
        const float x = p[i * ldp];
        const double d = (double) x - (double) t[i];
        tot += d * d;
        if (dp) dp[i] = grad_scale * (x - t[i]);
    }
    tot = nf_block_sum(tot, red);
    if (threadIdx.x == 0) loss[0] = (float) (tot / (double) n);
}

/* ---- launchers --------------------------------------------------------------------- */

static cudaError_t nf_attention_backward(cudaStream_t st, nf_abw_args a, const char ** kernel) {
    for (a.e0 = 0; a.e0 < a.hd; a.e0 += NF_ABW_HD) {
        NF_LAUNCH(nf_k_attn_bwd_q, nf_blocks(a.G * a.H * a.lq, 1), NF_ABW_T, st)(a);
        NF_CHECK_LAUNCH("nf_k_attn_bwd_q");
        NF_LAUNCH(nf_k_attn_bwd_kv, nf_blocks(a.G * a.H * a.lk, 1), NF_ABW_T, st)(a);
        NF_CHECK_LAUNCH("nf_k_attn_bwd_kv");
    }
    return cudaSuccess;
}

static cudaError_t nf_colsums(cudaStream_t st, const float * z, const float * y, const float * dtok, int64_t rows,
                              int64_t F, int64_t T, int64_t D, double * part, float * out0, float * out1,
                              const char ** kernel) {
    const int64_t per = (rows + NF_TB_CHUNKS - 1) / NF_TB_CHUNKS;
    if (z) {
        NF_LAUNCH(nf_k_embed_bwd_part, nf_blocks(NF_TB_CHUNKS * D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
        (z, dtok, rows, F, D, per, part);
        NF_CHECK_LAUNCH("nf_k_embed_bwd_part");
    } else {
        NF_LAUNCH(nf_k_label_bwd_part, nf_blocks(NF_TB_CHUNKS * D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
        (y, dtok, rows, T, D, per, part);
        NF_CHECK_LAUNCH("nf_k_label_bwd_part");
    }
    NF_LAUNCH(nf_k_colsum_finalize, nf_blocks(D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(part, D, out0, out1);
    NF_CHECK_LAUNCH("nf_k_colsum_finalize");
    return cudaSuccess;
}

static cudaError_t nf_label_bwd_class(cudaStream_t st, const int32_t * y, const float * dtok, int64_t n, int64_t T,
                                      int64_t D, int64_t C, float * dE, const char ** kernel) {
    NF_LAUNCH(nf_k_label_bwd_class, nf_blocks(C * D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(y, dtok, n, T, D, C, dE);
    NF_CHECK_LAUNCH("nf_k_label_bwd_class");
    return cudaSuccess;
}

static cudaError_t nf_cross_entropy(cudaStream_t st, const float * l, int64_t ldl, const int32_t * y, int64_t n,
                                    int64_t C, float gs, float * loss, float * dl, const char ** kernel) {
    NF_LAUNCH(nf_k_cross_entropy, 1, NF_CUDA_BLOCK, st)(l, ldl, y, n, C, gs, loss, dl);
    NF_CHECK_LAUNCH("nf_k_cross_entropy");
    return cudaSuccess;
}

static cudaError_t nf_mse_loss(cudaStream_t st, const float * p, int64_t ldp, const float * t, int64_t n, float gs,
                               float * loss, float * dp, const char ** kernel) {
    NF_LAUNCH(nf_k_mse_loss, 1, NF_CUDA_BLOCK, st)(p, ldp, t, n, gs, loss, dp);
    NF_CHECK_LAUNCH("nf_k_mse_loss");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------------- */

int nf__cuda_attention_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    if (p->n_groups <= 0 || p->lq <= 0 || p->n_heads <= 0 || p->head_dim <= 0) return NF_OK;
    nf_abw_args a;
    a.q = NF_F(&op->src[0]);
    a.k = NF_F(&op->src[1]);
    a.v = NF_F(&op->src[2]);
    a.o = NF_F(&op->src[3]);
    a.dO = NF_F(&op->src[4]);
    a.dq = NF_F(&op->dst[0]);
    a.dk = NF_F(&op->dst[1]);
    a.dv = NF_F(&op->dst[2]);
    a.st = NF_F(&op->dst[3]);
    a.G = p->n_groups;
    a.H = p->n_heads;
    a.lq = p->lq;
    a.lk = p->lk;
    a.hd = p->head_dim;
    a.q_gs = p->q_gs;
    a.q_ss = p->q_ss;
    a.kv_gs = p->kv_gs;
    a.kv_ss = p->kv_ss;
    a.o_gs = p->o_gs;
    a.o_ss = p->o_ss;
    a.scale = p->scale;
    a.acc = p->accumulate_kv != 0;
    a.drop_seed = p->drop_seed;
    a.drop_thr = p->drop_threshold;
    a.drop_scale = p->drop_scale;
    a.e0 = 0;
    NF_OP_LAUNCH(nf_attention_backward(nf__cuda_op_stream(be), a, NF_K));
    return NF_OK;
}
/* as ATTENTION's limits (cuda-ops.c), any head_dim: wider than NF_ABW_HD
 * columns in several launches */
bool nf__cuda_attention_backward_supports(nf_backend * be, const nf_op * op) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    return p->lk >= 1 && p->lq <= INT_MAX && p->lk <= INT_MAX && p->head_dim <= INT_MAX && p->q_ss <= INT_MAX &&
           p->kv_ss <= INT_MAX && p->o_ss <= INT_MAX && p->q_gs >= 0 && p->kv_gs >= 0 && p->o_gs >= 0;
}

int nf__cuda_embed_features_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1], D = op->src[1].ne[2];
    if (D <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, (size_t) NF_TB_CHUNKS * (size_t) D * 2 * sizeof(double), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_colsums(nf__cuda_op_stream(be), NF_F(&op->src[0]), NULL, NF_F(&op->src[1]), n * F, F, F + 1, D,
                            (double *) scratch, NF_F(&op->dst[0]), NF_F(&op->dst[1]), NF_K));
    return NF_OK;
}
bool nf__cuda_embed_features_backward_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_label_tokens_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const int mode = op->p.label_tokens_backward.mode;
    const nf_tensor * dt = &op->src[1];
    const int64_t n = dt->ne[0], T = dt->ne[1], D = dt->ne[2];
    if (D <= 0) return NF_OK;
    cudaStream_t st = nf__cuda_op_stream(be);
    if (mode == NF_LABEL_CLASS) {
        NF_OP_LAUNCH(
            nf_label_bwd_class(st, NF_I(&op->src[0]), NF_F(dt), n, T, D, op->dst[0].ne[0], NF_F(&op->dst[0]), NF_K));
        return NF_OK;
    }
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, (size_t) NF_TB_CHUNKS * (size_t) D * 2 * sizeof(double), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    const int value = mode == NF_LABEL_VALUE;
    NF_OP_LAUNCH(nf_colsums(st, NULL, value ? NF_F(&op->src[0]) : NULL, NF_F(dt), n, 1, T, D, (double *) scratch,
                            NF_F(&op->dst[0]), value ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_label_tokens_backward_supports(nf_backend * be, const nf_op * op) {
    const int mode = op->p.label_tokens_backward.mode;
    if (mode == NF_LABEL_CLASS) return op->src[0].type == NF_I32;
    return mode == NF_LABEL_VALUE || mode == NF_LABEL_MASK;
}

int nf__cuda_cross_entropy(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_cross_entropy_params * p = &op->p.cross_entropy;
    NF_OP_LAUNCH(nf_cross_entropy(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldl, NF_I(&op->src[1]), p->n, p->c,
                                  p->grad_scale, NF_F(&op->dst[0]), op->n_dst == 2 ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_cross_entropy_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_mse_loss(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_mse_loss_params * p = &op->p.mse_loss;
    NF_OP_LAUNCH(nf_mse_loss(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldp, NF_F(&op->src[1]), p->n, p->grad_scale,
                             NF_F(&op->dst[0]), op->n_dst == 2 ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_mse_loss_supports(nf_backend * be, const nf_op * op) { return true; }
