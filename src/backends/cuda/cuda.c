/*
 * cuda.c -- the CUDA backend: device selection, memory, transfers, the vtable.
 * The GEMM, LINEAR, ATTENTION and CONV1D host code and the kernel table are in
 * cuda-ops.c, the kernels in cuda-kernels-*.cu.
 *
 * One backend instance = one device, one non-blocking stream, one cuBLAS
 * handle bound to that stream. All work is enqueued on the stream; upload
 * and download synchronize it (they are the only host<->device copies, and
 * the core records each one). Nothing here ever falls back to the host.
 *
 * Precision:
 *  - exact (default): cuBLAS math mode CUBLAS_PEDANTIC_MATH and every GEMM
 *    with compute type CUBLAS_COMPUTE_32F_PEDANTIC (IEEE fp32 multiply-add,
 *    no TF32, no reduced-precision reductions).
 *  - tf32 (opt-in): CUBLAS_TF32_TENSOR_OP_MATH and CUBLAS_COMPUTE_32F_FAST_TF32
 *    for the cuBLAS GEMMs (LINEAR, CONV1D, and both ATTENTION products where
 *    lk or head_dim is too large for nf_k_attention_small); every other kernel,
 *    nf_k_attention_small included, is the same exact fp32 code.
 *  Kernels (cuda-kernels-*.cu) are built with --fmad=false and without
 *  -use_fast_math; NF_CUDA_BUILD_FLAGS records what was used.
 *
 * GEMM layout: tensors are row-major, cuBLAS is column-major. A row-major
 * (r x c) matrix with row stride ld is the column-major (c x r) matrix with
 * leading dimension ld, so y = x·Wᵀ (m x n) is computed as the
 * column-major yᵀ (n x m) = op_T(W as k x n) · xᵀ (k x m).
 */
#include "cuda-impl.h"
#include "nf-cuda-config.h"

#include <stdlib.h>
#include <string.h>

/* ---- errors -------------------------------------------------------------------- */

static int nf__cuda_err(nf_err * err, int code, const char * who, const char * what, cudaError_t e) {
    return nf__err_set(err, code, "%s: %s failed: %s (%s)", who, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* cudaGetDeviceCount's error, with what it usually means */
static const char * nf__cuda_count_hint(cudaError_t e) {
    if (e == cudaErrorInsufficientDriver)
        return "; no NVIDIA driver is loaded on this machine, or it is older than this CUDA runtime";
    if (e == cudaErrorNoDevice) return "; the driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
    return "";
}

static int nf__cuda_set_device(nf_backend * be, nf_err * err) {
    cudaError_t e = cudaSetDevice(nf__cuda(be)->device);
    if (e != cudaSuccess) return nf__cuda_err(err, NF_ERR_DEVICE, be->name, "cudaSetDevice", e);
    return NF_OK;
}

static double nf__gib(size_t b) { return (double) b / (1024.0 * 1024.0 * 1024.0); }
static double nf__mib(size_t b) { return (double) b / (1024.0 * 1024.0); }

static int nf__cuda_malloc(nf_backend * be, void ** p, size_t size, const char * what, nf_err * err) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, size ? size : 1);
    if (e == cudaSuccess) return NF_OK;
    (void) cudaGetLastError(); /* an allocation failure is not sticky: clear it */
    *p = NULL;
    size_t free_b = 0, total_b = 0;
    cudaError_t e2 = cudaMemGetInfo(&free_b, &total_b);
    (void) cudaGetLastError();
    int code = e == cudaErrorMemoryAllocation ? NF_ERR_NOMEM : NF_ERR_DEVICE;
    if (e2 == cudaSuccess) {
        return nf__err_set(
            err, code,
            "%s: cudaMalloc of %zu bytes (%.1f MiB) for %s failed: %s (%s); the device has %zu bytes (%.1f MiB) free of %.2f GiB",
            be->name, size, nf__mib(size), what, cudaGetErrorName(e), cudaGetErrorString(e), free_b, nf__mib(free_b),
            nf__gib(total_b));
    }
    return nf__err_set(err, code, "%s: cudaMalloc of %zu bytes (%.1f MiB) for %s failed: %s (%s)", be->name, size,
                       nf__mib(size), what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Scratch device memory, grown on demand (never shrunk). */
int nf__cuda_scratch(nf_backend * be, size_t bytes, void ** out, nf_err * err) {
    nf_cuda_ctx * c = nf__cuda(be);
    if (bytes > c->scratch_size) {
        if (c->scratch) {
            /* earlier kernels may still read it */
            cudaError_t e = cudaStreamSynchronize(c->stream);
            if (e != cudaSuccess)
                return nf__cuda_err(err, NF_ERR_DEVICE, be->name, "cudaStreamSynchronize (scratch)", e);
            cudaFree(c->scratch);
            c->scratch = NULL;
            c->scratch_size = 0;
        }
        size_t want = (bytes + ((size_t) 1 << 20) - 1) & ~(((size_t) 1 << 20) - 1);
        NF_TRY(nf__cuda_malloc(be, &c->scratch, want, "scratch", err));
        c->scratch_size = want;
        nf__trace_alloc(be, (int64_t) want);
    }
    *out = c->scratch;
    return NF_OK;
}

/* ---- vtable ---------------------------------------------------------------------- */

/* every kernel runs on this backend's device, from a clean error state */
static int nf__cuda_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    NF_TRY(nf__cuda_set_device(be, err));
    /* errors are reported per launch: start clean (a sticky error, after an
     * illegal access say, would reappear at once and be reported here) */
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        return nf__err_set(err, NF_ERR_DEVICE, "op %s (%s) on %s: device already in error before the op: %s (%s)",
                           nf__op_name(op->type), nf__op_label(op), be->name, cudaGetErrorName(e),
                           cudaGetErrorString(e));
    }
    return nf__cuda(be)->bf16 ? nf__cuda_bf16_launch(be, k, op, err) : k->run(be, op, err);
}

