/*
 * cuda-ops.c -- the CUDA backend's host code for LINEAR, ATTENTION and CONV1D
 * (cuBLAS GEMMs and the kernels of cuda-kernels-*.cu), the per-op limits and the
 * kernel table. Precision and the GEMM layout: see cuda.c.
 */
#include "cuda-impl.h"

#include <limits.h>
#include <stdio.h>

/* ---- errors -------------------------------------------------------------------- */

static int nf__cuda_launch_err(nf_backend * be, const nf_op * op, const char * kernel, cudaError_t e, nf_err * err) {
    return nf__err_set(err, NF_ERR_DEVICE, "op %s (%s) on %s: kernel %s failed: %s (%s)", nf__op_name(op->type),
                       nf__op_label(op), be->name, kernel ? kernel : "?", cudaGetErrorName(e), cudaGetErrorString(e));
}

static int nf__cublas_err(nf_backend * be, const nf_op * op, const char * call, cublasStatus_t s, int m, int n, int k,
                          int batch, nf_err * err) {
    return nf__err_set(err, NF_ERR_DEVICE, "op %s (%s) on %s: %s (m=%d n=%d k=%d batch=%d, %s) failed: %s (%s)",
                       nf__op_name(op->type), nf__op_label(op), be->name, call, m, n, k, batch,
                       nf__cuda(be)->compute_name, cublasGetStatusName(s), cublasGetStatusString(s));
}

/* ---- GEMM ------------------------------------------------------------------------ */

/* Column-major C = alpha op(A) op(B) + beta C, batched by strides when
 * batch > 1. Leading dimensions are raised to the minimum cuBLAS accepts
 * where the matrix has a single column (the stride is then never used). */
static int nf__cuda_blas_gemm(nf_backend * be, const nf_op * op, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                              int64_t n, int64_t k, float alpha, const float * A, int64_t lda, int64_t sA,
                              const float * B, int64_t ldb, int64_t sB, float beta, float * C, int64_t ldc, int64_t sC,
                              int64_t batch, nf_err * err) {
    nf_cuda_ctx * c = nf__cuda(be);
    const int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    const int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    if (a_cols <= 1 && lda < a_rows) lda = a_rows;
    if (b_cols <= 1 && ldb < b_rows) ldb = b_rows;
    if (n <= 1 && ldc < m) ldc = m;
    if (lda < 1) lda = 1;
    if (ldb < 1) ldb = 1;
    if (ldc < 1) ldc = 1;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX ||
        batch > INT_MAX) {
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "op %s (%s) on %s: GEMM dimensions exceed cuBLAS's int range",
                           nf__op_name(op->type), nf__op_label(op), be->name);
    }
    cublasStatus_t s;
    if (batch == 1) {
        s = cublasGemmEx(c->blas, ta, tb, (int) m, (int) n, (int) k, &alpha, A, CUDA_R_32F, (int) lda, B, CUDA_R_32F,
                         (int) ldb, &beta, C, CUDA_R_32F, (int) ldc, c->compute, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS)
            return nf__cublas_err(be, op, "cublasGemmEx", s, (int) m, (int) n, (int) k, 1, err);
    } else {
        s = cublasGemmStridedBatchedEx(c->blas, ta, tb, (int) m, (int) n, (int) k, &alpha, A, CUDA_R_32F, (int) lda,
                                       (long long) sA, B, CUDA_R_32F, (int) ldb, (long long) sB, &beta, C, CUDA_R_32F,
                                       (int) ldc, (long long) sC, (int) batch, c->compute, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) {
            return nf__cublas_err(be, op, "cublasGemmStridedBatchedEx", s, (int) m, (int) n, (int) k, (int) batch, err);
        }
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return nf__cuda_launch_err(be, op, "cuBLAS GEMM", e, err);
    return NF_OK;
}

/* ---- ops ------------------------------------------------------------------------- */

/* for the ops in cuda-kernels-*.cu */
cudaStream_t nf__cuda_op_stream(nf_backend * be) { return nf__cuda(be)->stream; }
int nf__cuda_op_scratch(nf_backend * be, size_t bytes, void ** out, size_t * size, nf_err * err) {
    NF_TRY(nf__cuda_scratch(be, bytes, out, err));
    *size = nf__cuda(be)->scratch_size;
    return NF_OK;
}
int nf__cuda_op_launch_err(nf_backend * be, const nf_op * op, const char * kernel, cudaError_t e, nf_err * err) {
    return nf__cuda_launch_err(be, op, kernel, e, err);
}

