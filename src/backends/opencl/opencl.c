/*
 * opencl.c -- the OpenCL backend ("opencl:N").
 *
 * One backend instance = one OpenCL device, one context, one in-order queue,
 * one program built from the embedded kernels.cl. Every op runs on that
 * device; there is no host fallback anywhere in this file (an op the device
 * cannot run is NF_ERR_UNSUPPORTED / NF_ERR_DEVICE, never a silent copy).
 *
 * Device numbering: N counts the devices of all platforms, platforms in the
 * order clGetPlatformIDs returns them, devices in the order clGetDeviceIDs
 * (CL_DEVICE_TYPE_ALL) returns them.
 *
 * Precision: the program is built without any relaxed-math option (see
 * build_options()); kernels.cl turns FP_CONTRACT off. The options used are
 * recorded in be->precision_detail.
 *
 * Program binary cache: $NOFALL_CACHE_DIR/opencl, else
 * $XDG_CACHE_HOME/nofall/opencl, else ~/.cache/nofall/opencl, file
 * <64-bit FNV-1a of source+options+device+driver>.bin. Any cache problem
 * silently means "build from source" (it is a build cache, not a compute
 * fallback). NOFALL_OPENCL_NO_CACHE=1 disables it.
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
 *
 * Test hook: NOFALL_OPENCL_TEST_BREAK_BUILD=1 appends a line with a syntax
 * error to the program source, so that tests can check that a kernel build
 * failure is reported as NF_ERR_DEVICE with the build log.
 */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif

#include "nf-impl.h"
#include "opencl-kernels.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#ifdef NF_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* ---- error names ------------------------------------------------------------ */

static const char * cl_err_name(cl_int e)
{
    switch (e) {
#define E(x) case x: return #x
        E(CL_SUCCESS);
        E(CL_DEVICE_NOT_FOUND);
        E(CL_DEVICE_NOT_AVAILABLE);
        E(CL_COMPILER_NOT_AVAILABLE);
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE);
        E(CL_OUT_OF_RESOURCES);
        E(CL_OUT_OF_HOST_MEMORY);
        E(CL_PROFILING_INFO_NOT_AVAILABLE);
        E(CL_MEM_COPY_OVERLAP);
        E(CL_IMAGE_FORMAT_MISMATCH);
        E(CL_IMAGE_FORMAT_NOT_SUPPORTED);
        E(CL_BUILD_PROGRAM_FAILURE);
        E(CL_MAP_FAILURE);
        E(CL_MISALIGNED_SUB_BUFFER_OFFSET);
        E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        E(CL_COMPILE_PROGRAM_FAILURE);
        E(CL_LINKER_NOT_AVAILABLE);
        E(CL_LINK_PROGRAM_FAILURE);
        E(CL_DEVICE_PARTITION_FAILED);
        E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
        E(CL_INVALID_VALUE);
        E(CL_INVALID_DEVICE_TYPE);
        E(CL_INVALID_PLATFORM);
        E(CL_INVALID_DEVICE);
        E(CL_INVALID_CONTEXT);
        E(CL_INVALID_QUEUE_PROPERTIES);
        E(CL_INVALID_COMMAND_QUEUE);
        E(CL_INVALID_HOST_PTR);
        E(CL_INVALID_MEM_OBJECT);
        E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
        E(CL_INVALID_IMAGE_SIZE);
        E(CL_INVALID_SAMPLER);
        E(CL_INVALID_BINARY);
        E(CL_INVALID_BUILD_OPTIONS);
        E(CL_INVALID_PROGRAM);
        E(CL_INVALID_PROGRAM_EXECUTABLE);
        E(CL_INVALID_KERNEL_NAME);
        E(CL_INVALID_KERNEL_DEFINITION);
        E(CL_INVALID_KERNEL);
        E(CL_INVALID_ARG_INDEX);
        E(CL_INVALID_ARG_VALUE);
        E(CL_INVALID_ARG_SIZE);
        E(CL_INVALID_KERNEL_ARGS);
        E(CL_INVALID_WORK_DIMENSION);
        E(CL_INVALID_WORK_GROUP_SIZE);
        E(CL_INVALID_WORK_ITEM_SIZE);
        E(CL_INVALID_GLOBAL_OFFSET);
        E(CL_INVALID_EVENT_WAIT_LIST);
        E(CL_INVALID_EVENT);
        E(CL_INVALID_OPERATION);
        E(CL_INVALID_GL_OBJECT);
        E(CL_INVALID_BUFFER_SIZE);
        E(CL_INVALID_MIP_LEVEL);
        E(CL_INVALID_GLOBAL_WORK_SIZE);
        E(CL_INVALID_PROPERTY);
        E(CL_INVALID_IMAGE_DESCRIPTOR);
        E(CL_INVALID_COMPILER_OPTIONS);
        E(CL_INVALID_LINKER_OPTIONS);
        E(CL_INVALID_DEVICE_PARTITION_COUNT);
        E(CL_PLATFORM_NOT_FOUND_KHR);
#undef E
        default: return "unknown OpenCL error";
    }
}

/* Every OpenCL call goes through this: on failure return an nf error naming
 * the call (what) and the CL error by name and number. */
#define CL_CHECK(call, err, what)                                                   \
    do {                                                                            \
        cl_int nf__cl_rc = (call);                                                  \
        if (nf__cl_rc != CL_SUCCESS) {                                              \
            return nf__err_set((err), cl_rc_code(nf__cl_rc), "%s: %s (%d)", (what), \
                               cl_err_name(nf__cl_rc), (int)nf__cl_rc);             \
        }                                                                           \
    } while (0)

static int cl_rc_code(cl_int e)
{
    switch (e) {
        case CL_MEM_OBJECT_ALLOCATION_FAILURE:
        case CL_OUT_OF_HOST_MEMORY:
        case CL_INVALID_BUFFER_SIZE:
            return NF_ERR_NOMEM;
        default:
            return NF_ERR_DEVICE;
    }
}

/* ---- state -------------------------------------------------------------------- */

/* the program's kernels: one entry each (enum value, kernel name in kernels.cl) */
#define CL_KERNELS(X)                                                               \
    X(K_QUANTILE_SORT, "nf_quantile_sort") X(K_QUANTILE_INTERP, "nf_quantile_interp") \
    X(K_BUCKETIZE_U, "nf_bucketize_u") X(K_BUCKETIZE_STATS, "nf_bucketize_stats")     \
    X(K_BUCKETIZE_Z, "nf_bucketize_z")                                              \
    X(K_EMBED_FEATURES, "nf_embed_features")                                        \
    X(K_LABEL_CLASS, "nf_label_class") X(K_LABEL_VALUE, "nf_label_value")           \
    X(K_LABEL_MASK, "nf_label_mask")                                                \
    X(K_LAYER_NORM, "nf_layer_norm")                                                \
    X(K_LINEAR, "nf_linear") X(K_LINEAR_EPILOGUE, "nf_linear_epilogue")             \
    X(K_ATTENTION, "nf_attention")