static int nf__cuda_buffer_alloc(nf_backend * be, size_t size, void ** handle, nf_err * err) {
    NF_TRY(nf__cuda_set_device(be, err));
    return nf__cuda_malloc(be, handle, size, "a tensor", err);
}

static void nf__cuda_buffer_free(nf_backend * be, void * handle) {
    if (!handle) return;
    (void) cudaSetDevice(nf__cuda(be)->device);
    /* kernels queued on the stream may still use it */
    (void) cudaStreamSynchronize(nf__cuda(be)->stream);
    (void) cudaFree(handle);
}

/* A blocking copy on the backend's stream, for the boundary transfers. */
static int nf__cuda_memcpy(nf_backend * be, void * dst, const void * src, size_t n, enum cudaMemcpyKind kind,
                           const char * dir, nf_err * err) {
    NF_TRY(nf__cuda_set_device(be, err));
    nf_cuda_ctx * c = nf__cuda(be);
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof(what), "cudaMemcpyAsync %s of %zu bytes", dir, n);
        return nf__cuda_err(err, NF_ERR_DEVICE, be->name, what, e);
    }
    return NF_OK;
}

static int nf__cuda_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err) {
    return nf__cuda_memcpy(be, (char *) handle + offs, src, n, cudaMemcpyHostToDevice, "host->device", err);
}

static int nf__cuda_download(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err) {
    return nf__cuda_memcpy(be, dst, (const char *) handle + offs, n, cudaMemcpyDeviceToHost, "device->host", err);
}

static int nf__cuda_buffer_where(nf_backend * be, void * handle, char * out, size_t n, nf_err * err) {
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof(a));
    cudaError_t e = cudaPointerGetAttributes(&a, handle);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return nf__cuda_err(err, NF_ERR_DEVICE, be->name, "cudaPointerGetAttributes", e);
    }
    switch (a.type) {
        case cudaMemoryTypeDevice: snprintf(out, n, "cuda:%d", a.device); break;
        case cudaMemoryTypeManaged: snprintf(out, n, "cuda:%d/managed", a.device); break;
        case cudaMemoryTypeHost:
        case cudaMemoryTypeUnregistered:
        default: snprintf(out, n, "cpu"); break;
    }
    return NF_OK;
}

