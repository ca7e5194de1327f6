/*
 * opencl-gemm.c -- LINEAR, CONV1D and GEMM on the OpenCL backend.
 *
 * CONV1D is im2col + this GEMM (see nf__cl_conv1d at the end).
 *
 * LINEAR's GEMM: CLBlast SGEMM (when built with it, NF_HAVE_CLBLAST) followed
 * by our epilogue kernel (bias, GELU, accumulate), or our own tiled kernel
 * nf_linear. CLBlast is not used where it would compile with the non-IEEE
 * mad() (AMD and Qualcomm GPUs) or when CLBLAST_BUILD_OPTIONS asks for relaxed
 * math. NOFALL_OPENCL_GEMM=own|clblast forces the choice (clblast fails at init
 * where it is not allowed). The choice is made once at init and is recorded
 * in precision_detail; a CLBlast error is an error, never a switch of kernel.
 * NOFALL_OPENCL_GEMM_GEOMETRY="TM TN TK WX WY VEC" overrides the built-in
 * kernel's tile geometry (opencl-kernels.h; used by tests).
 * See GEMM.md for the measurements.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NF_HAVE_CLBLAST
static int contains_ci(const char * hay, const char * needle) {
    for (const char * h = hay; *h; h++) {
        size_t i = 0;
        while (needle[i] && h[i] && (h[i] | 0x20) == (needle[i] | 0x20)) {
            i++;
        }
        if (!needle[i]) {
            return 1;
        }
    }
    return 0;
}
#endif

/* LINEAR's GEMM: CLBlast or our kernel (see the file comment). */
int nf__cl_choose_gemm(struct nf_cl * c, nf_err * err) {
    const char * force = c->opt_gemm[0] ? c->opt_gemm : NULL;
    if (force && strcmp(force, "own") != 0 && strcmp(force, "clblast") != 0) {
        return nf__err_set(err, NF_ERR_ARG, "opencl.gemm=%s: expected \"own\" or \"clblast\"", force);
    }
#ifdef NF_HAVE_CLBLAST
    char vendor[256];
    nf__cl_dev_str(c->device, CL_DEVICE_VENDOR, vendor, sizeof(vendor));
    cl_device_type type = 0;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_TYPE)");
    const char * why_not = NULL;
    if ((type & CL_DEVICE_TYPE_GPU) && (contains_ci(vendor, "amd") || contains_ci(vendor, "advanced micro devices") ||
                                        contains_ci(vendor, "qualcomm"))) {
        why_not = "CLBlast would use the non-IEEE mad() on this GPU";
    }
    const char * cbo = getenv("CLBLAST_BUILD_OPTIONS");
    if (cbo &&
        (strstr(cbo, "-cl-fast-relaxed-math") || strstr(cbo, "-cl-unsafe-math-optimizations") ||
         strstr(cbo, "-cl-mad-enable") || strstr(cbo, "-cl-finite-math-only") || strstr(cbo, "-cl-denorms-are-zero"))) {
        why_not = "CLBLAST_BUILD_OPTIONS asks for relaxed math";
    }
    if (force && strcmp(force, "clblast") == 0 && why_not) {
        return nf__err_set(err, NF_ERR_DEVICE, "opencl.gemm=clblast: not allowed on %s: %s", c->name, why_not);
    }
    if ((force && strcmp(force, "own") == 0) || why_not) {
        c->use_clblast = 0;
        snprintf(c->gemm_desc, sizeof(c->gemm_desc), "GEMM: built-in tiled kernel (%s)",
                 why_not ? why_not : "opencl.gemm=own");
    } else {
        c->use_clblast = 1;
        snprintf(c->gemm_desc, sizeof(c->gemm_desc), "GEMM: CLBlast SGEMM (IEEE mul/fma, no mad) + nofall epilogue");
    }