#define NF__LAUNCH(call)                                                                             \
    do {                                                                                             \
        const char * kname_ = NULL;                                                                  \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) return nf__cuda_launch_err(be, op, kname_ ? kname_ : #call, e_, err); \
    } while (0)
/* the launchers report the failing kernel through their last argument */
#define NF__K (&kname_)

/* y = act(x·Wᵀ + bias) [+ y]. Three shapes, all with the cpu reference's
 * rounding sequence (t = round(x·Wᵀ); t = t + bias; gelu; y = y + t):
 *  - no bias, no act: one GEMM straight into y, beta = accumulate (y + t
 *    rounded once, as the reference);
 *  - not accumulating: GEMM into y (beta 0), then the epilogue in place;
 *  - accumulating with bias or act: GEMM into scratch by chunks of rows,
 *    then the epilogue adds into y. */
int nf__cuda_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_linear_params * p = &op->p.linear;
    const int64_t m = p->m, n = p->n, k = p->k;
    if (m <= 0 || n <= 0) return NF_OK;
    const float * x = NF__F(&op->src[0]);
    const float * W = NF__F(&op->src[1]);
    const float * bias = op->n_src >= 3 ? NF__F(&op->src[2]) : NULL;
    float * y = NF__F(&op->dst[0]);
    const int act = p->act == NF_ACT_GELU ? 1 : p->act == NF_ACT_RELU ? 2 : 0;
    cudaStream_t st = nf__cuda(be)->stream;

    if (!bias && !act) {
        return nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, 1.0f, W, k, 0, x, p->ldx, 0,
                                  p->accumulate ? 1.0f : 0.0f, y, p->ldy, 0, 1, err);
    }
    if (!p->accumulate) {
        NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, 1.0f, W, k, 0, x, p->ldx, 0, 0.0f, y,
                                  p->ldy, 0, 1, err));
        NF__LAUNCH(nf__cuda_linear_epilogue(st, y, p->ldy, bias, act, 0, y, p->ldy, m, n, NF__K));
        return NF_OK;
    }
    int64_t rows = nf__cuda(be)->chunk_floats / n;
    if (rows < 1) rows = 1;
    if (rows > m) rows = m;
    void * scratch = NULL;
    NF_TRY(nf__cuda_scratch(be, (size_t) rows * (size_t) n * sizeof(float), &scratch, err));
    float * t = (float *) scratch;
    for (int64_t r0 = 0; r0 < m; r0 += rows) {
        const int64_t mr = m - r0 < rows ? m - r0 : rows;
        NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, n, mr, k, 1.0f, W, k, 0, x + r0 * p->ldx, p->ldx, 0,
                                  0.0f, t, n, 0, 1, err));
        NF__LAUNCH(nf__cuda_linear_epilogue(st, t, n, bias, act, 1, y + r0 * p->ldy, p->ldy, mr, n, NF__K));
    }
    return NF_OK;
}

/* softmax(scale q kᵀ) v per (group, head).
 * Small lk and head_dim (every feature attention; row attention over at most
 * NF_CUDA_ATT_MAX_LK support rows): one launch of nf_k_attention_small for
 * all groups and heads, exact fp32 in either precision mode.
 * Otherwise cuBLAS for both products (TF32 in tf32 mode), per head h and
 * chunk of nb groups x nl query rows,
 *   S (nb, nl, lk)  = scale · Q Kᵀ   (strided batched over groups)
 *   S               = softmax rows   (nf_k_softmax_rows)
 *   O (nb, nl, hd)  = S V            (strided batched over groups)
 * In column-major terms: Sᵀ (lk x nl) = op_T(K: hd x lk, ld kv_ss) · Qᵀ (hd x nl, ld q_ss),
 * and Oᵀ (hd x nl, ld o_ss) = Vᵀ (hd x lk, ld kv_ss) · Sᵀ (lk x nl, ld lk). */