static int nf__cuda_sync(nf_backend * be, nf_err * err) {
    NF_TRY(nf__cuda_set_device(be, err));
    cudaError_t e = cudaStreamSynchronize(nf__cuda(be)->stream);
    if (e != cudaSuccess) return nf__cuda_err(err, NF_ERR_DEVICE, be->name, "cudaStreamSynchronize", e);
    return NF_OK;
}

static void nf__cuda_ctx_free(nf_cuda_ctx * c) {
    if (!c) return;
    (void) cudaSetDevice(c->device);
    if (c->stream) (void) cudaStreamSynchronize(c->stream);
    if (c->blas) cublasDestroy(c->blas);
    if (c->scratch) cudaFree(c->scratch);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static void nf__cuda_free(nf_backend * be) {
    nf__cuda_ctx_free(nf__cuda(be));
    be->ctx = NULL;
}

static const struct nf_backend_i nf__cuda_iface = {
    .kind = "cuda",
    .free = nf__cuda_free,
    .buffer_alloc = nf__cuda_buffer_alloc,
    .buffer_free = nf__cuda_buffer_free,
    .upload = nf__cuda_upload,
    .download = nf__cuda_download,
    .buffer_where = nf__cuda_buffer_where,
    .kernels = nf__cuda_kernels,
    .launch = nf__cuda_launch,
    .sync = nf__cuda_sync,
};

/* ---- init / list ------------------------------------------------------------------ */

static void nf__cuda_versions(char * out, size_t n) {
    int rt = 0, drv = 0;
    (void) cudaRuntimeGetVersion(&rt);
    (void) cudaDriverGetVersion(&drv);
    (void) cudaGetLastError();
    snprintf(out, n, "runtime %d.%d, driver %d.%d", rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
}

int nf__backend_cuda_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    const int precision = opts->precision;
    char name[32];
    snprintf(name, sizeof(name), "cuda:%d", index);
    if (precision != NF_PRECISION_EXACT && precision != NF_PRECISION_TF32 && precision != NF_PRECISION_BF16_AUTOCAST) {
        return nf__err_set(err, NF_ERR_ARG, "%s: unknown precision mode %d", name, precision);
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return nf__err_set(err, NF_ERR_DEVICE, "%s: cudaGetDeviceCount failed: %s (%s)%s", name, cudaGetErrorName(e),
                           cudaGetErrorString(e), nf__cuda_count_hint(e));
    }
    if (count <= 0) return nf__err_set(err, NF_ERR_DEVICE, "%s: no CUDA device is present", name);
    if (index < 0 || index >= count) {
        if (count == 1)
            return nf__err_set(err, NF_ERR_DEVICE, "%s: no such device: 1 CUDA device is present (cuda:0)", name);
        return nf__err_set(err, NF_ERR_DEVICE, "%s: no such device: %d CUDA devices are present (cuda:0 .. cuda:%d)",
                           name, count, count - 1);
    }
    e = cudaSetDevice(index);
    if (e != cudaSuccess) return nf__cuda_err(err, NF_ERR_DEVICE, name, "cudaSetDevice", e);
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof(prop));
    e = cudaGetDeviceProperties(&prop, index);
    if (e != cudaSuccess) return nf__cuda_err(err, NF_ERR_DEVICE, name, "cudaGetDeviceProperties", e);
    {
        const char * kname = NULL;
        e = nf__cuda_probe(&kname);
        if (e != cudaSuccess) {
            (void) cudaGetLastError();
            return nf__err_set(err, NF_ERR_DEVICE,
                               "%s: %s (sm_%d%d) cannot run this build's kernels (%s): %s (%s); built for %s", name,
                               prop.name, prop.major, prop.minor, kname ? kname : "?", cudaGetErrorName(e),
                               cudaGetErrorString(e), NF_CUDA_ARCHS);
        }
    }

    nf_cuda_ctx * c = calloc(1, sizeof(*c));
    if (!c) return nf__err_set(err, NF_ERR_NOMEM, "%s: out of host memory", name);
    c->device = index;
    c->chunk_floats = NF_CUDA_CHUNK_FLOATS_DEFAULT;
    {
        /* cuda.chunk_floats=N (tests): smaller work buffers (attention, LINEAR, CONV1D) */
        const char * cf = nf__opt(opts, "cuda.chunk_floats");
        char * end = NULL;
        const long long v = cf ? strtoll(cf, &end, 10) : 0;
        if (cf && (!cf[0] || *end || v < 1)) {
            nf__cuda_ctx_free(c);
            return nf__err_set(err, NF_ERR_ARG, "%s: cuda.chunk_floats=%s: expected a positive integer", name, cf);
        }
        if (cf && v < c->chunk_floats) c->chunk_floats = v;
        /* cuda.attention=cublas: every ATTENTION through cuBLAS */
        const char * am = nf__opt(opts, "cuda.attention");
        if (am && strcmp(am, "auto") != 0 && strcmp(am, "cublas") != 0) {
            nf__cuda_ctx_free(c);
            return nf__err_set(err, NF_ERR_ARG, "%s: cuda.attention=%s: expected \"auto\" or \"cublas\"", name, am);
        }
        c->attention_small = !(am && strcmp(am, "cublas") == 0);
    }
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        c->stream = NULL;
        nf__cuda_ctx_free(c);
        return nf__cuda_err(err, NF_ERR_DEVICE, name, "cudaStreamCreateWithFlags", e);
    }