#else
    if (force && strcmp(force, "clblast") == 0) {
        return nf__err_set(err, NF_ERR_ARG, "opencl.gemm=clblast: this build has no CLBlast");
    }
    snprintf(c->gemm_desc, sizeof(c->gemm_desc), "GEMM: built-in tiled kernel");
#endif
    return NF_OK;
}

/* ---- supports ---------------------------------------------------------------------- */

bool nf__cl_linear_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_linear_params * p = &op->p.linear;
    if (op->n_src < 2 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[1]) || !is_f32(&op->dst[0]) ||
        (op->n_src >= 3 && !is_f32(&op->src[2]))) {
        return false;
    }
    if (p->act != NF_ACT_NONE && p->act != NF_ACT_GELU && p->act != NF_ACT_RELU) {
        return false;
    }
    return fits_int(p->m) && fits_int(p->n) && fits_int(p->k) &&
           (c->use_clblast || c->kwg[K_LINEAR] >= (size_t) c->lin.wx * c->lin.wy);
}

/* ---- compute ------------------------------------------------------------------------ */

#ifdef NF_HAVE_CLBLAST
static const char * clblast_status_name(CLBlastStatusCode s) {
    if ((int) s > -1000) {
        return nf__cl_err_name((cl_int) s); /* CLBlast passes OpenCL codes through */
    }
    switch (s) {
#define E(x) \
    case x: return #x
        E(CLBlastNotImplemented);
        E(CLBlastInvalidMatrixA);
        E(CLBlastInvalidMatrixB);
        E(CLBlastInvalidMatrixC);
        E(CLBlastInvalidDimension);
        E(CLBlastInvalidLeadDimA);
        E(CLBlastInvalidLeadDimB);
        E(CLBlastInvalidLeadDimC);
        E(CLBlastInsufficientMemoryA);
        E(CLBlastInsufficientMemoryB);
        E(CLBlastInsufficientMemoryC);
        E(CLBlastInsufficientMemoryTemp);
        E(CLBlastInvalidLocalMemUsage);
        E(CLBlastDatabaseError);
        E(CLBlastUnknownError);
        E(CLBlastUnexpectedError);
#undef E
        default: return "CLBlast error";
    }
}

/* C[c_off + r*ldc + o] = sum_k op(A)[r][k] * op(B)[k][o] for r < M, o < N, row-major
 * (op(X) = Xᵀ when trans_x): CLBlast SGEMM with beta = 0, its temporary
 * buffer in gemm_tmp */
static int clblast_gemm_t(struct nf_cl * c, int trans_a, int trans_b, cl_mem A, size_t a_off, size_t lda, cl_mem B,
                          size_t b_off, size_t ldb, cl_mem C, size_t c_off, size_t ldc, size_t M, size_t N, size_t K,
                          nf_err * err) {
    const CLBlastTranspose ta = trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose tb = trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t need = 0;
    CLBlastStatusCode st = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, ta, tb, M, N, K, a_off, lda, b_off, ldb,
                                                      c_off, ldc, &c->queue, &need);
    if (st != CLBlastSuccess) {
        return nf__err_set(err, NF_ERR_DEVICE, "%s: CLBlastSGemmTempBufferSize(m=%zu n=%zu k=%zu): %s (%d)", c->name, M,
                           N, K, clblast_status_name(st), (int) st);
    }
    if (need > 0) {
        int rr = nf__cl_reserve_buffer(c, &c->gemm_tmp, &c->gemm_tmp_size, need, "CLBlast temp", err);
        if (rr != NF_OK) {
            return rr;
        }
    }
    st = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, ta, tb, M, N, K, 1.0f, A, a_off, lda, B, b_off, ldb, 0.0f, C,
                                    c_off, ldc, &c->queue, NULL, c->gemm_tmp ? c->gemm_tmp : C);
    if (st != CLBlastSuccess) {
        return nf__err_set(err, (int) st > -1000 ? cl_rc_code((cl_int) st) : NF_ERR_DEVICE,
                           "%s: CLBlastSgemm(m=%zu n=%zu k=%zu): %s (%d)", c->name, M, N, K, clblast_status_name(st),
                           (int) st);
    }
    return NF_OK;
}

