/*
 * cuda-kernels-attention.cu -- ATTENTION (row softmax, the one-launch small-lk kernel) and the
 * sinkhorn bucket ops BUCKET_ROUTE, BUCKET_GATHER
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#include "cuda-kernels-common.h"

/* ---- softmax (ATTENTION) --------------------------------------------------- */

/* One warp per row: max, e = expf(s - max) stored in place and summed
 * (per lane in double, then a butterfly), then p = e * (1.0f / (float)sum)
 * as the cpu reference normalises. */
__global__ void nf_k_softmax_rows(float * S, int64_t rows, int64_t lk) {
    const int lane = (int) (threadIdx.x & 31);
    const int64_t warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t) gridDim.x * blockDim.x) >> 5;
    for (int64_t r = warp; r < rows; r += nwarps) {
        float * s = S + r * lk;
        float mx = -INFINITY;
        for (int64_t j = lane; j < lk; j += 32) mx = fmaxf(mx, s[j]);
        mx = nf_warp_max(mx);
        double sum = 0.0;
        for (int64_t j = lane; j < lk; j += 32) {
            const float e = expf(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        sum = nf_warp_sum(sum);
        const float inv = 1.0f / (float) sum;
        for (int64_t j = lane; j < lk; j += 32) s[j] = s[j] * inv;
    }
}

/* ---- ATTENTION, small lk: one launch ------------------------------------------ */

#define NF_ATT_TK      32                 /* keys (values) per shared-memory tile */
#define NF_ATT_THREADS NF_CUDA_ATT_MAX_HD /* one thread per output column         */

/* A barrier (the previous tile's readers are done), rows j0 .. j0+nk-1 of
 * src (row stride ss, E floats each) into Ts, a barrier; returns nk. */
__device__ __forceinline__ int nf_att_tile(float (*Ts)[NF_CUDA_ATT_MAX_HD + 1], const float * __restrict__ src,
                                           int64_t ss, int j0, int LK, int E) {
    const int nk = LK - j0 < NF_ATT_TK ? LK - j0 : NF_ATT_TK;
    __syncthreads();
    for (int idx = (int) threadIdx.x; idx < nk * E; idx += NF_ATT_THREADS) {
        const int jj = idx / E, e = idx - jj * E;
        Ts[jj][e] = src[(int64_t) (j0 + jj) * ss + e];
    }
    __syncthreads();
    return nk;
}

/* Work item = (group g, head h, tile of NF_CUDA_ATT_ROWS query rows), taken
 * grid-stride. Per item:
 *   Qs (rows, hd)      the query rows
 *   S  (rows, lk)      s = (q . k, an fmaf chain over e) * scale, K by tiles
 *   softmax rows of S  (a warp per row; same sequence as nf_k_softmax_rows)
 *   o  (rows, hd)      o = sum_j p_j v_j, an fmaf chain over j, V by tiles
 * Tiles are padded by one float per row, so the score loop (lanes = keys)
 * reads distinct banks; in the value loop lanes are output columns. */
__global__ void nf_k_attention_small(const float * __restrict__ q, const float * __restrict__ k,
                                     const float * __restrict__ v, float * __restrict__ o, int64_t G, int64_t H,
                                     int64_t lq, int64_t lk, int64_t hd, int64_t q_gs, int64_t q_ss, int64_t kv_gs,
                                     int64_t kv_ss, int64_t o_gs, int64_t o_ss, float scale, int64_t drop_seed,
                                     int32_t drop_thr, float drop_scale) {
    __shared__ float Qs[NF_CUDA_ATT_ROWS][NF_CUDA_ATT_MAX_HD];
    __shared__ float Ts[NF_ATT_TK][NF_CUDA_ATT_MAX_HD + 1];
    __shared__ float S[NF_CUDA_ATT_ROWS][NF_CUDA_ATT_MAX_LK];
    __shared__ float Inv[NF_CUDA_ATT_ROWS];
    const int t = (int) threadIdx.x, lane = t & 31, warp = t >> 5;
    const int E = (int) hd, LK = (int) lk;
    const int64_t ntiles = (lq + NF_CUDA_ATT_ROWS - 1) / NF_CUDA_ATT_ROWS;
    const int64_t items = G * H * ntiles;
    for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
        const int64_t tile = it % ntiles, gh = it / ntiles;
        const int64_t h = gh % H, g = gh / H;
        const int64_t i0 = tile * NF_CUDA_ATT_ROWS;
        const int nl = (int) (lq - i0 < NF_CUDA_ATT_ROWS ? lq - i0 : NF_CUDA_ATT_ROWS);
        const float * qb = q + g * q_gs + i0 * q_ss + h * hd;
        const float * kb = k + g * kv_gs + h * hd;
        const float * vb = v + g * kv_gs + h * hd;
        float * ob = o + g * o_gs + i0 * o_ss + h * hd;

        for (int idx = t; idx < NF_CUDA_ATT_ROWS * E; idx += NF_ATT_THREADS) {
            const int i = idx / E, e = idx - i * E;
            Qs[i][e] = i < nl ? qb[(int64_t) i * q_ss + e] : 0.0f;
        }
        /* scores */
        for (int j0 = 0; j0 < LK; j0 += NF_ATT_TK) {
            const int nk = nf_att_tile(Ts, kb, kv_ss, j0, LK, E); /* (its first barrier: Qs written) */
            for (int idx = t; idx < NF_CUDA_ATT_ROWS * NF_ATT_TK; idx += NF_ATT_THREADS) {
                const int i = idx / NF_ATT_TK, jj = idx - i * NF_ATT_TK;
                if (i < nl && jj < nk) {
                    float s = 0.0f;
                    for (int e = 0; e < E; e++) s = fmaf(Qs[i][e], Ts[jj][e], s);
                    S[i][j0 + jj] = s * scale;
                }
            }
        }
        __syncthreads();
        /* softmax, a warp per row (the loop bound is uniform in a warp) */
        for (int i = warp; i < nl; i += NF_ATT_THREADS / 32) {
            float mx = -INFINITY;
            for (int j = lane; j < LK; j += 32) mx = fmaxf(mx, S[i][j]);
            mx = nf_warp_max(mx);
            double sum = 0.0;
            for (int j = lane; j < LK; j += 32) {
                const float e = expf(S[i][j] - mx);
                S[i][j] = e;
                sum += e;
            }
            sum = nf_warp_sum(sum);
            if (lane == 0) Inv[i] = 1.0f / (float) sum;
        }
        __syncthreads();
        for (int idx = t; idx < nl * LK; idx += NF_ATT_THREADS) {
            const int i = idx / LK, j = idx - i * LK;
            S[i][j] = S[i][j] * Inv[i];
            if (drop_thr > 0)
                S[i][j] = S[i][j] * nf_attn_drop(drop_seed, (gh * lq + i0 + i) * lk + j, drop_thr, drop_scale);
        }
        /* values */
        float acc[NF_CUDA_ATT_ROWS];
        NF_UNROLL
        for (int i = 0; i < NF_CUDA_ATT_ROWS; i++) acc[i] = 0.0f;
        for (int j0 = 0; j0 < LK; j0 += NF_ATT_TK) {
            const int nk = nf_att_tile(Ts, vb, kv_ss, j0, LK, E); /* (its first barrier: S normalised) */
            if (t < E) {
                for (int jj = 0; jj < nk; jj++) {
                    const float vv = Ts[jj][t];
                    NF_UNROLL
                    for (int i = 0; i < NF_CUDA_ATT_ROWS; i++) acc[i] = fmaf(S[i][j0 + jj], vv, acc[i]);
                }
            }
        }
        if (t < E) {
            NF_UNROLL
            for (int i = 0; i < NF_CUDA_ATT_ROWS; i++)
                if (i < nl) ob[(int64_t) i * o_ss + t] = acc[i];
        }
        __syncthreads(); /* before the next item overwrites Qs, Ts and S */
    }
}