enum {
#define X(id, kname) id,
    CL_KERNELS(X)
#undef X
    K_COUNT
};
static const char * const k_names[K_COUNT] = {
#define X(id, kname) kname,
    CL_KERNELS(X)
#undef X
};

struct nf_cl {
    nf_backend     * be;        /* the backend this context serves (for counters) */
    int              index;
    char             name[32];
    cl_platform_id   platform;
    cl_device_id     device;
    cl_context       context;
    cl_command_queue queue;
    cl_program       program;
    cl_kernel        k[K_COUNT];
    size_t           kwg[K_COUNT];     /* CL_KERNEL_WORK_GROUP_SIZE */
    int              fp64;
    int              cr_divsqrt;
    size_t           max_wg;
    cl_ulong         max_alloc;
    size_t           ln_wg;            /* LAYER_NORM work-group (power of two) */
    size_t           sort_wg;          /* QUANTILE sort work-group (power of two) */
    cl_mem           scratch;
    size_t           scratch_size;
    struct nf_cl_lin_geo lin;          /* nf_linear geometry (built-in GEMM) */
    int              use_clblast;      /* LINEAR via CLBlast SGEMM + nf_linear_epilogue */
    char             gemm_desc[160];
    cl_mem           gemm_tmp;         /* CLBlast's temporary buffer */
    size_t           gemm_tmp_size;
    /* the backend options (struct nf_backend_opts), copied at init */
    char             cache_dir[1024];  /* "" = no binary cache */
    char             opt_gemm[16];     /* opencl.gemm: "", "own", "clblast" */
    char             opt_geometry[64]; /* opencl.gemm_geometry */
    int              opt_break_build;  /* opencl.test_break_build=1 */
};

/* ---- device enumeration ------------------------------------------------------- */

struct cl_dev_ref {
    cl_platform_id platform;
    cl_device_id   device;
};

/* All (platform, device) pairs in "opencl:N" order. On "none found" returns
 * NF_ERR_DEVICE with a message naming the failing call. *out is malloc'ed. */
static int cl_enumerate(struct cl_dev_ref ** out, int * n_out, nf_err * err)
{
    *out = NULL;
    *n_out = 0;
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(0, NULL, &np);
    if (rc != CL_SUCCESS || np == 0) {
        if (rc == CL_SUCCESS) {
            rc = CL_PLATFORM_NOT_FOUND_KHR;
        }
        return nf__err_set(err, NF_ERR_DEVICE, "no OpenCL platform found (clGetPlatformIDs: %s)",
                           cl_err_name(rc));
    }
    cl_platform_id * plats = calloc(np, sizeof(*plats));
    if (!plats) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    rc = clGetPlatformIDs(np, plats, NULL);
    if (rc != CL_SUCCESS) {
        free(plats);
        return nf__err_set(err, NF_ERR_DEVICE, "no OpenCL platform found (clGetPlatformIDs: %s)",
                           cl_err_name(rc));
    }
    struct cl_dev_ref * refs = NULL;
    int n = 0;
    cl_int last = CL_DEVICE_NOT_FOUND;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        rc = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (rc != CL_SUCCESS || nd == 0) {
            last = rc == CL_SUCCESS ? CL_DEVICE_NOT_FOUND : rc;
            continue;
        }
        cl_device_id * devs = calloc(nd, sizeof(*devs));
        struct cl_dev_ref * nr = realloc(refs, (size_t)(n + (int)nd) * sizeof(*refs));
        if (!devs || !nr) {
            free(devs);
            free(nr ? nr : refs);
            free(plats);
            return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
        }
        refs = nr;
        rc = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL);
        if (rc != CL_SUCCESS) {
            last = rc;
            free(devs);
            continue;
        }
        for (cl_uint d = 0; d < nd; d++) {
            refs[n].platform = plats[p];
            refs[n].device   = devs[d];
            n++;
        }
        free(devs);
    }
    free(plats);
    if (n == 0) {
        free(refs);
        return nf__err_set(err, NF_ERR_DEVICE,
                           "no OpenCL device found (%u platform%s; clGetDeviceIDs: %s)",
                           (unsigned)np, np == 1 ? "" : "s", cl_err_name(last));
    }
    *out = refs;
    *n_out = n;
    return NF_OK;
}

static void dev_str(cl_device_id d, cl_device_info what, char * out, size_t n)
{
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, n, out, NULL) != CL_SUCCESS) {
        snprintf(out, n, "?");
    }
    out[n - 1] = '\0';
}

static void plat_str(cl_platform_id p, cl_platform_info what, char * out, size_t n)
{
    out[0] = '\0';
    if (clGetPlatformInfo(p, what, n, out, NULL) != CL_SUCCESS) {
        snprintf(out, n, "?");
    }
    out[n - 1] = '\0';
}

/* ---- program binary cache ----------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void * data, size_t n)
{
    const unsigned char * p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t fnv1a_str(uint64_t h, const char * s)
{
    return fnv1a(h, s, strlen(s) + 1);   /* include the NUL as a separator */
}

/* mkdir -p; returns 0 on success */
static int mkdirs(char * path)
{
    for (char * p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                *p = '/';
                return -1;
            }
            *p = '/';
        }
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -1;
    }
    return 0;
}

#define NF_CL_CACHE_MAGIC "NFCLBIN1"

/* Try to load a cached binary and build it. Returns the program or NULL. */
static cl_program cache_load(struct nf_cl * c, const char * path, uint64_t hash, const char * opts)
{
    FILE * f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char magic[8];
    uint64_t h = 0, len = 0;
    unsigned char * bin = NULL;
    cl_program prog = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, NF_CL_CACHE_MAGIC, 8) != 0 ||
        fread(&h, sizeof(h), 1, f) != 1 || h != hash ||
        fread(&len, sizeof(len), 1, f) != 1 || len == 0 || len > ((uint64_t)1 << 30)) {
        goto done;
    }
    bin = malloc((size_t)len);
    if (!bin || fread(bin, 1, (size_t)len, f) != (size_t)len) {
        goto done;
    }
    {
        size_t sz = (size_t)len;
        const unsigned char * bp = bin;
        cl_int st = CL_SUCCESS, rc = CL_SUCCESS;
        prog = clCreateProgramWithBinary(c->context, 1, &c->device, &sz, &bp, &st, &rc);
        if (rc != CL_SUCCESS || st != CL_SUCCESS) {
            if (prog) {
                clReleaseProgram(prog);
            }
            prog = NULL;
            goto done;
        }
        if (clBuildProgram(prog, 1, &c->device, opts, NULL, NULL) != CL_SUCCESS) {
            clReleaseProgram(prog);
            prog = NULL;
        }
    }
done:
    free(bin);
    fclose(f);
    return prog;
}

