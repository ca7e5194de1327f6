/*
 * opencl.c -- the OpenCL backend ("opencl:N"): device enumeration, init / free,
 * listing and the backend vtable. The other concerns are in opencl-buffers.c,
 * opencl-program.c, opencl-gemm.c and opencl-ops.c (see opencl-impl.h).
 *
 * One backend instance = one OpenCL device, one context, one in-order queue,
 * one program built from the embedded kernel files (kernels-*.cl). Every op runs on that
 * device; there is no host fallback anywhere in this backend (an op the device
 * cannot run is NF_ERR_UNSUPPORTED / NF_ERR_DEVICE, never a silent copy).
 *
 * Device numbering: N counts the devices of all platforms, platforms in the
 * order clGetPlatformIDs returns them, devices in the order clGetDeviceIDs
 * (CL_DEVICE_TYPE_ALL) returns them.
 *
 * Precision: the program is built without any relaxed-math option (see
 * nf__cl_build_options() in opencl-program.c); kernels-common.cl turns FP_CONTRACT
 * off. The options used are recorded in be->precision_detail.
 *
 * Program binary cache: see opencl-program.c. LINEAR's GEMM: see opencl-gemm.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- error names ------------------------------------------------------------ */

const char * nf__cl_err_name(cl_int e) {
    switch (e) {
#define E(x) \
    case x: return #x
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

const char * const nf__cl_k_names[K_COUNT] = {
#define X(id, kname) kname,
    CL_KERNELS(X)
#undef X
};

/* ---- device enumeration ------------------------------------------------------- */

struct cl_dev_ref {
    cl_platform_id platform;
    cl_device_id device;
};

/* All (platform, device) pairs in "opencl:N" order. On "none found" returns
 * NF_ERR_DEVICE with a message naming the failing call. *out is malloc'ed. */
static int cl_enumerate(struct cl_dev_ref ** out, int * n_out, nf_err * err) {
    *out = NULL;
    *n_out = 0;
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(0, NULL, &np);
    if (rc != CL_SUCCESS || np == 0) {
        if (rc == CL_SUCCESS) {
            rc = CL_PLATFORM_NOT_FOUND_KHR;
        }
        return nf__err_set(err, NF_ERR_DEVICE, "no OpenCL platform found (clGetPlatformIDs: %s)", nf__cl_err_name(rc));
    }
    cl_platform_id * plats = calloc(np, sizeof(*plats));
    if (!plats) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    rc = clGetPlatformIDs(np, plats, NULL);
    if (rc != CL_SUCCESS) {
        free(plats);
        return nf__err_set(err, NF_ERR_DEVICE, "no OpenCL platform found (clGetPlatformIDs: %s)", nf__cl_err_name(rc));
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
        struct cl_dev_ref * nr = realloc(refs, (size_t) (n + (int) nd) * sizeof(*refs));
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
            refs[n].device = devs[d];
            n++;
        }
        free(devs);
    }
    free(plats);
    if (n == 0) {
        free(refs);
        return nf__err_set(err, NF_ERR_DEVICE, "no OpenCL device found (%u platform%s; clGetDeviceIDs: %s)",
                           (unsigned) np, np == 1 ? "" : "s", nf__cl_err_name(last));
    }
    *out = refs;
    *n_out = n;
    return NF_OK;
}

static void plat_str(cl_platform_id p, cl_platform_info what, char * out, size_t n) {
    out[0] = '\0';
    if (clGetPlatformInfo(p, what, n, out, NULL) != CL_SUCCESS) {
        snprintf(out, n, "?");
    }
    out[n - 1] = '\0';
}

/* ---- init / free -------------------------------------------------------------- */

static void cl_ctx_free(struct nf_cl * c) {
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

static void be_free(nf_backend * be) {
    cl_ctx_free(be->ctx);
    be->ctx = NULL;
}

static size_t pow2_floor(size_t v) {
    size_t p = 1;
    while (p * 2 <= v) {
        p *= 2;
    }
    return p;
}

static const struct nf_backend_i cl_iface;

static int cl_init(struct nf_cl * c, int index, nf_backend ** out, nf_err * err) {
    struct cl_dev_ref * refs = NULL;
    int n = 0;
    NF_TRY(cl_enumerate(&refs, &n, err));
    if (index < 0 || index >= n) {
        free(refs);
        return nf__err_set(err, NF_ERR_DEVICE, "opencl:%d: no such device (%d OpenCL device%s found)", index, n,
                           n == 1 ? "" : "s");
    }
    c->platform = refs[index].platform;
    c->device = refs[index].device;
    free(refs);

    char dev_name[256], drv[128], plat_name[256], clc[128], ext[8192];
    nf__cl_dev_str(c->device, CL_DEVICE_NAME, dev_name, sizeof(dev_name));
    nf__cl_dev_str(c->device, CL_DRIVER_VERSION, drv, sizeof(drv));
    nf__cl_dev_str(c->device, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof(clc));
    nf__cl_dev_str(c->device, CL_DEVICE_EXTENSIONS, ext, sizeof(ext));
    plat_str(c->platform, CL_PLATFORM_NAME, plat_name, sizeof(plat_name));

    cl_bool avail = CL_FALSE, compiler = CL_FALSE;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_AVAILABLE, sizeof(avail), &avail, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_AVAILABLE)");
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof(compiler), &compiler, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_COMPILER_AVAILABLE)");
    if (!avail) {
        return nf__err_set(err, NF_ERR_DEVICE, "%s (%s) is not available (CL_DEVICE_AVAILABLE = false)", c->name,
                           dev_name);
    }
    if (!compiler) {
        return nf__err_set(err, NF_ERR_DEVICE, "%s (%s) has no OpenCL C compiler (CL_COMPILER_NOT_AVAILABLE)", c->name,
                           dev_name);
    }
    cl_device_fp_config fp = 0;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp), &fp, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_SINGLE_FP_CONFIG)");
    c->cr_divsqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    c->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(c->max_wg), &c->max_wg, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)");
    CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(c->max_alloc), &c->max_alloc, NULL), err,
             "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)");

    cl_int rc = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties) c->platform, 0};
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
        if (sscanf(geo, "%d %d %d %d %d %d", &g.tm, &g.tn, &g.tk, &g.wx, &g.wy, &g.vec) != 6 || g.tm < 1 || g.tn < 1 ||
            g.tk < 1 || g.wx < 1 || g.wy < 1 || g.tm % g.wy || g.tn % g.wx || (g.vec != 0 && g.vec != 1) ||
            (g.vec && g.tn != 4 * g.wx)) {
            return nf__err_set(err, NF_ERR_ARG,
                               "opencl.gemm_geometry=\"%s\": expected \"TM TN TK WX WY VEC\" "
                               "with TM %% WY == 0, TN %% WX == 0, VEC 0/1 and TN == 4*WX when VEC",
                               geo);
        }
        c->lin = g;
    }
    NF_TRY(nf__cl_choose_gemm(c, err));

    char opts[512];
    nf__cl_build_options(c, clc, opts, sizeof(opts));
    NF_TRY(nf__cl_build_program(c, opts, dev_name, drv, plat_name, err));

    for (int i = 0; i < K_COUNT; i++) {
        c->k[i] = clCreateKernel(c->program, nf__cl_k_names[i], &rc);
        char what[96];
        snprintf(what, sizeof(what), "clCreateKernel(%s)", nf__cl_k_names[i]);
        CL_CHECK(rc, err, what);
        CL_CHECK(clGetKernelWorkGroupInfo(c->k[i], c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(c->kwg[i]), &c->kwg[i],
                                          NULL),
                 err, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
    }
    c->ln_wg = pow2_floor(c->kwg[K_LAYER_NORM] < 256 ? c->kwg[K_LAYER_NORM] : 256);
    c->sort_wg = pow2_floor(c->kwg[K_QUANTILE_SORT] < 256 ? c->kwg[K_QUANTILE_SORT] : 256);

    nf_backend * be = nf__backend_new(&cl_iface, c, c->name);
    if (!be) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    c->be = be;
    be->precision = c->bf16 ? NF_PRECISION_BF16_AUTOCAST : NF_PRECISION_EXACT;
    snprintf(be->desc, sizeof(be->desc), "%s (%s, %s)", dev_name, plat_name, drv);
    if (c->bf16) {
        snprintf(be->precision_detail, sizeof(be->precision_detail),
                 "bf16-autocast (upstream's torch.autocast(\"cpu\", bfloat16)) as fp32 arithmetic with bf16 "
                 "rounding: linear and attention inputs and outputs rounded to bf16 (nearest, ties to even) where "
                 "torch holds bf16 tensors, fp32 sums of the exact bf16 products, softmax numerators rounded to "
                 "bf16, Mitra's other ops exact fp32; SpTransformer's activations all bf16, every op's output "
                 "rounded (docs/precision.md); opencl build options: %s; %s",
                 opts[0] ? opts : "(none)", c->gemm_desc);
        *out = be;
        return NF_OK;
    }
    snprintf(be->precision_detail, sizeof(be->precision_detail),
             "opencl build options: %s; precision exact (no relaxed/fast math, FP_CONTRACT OFF, "
             "div/sqrt correctly rounded%s, exp/erf %s); %s",
             opts[0] ? opts : "(none)",
             c->cr_divsqrt ? ""
                           : (c->fp64 ? " via fp64"
                                      : " NOT guaranteed: device lacks "
                                        "CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT and fp64"),
             c->fp64 ? "via fp64, rounded once" : "OpenCL float built-ins (<= 3 / 16 ulp)", c->gemm_desc);
    *out = be;
    return NF_OK;
}