/* C[c_off + r*N + o] = sum_k A[a_off + r*lda + k] * B[b_off + o*K + k] for r < M, o < N
 * (RowMajor, NoTrans, Trans: LINEAR's and CONV1D's shape) */
static int clblast_gemm(struct nf_cl * c, cl_mem A, size_t a_off, size_t lda, cl_mem B, size_t b_off, cl_mem C,
                        size_t c_off, size_t M, size_t N, size_t K, nf_err * err) {
    return clblast_gemm_t(c, 0, 1, A, a_off, lda, B, b_off, K, C, c_off, N, M, N, K, err);
}

#endif

int nf__cl_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        return nf__cl_linear_chunks(be, op, 0, err);
    }
#endif
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : &op->src[1]; /* any valid buffer when absent */
    const nf_tensor * y = &op->dst[0];
    const struct nf_linear_params * p = &op->p.linear;
    const struct nf_cl_lin_geo * g = &c->lin;
    const size_t ls[2] = {(size_t) g->wx, (size_t) g->wy};
    const size_t gs[2] = {((size_t) p->n + g->tn - 1) / g->tn * g->wx, ((size_t) p->m + g->tm - 1) / g->tm * g->wy};
    return LAUNCH(c, K_LINEAR, 2, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(W)),
                  KLONG(toff(W)), KMEM(tmem(bias)), KLONG(toff(bias)), KINT(has_bias), KMEM(tmem(y)), KLONG(toff(y)),
                  KLONG(p->ldy), KINT(p->m), KINT(p->n), KINT(p->k), KINT(p->act), KINT(p->accumulate != 0));
}

/* ---- CONV1D: im2col + the GEMM ------------------------------------------------------- */

/* The raw sums of one row block, C[c_off + r*N + o] = sum_k A[a_off + r*lda + k] *
 * B[b_off + o*K + k]: the GEMM LINEAR uses (CLBlast, or nf_linear without bias,
 * activation or accumulation, so that t = sum exactly). */
int nf__cl_gemm_raw(struct nf_cl * c, cl_mem A, size_t a_off, size_t lda, cl_mem B, size_t b_off, cl_mem C,
                    size_t c_off, size_t M, size_t N, size_t K, nf_err * err) {
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        return clblast_gemm(c, A, a_off, lda, B, b_off, C, c_off, M, N, K, err);
    }
#endif
    const struct nf_cl_lin_geo * g = &c->lin;
    const size_t ls[2] = {(size_t) g->wx, (size_t) g->wy};
    const size_t gs[2] = {(N + g->tn - 1) / g->tn * g->wx, (M + g->tm - 1) / g->tm * g->wy};
    return LAUNCH(c, K_LINEAR, 2, gs, ls, err, KMEM(A), KLONG(a_off), KLONG(lda), KMEM(B), KLONG(b_off), KMEM(B),
                  KLONG(b_off), KINT(0), KMEM(C), KLONG(c_off), KLONG(N), KINT(M), KINT(N), KINT(K), KINT(0), KINT(0));
}

/* scratch bytes per chunk of LINEAR rows (beside bf16's rounded W) */
#define NF_CL_GEMM_CHUNK_BYTES ((size_t) 64 << 20)

/* dim 0: c < cols; dim 1: r < rows.  rows (row stride lds) of src, bf16-rounded, into
 * contiguous rows of dst */
static int round_rows(struct nf_cl * c, cl_mem src, cl_long s_off, cl_long lds, cl_mem dst, cl_long d_off, int64_t rows,
                      int64_t ncols, nf_err * err) {
    const size_t ls[2] = {64, 1};
    const size_t gs[2] = {(size_t) ncols, (size_t) rows};
    return LAUNCH(c, K_BF16_ROUND_ROWS, 2, gs, ls, err, KMEM(src), KLONG(s_off), KLONG(lds), KMEM(dst), KLONG(d_off),
                  KINT(rows), KINT(ncols));
}