int nf__cuda_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const int64_t G = p->n_groups, lq = p->lq, lk = p->lk, H = p->n_heads, hd = p->head_dim;
    if (G <= 0 || lq <= 0 || H <= 0 || hd <= 0) return NF_OK;
    const float * q = NF__F(&op->src[0]);
    const float * k = NF__F(&op->src[1]);
    const float * v = NF__F(&op->src[2]);
    float * o = NF__F(&op->dst[0]);
    cudaStream_t st = nf__cuda(be)->stream;

    if (nf__cuda(be)->attention_small && lk <= NF_CUDA_ATT_MAX_LK && hd <= NF_CUDA_ATT_MAX_HD) {
        NF__LAUNCH(nf__cuda_attention_small(st, q, k, v, o, G, H, lq, lk, hd, p->q_gs, p->q_ss, p->kv_gs, p->kv_ss,
                                            p->o_gs, p->o_ss, p->scale, p->drop_seed, p->drop_threshold, p->drop_scale,
                                            NF__K));
        return NF_OK;
    }

    const int64_t budget = nf__cuda(be)->chunk_floats;
    int64_t gc, L;
    if (lq * lk <= budget) {
        L = lq;
        gc = budget / (lq * lk);
        if (gc > G) gc = G;
        if (gc > NF_CUDA_MAX_BATCH) gc = NF_CUDA_MAX_BATCH;
        if (gc < 1) gc = 1;
    } else {
        gc = 1;
        L = budget / lk;
        if (L < 1) L = 1;
    }
    void * scratch = NULL;
    NF_TRY(nf__cuda_scratch(be, (size_t) gc * (size_t) L * (size_t) lk * sizeof(float), &scratch, err));
    float * S = (float *) scratch;

    for (int64_t g0 = 0; g0 < G; g0 += gc) {
        const int64_t nb = G - g0 < gc ? G - g0 : gc;
        for (int64_t i0 = 0; i0 < lq; i0 += L) {
            const int64_t nl = lq - i0 < L ? lq - i0 : L;
            for (int64_t h = 0; h < H; h++) {
                const float * Q = q + g0 * p->q_gs + i0 * p->q_ss + h * hd;
                const float * K = k + g0 * p->kv_gs + h * hd;
                const float * V = v + g0 * p->kv_gs + h * hd;
                float * O = o + g0 * p->o_gs + i0 * p->o_ss + h * hd;
                NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, lk, nl, hd, p->scale, K, p->kv_ss, p->kv_gs,
                                          Q, p->q_ss, p->q_gs, 0.0f, S, lk, nl * lk, nb, err));
                NF__LAUNCH(nf__cuda_softmax_rows(st, S, nb * nl, lk, NF__K));
                if (p->drop_threshold > 0)
                    NF__LAUNCH(nf__cuda_attn_drop_rows(st, S, nb, nl, lk, g0, i0, h, H, lq, p->drop_seed,
                                                       p->drop_threshold, p->drop_scale, NF__K));
                NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_N, CUBLAS_OP_N, hd, nl, lk, 1.0f, V, p->kv_ss, p->kv_gs, S,
                                          lk, nl * lk, 0.0f, O, p->o_ss, p->o_gs, nb, err));
            }
        }
    }
    return NF_OK;
}

/* y (+)= conv1d(x, W) + bias, the cpu reference's im2col + GEMM:
 *   Wt (cout, K*cin)  W tap-major (nf_k_conv_weights; W itself where K == 1)
 *   col (rows, K*cin) the im2col of a chunk of positions (nf_k_conv_im2col;
 *                     none where K == 1 and x is read in place)
 *   yᵀ (cout x rows, ld ldy) = op_T(Wt: KC x cout, ld KC) · colᵀ (KC x rows,
 *                     ld KC)  (column-major; strided-batched over sequences)
 * and LINEAR's three shapes of epilogue, with the reference's rounding
 * sequence (t = round(sum); t = t + bias; y = y + t):
 *  - no bias: one GEMM straight into y, beta = accumulate;
 *  - bias, not accumulating: GEMM into y, then y = y + bias in place;
 *  - bias, accumulating: GEMM into t (scratch), then y = y + (t + bias).
 * Chunks: gc whole sequences per GEMM (one strided-batched call) where a
 * sequence's work buffers fit in chunk_floats and the sequences' outputs are
 * disjoint; else one sequence at a time in chunks of rb positions. The work
 * buffers are the backend's scratch (grown on demand, traced, freed with
 * the backend). */