/* Best effort: write the built program's binary (tmp file + rename). */
static void cache_store(struct nf_cl * c, const char * dir, const char * path, uint64_t hash)
{
    size_t sz = 0;
    if (clGetProgramInfo(c->program, CL_PROGRAM_BINARY_SIZES, sizeof(sz), &sz, NULL) != CL_SUCCESS ||
        sz == 0) {
        return;
    }
    unsigned char * bin = malloc(sz);
    if (!bin) {
        return;
    }
    unsigned char * bins[1] = { bin };
    if (clGetProgramInfo(c->program, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) != CL_SUCCESS) {
        free(bin);
        return;
    }
    char d[1024];
    snprintf(d, sizeof(d), "%s", dir);
    char tmp[1200];
    if (mkdirs(d) != 0 ||
        snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        free(bin);
        return;
    }
    FILE * f = fopen(tmp, "wb");
    if (!f) {
        free(bin);
        return;
    }
    uint64_t len = sz;
    int ok = fwrite(NF_CL_CACHE_MAGIC, 1, 8, f) == 8 &&
             fwrite(&hash, sizeof(hash), 1, f) == 1 &&
             fwrite(&len, sizeof(len), 1, f) == 1 &&
             fwrite(bin, 1, sz, f) == sz;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
    }
    free(bin);
}

/* ---- init / free -------------------------------------------------------------- */

static void cl_ctx_free(struct nf_cl * c)
{
    if (!c) {
        return;
    }
    if (c->queue) {
        clFinish(c->queue);
    }
    if (c->scratch) {
        clReleaseMemObject(c->scratch);
    }
    if (c->gemm_tmp) {
        clReleaseMemObject(c->gemm_tmp);
    }
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        /* CLBlast's program cache holds references to our context */
        CLBlastClearCache();
    }
#endif
    for (int i = 0; i < K_COUNT; i++) {
        if (c->k[i]) {
            clReleaseKernel(c->k[i]);
        }
    }
    if (c->program) {
        clReleaseProgram(c->program);
    }
    if (c->queue) {
        clReleaseCommandQueue(c->queue);
    }
    if (c->context) {
        clReleaseContext(c->context);
    }
    free(c);
}

static void be_free(nf_backend * be)
{
    cl_ctx_free(be->ctx);
    be->ctx = NULL;
}

/* Build options. Never: -cl-fast-relaxed-math, -cl-unsafe-math-optimizations,
 * -cl-mad-enable, -cl-finite-math-only (nor -cl-denorms-are-zero). */
static void build_options(const struct nf_cl * c, const char * clc_version, char * out, size_t n)
{
    /* "OpenCL C 1.2 ..." -> major.minor */
    int maj = 1, min = 0;
    if (sscanf(clc_version, "OpenCL C %d.%d", &maj, &min) != 2) {
        maj = 1;
        min = 0;
    }
    out[0] = '\0';
    size_t w = 0;
#define APPEND(s) do { int nf__w = snprintf(out + w, n - w, "%s%s", w ? " " : "", (s)); \
                       if (nf__w > 0 && (size_t)nf__w < n - w) w += (size_t)nf__w; } while (0)
    if (maj > 1 || (maj == 1 && min >= 2)) {
        APPEND("-cl-std=CL1.2");
    }
    if (c->cr_divsqrt) {
        APPEND("-cl-fp32-correctly-rounded-divide-sqrt");
        APPEND("-DNF_CR_DIVSQRT=1");
    }
    if (c->fp64) {
        APPEND("-DNF_FP64=1");
    }
    char geo[160];
    snprintf(geo, sizeof(geo), "-DNF_LIN_TM=%d -DNF_LIN_TN=%d -DNF_LIN_TK=%d -DNF_LIN_WX=%d -DNF_LIN_WY=%d -DNF_LIN_VEC=%d",
             c->lin.tm, c->lin.tn, c->lin.tk, c->lin.wx, c->lin.wy, c->lin.vec);
    APPEND(geo);
#undef APPEND
}

static int build_program(struct nf_cl * c, const char * opts, char * dev_name, char * drv,
                         char * plat_name, nf_err * err)
{
    /* source (+ the test hook's broken line) */
    const int broken = c->opt_break_build;
    static const char broken_line[] =
        "\n/* opencl.test_break_build=1 */ this is not OpenCL C ;\n";
    size_t len = nf__opencl_kernels_src_len + (broken ? sizeof(broken_line) - 1 : 0);
    char * src = malloc(len + 1);
    if (!src) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    memcpy(src, nf__opencl_kernels_src, nf__opencl_kernels_src_len);
    if (broken) {
        memcpy(src + nf__opencl_kernels_src_len, broken_line, sizeof(broken_line) - 1);
    }
    src[len] = '\0';

    uint64_t hash = 1469598103934665603ULL;
    hash = fnv1a(hash, src, len);
    hash = fnv1a_str(hash, opts);
    hash = fnv1a_str(hash, dev_name);
    hash = fnv1a_str(hash, drv);
    hash = fnv1a_str(hash, plat_name);

    char path[1100];
    const char * dir = c->cache_dir;
    const int have_cache = dir[0] &&
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".bin", dir, hash) < (int)sizeof(path);
    if (have_cache) {
        c->program = cache_load(c, path, hash, opts);
        if (c->program) {
            free(src);
            return NF_OK;
        }
    }

    cl_int rc = CL_SUCCESS;
    const char * srcs[1] = { src };
    c->program = clCreateProgramWithSource(c->context, 1, srcs, &len, &rc);
    free(src);
    CL_CHECK(rc, err, "clCreateProgramWithSource");
    rc = clBuildProgram(c->program, 1, &c->device, opts, NULL, NULL);
    if (rc != CL_SUCCESS) {
        size_t log_len = 0;
        char * log = NULL;
        if (clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_len) ==
                CL_SUCCESS && log_len > 0 && (log = malloc(log_len + 1)) != NULL) {
            if (clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, log_len, log,
                                      NULL) != CL_SUCCESS) {
                log[0] = '\0';
            }
            log[log_len] = '\0';
        }
        /* keep the tail of the log: the message buffer is 4 KiB */
        const char * shown = log ? log : "(no build log)";
        size_t sl = strlen(shown);
        if (sl > 3000) {
            shown += sl - 3000;
        }
        nf__err_set(err, NF_ERR_DEVICE, "kernel build failed (clBuildProgram: %s (%d), options \"%s\")%s:\n%s",
                    cl_err_name(rc), (int)rc, opts, broken ? " [opencl.test_break_build=1]" : "",
                    shown);
        free(log);
        return NF_ERR_DEVICE;
    }
    if (have_cache) {
        cache_store(c, dir, path, hash);
    }
    return NF_OK;
}

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v) {
        p *= 2;
    }
    return p;
}

