/* cpu.c -- the cpu backend: host memory, the reference kernels in cpu-kernels.c,
 * the GEMM in cpu-gemm.c. */
#include "cpu-bf16.h"
#include "cpu-gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

static void nf__cpu_free(nf_backend * be) { nf__cpu_bf16_free(be->ctx); }

static int nf__cpu_buffer_alloc(nf_backend * be, size_t size, void ** handle, nf_err * err) {
    size_t rounded = (size + 63) & ~(size_t) 63;
    void * p = aligned_alloc(64, rounded);
    if (!p) return nf__err_set(err, NF_ERR_NOMEM, "cpu: cannot allocate %zu bytes", size);
    *handle = p;
    return NF_OK;
}

static void nf__cpu_buffer_free(nf_backend * be, void * handle) { free(handle); }

static int nf__cpu_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err) {
    memcpy((char *) handle + offs, src, n);
    return NF_OK;
}

/* bf16-autocast: a write or a free drops the bf16 copies of what it touches */
static void nf__cpu_bf16_buffer_free(nf_backend * be, void * handle) {
    nf__cpu_bf16_forget(be->ctx, handle, 0, SIZE_MAX);
    free(handle);
}

static int nf__cpu_bf16_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err) {
    nf__cpu_bf16_forget(be->ctx, handle, offs, offs + n);
    return nf__cpu_upload(be, handle, offs, src, n, err);
}

static int nf__cpu_download(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err) {
    memcpy(dst, (const char *) handle + offs, n);
    return NF_OK;
}

static int nf__cpu_buffer_where(nf_backend * be, void * handle, char * out, size_t n, nf_err * err) {
    snprintf(out, n, "cpu");
    return NF_OK;
}

static const struct nf_backend_i nf__cpu_iface = {
    .kind = "cpu",
    .free = nf__cpu_free,
    .buffer_alloc = nf__cpu_buffer_alloc,
    .buffer_free = nf__cpu_buffer_free,
    .upload = nf__cpu_upload,
    .download = nf__cpu_download,
    .buffer_where = nf__cpu_buffer_where,
    .kernels = nf__cpu_kernels,
    .launch = NULL,
    .sync = NULL,
};

/* --precision bf16-autocast: the same backend, every op through cpu-bf16.c's launch */
static const struct nf_backend_i nf__cpu_bf16_iface = {
    .kind = "cpu",
    .free = nf__cpu_free,
    .buffer_alloc = nf__cpu_buffer_alloc,
    .buffer_free = nf__cpu_bf16_buffer_free,
    .upload = nf__cpu_bf16_upload,
    .download = nf__cpu_download,
    .buffer_where = nf__cpu_buffer_where,
    .kernels = nf__cpu_kernels,
    .launch = nf__cpu_bf16_launch,
    .sync = NULL,
};

int nf__backend_cpu_init(const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    const int precision = opts ? opts->precision : NF_PRECISION_EXACT;
    const int bf16 = precision == NF_PRECISION_BF16_AUTOCAST;
    if (precision != NF_PRECISION_EXACT && !bf16) {
        return nf__err_set(err, NF_ERR_ARG,
                           "cpu: precision '%s' is not available (the cpu backend runs exact fp32 or bf16-autocast)",
                           nf_precision_name(precision));
    }
    struct nf_cpu_bf16 * ctx = NULL;
    if (bf16) {
        char why[256];
        if (!nf__cpu_bf16_check(why, sizeof(why)))
            return nf__err_set(err, NF_ERR_DEVICE, "cpu: --precision bf16-autocast is not available: %s", why);
        NF_TRY(nf__cpu_bf16_new(&ctx, err));
    }
    nf_backend * be = nf__backend_new(bf16 ? &nf__cpu_bf16_iface : &nf__cpu_iface, ctx, "cpu");
    if (!be) {
        nf__cpu_bf16_free(ctx);
        return nf__err_set(err, NF_ERR_NOMEM, "cpu: out of memory");
    }
    be->precision = precision;
    struct nf_cpu_gemm_info gi;
    nf__cpu_gemm_info(&gi);
    snprintf(be->desc, sizeof(be->desc), "host CPU %s (%s), %d OpenMP threads; GEMM: %s",
             gi.cpu_model[0] ? gi.cpu_model : "(unknown model)", gi.cpu_simd, omp_get_max_threads(), gi.library);
    if (bf16) {
        snprintf(be->precision_detail, sizeof(be->precision_detail),
                 "bf16-autocast (upstream's torch.autocast(\"cpu\", bfloat16)): linear and attention on "
                 "bf16-rounded inputs with fp32 accumulation and bf16-rounded outputs (linear: oneDNN %d.%d bf16 "
                 "matmul, bf16 x bf16 -> f32; attention: fp32 sums of bf16 products, softmax numerators rounded to "
                 "bf16), Mitra's other ops exact fp32 (layer norm, quantiles, residual adds); SpTransformer's "
                 "activations all bf16, every op's output rounded (docs/precision.md); %s",
                 dnnl_version()->major, dnnl_version()->minor, gi.library);
    } else {
        snprintf(
            be->precision_detail, sizeof(be->precision_detail),
            "exact fp32; compiled with -ffp-contract=off -fno-fast-math; erf GELU (correctly rounded erf: double-precision Chebyshev series); softmax exp correctly rounded (double-precision Taylor series); %s",
            gi.library);
    }
    snprintf(be->warning, sizeof(be->warning), "%s", gi.warning);
    *out = be;
    return NF_OK;
}