int nf__cuda_conv1d(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_conv1d_params * p = &op->p.conv1d;
    const int64_t S = p->n_seq, L = p->len, cin = p->cin, cout = p->cout, K = p->ksize, KC = K * cin;
    if (S <= 0 || L <= 0) return NF_OK;
    const float * x = NF__F(&op->src[0]);
    const float * W = NF__F(&op->src[1]);
    const float * bias = op->n_src >= 3 ? NF__F(&op->src[2]) : NULL;
    float * y = NF__F(&op->dst[0]);
    cudaStream_t st = nf__cuda(be)->stream;

    /* 1x1 (then pad == 0): the GEMM reads x in place unless x and y overlap
     * (im2col then copies each chunk before the GEMM writes it) */
    int direct = 0;
    if (K == 1) {
        const size_t xb = op->src[0].offs, yb = op->dst[0].offs;
        const size_t xe = xb + (size_t) ((S - 1) * p->x_gs + (L - 1) * p->ldx + cin) * sizeof(float);
        const size_t ye = yb + (size_t) ((S - 1) * p->y_gs + (L - 1) * p->ldy + cout) * sizeof(float);
        direct = op->src[0].buf != op->dst[0].buf || xe <= yb || ye <= xb;
    }
    const int use_t = bias && p->accumulate;
    const int64_t per_row = (direct ? 0 : KC) + (use_t ? cout : 0);
    const int64_t budget = nf__cuda(be)->chunk_floats;
    int64_t gc = 1, rb = L;
    if (per_row > 0 && L * per_row > budget) {
        rb = budget / per_row;
        if (rb < 1) rb = 1;
    } else if (S > 1 && p->y_gs >= (L - 1) * p->ldy + cout) {
        gc = per_row > 0 ? budget / (L * per_row) : S;
        if (gc > S) gc = S;
        if (gc > NF_CUDA_MAX_BATCH) gc = NF_CUDA_MAX_BATCH;
        if (gc < 1) gc = 1;
    }

    const size_t a = 255;
    const size_t wt_bytes = K == 1 ? 0 : ((size_t) (cout * KC) * sizeof(float) + a) & ~a;
    const size_t col_bytes = direct ? 0 : ((size_t) (gc * rb * KC) * sizeof(float) + a) & ~a;
    const size_t t_bytes = use_t ? (size_t) (gc * rb * cout) * sizeof(float) : 0;
    char * scratch = NULL;
    if (wt_bytes + col_bytes + t_bytes > 0) {
        void * sp = NULL;
        NF_TRY(nf__cuda_scratch(be, wt_bytes + col_bytes + t_bytes, &sp, err));
        scratch = (char *) sp;
    }
    const float * Wt = W;
    if (K > 1) {
        NF__LAUNCH(nf__cuda_conv_weights(st, W, cout, cin, K, (float *) scratch, NF__K));
        Wt = (const float *) scratch;
    }
    float * col = direct ? NULL : (float *) (scratch + wt_bytes);
    float * t = use_t ? (float *) (scratch + wt_bytes + col_bytes) : NULL;

    for (int64_t s0 = 0; s0 < S; s0 += gc) {
        const int64_t nb = S - s0 < gc ? S - s0 : gc;
        for (int64_t t0 = 0; t0 < L; t0 += rb) {
            const int64_t nr = L - t0 < rb ? L - t0 : rb;
            const float * B = col;
            int64_t ldb = KC, sB = nr * KC;
            if (direct) {
                B = x + s0 * p->x_gs + t0 * p->ldx;
                ldb = p->ldx;
                sB = p->x_gs;
            } else {
                NF__LAUNCH(nf__cuda_conv_im2col(st, x + s0 * p->x_gs, p->ldx, p->x_gs, L, cin, K, p->dilation, p->pad,
                                                t0, nr, nb, col, NF__K));
            }
            float * yc = y + s0 * p->y_gs + t0 * p->ldy;
            if (use_t) {
                NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, cout, nr, KC, 1.0f, Wt, KC, 0, B, ldb, sB,
                                          0.0f, t, cout, nr * cout, nb, err));
                NF__LAUNCH(
                    nf__cuda_conv_epilogue(st, t, cout, nr * cout, bias, 1, yc, p->ldy, p->y_gs, nr, nb, cout, NF__K));
            } else {
                NF_TRY(nf__cuda_blas_gemm(be, op, CUBLAS_OP_T, CUBLAS_OP_N, cout, nr, KC, 1.0f, Wt, KC, 0, B, ldb, sB,
                                          p->accumulate ? 1.0f : 0.0f, yc, p->ldy, p->y_gs, nb, err));
                if (bias) {
                    NF__LAUNCH(nf__cuda_conv_epilogue(st, yc, p->ldy, p->y_gs, bias, 0, yc, p->ldy, p->y_gs, nr, nb,
                                                      cout, NF__K));
                }
            }
        }
    }
    return NF_OK;
}

