/*
 * opencl-gemm.c -- LINEAR on the OpenCL backend.
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

bool nf__cl_sup_linear(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_linear_params * p = &op->p.linear;
    if (op->n_src < 2 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[1]) || !is_f32(&op->dst[0]) ||
        (op->n_src >= 3 && !is_f32(&op->src[2]))) {
        return false;
    }
    if (p->act != NF_ACT_NONE && p->act != NF_ACT_GELU) {
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

/* raw products of a chunk of rows into scratch (ldc = n), then the epilogue */
#define NF_CL_GEMM_CHUNK_BYTES ((size_t) 64 << 20)

static int op_linear_clblast(nf_backend * be, const nf_op * op, nf_err * err) {
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
    size_t mc = NF_CL_GEMM_CHUNK_BYTES / sizeof(float) / N;
    mc = mc < 1 ? 1 : mc > M ? M : mc;
    NF_TRY(nf__cl_ensure_scratch(c, mc * N * sizeof(float), err));
    for (size_t r0 = 0; r0 < M; r0 += mc) {
        const size_t rows = M - r0 < mc ? M - r0 : mc;
        const size_t a_off = (size_t) toff(x) + r0 * (size_t) p->ldx;
        size_t need = 0;
        CLBlastStatusCode st = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                                          CLBlastTransposeYes, rows, N, K, a_off, (size_t) p->ldx,
                                                          (size_t) toff(W), K, 0, N, &c->queue, &need);
        if (st != CLBlastSuccess) {
            return nf__err_set(err, NF_ERR_DEVICE, "%s: CLBlastSGemmTempBufferSize(m=%zu n=%zu k=%zu): %s (%d)",
                               c->name, rows, N, K, clblast_status_name(st), (int) st);
        }
        if (need > 0) {
            int rr = nf__cl_reserve_buffer(c, &c->gemm_tmp, &c->gemm_tmp_size, need, "CLBlast temp", err);
            if (rr != NF_OK) {
                return rr;
            }
        }
        st = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, rows, N, K,
                                        1.0f, tmem(x), a_off, (size_t) p->ldx, tmem(W), (size_t) toff(W), K, 0.0f,
                                        c->scratch, 0, N, &c->queue, NULL, c->gemm_tmp ? c->gemm_tmp : c->scratch);
        if (st != CLBlastSuccess) {
            return nf__err_set(err, (int) st > -1000 ? cl_rc_code((cl_int) st) : NF_ERR_DEVICE,
                               "%s: CLBlastSgemm(m=%zu n=%zu k=%zu): %s (%d)", c->name, rows, N, K,
                               clblast_status_name(st), (int) st);
        }
        const size_t ls[2] = {64, 1};
        const size_t gs[2] = {N, rows};
        NF_TRY(LAUNCH(c, K_LINEAR_EPILOGUE, 2, gs, ls, err, KMEM(c->scratch), KMEM(tmem(bias)), KLONG(toff(bias)),
                      KINT(has_bias), KMEM(tmem(y)), KLONG(toff(y) + (cl_long) (r0 * (size_t) p->ldy)), KLONG(p->ldy),
                      KINT(rows), KINT(N), KINT(p->act == NF_ACT_GELU), KINT(p->accumulate != 0)));
    }
    return NF_OK;
}
#endif

int nf__cl_op_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        return op_linear_clblast(be, op, err);
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
                  KLONG(p->ldy), KINT(p->m), KINT(p->n), KINT(p->k), KINT(p->act == NF_ACT_GELU),
                  KINT(p->accumulate != 0));
}