#ifdef NF_HAVE_CLBLAST
static int contains_ci(const char * hay, const char * needle)
{
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
static int choose_gemm(struct nf_cl * c, nf_err * err)
{
    const char * force = c->opt_gemm[0] ? c->opt_gemm : NULL;
    if (force && strcmp(force, "own") != 0 && strcmp(force, "clblast") != 0) {
        return nf__err_set(err, NF_ERR_ARG, "opencl.gemm=%s: expected \"own\" or \"clblast\"", force);
    }
#ifdef NF_HAVE_CLBLAST
    char vendor[256];
    dev_str(c->device, CL_DEVICE_VENDOR, vendor, sizeof(vendor));
    cl_device_type type = 0;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_TYPE)");
    const char * why_not = NULL;
    if ((type & CL_DEVICE_TYPE_GPU) && (contains_ci(vendor, "amd") || contains_ci(vendor, "advanced micro devices") ||
                                        contains_ci(vendor, "qualcomm"))) {
        why_not = "CLBlast would use the non-IEEE mad() on this GPU";
    }
    const char * cbo = getenv("CLBLAST_BUILD_OPTIONS");
    if (cbo && (strstr(cbo, "-cl-fast-relaxed-math") || strstr(cbo, "-cl-unsafe-math-optimizations") ||
                strstr(cbo, "-cl-mad-enable") || strstr(cbo, "-cl-finite-math-only") ||
                strstr(cbo, "-cl-denorms-are-zero"))) {
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

static const struct nf_backend_i cl_iface;

static int cl_init(struct nf_cl * c, int index, nf_backend ** out, nf_err * err)
{
    struct cl_dev_ref * refs = NULL;
    int n = 0;
    NF_TRY(cl_enumerate(&refs, &n, err));
    if (index < 0 || index >= n) {
        free(refs);
        return nf__err_set(err, NF_ERR_DEVICE, "opencl:%d: no such device (%d OpenCL device%s found)",
                           index, n, n == 1 ? "" : "s");
    }
    c->platform = refs[index].platform;
    c->device   = refs[index].device;
    free(refs);

    char dev_name[256], drv[128], plat_name[256], clc[128], ext[8192];
    dev_str(c->device, CL_DEVICE_NAME, dev_name, sizeof(dev_name));
    dev_str(c->device, CL_DRIVER_VERSION, drv, sizeof(drv));
    dev_str(c->device, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof(clc));
    dev_str(c->device, CL_DEVICE_EXTENSIONS, ext, sizeof(ext));
    plat_str(c->platform, CL_PLATFORM_NAME, plat_name, sizeof(plat_name));

    cl_bool avail = CL_FALSE, compiler = CL_FALSE;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_AVAILABLE, sizeof(avail), &avail, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_AVAILABLE)");
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof(compiler), &compiler, NULL),
             err, "clGetDeviceInfo(CL_DEVICE_COMPILER_AVAILABLE)");
    if (!avail) {
        return nf__err_set(err, NF_ERR_DEVICE, "%s (%s) is not available (CL_DEVICE_AVAILABLE = false)",
                           c->name, dev_name);
    }
    if (!compiler) {
        return nf__err_set(err, NF_ERR_DEVICE, "%s (%s) has no OpenCL C compiler (CL_COMPILER_NOT_AVAILABLE)",
                           c->name, dev_name);
    }
    cl_device_fp_config fp = 0;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp), &fp, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_SINGLE_FP_CONFIG)");
    c->cr_divsqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    c->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(c->max_wg), &c->max_wg, NULL),
             err, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)");
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(c->max_alloc), &c->max_alloc,
                             NULL), err, "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)");

    cl_int rc = CL_SUCCESS;
    cl_context_properties props[] = { CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0 };
    c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &rc);
    CL_CHECK(rc, err, "clCreateContext");
    /* in-order queue; no profiling (the core times ops with sync + wall clock) */
    c->queue = clCreateCommandQueue(c->context, c->device, 0, &rc);
    CL_CHECK(rc, err, "clCreateCommandQueue");

    cl_device_type dtype = 0;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof(dtype), &dtype, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_TYPE)");
    c->lin = nf__cl_lin_geo((dtype & CL_DEVICE_TYPE_CPU) != 0);
    /* opencl.gemm_geometry="TM TN TK WX WY VEC" overrides the built-in GEMM's
     * geometry (tests use it to run the GPU geometry on a CPU device) */
    const char * geo = c->opt_geometry;
    if (geo && geo[0]) {
        struct nf_cl_lin_geo g;
        if (sscanf(geo, "%d %d %d %d %d %d", &g.tm, &g.tn, &g.tk, &g.wx, &g.wy, &g.vec) != 6 ||
            g.tm < 1 || g.tn < 1 || g.tk < 1 || g.wx < 1 || g.wy < 1 || g.tm % g.wy || g.tn % g.wx ||
            (g.vec != 0 && g.vec != 1) || (g.vec && g.tn != 4 * g.wx)) {
            return nf__err_set(err, NF_ERR_ARG, "opencl.gemm_geometry=\"%s\": expected \"TM TN TK WX WY VEC\" "
                               "with TM %% WY == 0, TN %% WX == 0, VEC 0/1 and TN == 4*WX when VEC", geo);
        }
        c->lin = g;
    }
    NF_TRY(choose_gemm(c, err));

    char opts[512];
    build_options(c, clc, opts, sizeof(opts));
    NF_TRY(build_program(c, opts, dev_name, drv, plat_name, err));

    for (int i = 0; i < K_COUNT; i++) {
        c->k[i] = clCreateKernel(c->program, k_names[i], &rc);
        char what[96];
        snprintf(what, sizeof(what), "clCreateKernel(%s)", k_names[i]);
        CL_CHECK(rc, err, what);
        CL_CHECK(clGetKernelWorkGroupInfo(c->k[i], c->device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof(c->kwg[i]), &c->kwg[i], NULL), err,
                 "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
    }
    c->ln_wg   = pow2_floor(c->kwg[K_LAYER_NORM] < 256 ? c->kwg[K_LAYER_NORM] : 256);
    c->sort_wg = pow2_floor(c->kwg[K_QUANTILE_SORT] < 256 ? c->kwg[K_QUANTILE_SORT] : 256);

    nf_backend * be = nf__backend_new(&cl_iface, c, c->name);
    if (!be) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    c->be = be;
    be->precision = NF_PRECISION_EXACT;
    snprintf(be->desc, sizeof(be->desc), "%s (%s, %s)", dev_name, plat_name, drv);
    snprintf(be->precision_detail, sizeof(be->precision_detail),
             "opencl build options: %s; precision exact (no relaxed/fast math, FP_CONTRACT OFF, "
             "div/sqrt correctly rounded%s, exp/erf %s); %s",
             opts[0] ? opts : "(none)",
             c->cr_divsqrt ? "" : (c->fp64 ? " via fp64" : " NOT guaranteed: device lacks "
                                   "CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT and fp64"),
             c->fp64 ? "via fp64, rounded once" : "OpenCL float built-ins (<= 3 / 16 ulp)", c->gemm_desc);
    *out = be;
    return NF_OK;
}