/* GEMM (the training op): C (+)= op(A) op(B) row-major is, column-major,
 * Cᵀ (n x m, ld ldc) = op(B)ᵀ op(A)ᵀ, where the stored B (row-major (k, n),
 * or (n, k) when trans_b) is op(B)ᵀ itself (CUBLAS_OP_N) or its transpose
 * (CUBLAS_OP_T), and A likewise. One cuBLAS call, beta = accumulate (as
 * LINEAR's plain shape: C + t rounded once; cuBLAS reads no C when beta is 0). */
int nf__cuda_gemm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gemm_params * p = &op->p.gemm;
    if (p->m <= 0 || p->n <= 0) return NF_OK;
    return nf__cuda_blas_gemm(be, op, p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                              p->n, p->m, p->k, 1.0f, NF__F(&op->src[1]), p->ldb, 0, NF__F(&op->src[0]), p->lda, 0,
                              p->accumulate ? 1.0f : 0.0f, NF__F(&op->dst[0]), p->ldc, 0, 1, err);
}

/* ---- limits and the kernel table ------------------------------------------------- */

static bool nf__fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

bool nf__cuda_linear_supports(nf_backend * be, const nf_op * op) {
    const struct nf_linear_params * p = &op->p.linear;
    return (p->act == NF_ACT_NONE || p->act == NF_ACT_GELU || p->act == NF_ACT_RELU) && nf__fits_int(p->m) &&
           nf__fits_int(p->n) && nf__fits_int(p->k) && nf__fits_int(p->ldx) && nf__fits_int(p->ldy) &&
           (p->m <= 1 || (p->ldx >= p->k && p->ldy >= p->n));
}

bool nf__cuda_attention_supports(nf_backend * be, const nf_op * op) {
    const struct nf_attention_params * p = &op->p.attention;
    const int64_t hd = p->head_dim;
    return p->lk >= 1 && nf__fits_int(p->lq) && nf__fits_int(p->lk) && nf__fits_int(hd) && nf__fits_int(p->q_ss) &&
           nf__fits_int(p->kv_ss) && nf__fits_int(p->o_ss) && p->q_gs >= 0 && p->kv_gs >= 0 && p->o_gs >= 0 &&
           (p->lq <= 1 || (p->q_ss >= hd && p->o_ss >= hd)) && (p->lk <= 1 || p->kv_ss >= hd);
}

bool nf__cuda_conv1d_supports(nf_backend * be, const nf_op * op) {
    const struct nf_conv1d_params * p = &op->p.conv1d;
    /* cuBLAS's int dimensions and leading dimensions */
    return nf__fits_int(p->len) && nf__fits_int(p->cout) && nf__fits_int(p->cin) && nf__fits_int(p->ksize) &&
           p->cin <= INT_MAX / p->ksize && nf__fits_int(p->ldx) && nf__fits_int(p->ldy);
}

bool nf__cuda_gemm_supports(nf_backend * be, const nf_op * op) {
    const struct nf_gemm_params * p = &op->p.gemm;
    return nf__fits_int(p->m) && nf__fits_int(p->n) && nf__fits_int(p->k) && nf__fits_int(p->lda) &&
           nf__fits_int(p->ldb) && nf__fits_int(p->ldc);
}

/* the ops this backend lacks (NF_ERR_UNSUPPORTED), one line each:
 *   #define NF_CUDA_LACKS_<NAME> NF_KERNEL_LACKS
 * none: every op has a kernel nf__cuda_<name> and its limits nf__cuda_<name>_supports
 * (declared in cuda-kernels.h; table: nf-impl.h, NF_KERNEL_ENTRY) */

const struct nf_kernel nf__cuda_kernels[NF_OP_COUNT] = {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) \
    [NF_OP_##NAME] = NF_KERNEL_ENTRY(NF_CUDA_LACKS_##NAME, nf__cuda_##name, nf__cuda_##name##_supports),
#include "nf-ops.def"
};