#ifndef NF_CUDA_EMU
    {
        int lrc = nf__cublas_load(name, err);
        if (lrc != NF_OK) {
            nf__cuda_ctx_free(c);
            return lrc;
        }
    }
#endif
    cublasStatus_t s = cublasCreate(&c->blas);
    const char * what = "cublasCreate";
    if (s != CUBLAS_STATUS_SUCCESS) c->blas = NULL;
    if (s == CUBLAS_STATUS_SUCCESS) {
        what = "cublasSetStream";
        s = cublasSetStream(c->blas, c->stream);
    }
    const int tf32 = precision == NF_PRECISION_TF32;
    c->bf16 = precision == NF_PRECISION_BF16_AUTOCAST;
    if (s == CUBLAS_STATUS_SUCCESS) {
        /* bf16-autocast: the default math mode (bf16 tensor cores, fp32 accumulation) */
        what = tf32      ? "cublasSetMathMode(CUBLAS_TF32_TENSOR_OP_MATH)"
               : c->bf16 ? "cublasSetMathMode(CUBLAS_DEFAULT_MATH)"
                         : "cublasSetMathMode(CUBLAS_PEDANTIC_MATH)";
        s = cublasSetMathMode(c->blas, tf32      ? CUBLAS_TF32_TENSOR_OP_MATH
                                       : c->bf16 ? CUBLAS_DEFAULT_MATH
                                                 : CUBLAS_PEDANTIC_MATH);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        what = "cublasSetAtomicsMode(CUBLAS_ATOMICS_NOT_ALLOWED)";
        s = cublasSetAtomicsMode(c->blas, CUBLAS_ATOMICS_NOT_ALLOWED);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        int rc = nf__err_set(err, NF_ERR_DEVICE, "%s: %s failed: %s (%s)", name, what, cublasGetStatusName(s),
                             cublasGetStatusString(s));
        nf__cuda_ctx_free(c);
        return rc;
    }
    c->compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
    c->compute_name = tf32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F_PEDANTIC";
    if (c->bf16) c->compute_name = "CUBLAS_COMPUTE_32F on CUDA_R_16BF operands (LINEAR)";

    nf_backend * be = nf__backend_new(&nf__cuda_iface, c, name);
    if (!be) {
        nf__cuda_ctx_free(c);
        return nf__err_set(err, NF_ERR_NOMEM, "%s: out of host memory", name);
    }
    be->precision = precision;
    /* 16384 tokens x 512 per chunk: the row-chunk GEMMs fill the GPU many
     * times over (a 4096-token chunk is about one wave of 128x128 tiles) */
    be->chunk_tokens = 16384;
    snprintf(be->desc, sizeof(be->desc), "%s, %.1f GiB, sm_%d%d, %d SMs%s", prop.name, nf__gib(prop.totalGlobalMem),
             prop.major, prop.minor, prop.multiProcessorCount, NF_CUDA_EMU_NOTE);

    const char * ovr = getenv("NVIDIA_TF32_OVERRIDE");
    int blas_ver = 0;
    (void) cublasGetVersion(c->blas, &blas_ver);
    char vers[64], att[128];
    nf__cuda_versions(vers, sizeof(vers));
    if (c->attention_small) {
        snprintf(att, sizeof(att), "one fp32 kernel where lk <= %d and head_dim <= %d, else cuBLAS", NF_CUDA_ATT_MAX_LK,
                 NF_CUDA_ATT_MAX_HD);
    } else {
        snprintf(att, sizeof(att), "cuBLAS for every op (cuda.attention=cublas)");
    }
    if (c->bf16) {
        snprintf(be->precision_detail, sizeof(be->precision_detail),
                 "bf16-autocast (upstream's torch.autocast(\"cpu\", bfloat16)): linear by cublasGemmEx on bf16 "
                 "operands (x and W rounded to bf16, nearest even) with CUBLAS_COMPUTE_32F and fp32 output, its "
                 "bias, activation and output rounded to bf16 as torch does; attention and the Linear(1, D) "
                 "embeddings as fp32 kernels with bf16 rounding (q/k/v, softmax numerators, outputs); every other "
                 "op exact fp32; cuBLAS %d math mode CUBLAS_DEFAULT_MATH; kernels nvcc %s; CUDA %s",
                 blas_ver, NF_CUDA_BUILD_FLAGS, vers);
        *out = be;
        return NF_OK;
    }
    snprintf(be->precision_detail, sizeof(be->precision_detail),
             "%s; cuBLAS %d math mode %s, GEMM compute type %s; NVIDIA_TF32_OVERRIDE=%s%s; "
             "kernels: exact fp32 (erff/expf/sqrtf, IEEE div), nvcc %s; attention: %s; CUDA %s",
             tf32 ? "tf32: cuBLAS GEMMs on TF32 tensor cores (inputs rounded to 10 mantissa bits), other ops exact fp32"
                  : "exact fp32 (no TF32)",
             blas_ver, tf32 ? "CUBLAS_TF32_TENSOR_OP_MATH" : "CUBLAS_PEDANTIC_MATH", c->compute_name,
             ovr ? ovr : "unset",
             (tf32 && ovr && strcmp(ovr, "0") == 0) ? " (the driver disables TF32: GEMMs run in fp32)" : "",
             NF_CUDA_BUILD_FLAGS, att, vers);
    *out = be;
    return NF_OK;
}

void nf__backend_cuda_list(FILE * f) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        fprintf(f, "cuda: compiled in, no device (%s: %s%s)\n", cudaGetErrorName(e), cudaGetErrorString(e),
                nf__cuda_count_hint(e));
        return;
    }
    if (count <= 0) {
        fprintf(f, "cuda: compiled in, no device\n");
        return;
    }
    char vers[64];
    nf__cuda_versions(vers, sizeof(vers));
    fprintf(f, "cuda: compiled in (%s; kernels for %s), %d device%s%s\n", vers, NF_CUDA_ARCHS, count,
            count == 1 ? "" : "s", NF_CUDA_EMU_NOTE);
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp prop;
        memset(&prop, 0, sizeof(prop));
        e = cudaGetDeviceProperties(&prop, i);
        if (e != cudaSuccess) {
            (void) cudaGetLastError();
            fprintf(f, "  cuda:%d  (cudaGetDeviceProperties failed: %s)\n", i, cudaGetErrorName(e));
            continue;
        }
        fprintf(f, "  cuda:%d  %s  %.1f GiB  sm_%d%d  %d SMs\n", i, prop.name, nf__gib(prop.totalGlobalMem), prop.major,
                prop.minor, prop.multiProcessorCount);
    }
}