/* BUCKET_ROUTE, step 1: bucket means of one operand, for every (s, h, u, e):
 *   out[((s*H + h)*nb + u)*E + e] = (sum_i x[s][u*bkt + i][h][e], i ascending,
 *   from 0.0f) / (float)bkt. */
__global__ void nf_k_bucket_means(const float * __restrict__ x, int64_t ss, int64_t gs, int64_t n_seq, int64_t H,
                                  int64_t nb, int64_t bkt, int64_t E, float * __restrict__ out) {
    const float fb = (float) bkt;
    NF_FOR(idx, n_seq * H * nb * E) {
        const int64_t e = idx % E, shu = idx / E;
        const int64_t u = shu % nb, sh = shu / nb;
        const int64_t h = sh % H, s = sh / H;
        const float * p = x + s * gs + u * bkt * ss + h * E + e;
        float acc = 0.0f;
        for (int64_t i = 0; i < bkt; i++) acc += p[i * ss];
        out[idx] = acc / fb;
    }
}

/* BUCKET_ROUTE, step 2: a block of NF_ROUTE_THREADS threads per row
 * it = (s*H + h)*nb + u, exactly the reference's sequence:
 *   R[v] = (sum_e qbar_u[e] * kbar_v[e], e ascending) * scale   (lanes over v)
 *   m = max (serial: R[v] > m ? R[v] : m from R[0]);  R[v] = expf(R[v] - m)
 *   sum (serial, ascending v);  P[v] = R[v] / sum
 *   v* = first index of the max of P, the runner-up (serial);
 * R is the row's scratch (nb floats in global memory). */