/* the raw sums of a chunk of rows into scratch (ldc = n) by nf__cl_gemm_raw, then
 * nf_linear_epilogue; bf16: scratch holds W rounded (N*K), then per chunk x rounded
 * (mc*K) and the sums (mc*N), and the epilogue is nf_bf16_linear_epilogue */
int nf__cl_linear_chunks(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : &op->src[1];
    const nf_tensor * y = &op->dst[0];
    const struct nf_linear_params * p = &op->p.linear;
    const size_t M = (size_t) p->m, N = (size_t) p->n, K = (size_t) p->k;
    if (M == 0) {
        return NF_OK;
    }
    size_t mc = NF_CL_GEMM_CHUNK_BYTES / sizeof(float) / (bf16 ? K + N : N);
    mc = mc < 1 ? 1 : mc > M ? M : mc;
    const size_t wa = 0, xa = bf16 ? N * K : 0, ta = bf16 ? xa + mc * K : 0;
    NF_TRY(nf__cl_ensure_scratch(c, (ta + mc * N) * sizeof(float), err));
    if (bf16) {
        NF_TRY(round_rows(c, tmem(W), toff(W), (cl_long) K, c->scratch, (cl_long) wa, (int64_t) N, (int64_t) K, err));
    }
    for (size_t r0 = 0; r0 < M; r0 += mc) {
        const size_t rows = M - r0 < mc ? M - r0 : mc;
        const size_t x_off = (size_t) toff(x) + r0 * (size_t) p->ldx;
        if (bf16) {
            NF_TRY(round_rows(c, tmem(x), (cl_long) x_off, p->ldx, c->scratch, (cl_long) xa, (int64_t) rows,
                              (int64_t) K, err));
            NF_TRY(nf__cl_gemm_raw(c, c->scratch, xa, K, c->scratch, wa, c->scratch, ta, rows, N, K, err));
        } else {
            NF_TRY(nf__cl_gemm_raw(c, tmem(x), x_off, (size_t) p->ldx, tmem(W), (size_t) toff(W), c->scratch, 0, rows,
                                   N, K, err));
        }
        const size_t ls[2] = {64, 1};
        const size_t gs[2] = {N, rows};
        const cl_long y_off = toff(y) + (cl_long) (r0 * (size_t) p->ldy);
        if (bf16) {
            NF_TRY(LAUNCH(c, K_BF16_LINEAR_EPILOGUE, 2, gs, ls, err, KMEM(c->scratch), KLONG(ta), KMEM(tmem(bias)),
                          KLONG(toff(bias)), KINT(has_bias), KMEM(tmem(y)), KLONG(y_off), KLONG(p->ldy), KINT(rows),
                          KINT(N), KINT(p->act), KINT(p->accumulate != 0), KINT(p->bias_after_round != 0),
                          KINT(p->bf16_stream != 0)));
        } else {
            NF_TRY(LAUNCH(c, K_LINEAR_EPILOGUE, 2, gs, ls, err, KMEM(c->scratch), KMEM(tmem(bias)), KLONG(toff(bias)),
                          KINT(has_bias), KMEM(tmem(y)), KLONG(y_off), KLONG(p->ldy), KINT(rows), KINT(N), KINT(p->act),
                          KINT(p->accumulate != 0)));
        }
    }
    return NF_OK;
}

bool nf__cl_conv1d_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_conv1d_params * p = &op->p.conv1d;
    if (op->n_src < 2 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[1]) || !is_f32(&op->dst[0]) ||
        (op->n_src >= 3 && !is_f32(&op->src[2]))) {
        return false;
    }
    /* rows (n_seq*len), channels and im2col width in int */
    return fits_int(p->n_seq) && fits_int(p->len) && fits_int(p->n_seq * p->len) && fits_int(p->cin) &&
           fits_int(p->cout) && fits_int(p->ksize) && fits_int(p->cin * p->ksize) &&
           (c->use_clblast || c->kwg[K_LINEAR] >= (size_t) c->lin.wx * c->lin.wy);
}

