/*
 * cuda-kernels-tabular.cu -- the tabular (Mitra) ops: QUANTILE, BUCKETIZE_NORM, EMBED_FEATURES, LABEL_TOKENS
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#include "cuda-kernels-common.h"

/* ---- QUANTILE ------------------------------------------------------------ */

/* xt (F, n) = transpose of x (n, F): writes coalesced. */
__global__ void nf_k_transpose(const float * __restrict__ x, int64_t n, int64_t F, float * __restrict__ xt) {
    NF_FOR(e, n * F) {
        const int64_t j = e / n, i = e - j * n;
        xt[e] = x[i * F + j];
    }
}

/* flag[j] = column j of xt holds a NaN. One block per column. */
__global__ void nf_k_col_has_nan(const float * __restrict__ xt, int64_t n, int64_t F, int * __restrict__ flag) {
    for (int64_t j = blockIdx.x; j < F; j += gridDim.x) {
        int any = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            if (isnan(xt[j * n + i])) any = 1;
        any = __syncthreads_or(any);
        if (threadIdx.x == 0) flag[j] = any ? 1 : 0;
    }
}

__global__ void nf_k_segment_offsets(int * __restrict__ off, int64_t F, int64_t n) {
    NF_FOR(j, F + 1) off[j] = (int) (j * n);
}

__global__ void nf_k_fill(float * __restrict__ p, int64_t count, float v) { NF_FOR(i, count) p[i] = v; }

/* B[j][k-1] from the ascending column v = sorted + j*n (op doc, verbatim). */
__global__ void nf_k_quantile_lerp(const float * __restrict__ sorted, const int * __restrict__ nanflag, int64_t n,
                                   int64_t F, int32_t nq, int32_t q_denom, float * __restrict__ B) {
    NF_FOR(e, F * nq) {
        const int64_t j = e / nq;
        const int32_t k = (int32_t) (e - j * nq) + 1;
        float r;
        if (nanflag[j]) {
            r = NAN;
        } else {
            const float q = (float) k / (float) q_denom;
            const float pos = q * (float) (n - 1);
            int64_t lo = (int64_t) pos;
            const float w = pos - (float) lo;
            int64_t hi = (int64_t) ceilf(pos);
            /* only reachable with q outside [0,1]; keeps reads in the column */
            if (lo < 0) lo = 0;
            if (lo > n - 1) lo = n - 1;
            if (hi < 0) hi = 0;
            if (hi > n - 1) hi = n - 1;
            const float * v = sorted + j * n;
            const float a = v[lo], b = v[hi];
            r = fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(w - 1.0f, b - a, b);
        }
        B[e] = r;
    }
}

/* ---- BUCKETIZE_NORM -------------------------------------------------------- */

/* One block per column j. Pass 1 writes u = idx/n_s into zs and sums it;
 * pass 2 centres it and sums the squares; pass 3 scales. Each thread only
 * rereads the elements it wrote itself. Sums in double, as the op allows:
 * sum_s u and sum_s u*u with u*u a float product, exactly as the C
 * expression `double acc; acc += u*u;`. */
__global__ void nf_k_bucketize_norm(const float * __restrict__ xs, int64_t n_s, const float * __restrict__ xq,
                                    int64_t n_q, int64_t F, const float * __restrict__ B, int64_t nb,
                                    float * __restrict__ zs, float * __restrict__ zq) {
    __shared__ double red[NF_CUDA_BLOCK];
    const float fn = (float) n_s;
    for (int64_t j = blockIdx.x; j < F; j += gridDim.x) {
        const float * Bj = B + j * nb;
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) {
            const float u = (float) nf_lower_bound(Bj, nb, xs[i * F + j]) / fn;
            zs[i * F + j] = u;
            s += u;
        }
        s = nf_block_sum(s, red);
        const float mean = (float) s / fn;
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) {
            const float u = zs[i * F + j] - mean;
            zs[i * F + j] = u;
            ss += u * u;
        }
        ss = nf_block_sum(ss, red);
        const float var = (float) ss / fn;
        const float sd = sqrtf(var);
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) zs[i * F + j] = var == 0.0f ? 0.0f : zs[i * F + j] / sd;
        for (int64_t i = threadIdx.x; i < n_q; i += blockDim.x) {
            const float u = (float) nf_lower_bound(Bj, nb, xq[i * F + j]) / fn - mean;
            zq[i * F + j] = var == 0.0f ? 0.0f : u / sd;
        }
    }
}

/* ---- EMBED_FEATURES / LABEL_TOKENS --------------------------------------- */

/* tok[r][1+j][d] = z[r][j]*w[d] + b[d]: a rounded product, then a rounded
 * sum (no FMA: --fmad=false). */
__global__ void nf_k_embed_features(const float * __restrict__ z, int64_t n, int64_t F, const float * __restrict__ w,
                                    const float * __restrict__ b, float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * F * D) {
        const int64_t d = e % D;
        const int64_t rj = e / D;
        const int64_t j = rj % F, r = rj / F;
        tok[(r * T + 1 + j) * D + d] = z[r * F + j] * w[d] + b[d];
    }
}