#define NF_ROUTE_THREADS 32
__global__ void nf_k_bucket_route(const float * __restrict__ qbar, const float * __restrict__ kbar, int64_t rows,
                                  int64_t nb, int64_t E, float scale, float * __restrict__ R,
                                  int32_t * __restrict__ sel, float * __restrict__ prob) {
    __shared__ float s_val;
    const int t = (int) threadIdx.x;
    for (int64_t it = blockIdx.x; it < rows; it += gridDim.x) {
        const float * q = qbar + it * E;
        const float * kh = kbar + (it / nb) * nb * E;
        float * Rr = R + it * nb;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) {
            const float * kv = kh + v * E;
            float d = 0.0f;
            for (int64_t e = 0; e < E; e++) d += q[e] * kv[e];
            Rr[v] = d * scale;
        }
        __syncthreads();
        if (t == 0) {
            float mx = Rr[0];
            for (int64_t v = 1; v < nb; v++) mx = Rr[v] > mx ? Rr[v] : mx;
            s_val = mx;
        }
        __syncthreads();
        const float mx = s_val;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) Rr[v] = expf(Rr[v] - mx);
        __syncthreads();
        if (t == 0) {
            float sum = 0.0f;
            for (int64_t v = 0; v < nb; v++) sum += Rr[v];
            s_val = sum;
        }
        __syncthreads();
        const float sum = s_val;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) Rr[v] = Rr[v] / sum;
        __syncthreads();
        if (t == 0) nf_route_pick(Rr, nb, sel + it, prob + 2 * it);
        __syncthreads(); /* s_val is rewritten by the next row */
    }
}

/* BUCKET_GATHER: a warp per output row rr = (s*nb + u)*2B + j of kcat and
 * vcat (n_heads*head_dim columns); sel clamped into [0, nb). vsrc is k
 * (reuse_keys) or v. bf16 (bf16-autocast): the routed rows rounded, R(p * k). */