/* scratch of one CONV1D launch (Wt, one im2col block, its GEMM output): at
 * most this much where the rows allow (SpTransformer's widest layer, 128
 * channels x 21 taps, fits 23,800 positions: a whole sequence per GEMM) */
#define NF_CL_CONV_CHUNK_BYTES ((size_t) 256 << 20)
#define NF_CL_CONV_ALIGN       ((size_t) 64) /* region starts in scratch, in floats */

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* y (+)= bias + conv(x, W): W permuted tap-major into scratch once (Wt, (cout,
 * ksize*cin)), then per block of rows of the flattened (sequence, position)
 * index: im2col of the block into scratch, the GEMM col · Wtᵀ into scratch,
 * and the epilogue y = y + (sum + bias) (the cpu reference's rounding).
 * bf16: Wt and each im2col block rounded to bf16 in place (the GEMM then sums
 * exact products of bf16 values in fp32, as the cpu's bf16 matmul per tap),
 * nf_conv1d_epilogue with its bf16 flag: R(sum + R(bias)), R(y + that). */
int nf__cl_conv1d(nf_backend * be, const nf_op * op, nf_err * err) { return nf__cl_conv1d_r(be, op, 0, err); }

int nf__cl_conv1d_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_conv1d_params * p = &op->p.conv1d;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : W; /* any valid buffer when absent */
    const nf_tensor * y = &op->dst[0];
    const size_t rows = (size_t) p->n_seq * (size_t) p->len;
    if (rows == 0) {
        return NF_OK;
    }
    const size_t cin = (size_t) p->cin, cout = (size_t) p->cout, K = (size_t) p->ksize, KC = cin * K;
    const size_t nw = round_up(cout * KC, NF_CL_CONV_ALIGN);
    size_t budget = NF_CL_CONV_CHUNK_BYTES < c->max_alloc ? NF_CL_CONV_CHUNK_BYTES : (size_t) c->max_alloc;
    budget /= sizeof(float);
    size_t mc = budget > nw + NF_CL_CONV_ALIGN ? (budget - nw - NF_CL_CONV_ALIGN) / (KC + cout) : 0;
    mc = mc < 1 ? 1 : mc > rows ? rows : mc;
    const size_t col_off = nw;
    const size_t tmp_off = nw + round_up(mc * KC, NF_CL_CONV_ALIGN);
    NF_TRY(nf__cl_ensure_scratch(c, (tmp_off + mc * cout) * sizeof(float), err));

    const size_t l1[1] = {64};
    const size_t gw[1] = {cout * KC};
    NF_TRY(LAUNCH(c, K_CONV1D_WPERM, 1, gw, l1, err, KMEM(tmem(W)), KLONG(toff(W)), KMEM(c->scratch), KLONG(0),
                  KINT(cin), KINT(K), KLONG(cout * KC)));
    if (bf16) {
        NF_TRY(round_rows(c, c->scratch, 0, (cl_long) KC, c->scratch, 0, (int64_t) cout, (int64_t) KC, err));
    }
    const size_t li[2] = {KC >= 64 ? 64 : KC, 1};
    const size_t le[2] = {cout >= 64 ? 64 : cout, 1};
    for (size_t r0 = 0; r0 < rows; r0 += mc) {
        const size_t nr = rows - r0 < mc ? rows - r0 : mc;
        const size_t gi[2] = {KC, nr};
        NF_TRY(LAUNCH(c, K_CONV1D_IM2COL, 2, gi, li, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KLONG(p->x_gs),
                      KMEM(c->scratch), KLONG(col_off), KINT(r0), KINT(nr), KINT(p->len), KINT(cin), KINT(KC),
                      KLONG(p->dilation), KLONG(p->pad)));
        if (bf16) {
            NF_TRY(round_rows(c, c->scratch, (cl_long) col_off, (cl_long) KC, c->scratch, (cl_long) col_off,
                              (int64_t) nr, (int64_t) KC, err));
        }
        NF_TRY(nf__cl_gemm_raw(c, c->scratch, col_off, KC, c->scratch, 0, c->scratch, tmp_off, nr, cout, KC, err));
        const size_t ge[2] = {cout, nr};
        NF_TRY(LAUNCH(c, K_CONV1D_EPILOGUE, 2, ge, le, err, KMEM(c->scratch), KLONG(tmp_off), KMEM(tmem(bias)),
                      KLONG(toff(bias)), KINT(has_bias), KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy), KLONG(p->y_gs),
                      KINT(r0), KINT(nr), KINT(p->len), KINT(cout), KINT(p->accumulate != 0), KINT(bf16)));
    }
    return NF_OK;
}