int nf__backend_opencl_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err)
{
    *out = NULL;
    const int precision = opts->precision;
    if (precision == NF_PRECISION_TF32) {
        return nf__err_set(err, NF_ERR_ARG, "opencl:%d: precision tf32 is a CUDA-only mode "
                           "(the OpenCL backend is exact fp32 only)", index);
    }
    if (precision != NF_PRECISION_EXACT) {
        return nf__err_set(err, NF_ERR_ARG, "opencl:%d: unknown precision %d", index, precision);
    }
    struct nf_cl * c = calloc(1, sizeof(*c));
    if (!c) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    c->index = index;
    snprintf(c->name, sizeof(c->name), "opencl:%d", index);
    const char * v;
    if (opts->cache_dir && snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", opts->cache_dir) >= (int) sizeof(c->cache_dir)) {
        cl_ctx_free(c);
        return nf__err_set(err, NF_ERR_ARG, "opencl:%d: cache directory name too long", index);
    }
    if ((v = nf__opt(opts, "opencl.gemm")))          snprintf(c->opt_gemm, sizeof(c->opt_gemm), "%s", v);
    if ((v = nf__opt(opts, "opencl.gemm_geometry"))) snprintf(c->opt_geometry, sizeof(c->opt_geometry), "%s", v);
    if ((v = nf__opt(opts, "opencl.test_break_build"))) c->opt_break_build = strcmp(v, "1") == 0;
    int rc = cl_init(c, index, out, err);
    if (rc != NF_OK) {
        cl_ctx_free(c);
        *out = NULL;
        /* messages from cl_enumerate / CL_CHECK do not name the device yet */
        if (err && strncmp(err->msg, "opencl:", 7) != 0) {
            nf__err_prefix(err, "opencl:%d", index);
        }
        return rc;
    }
    return NF_OK;
}

/* ---- listing -------------------------------------------------------------------- */

void nf__backend_opencl_list(FILE * f)
{
    nf_err err;
    memset(&err, 0, sizeof(err));
    struct cl_dev_ref * refs = NULL;
    int n = 0;
    if (cl_enumerate(&refs, &n, &err) != NF_OK) {
        fprintf(f, "opencl: compiled in, no platform/device found (%s)\n", err.msg);
        return;
    }
    cl_platform_id last = NULL;
    for (int i = 0; i < n; i++) {
        if (refs[i].platform != last) {
            char pn[256], pv[256];
            plat_str(refs[i].platform, CL_PLATFORM_NAME, pn, sizeof(pn));
            plat_str(refs[i].platform, CL_PLATFORM_VERSION, pv, sizeof(pv));
            fprintf(f, "opencl platform: %s (%s)\n", pn, pv);
            last = refs[i].platform;
        }
        char dn[256], dv[256], drv[128];
        cl_ulong mem = 0;
        cl_uint cu = 0;
        dev_str(refs[i].device, CL_DEVICE_NAME, dn, sizeof(dn));
        dev_str(refs[i].device, CL_DEVICE_VERSION, dv, sizeof(dv));
        dev_str(refs[i].device, CL_DRIVER_VERSION, drv, sizeof(drv));
        if (clGetDeviceInfo(refs[i].device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL) != CL_SUCCESS) {
            mem = 0;
        }
        if (clGetDeviceInfo(refs[i].device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL) != CL_SUCCESS) {
            cu = 0;
        }
        fprintf(f, "  opencl:%d  %s  %.1f GiB, %u compute units, %s, driver %s\n", i, dn,
                (double)mem / (1024.0 * 1024.0 * 1024.0), (unsigned)cu, dv, drv);
    }
    free(refs);
}

/* ---- buffers -------------------------------------------------------------------- */

static int be_buffer_alloc(nf_backend * be, size_t size, void ** handle, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    *handle = NULL;
    if (size > c->max_alloc) {
        return nf__err_set(err, NF_ERR_NOMEM, "%s: buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                           "(%" PRIu64 " bytes)", c->name, size, (uint64_t)c->max_alloc);
    }
    cl_int rc = CL_SUCCESS;
    /* device memory only: never CL_MEM_USE_HOST_PTR / ALLOC_HOST_PTR */
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size ? size : 4, NULL, &rc);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clCreateBuffer(%zu bytes): %s (%d)", c->name, size,
                           cl_err_name(rc), (int)rc);
    }
    *handle = m;
    return NF_OK;
}

static void be_buffer_free(nf_backend * be, void * handle)
{
    if (handle) {
        clReleaseMemObject((cl_mem)handle);
    }
}

static int be_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    if (n == 0) {
        return NF_OK;
    }
    cl_int rc = clEnqueueWriteBuffer(c->queue, (cl_mem)handle, CL_TRUE, offs, n, src, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clEnqueueWriteBuffer(%zu bytes at %zu): %s (%d)",
                           c->name, n, offs, cl_err_name(rc), (int)rc);
    }
    return NF_OK;
}

static int be_download(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    if (n == 0) {
        return NF_OK;
    }
    cl_int rc = clEnqueueReadBuffer(c->queue, (cl_mem)handle, CL_TRUE, offs, n, dst, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: clEnqueueReadBuffer(%zu bytes at %zu): %s (%d)",
                           c->name, n, offs, cl_err_name(rc), (int)rc);
    }
    return NF_OK;
}

static int be_buffer_where(nf_backend * be, void * handle, char * out, size_t n, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    cl_context ctx = NULL;
    cl_mem_flags flags = 0;
    CL_CHECK(clGetMemObjectInfo((cl_mem)handle, CL_MEM_CONTEXT, sizeof(ctx), &ctx, NULL), err,
             "clGetMemObjectInfo(CL_MEM_CONTEXT)");
    CL_CHECK(clGetMemObjectInfo((cl_mem)handle, CL_MEM_FLAGS, sizeof(flags), &flags, NULL), err,
             "clGetMemObjectInfo(CL_MEM_FLAGS)");
    if (flags & (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR)) {
        snprintf(out, n, "cpu");
    } else if (ctx == c->context) {
        snprintf(out, n, "%s", c->name);
    } else {
        snprintf(out, n, "opencl:?");
    }
    return NF_OK;
}

static int be_sync(nf_backend * be, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    CL_CHECK(clFinish(c->queue), err, "clFinish");
    return NF_OK;
}

/* ---- kernel launch helpers -------------------------------------------------------- */

struct karg {
    size_t       size;
    const void * ptr;
};
#define KMEM(m)   { sizeof(cl_mem),   &(cl_mem){ (m) } }
#define KLONG(v)  { sizeof(cl_long),  &(cl_long){ (cl_long)(v) } }
#define KINT(v)   { sizeof(cl_int),   &(cl_int){ (cl_int)(v) } }
#define KFLT(v)   { sizeof(cl_float), &(cl_float){ (cl_float)(v) } }
#define KLOCAL(n) { (n), NULL }