__global__ void nf_k_bucket_gather(const float * k, const float * v, const float * vsrc,
                                   const int32_t * __restrict__ sel, const float * __restrict__ prob, int64_t rows,
                                   int64_t nb, int64_t B, int64_t H, int E, int64_t kv_ss, int64_t kv_gs, int bf16,
                                   float * __restrict__ kc, float * __restrict__ vc) {
    const int lane = (int) (threadIdx.x & 31);
    const int Wd = (int) H * E;
    NF_WARP_ROWS(rr, rows) {
        const int64_t su = rr / (2 * B), j = rr - su * 2 * B;
        const int64_t s = su / nb, u = su - s * nb;
        float * kd = kc + rr * Wd;
        float * vd = vc + rr * Wd;
        for (int c = lane; c < Wd; c += 32) {
            const int h = c / E, e = c - h * E;
            if (j < B) {
                const int64_t i = (s * H + h) * nb + u;
                int64_t vs = sel[i];
                vs = vs < 0 ? 0 : vs >= nb ? nb - 1 : vs;
                const float pu = prob[2 * i];
                const int64_t rs = s * kv_gs + (vs * B + j) * kv_ss + h * E + e;
                kd[c] = bf16 ? nf_bf16(pu * k[rs]) : pu * k[rs];
                vd[c] = bf16 ? nf_bf16(pu * vsrc[rs]) : pu * vsrc[rs];
            } else {
                const int64_t ro = s * kv_gs + (u * B + j - B) * kv_ss + h * E + e;
                kd[c] = k[ro];
                vd[c] = v[ro];
            }
        }
    }
}

/* ---- launchers --------------------------------------------------------------- */

/* scratch of BUCKET_ROUTE: qbar, kbar (rows x E each), R (rows x nb), rows = n_seq*H*nb */
static size_t nf_bucket_route_scratch(int64_t rows, int64_t nb, int64_t E) {
    return 2 * nf_align256((size_t) rows * (size_t) E * sizeof(float)) +
           nf_align256((size_t) rows * (size_t) nb * sizeof(float));
}