int nf__backend_opencl_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    const int precision = opts->precision;
    if (precision == NF_PRECISION_TF32) {
        return nf__err_set(err, NF_ERR_ARG,
                           "opencl:%d: precision tf32 is a CUDA-only mode "
                           "(the OpenCL backend runs exact fp32 or bf16-autocast)",
                           index);
    }
    if (precision != NF_PRECISION_EXACT && precision != NF_PRECISION_BF16_AUTOCAST) {
        return nf__err_set(err, NF_ERR_ARG, "opencl:%d: unknown precision %d", index, precision);
    }
    struct nf_cl * c = calloc(1, sizeof(*c));
    if (!c) {
        return nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
    }
    c->index = index;
    c->bf16 = precision == NF_PRECISION_BF16_AUTOCAST;
    snprintf(c->name, sizeof(c->name), "opencl:%d", index);
    const char * v;
    if (opts->cache_dir &&
        snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", opts->cache_dir) >= (int) sizeof(c->cache_dir)) {
        cl_ctx_free(c);
        return nf__err_set(err, NF_ERR_ARG, "opencl:%d: cache directory name too long", index);
    }
    if ((v = nf__opt(opts, "opencl.gemm"))) snprintf(c->opt_gemm, sizeof(c->opt_gemm), "%s", v);
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