static int launch(struct nf_cl * c, int kid, const struct karg * a, int na, cl_uint dims,
                  const size_t * gws_in, const size_t * lws, nf_err * err)
{
    size_t gws[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (gws_in[d] == 0) {
            return NF_OK;   /* nothing to do */
        }
        gws[d] = gws_in[d];
        if (lws) {
            gws[d] = (gws[d] + lws[d] - 1) / lws[d] * lws[d];
        }
    }
    char what[96];
    for (int i = 0; i < na; i++) {
        cl_int rc = clSetKernelArg(c->k[kid], (cl_uint)i, a[i].size, a[i].ptr);
        if (rc != CL_SUCCESS) {
            return nf__err_set(err, NF_ERR_DEVICE, "%s: clSetKernelArg(%s, %d): %s (%d)", c->name,
                               k_names[kid], i, cl_err_name(rc), (int)rc);
        }
    }
    snprintf(what, sizeof(what), "clEnqueueNDRangeKernel(%s)", k_names[kid]);
    cl_int rc = clEnqueueNDRangeKernel(c->queue, c->k[kid], dims, NULL, gws, lws, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: %s: %s (%d)", c->name, what, cl_err_name(rc), (int)rc);
    }
    return NF_OK;
}

#define LAUNCH(c, kid, dims, gws, lws, err, ...)                                          \
    launch((c), (kid), (const struct karg[]){ __VA_ARGS__ },                              \
           (int)(sizeof((const struct karg[]){ __VA_ARGS__ }) / sizeof(struct karg)),     \
           (dims), (gws), (lws), (err))

/* Grow a device buffer to at least size bytes (contents are not kept). */
static int reserve_buffer(struct nf_cl * c, cl_mem * buf, size_t * cur, size_t size, const char * what, nf_err * err)
{
    if (size == 0) {
        size = 4;
    }
    if (*buf && *cur >= size) {
        return NF_OK;
    }
    if (size > c->max_alloc) {
        return nf__err_set(err, NF_ERR_NOMEM, "%s: %s buffer of %zu bytes exceeds "
                           "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%" PRIu64 " bytes)", c->name, what, size,
                           (uint64_t)c->max_alloc);
    }
    if (*buf) {
        /* the release is deferred by OpenCL until queued kernels using it finish */
        clReleaseMemObject(*buf);
        *buf = NULL;
        *cur = 0;
    }
    cl_int rc = CL_SUCCESS;
    *buf = clCreateBuffer(c->context, CL_MEM_READ_WRITE, size, NULL, &rc);
    if (rc != CL_SUCCESS) {
        *buf = NULL;
        return nf__err_set(err, cl_rc_code(rc), "%s: clCreateBuffer(%s, %zu bytes): %s (%d)", c->name,
                           what, size, cl_err_name(rc), (int)rc);
    }
    *cur = size;
    if (c->be) nf__trace_alloc(c->be, (int64_t) size);
    return NF_OK;
}

static int ensure_scratch(struct nf_cl * c, size_t size, nf_err * err)
{
    return reserve_buffer(c, &c->scratch, &c->scratch_size, size, "scratch", err);
}

static cl_mem tmem(const nf_tensor * t)
{
    return (cl_mem)t->buf->handle;
}

/* element offset of a tensor view */
static cl_long toff(const nf_tensor * t)
{
    return (cl_long)(t->offs / nf__dtype_size(t->type));
}

static int64_t dim(const nf_tensor * t, int i)
{
    return i < t->ndim ? t->ne[i] : 1;
}

static int64_t cols(const nf_tensor * t)
{
    int64_t n = 1;
    for (int i = 1; i < t->ndim; i++) {
        n *= t->ne[i];
    }
    return n;
}

static bool has_tensor(const nf_tensor * t)
{
    return t->buf != NULL && t->buf->handle != NULL;
}

/* ---- per-op limits (kernel table .supports) ------------------------------------- */

static bool is_f32(const nf_tensor * t)
{
    return has_tensor(t) && t->type == NF_F32 && t->offs % sizeof(float) == 0;
}

static bool fits_int(int64_t v)
{
    return v >= 0 && v <= INT32_MAX;
}

/* per-op limits of the kernels below (the dispatcher has validated the op) */
static bool sup_quantile(nf_backend * be, const nf_op * op)
{
    const struct nf_quantile_params * p = &op->p.quantile;
    if (op->n_src < 1 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->dst[0])) {
        return false;
    }
    const int64_t n = dim(&op->src[0], 0);
    return n >= 1 && n <= (1 << 24) && fits_int(cols(&op->src[0])) && p->nq >= 1 && p->q_denom >= 1;
}

static bool sup_bucketize(nf_backend * be, const nf_op * op)
{
    if (op->n_src < 3 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[2]) ||
        !is_f32(&op->dst[0])) {
        return false;
    }
    const int64_t n_s = dim(&op->src[0], 0);
    if (n_s < 1 || !fits_int(n_s) || !fits_int(cols(&op->src[0])) || !fits_int(cols(&op->src[2]))) {
        return false;
    }
    if (op->n_src >= 2 && has_tensor(&op->src[1]) && nf__tensor_numel(&op->src[1]) > 0) {
        return op->n_dst >= 2 && is_f32(&op->src[1]) && is_f32(&op->dst[1]);
    }
    return true;
}

static bool sup_embed(nf_backend * be, const nf_op * op)
{
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) &&
           is_f32(&op->src[2]) && is_f32(&op->dst[0]) && op->dst[0].ndim == 3 &&
           fits_int(op->dst[0].ne[1]) && fits_int(op->dst[0].ne[2]);
}

static bool sup_label(nf_backend * be, const nf_op * op)
{
    if (op->n_dst < 1 || !is_f32(&op->dst[0]) || op->dst[0].ndim != 3 ||
        !fits_int(op->dst[0].ne[0]) || !fits_int(op->dst[0].ne[1]) || !fits_int(op->dst[0].ne[2])) {
        return false;
    }
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS:
            return op->n_src >= 2 && has_tensor(&op->src[0]) && op->src[0].type == NF_I32 &&
                   op->src[0].offs % 4 == 0 && is_f32(&op->src[1]) && fits_int(dim(&op->src[1], 0));
        case NF_LABEL_VALUE:
            return op->n_src >= 3 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->src[2]);
        case NF_LABEL_MASK:
            return op->n_src >= 2 && is_f32(&op->src[1]);
        default:
            return false;
    }
}

static bool sup_layer_norm(nf_backend * be, const nf_op * op)
{
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) &&
           is_f32(&op->src[2]) && is_f32(&op->dst[0]) && p->k >= 1 && fits_int(p->k) && p->m >= 0;
}

static bool sup_linear(nf_backend * be, const nf_op * op)
{
    struct nf_cl * c = be->ctx;
    const struct nf_linear_params * p = &op->p.linear;
    if (op->n_src < 2 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[1]) ||
        !is_f32(&op->dst[0]) || (op->n_src >= 3 && !is_f32(&op->src[2]))) {
        return false;
    }
    if (p->act != NF_ACT_NONE && p->act != NF_ACT_GELU) {
        return false;
    }
    return fits_int(p->m) && fits_int(p->n) && fits_int(p->k) &&
           (c->use_clblast || c->kwg[K_LINEAR] >= (size_t)c->lin.wx * c->lin.wy);
}