__global__ void nf_k_label_tokens(int mode, int64_t n, const int32_t * __restrict__ yi, const float * __restrict__ yf,
                                  const float * __restrict__ E, int64_t C, const float * __restrict__ w,
                                  const float * __restrict__ b, float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * D) {
        const int64_t r = e / D, d = e - r * D;
        float v;
        if (mode == 0) {
            const int32_t c = yi[r];
            v = (c >= 0 && c < C) ? E[(int64_t) c * D + d] : NAN;
        } else if (mode == 1) {
            v = yf[r] * w[d] + b[d];
        } else {
            v = E[d];
        }
        tok[r * T * D + d] = v;
    }
}

/* ---- launchers --------------------------------------------------------------- */

static size_t nf_sort_temp_bytes(int64_t n, int64_t F) {
#ifdef NF_CUDA_EMU
    (void) n;
    (void) F;
    return 256;
#else
    size_t bytes = 0;
    cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
        (void *) NULL, bytes, (const float *) NULL, (float *) NULL, (int) (n * F), (int) F, (const int *) NULL,
        (const int *) NULL, 0, (int) (sizeof(float) * 8), (cudaStream_t) 0);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return 0;
    }
    return bytes;
#endif
}

static size_t nf_quantile_scratch(int64_t n, int64_t F) {
    if (n <= 0 || F <= 0) return 0;
    const size_t items = (size_t) n * (size_t) F;
    return 2 * nf_align256(items * sizeof(float)) + nf_align256((size_t) (F + 1) * sizeof(int)) +
           nf_align256((size_t) F * sizeof(int)) + nf_align256(nf_sort_temp_bytes(n, F));
}