void nf__backend_opencl_list(FILE * f) {
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
        nf__cl_dev_str(refs[i].device, CL_DEVICE_NAME, dn, sizeof(dn));
        nf__cl_dev_str(refs[i].device, CL_DEVICE_VERSION, dv, sizeof(dv));
        nf__cl_dev_str(refs[i].device, CL_DRIVER_VERSION, drv, sizeof(drv));
        if (clGetDeviceInfo(refs[i].device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL) != CL_SUCCESS) {
            mem = 0;
        }
        if (clGetDeviceInfo(refs[i].device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL) != CL_SUCCESS) {
            cu = 0;
        }
        fprintf(f, "  opencl:%d  %s  %.1f GiB, %u compute units, %s, driver %s\n", i, dn,
                (double) mem / (1024.0 * 1024.0 * 1024.0), (unsigned) cu, dv, drv);
    }
    free(refs);
}

static int be_sync(nf_backend * be, nf_err * err) {
    struct nf_cl * c = be->ctx;
    CL_CHECK(clFinish(c->queue), err, "clFinish");
    return NF_OK;
}

/* ---- vtable ---------------------------------------------------------------------- */

/* every kernel's errors name the op */
static int be_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    int rc = c->bf16 ? nf__cl_bf16_launch(be, k, op, err) : k->run(be, op, err);
    if (rc != NF_OK) {
        nf__err_prefix(err, "op %s (%s)", nf__op_name(op->type), op->label ? op->label : "-");
    }
    return rc;
}

static const struct nf_backend_i cl_iface = {
    .kind = "opencl",
    .free = be_free,
    .buffer_alloc = nf__cl_buffer_alloc,
    .buffer_free = nf__cl_buffer_free,
    .upload = nf__cl_upload,
    .download = nf__cl_download,
    .buffer_where = nf__cl_buffer_where,
    .kernels = nf__cl_kernels,
    .launch = be_launch,
    .sync = be_sync,
};