/* ---- GEMM (the training op): C (+)= op(A) op(B) ------------------------------------- */

bool nf__cl_gemm_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_gemm_params * p = &op->p.gemm;
    return op->n_src >= 2 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]) &&
           fits_int(p->m) && fits_int(p->n) && fits_int(p->k) && (c->use_clblast || c->kwg[K_GEMM] >= (size_t) 16 * 16);
}

/* CLBlast (when LINEAR uses it): t = op(A) op(B) by chunks of rows into
 * scratch, then nf_gemm_store C (+)= t; else the built-in nf_gemm straight
 * into C. Either way C + t is one rounding (the cpu reference's). */
int nf__cl_gemm(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * A = &op->src[0];
    const nf_tensor * B = &op->src[1];
    const nf_tensor * C = &op->dst[0];
    const struct nf_gemm_params * p = &op->p.gemm;
    if (p->m == 0 || p->n == 0) {
        return NF_OK;
    }
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        const size_t M = (size_t) p->m, N = (size_t) p->n, K = (size_t) p->k;
        size_t mc = NF_CL_GEMM_CHUNK_BYTES / sizeof(float) / N;
        mc = mc < 1 ? 1 : mc > M ? M : mc;
        NF_TRY(nf__cl_ensure_scratch(c, mc * N * sizeof(float), err));
        for (size_t r0 = 0; r0 < M; r0 += mc) {
            const size_t rows = M - r0 < mc ? M - r0 : mc;
            /* the chunk's rows of op(A): rows of A, or columns of the stored Aᵀ */
            const size_t a_off = (size_t) toff(A) + (p->trans_a ? r0 : r0 * (size_t) p->lda);
            NF_TRY(clblast_gemm_t(c, p->trans_a, p->trans_b, tmem(A), a_off, (size_t) p->lda, tmem(B), (size_t) toff(B),
                                  (size_t) p->ldb, c->scratch, 0, N, rows, N, K, err));
            const size_t ls[2] = {64, 1};
            const size_t gs[2] = {N, rows};
            NF_TRY(LAUNCH(c, K_GEMM_STORE, 2, gs, ls, err, KMEM(c->scratch), KMEM(tmem(C)),
                          KLONG(toff(C) + (cl_long) (r0 * (size_t) p->ldc)), KLONG(p->ldc), KINT(rows), KINT(N),
                          KINT(p->accumulate != 0)));
        }
        return NF_OK;
    }
#endif
    const size_t ls[2] = {16, 16};
    const size_t gs[2] = {(size_t) p->n, (size_t) p->m};
    return LAUNCH(c, K_GEMM, 2, gs, ls, err, KMEM(tmem(A)), KLONG(toff(A)), KLONG(p->lda), KINT(p->trans_a),
                  KMEM(tmem(B)), KLONG(toff(B)), KLONG(p->ldb), KINT(p->trans_b), KMEM(tmem(C)), KLONG(toff(C)),
                  KLONG(p->ldc), KINT(p->m), KINT(p->n), KINT(p->k), KINT(p->accumulate != 0));
}