static cudaError_t nf_quantile(cudaStream_t st, const float * x, int64_t n, int64_t F, int32_t nq, int32_t q_denom,
                               float * B, void * scratch, size_t scratch_size, const char ** kernel) {
    if (F <= 0 || nq <= 0) return cudaSuccess;
    if (n <= 0) { /* quantile of an empty column: NaN, as torch */
        NF_LAUNCH(nf_k_fill, nf_blocks(F * nq, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(B, F * nq, NAN);
        NF_CHECK_LAUNCH("nf_k_fill");
        return cudaSuccess;
    }
    const size_t items = (size_t) n * (size_t) F;
    char * p = (char *) scratch;
    float * xt = (float *) p;
    p += nf_align256(items * sizeof(float));
    float * sorted = (float *) p;
    p += nf_align256(items * sizeof(float));
    int * off = (int *) p;
    p += nf_align256((size_t) (F + 1) * sizeof(int));
    int * flag = (int *) p;
    p += nf_align256((size_t) F * sizeof(int));
    size_t used = (size_t) (p - (char *) scratch);
    if (used > scratch_size) {
        if (kernel) *kernel = "quantile scratch";
        return cudaErrorInvalidValue;
    }
    void * temp = p;
    size_t temp_bytes = scratch_size - used;

    NF_LAUNCH(nf_k_transpose, nf_blocks((int64_t) items, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, n, F, xt);
    NF_CHECK_LAUNCH("nf_k_transpose");
    NF_LAUNCH(nf_k_col_has_nan, nf_blocks(F, 1), NF_CUDA_BLOCK, st)(xt, n, F, flag);
    NF_CHECK_LAUNCH("nf_k_col_has_nan");
    NF_LAUNCH(nf_k_segment_offsets, nf_blocks(F + 1, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(off, F, n);
    NF_CHECK_LAUNCH("nf_k_segment_offsets");

#ifdef NF_CUDA_EMU
    /* Host stand-in for CUB: ascending per segment, by the same total
     * order on bit patterns that a float radix sort uses. */
    (void) temp;
    (void) temp_bytes;
    {
        struct radix_less {
            static uint32_t key(float f) {
                uint32_t u;
                memcpy(&u, &f, 4);
                return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
            }
            bool operator()(float a, float b) const { return key(a) < key(b); }
        };
        memcpy(sorted, xt, items * sizeof(float));
        for (int64_t j = 0; j < F; j++) std::stable_sort(sorted + j * n, sorted + (j + 1) * n, radix_less());
    }
#else
    {
        cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
            temp, temp_bytes, (const float *) xt, sorted, (int) items, (int) F, (const int *) off,
            (const int *) (off + 1), 0, (int) (sizeof(float) * 8), st);
        if (e != cudaSuccess) {
            if (kernel) *kernel = "cub::DeviceSegmentedRadixSort::SortKeys";
            return e;
        }
        NF_CHECK_LAUNCH("cub::DeviceSegmentedRadixSort::SortKeys");
    }
#endif

    NF_LAUNCH(nf_k_quantile_lerp, nf_blocks(F * nq, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (sorted, flag, n, F, nq, q_denom, B);
    NF_CHECK_LAUNCH("nf_k_quantile_lerp");
    return cudaSuccess;
}

static cudaError_t nf_bucketize_norm(cudaStream_t st, const float * xs, int64_t n_s, const float * xq, int64_t n_q,
                                     int64_t F, const float * B, int64_t nb, float * zs, float * zq,
                                     const char ** kernel) {
    if (F <= 0 || (n_s <= 0 && n_q <= 0)) return cudaSuccess;
    if (n_q <= 0) {
        xq = NULL;
        zq = NULL;
        n_q = 0;
    }
    NF_LAUNCH(nf_k_bucketize_norm, nf_blocks(F, 1), NF_CUDA_BLOCK, st)(xs, n_s, xq, n_q, F, B, nb, zs, zq);
    NF_CHECK_LAUNCH("nf_k_bucketize_norm");
    return cudaSuccess;
}

static cudaError_t nf_embed_features(cudaStream_t st, const float * z, int64_t n, int64_t F, const float * w,
                                     const float * b, float * tok, int64_t T, int64_t D, const char ** kernel) {
    const int64_t work = n * F * D;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_embed_features, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(z, n, F, w, b, tok, T, D);
    NF_CHECK_LAUNCH("nf_k_embed_features");
    return cudaSuccess;
}

static cudaError_t nf_label_tokens(cudaStream_t st, int mode, int64_t n, const int32_t * yi, const float * yf,
                                   const float * E, int64_t C, const float * w, const float * b, float * tok, int64_t T,
                                   int64_t D, const char ** kernel) {
    const int64_t work = n * D;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_label_tokens, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (mode, n, yi, yf, E, C, w, b, tok, T, D);
    NF_CHECK_LAUNCH("nf_k_label_tokens");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------- */

int nf__cuda_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, nf_quantile_scratch(n, F), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_quantile(nf__cuda_op_stream(be), NF_F(&op->src[0]), n, F, op->p.quantile.nq, op->p.quantile.q_denom,
                             NF_F(&op->dst[0]), scratch, size, NF_K));
    return NF_OK;
}
bool nf__cuda_quantile_supports(nf_backend * be, const nf_op * op) {
    const struct nf_quantile_params * p = &op->p.quantile;
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    return op->src[0].ndim == 2 && p->q_denom > 0 && p->nq >= 0 && n >= 0 && F >= 0 &&
           (n == 0 || F <= INT_MAX / n); /* CUB segmented sort: int item counts */
}

int nf__cuda_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n_s = op->src[0].ne[0], F = op->src[0].ne[1];
    const int64_t n_q = (op->src[1].buf && op->dst[1].buf) ? op->src[1].ne[0] : 0;
    const int64_t nb = op->src[2].ne[1];
    NF_OP_LAUNCH(nf_bucketize_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), n_s, n_q ? NF_F(&op->src[1]) : NULL, n_q,
                                   F, NF_F(&op->src[2]), nb, NF_F(&op->dst[0]), n_q ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_bucketize_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor * tok = &op->dst[0];
    NF_OP_LAUNCH(nf_embed_features(nf__cuda_op_stream(be), NF_F(&op->src[0]), op->src[0].ne[0], op->src[0].ne[1],
                                   NF_F(&op->src[1]), NF_F(&op->src[2]), NF_F(tok), tok->ne[1], tok->ne[2], NF_K));
    return NF_OK;
}
bool nf__cuda_embed_features_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = tok->ne[0], T = tok->ne[1], D = tok->ne[2];
    cudaStream_t st = nf__cuda_op_stream(be);
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS:
            NF_OP_LAUNCH(nf_label_tokens(st, 0, n, NF_I(&op->src[0]), NULL, NF_F(&op->src[1]), op->src[1].ne[0], NULL,
                                         NULL, NF_F(tok), T, D, NF_K));
            return NF_OK;
        case NF_LABEL_VALUE:
            NF_OP_LAUNCH(nf_label_tokens(st, 1, n, NULL, NF_F(&op->src[0]), NULL, 0, NF_F(&op->src[1]),
                                         NF_F(&op->src[2]), NF_F(tok), T, D, NF_K));
            return NF_OK;
        case NF_LABEL_MASK:
            NF_OP_LAUNCH(
                nf_label_tokens(st, 2, n, NULL, NULL, NF_F(&op->src[1]), 1, NULL, NULL, NF_F(tok), T, D, NF_K));
            return NF_OK;
        default: break;
    }
    return nf__err_set(err, NF_ERR_UNSUPPORTED, "op LABEL_TOKENS (%s) on %s: unknown label mode %d",
                       op->label ? op->label : "-", be->name, (int) op->p.label_tokens.mode);
}
bool nf__cuda_label_tokens_supports(nf_backend * be, const nf_op * op) {
    const int mode = op->p.label_tokens.mode;
    if (mode == NF_LABEL_CLASS) return op->src[0].type == NF_I32;
    return mode == NF_LABEL_VALUE || mode == NF_LABEL_MASK;
}