static bool sup_attention(nf_backend * be, const nf_op * op)
{
    struct nf_cl * c = be->ctx;
    const struct nf_attention_params * p = &op->p.attention;
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) &&
           is_f32(&op->src[2]) && is_f32(&op->dst[0]) &&
           p->head_dim >= 1 && p->head_dim <= NF_CL_ATTN_MAX_HD && p->lk >= 1 &&
           fits_int(p->lq) && fits_int(p->lk) && fits_int(p->n_heads) && fits_int(p->n_groups) &&
           c->kwg[K_ATTENTION] >= NF_CL_ATTN_WG;
}

/* ---- compute ------------------------------------------------------------------------ */

static int op_quantile(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * B = &op->dst[0];
    const int64_t n = dim(x, 0);
    const int64_t F = cols(x);
    size_t P = 1;
    while ((int64_t)P < n) {
        P *= 2;
    }
    NF_TRY(ensure_scratch(c, (size_t)F * P * sizeof(float), err));
    size_t wg = c->sort_wg;
    if (wg > P / 2) {
        wg = P / 2 > 0 ? P / 2 : 1;
    }
    const size_t gs[1] = { (size_t)F * wg };
    const size_t ls[1] = { wg };
    NF_TRY(LAUNCH(c, K_QUANTILE_SORT, 1, gs, ls, err,
                  KMEM(tmem(x)), KLONG(toff(x)), KINT(n), KINT(F), KMEM(c->scratch), KINT(P)));
    const size_t gi[2] = { (size_t)op->p.quantile.nq, (size_t)F };
    return LAUNCH(c, K_QUANTILE_INTERP, 2, gi, NULL, err,
                  KMEM(c->scratch), KINT(P), KINT(n), KINT(op->p.quantile.nq), KINT(op->p.quantile.q_denom), KINT(F),
                  KMEM(tmem(B)), KLONG(toff(B)));
}

static int op_bucketize(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * xs = &op->src[0];
    const nf_tensor * xq = &op->src[1];
    const nf_tensor * B  = &op->src[2];
    const nf_tensor * zs = &op->dst[0];
    const nf_tensor * zq = &op->dst[1];
    const int64_t n_s = dim(xs, 0);
    const int64_t F   = cols(xs);
    const int64_t nb  = cols(B);
    const int has_q = has_tensor(xq) && nf__tensor_numel(xq) > 0 && op->n_dst >= 2 && has_tensor(zq);
    const int64_t n_q = has_q ? dim(xq, 0) : 0;
    const size_t l1[1] = { 64 };

    NF_TRY(ensure_scratch(c, (size_t)F * 2 * sizeof(float), err));
    const size_t g_s[1] = { (size_t)(n_s * F) };
    NF_TRY(LAUNCH(c, K_BUCKETIZE_U, 1, g_s, l1, err,
                  KMEM(tmem(xs)), KLONG(toff(xs)), KLONG(n_s * F), KINT(F),
                  KMEM(tmem(B)), KLONG(toff(B)), KINT(nb), KINT(n_s),
                  KMEM(tmem(zs)), KLONG(toff(zs))));
    if (has_q) {
        const size_t g_q[1] = { (size_t)(n_q * F) };
        NF_TRY(LAUNCH(c, K_BUCKETIZE_U, 1, g_q, l1, err,
                      KMEM(tmem(xq)), KLONG(toff(xq)), KLONG(n_q * F), KINT(F),
                      KMEM(tmem(B)), KLONG(toff(B)), KINT(nb), KINT(n_s),
                      KMEM(tmem(zq)), KLONG(toff(zq))));
    }
    const size_t g_f[1] = { (size_t)F };
    NF_TRY(LAUNCH(c, K_BUCKETIZE_STATS, 1, g_f, NULL, err,
                  KMEM(tmem(zs)), KLONG(toff(zs)), KINT(n_s), KINT(F), KMEM(c->scratch)));
    NF_TRY(LAUNCH(c, K_BUCKETIZE_Z, 1, g_s, l1, err,
                  KMEM(tmem(zs)), KLONG(toff(zs)), KLONG(n_s * F), KINT(F), KMEM(c->scratch)));
    if (has_q) {
        const size_t g_q[1] = { (size_t)(n_q * F) };
        NF_TRY(LAUNCH(c, K_BUCKETIZE_Z, 1, g_q, l1, err,
                      KMEM(tmem(zq)), KLONG(toff(zq)), KLONG(n_q * F), KINT(F), KMEM(c->scratch)));
    }
    return NF_OK;
}

static int op_embed(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * z = &op->src[0];
    const nf_tensor * w = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = dim(z, 0), F = dim(z, 1), D = tok->ne[2];
    const int64_t T = F + 1;
    const size_t ls[2] = { D >= 64 ? 64 : (size_t)D, 1 };
    const size_t gs[2] = { (size_t)D, (size_t)(n * F) };
    return LAUNCH(c, K_EMBED_FEATURES, 2, gs, ls, err,
                  KMEM(tmem(z)), KLONG(toff(z)), KMEM(tmem(w)), KLONG(toff(w)),
                  KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(tok)), KLONG(toff(tok)),
                  KLONG(n * F), KINT(F), KINT(T), KINT(D));
}

static int op_label(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = tok->ne[0], T = tok->ne[1], D = tok->ne[2];
    const size_t ls[2] = { D >= 64 ? 64 : (size_t)D, 1 };
    const size_t gs[2] = { (size_t)D, (size_t)n };
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS: {
            const nf_tensor * y = &op->src[0];
            const nf_tensor * E = &op->src[1];
            return LAUNCH(c, K_LABEL_CLASS, 2, gs, ls, err,
                          KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(E)), KLONG(toff(E)), KINT(dim(E, 0)),
                          KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n), KINT(T), KINT(D));
        }
        case NF_LABEL_VALUE: {
            const nf_tensor * y = &op->src[0];
            const nf_tensor * w = &op->src[1];
            const nf_tensor * b = &op->src[2];
            return LAUNCH(c, K_LABEL_VALUE, 2, gs, ls, err,
                          KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(w)), KLONG(toff(w)),
                          KMEM(tmem(b)), KLONG(toff(b)),
                          KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n), KINT(T), KINT(D));
        }
        case NF_LABEL_MASK: {
            const nf_tensor * M = &op->src[1];
            return LAUNCH(c, K_LABEL_MASK, 2, gs, ls, err,
                          KMEM(tmem(M)), KLONG(toff(M)),
                          KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n), KINT(T), KINT(D));
        }
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED, "%s: LABEL_TOKENS mode %d", c->name, (int)op->p.label_tokens.mode);
    }
}

static int op_layer_norm(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * g = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * y = &op->dst[0];
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    const size_t ls[1] = { c->ln_wg };
    const size_t gs[1] = { (size_t)p->m * c->ln_wg };
    return LAUNCH(c, K_LAYER_NORM, 1, gs, ls, err,
                  KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx),
                  KMEM(tmem(g)), KLONG(toff(g)), KMEM(tmem(b)), KLONG(toff(b)),
                  KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy),
                  KINT(p->k), KFLT(p->eps), KLOCAL(c->ln_wg * (c->fp64 ? sizeof(cl_double) : sizeof(cl_float))));
}