static cudaError_t nf_bucket_route(cudaStream_t st, const struct nf_bucket_route_params * p, const float * q,
                                   const float * k, int32_t * sel, float * prob, void * scratch, size_t scratch_size,
                                   const char ** kernel) {
    const int64_t H = p->n_heads, nb = p->n_buckets, E = p->head_dim, rows = p->n_seq * H * nb;
    if (rows <= 0) return cudaSuccess;
    if (nf_bucket_route_scratch(rows, nb, E) > scratch_size) {
        if (kernel) *kernel = "bucket_route scratch";
        return cudaErrorInvalidValue;
    }
    char * sp = (char *) scratch;
    float * qbar = (float *) sp;
    sp += nf_align256((size_t) rows * (size_t) E * sizeof(float));
    float * kbar = (float *) sp;
    sp += nf_align256((size_t) rows * (size_t) E * sizeof(float));
    float * R = (float *) sp;
    NF_LAUNCH(nf_k_bucket_means, nf_blocks(rows * E, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (q, p->q_ss, p->q_gs, p->n_seq, H, nb, p->bucket, E, qbar);
    NF_CHECK_LAUNCH("nf_k_bucket_means");
    NF_LAUNCH(nf_k_bucket_means, nf_blocks(rows * E, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (k, p->k_ss, p->k_gs, p->n_seq, H, nb, p->bucket, E, kbar);
    NF_CHECK_LAUNCH("nf_k_bucket_means");
    NF_LAUNCH(nf_k_bucket_route, nf_blocks(rows, 1), NF_ROUTE_THREADS, st)
    (qbar, kbar, rows, nb, E, p->scale, R, sel, prob);
    NF_CHECK_LAUNCH("nf_k_bucket_route");
    return cudaSuccess;
}

static cudaError_t nf_bucket_gather(cudaStream_t st, const struct nf_bucket_gather_params * p, const float * k,
                                    const float * v, const int32_t * sel, const float * prob, int bf16, float * kc,
                                    float * vc, const char ** kernel) {
    const int64_t rows = p->n_seq * p->n_buckets * 2 * p->bucket;
    if (rows <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bucket_gather, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (k, v, p->reuse_keys ? k : v, sel, prob, rows, p->n_buckets, p->bucket, p->n_heads, (int) p->head_dim, p->kv_ss,
     p->kv_gs, bf16, kc, vc);
    NF_CHECK_LAUNCH("nf_k_bucket_gather");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_attention_small(cudaStream_t st, const float * q, const float * k, const float * v,
                                                float * o, int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd,
                                                int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs,
                                                int64_t o_ss, float scale, int64_t drop_seed, int32_t drop_thr,
                                                float drop_scale, const char ** kernel) {
    if (G <= 0 || H <= 0 || lq <= 0 || hd <= 0) return cudaSuccess;
    if (lk < 1 || lk > NF_CUDA_ATT_MAX_LK || hd > NF_CUDA_ATT_MAX_HD) {
        if (kernel) *kernel = "nf_k_attention_small (lk or head_dim out of range)";
        return cudaErrorInvalidValue;
    }
    const int64_t items = G * H * ((lq + NF_CUDA_ATT_ROWS - 1) / NF_CUDA_ATT_ROWS);
    NF_LAUNCH(nf_k_attention_small, nf_blocks(items, 1), NF_ATT_THREADS, st)
    (q, k, v, o, G, H, lq, lk, hd, q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss, scale, drop_seed, drop_thr, drop_scale);
    NF_CHECK_LAUNCH("nf_k_attention_small");
    return cudaSuccess;
}

/* ATTENTION's dropout on the probabilities of the cuBLAS path: S (nb, nl, lk) of groups g0.., query rows
 * i0.., head h; S[b][r][j] *= the mask factor of element (((g0 + b) H + h) lq + i0 + r) lk + j */
__global__ void nf_k_attn_drop_rows(float * S, int64_t nb, int64_t nl, int64_t lk, int64_t g0, int64_t i0, int64_t h,
                                    int64_t H, int64_t lq, int64_t seed, int32_t thr, float scale) {
    NF_FOR(idx, nb * nl * lk) {
        const int64_t j = idx % lk, br = idx / lk, r = br % nl, b = br / nl;
        S[idx] = S[idx] * nf_attn_drop(seed, (((g0 + b) * H + h) * lq + i0 + r) * lk + j, thr, scale);
    }
}

extern "C" cudaError_t nf__cuda_attn_drop_rows(cudaStream_t st, float * S, int64_t nb, int64_t nl, int64_t lk,
                                               int64_t g0, int64_t i0, int64_t h, int64_t H, int64_t lq, int64_t seed,
                                               int32_t thr, float scale, const char ** kernel) {
    if (nb <= 0 || nl <= 0 || lk <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_attn_drop_rows, nf_blocks(nb * nl * lk, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (S, nb, nl, lk, g0, i0, h, H, lq, seed, thr, scale);
    NF_CHECK_LAUNCH("nf_k_attn_drop_rows");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_softmax_rows(cudaStream_t st, float * S, int64_t rows, int64_t lk,
                                             const char ** kernel) {
    if (rows <= 0 || lk <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_softmax_rows, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(S, rows, lk);
    NF_CHECK_LAUNCH("nf_k_softmax_rows");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------- */

int nf__cuda_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const int64_t rows = p->n_seq * p->n_heads * p->n_buckets;
    if (rows <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, nf_bucket_route_scratch(rows, p->n_buckets, p->head_dim), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_bucket_route(nf__cuda_op_stream(be), p, NF_F(&op->src[0]), NF_F(&op->src[1]), NF_I(&op->dst[0]),
                                 NF_F(&op->dst[1]), scratch, size, NF_K));
    return NF_OK;
}
bool nf__cuda_bucket_route_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_bucket_gather_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    NF_OP_LAUNCH(nf_bucket_gather(nf__cuda_op_stream(be), &op->p.bucket_gather, NF_F(&op->src[0]), NF_F(&op->src[1]),
                                  NF_I(&op->src[2]), NF_F(&op->src[3]), bf16, NF_F(&op->dst[0]), NF_F(&op->dst[1]),
                                  NF_K));
    return NF_OK;
}
int nf__cuda_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cuda_bucket_gather_r(be, op, 0, err);
}
bool nf__cuda_bucket_gather_supports(nf_backend * be, const nf_op * op) {
    /* the kernel indexes a row's n_heads*head_dim columns with int */
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    return p->head_dim <= INT_MAX && p->n_heads <= INT_MAX / p->head_dim;
}