#ifdef NF_HAVE_CLBLAST
static const char * clblast_status_name(CLBlastStatusCode s)
{
    if ((int)s > -1000) {
        return cl_err_name((cl_int)s);   /* CLBlast passes OpenCL codes through */
    }
    switch (s) {
#define E(x) case x: return #x
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
#define NF_CL_GEMM_CHUNK_BYTES ((size_t)64 << 20)

static int op_linear_clblast(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : &op->src[1];
    const nf_tensor * y = &op->dst[0];
    const struct nf_linear_params * p = &op->p.linear;
    const size_t M = (size_t)p->m, N = (size_t)p->n, K = (size_t)p->k;
    if (M == 0) {
        return NF_OK;
    }
    size_t mc = NF_CL_GEMM_CHUNK_BYTES / sizeof(float) / N;
    mc = mc < 1 ? 1 : mc > M ? M : mc;
    NF_TRY(ensure_scratch(c, mc * N * sizeof(float), err));
    for (size_t r0 = 0; r0 < M; r0 += mc) {
        const size_t rows = M - r0 < mc ? M - r0 : mc;
        const size_t a_off = (size_t)toff(x) + r0 * (size_t)p->ldx;
        size_t need = 0;
        CLBlastStatusCode st = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                                          CLBlastTransposeYes, rows, N, K, a_off, (size_t)p->ldx,
                                                          (size_t)toff(W), K, 0, N, &c->queue, &need);
        if (st != CLBlastSuccess) {
            return nf__err_set(err, NF_ERR_DEVICE, "%s: CLBlastSGemmTempBufferSize(m=%zu n=%zu k=%zu): %s (%d)",
                               c->name, rows, N, K, clblast_status_name(st), (int)st);
        }
        if (need > 0) {
            int rr = reserve_buffer(c, &c->gemm_tmp, &c->gemm_tmp_size, need, "CLBlast temp", err);
            if (rr != NF_OK) {
                return rr;
            }
        }
        st = CLBlastSgemmWithTempBuffer(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                        rows, N, K, 1.0f, tmem(x), a_off, (size_t)p->ldx,
                                        tmem(W), (size_t)toff(W), K, 0.0f, c->scratch, 0, N,
                                        &c->queue, NULL, c->gemm_tmp ? c->gemm_tmp : c->scratch);
        if (st != CLBlastSuccess) {
            return nf__err_set(err, (int)st > -1000 ? cl_rc_code((cl_int)st) : NF_ERR_DEVICE,
                               "%s: CLBlastSgemm(m=%zu n=%zu k=%zu): %s (%d)", c->name, rows, N, K,
                               clblast_status_name(st), (int)st);
        }
        const size_t ls[2] = { 64, 1 };
        const size_t gs[2] = { N, rows };
        NF_TRY(LAUNCH(c, K_LINEAR_EPILOGUE, 2, gs, ls, err,
                      KMEM(c->scratch), KMEM(tmem(bias)), KLONG(toff(bias)), KINT(has_bias),
                      KMEM(tmem(y)), KLONG(toff(y) + (cl_long)(r0 * (size_t)p->ldy)), KLONG(p->ldy),
                      KINT(rows), KINT(N), KINT(p->act == NF_ACT_GELU), KINT(p->accumulate != 0)));
    }
    return NF_OK;
}
#endif

static int op_linear(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
#ifdef NF_HAVE_CLBLAST
    if (c->use_clblast) {
        return op_linear_clblast(be, op, err);
    }
#endif
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : &op->src[1];   /* any valid buffer when absent */
    const nf_tensor * y = &op->dst[0];
    const struct nf_linear_params * p = &op->p.linear;
    const struct nf_cl_lin_geo * g = &c->lin;
    const size_t ls[2] = { (size_t)g->wx, (size_t)g->wy };
    const size_t gs[2] = { ((size_t)p->n + g->tn - 1) / g->tn * g->wx, ((size_t)p->m + g->tm - 1) / g->tm * g->wy };
    return LAUNCH(c, K_LINEAR, 2, gs, ls, err,
                  KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx),
                  KMEM(tmem(W)), KLONG(toff(W)),
                  KMEM(tmem(bias)), KLONG(toff(bias)), KINT(has_bias),
                  KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy),
                  KINT(p->m), KINT(p->n), KINT(p->k), KINT(p->act == NF_ACT_GELU), KINT(p->accumulate != 0));
}

static int op_attention(nf_backend * be, const nf_op * op, nf_err * err)
{
    struct nf_cl * c = be->ctx;
    const nf_tensor * q = &op->src[0];
    const nf_tensor * k = &op->src[1];
    const nf_tensor * v = &op->src[2];
    const nf_tensor * o = &op->dst[0];
    const struct nf_attention_params * p = &op->p.attention;
    const size_t ls[3] = { NF_CL_ATTN_WG, 1, 1 };
    const size_t gs[3] = { ((size_t)p->lq + NF_CL_ATTN_ROWS - 1) / NF_CL_ATTN_ROWS * NF_CL_ATTN_WG,
                           (size_t)p->n_heads, (size_t)p->n_groups };
    return LAUNCH(c, K_ATTENTION, 3, gs, ls, err,
                  KMEM(tmem(q)), KLONG(toff(q)), KMEM(tmem(k)), KLONG(toff(k)),
                  KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)),
                  KINT(p->lq), KINT(p->lk), KINT(p->head_dim),
                  KLONG(p->q_gs), KLONG(p->q_ss), KLONG(p->kv_gs), KLONG(p->kv_ss),
                  KLONG(p->o_gs), KLONG(p->o_ss), KFLT(p->scale));
}

static const struct nf_kernel cl_kernels[NF_OP_COUNT] = {
    [NF_OP_QUANTILE]       = { op_quantile,   sup_quantile },
    [NF_OP_BUCKETIZE_NORM] = { op_bucketize,  sup_bucketize },
    [NF_OP_EMBED_FEATURES] = { op_embed,      sup_embed },
    [NF_OP_LABEL_TOKENS]   = { op_label,      sup_label },
    [NF_OP_LAYER_NORM]     = { op_layer_norm, sup_layer_norm },
    [NF_OP_LINEAR]         = { op_linear,     sup_linear },
    [NF_OP_ATTENTION]      = { op_attention,  sup_attention },
};

/* every kernel's errors name the op */
static int be_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err)
{
    int rc = k->run(be, op, err);
    if (rc != NF_OK) {
        nf__err_prefix(err, "op %s (%s)", nf__op_name(op->type), op->label ? op->label : "-");
    }
    return rc;
}

static const struct nf_backend_i cl_iface = {
    .kind         = "opencl",
    .free         = be_free,
    .buffer_alloc = be_buffer_alloc,
    .buffer_free  = be_buffer_free,
    .upload       = be_upload,
    .download     = be_download,
    .buffer_where = be_buffer_where,
    .kernels      = cl_kernels,
    .launch       = be_launch,
    .sync         = be_sync,
};
