/*
 * bench/opencl-gemm.c -- times the OpenCL backend's own tiled GEMM kernel
 * (nf_linear from src/backends/opencl/kernels-gemm.cl, no bias/act) against
 * CLBlast SGEMM (when built with it) on one OpenCL device, for
 * y = x · Wᵀ with x (M, K), W (N, K), y (M, N), and checks both against
 * oneDNN dnnl_sgemm on the host (max abs error).
 *
 *   bench-opencl-gemm [device-index] [reps] [MxKxN ...]
 *
 * Each rep times both kernels back to back (clFinish around each); the best
 * time of each over the reps is reported, as GFLOP/s = 2 M N K / t.
 *
 * Results for the record are in src/backends/opencl/GEMM.md.
 */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif

#include "opencl-kernels.h"

#include <CL/cl.h>
#include <oneapi/dnnl/dnnl.h>
#ifdef NF_BENCH_CLBLAST
#include <clblast_c.h>
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cl_int rc_ = (call);                                                         \
        if (rc_ != CL_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, rc_); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

static double max_abs_diff(const float * a, const float * b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) {
            m = d;
        }
    }
    return m;
}

struct ctx {
    cl_context ctx;
    cl_command_queue q;
    cl_kernel lin;
    int tm, tn, tk, wx, wy, vec;   /* nf_linear geometry */
};

static int run_ours(struct ctx * c, cl_mem x, cl_mem w, cl_mem y, int M, int N, int K)
{
    cl_long zero = 0, ldx = K, ldy = N;
    cl_int m = M, n = N, k = K, has_bias = 0, act = 0, acc = 0;
    int a = 0;
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_mem), &x));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &zero));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &ldx));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_mem), &w));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &zero));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_mem), &w));      /* bias: unused */
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &zero));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &has_bias));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_mem), &y));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &zero));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_long), &ldy));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &m));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &n));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &k));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &act));
    CHECK(clSetKernelArg(c->lin, a++, sizeof(cl_int), &acc));
    size_t ls[2] = { (size_t)c->wx, (size_t)c->wy };
    size_t gs[2] = { ((size_t)N + c->tn - 1) / c->tn * c->wx, ((size_t)M + c->tm - 1) / c->tm * c->wy };
    CHECK(clEnqueueNDRangeKernel(c->q, c->lin, 2, NULL, gs, ls, 0, NULL, NULL));
    return 0;
}

#ifdef NF_BENCH_CLBLAST
static int run_clblast(struct ctx * c, cl_mem x, cl_mem w, cl_mem y, int M, int N, int K)
{
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                       (size_t)M, (size_t)N, (size_t)K, 1.0f, x, 0, (size_t)K, w, 0,
                                       (size_t)K, 0.0f, y, 0, (size_t)N, &c->q, NULL);
    if (s != CLBlastSuccess) {
        fprintf(stderr, "CLBlastSgemm failed: %d\n", (int)s);
        return 1;
    }
    return 0;
}
#endif

int main(int argc, char ** argv)
{
    const int dev_index = argc > 1 ? atoi(argv[1]) : 0;
    const int reps = argc > 2 ? atoi(argv[2]) : 7;
    /* NF_BENCH_NO_CLBLAST=1 skips CLBlast (for quick geometry sweeps) */
    const char * nocb = getenv("NF_BENCH_NO_CLBLAST");
    const int use_clblast = !(nocb && strcmp(nocb, "1") == 0);

    cl_uint np = 0;
    CHECK(clGetPlatformIDs(0, NULL, &np));
    cl_platform_id plats[16];
    if (np > 16) {
        np = 16;
    }
    CHECK(clGetPlatformIDs(np, plats, NULL));
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    int seen = 0;
    for (cl_uint p = 0; p < np && !dev; p++) {
        cl_uint nd = 0;
        cl_device_id devs[16];
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) {
            continue;
        }
        for (cl_uint d = 0; d < nd && d < 16; d++, seen++) {
            if (seen == dev_index) {
                plat = plats[p];
                dev = devs[d];
                break;
            }
        }
    }
    if (!dev) {
        fprintf(stderr, "opencl:%d: no such device\n", dev_index);
        return 1;
    }
    char name[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name), name, NULL);
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fp), &fp, NULL);
    char ext[8192] = "";
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof(ext), ext, NULL);
    struct ctx c;
    cl_device_type dtype = 0;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(dtype), &dtype, NULL);
    const struct nf_cl_lin_geo g0 = nf__cl_lin_geo((dtype & CL_DEVICE_TYPE_CPU) != 0);   /* as the backend */
    c.tm = g0.tm; c.tn = g0.tn; c.tk = g0.tk; c.wx = g0.wx; c.wy = g0.wy; c.vec = g0.vec;
    /* NF_BENCH_LIN="TM TN TK WX WY VEC" tries another geometry of our kernel */
    const char * geo = getenv("NF_BENCH_LIN");
    if (geo && sscanf(geo, "%d %d %d %d %d %d", &c.tm, &c.tn, &c.tk, &c.wx, &c.wy, &c.vec) != 6) {
        fprintf(stderr, "NF_BENCH_LIN: expected \"TM TN TK WX WY VEC\"\n");
        return 1;
    }
    char opts[512];
    snprintf(opts, sizeof(opts), "-cl-std=CL1.2%s%s -DNF_LIN_TM=%d -DNF_LIN_TN=%d -DNF_LIN_TK=%d -DNF_LIN_WX=%d -DNF_LIN_WY=%d -DNF_LIN_VEC=%d",
             (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ? " -cl-fp32-correctly-rounded-divide-sqrt -DNF_CR_DIVSQRT=1" : "",
             strstr(ext, "cl_khr_fp64") ? " -DNF_FP64=1" : "", c.tm, c.tn, c.tk, c.wx, c.wy, c.vec);
    printf("device opencl:%d: %s\nbuild options: %s\n", dev_index, name, opts);

    cl_int rc;
    cl_context_properties props[] = { CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0 };
    c.ctx = clCreateContext(props, 1, &dev, NULL, NULL, &rc);
    CHECK(rc);
    c.q = clCreateCommandQueue(c.ctx, dev, 0, &rc);
    CHECK(rc);
    const char * src = nf__opencl_kernels_src;
    size_t len = nf__opencl_kernels_src_len;
    cl_program prog = clCreateProgramWithSource(c.ctx, 1, &src, &len, &rc);
    CHECK(rc);
    rc = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[16384] = "";
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
        fprintf(stderr, "build failed (%d):\n%s\n", rc, log);
        return 1;
    }
    c.lin = clCreateKernel(prog, "nf_linear", &rc);
    CHECK(rc);

    int shapes[16][3] = { { 2048, 512, 2048 }, { 2048, 2048, 512 }, { 136, 512, 1536 } };
    size_t n_shapes = 3;
    if (argc > 3) {   /* shapes given as MxKxN ... */
        n_shapes = 0;
        for (int a = 3; a < argc && n_shapes < 16; a++) {
            if (sscanf(argv[a], "%dx%dx%d", &shapes[n_shapes][0], &shapes[n_shapes][1], &shapes[n_shapes][2]) == 3) {
                n_shapes++;
            }
        }
    }
    printf("%-22s %12s %12s %14s %14s %14s\n", "M x K x N", "ours GF/s", "clblast GF/s", "ours maxabs", "clblast maxabs",
           "host openblas");
    for (size_t si = 0; si < n_shapes; si++) {
        const int M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        float * hx = malloc(sizeof(float) * (size_t)M * K);
        float * hw = malloc(sizeof(float) * (size_t)N * K);
        float * ref = malloc(sizeof(float) * (size_t)M * N);
        float * out = malloc(sizeof(float) * (size_t)M * N);
        if (!hx || !hw || !ref || !out) {
            return 1;
        }
        for (size_t i = 0; i < (size_t)M * K; i++) {
            hx[i] = frand();
        }
        for (size_t i = 0; i < (size_t)N * K; i++) {
            hw[i] = frand();
        }
        /* host reference (OpenBLAS, the cpu backend's GEMM), timed for context */
        double t_blas = 1e30;
        for (int r = 0; r < (reps < 3 ? reps : 3); r++) {
            const double t0 = now_s();
            dnnl_sgemm('N', 'T', M, N, K, 1.0f, hx, K, hw, K, 0.0f, ref, N);
            const double t = now_s() - t0;
            t_blas = t < t_blas ? t : t_blas;
        }

        cl_mem x = clCreateBuffer(c.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * (size_t)M * K, hx, &rc);
        CHECK(rc);
        cl_mem w = clCreateBuffer(c.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * (size_t)N * K, hw, &rc);
        CHECK(rc);
        cl_mem y = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, sizeof(float) * (size_t)M * N, NULL, &rc);
        CHECK(rc);
        const double flops = 2.0 * M * N * K;

        /* warm-up (compiles CLBlast's kernels), then reps alternating ours / CLBlast;
         * the best (minimum) time of each is reported: robust on a shared machine */
        if (run_ours(&c, x, w, y, M, N, K)) {
            return 1;
        }
        CHECK(clFinish(c.q));
        CHECK(clEnqueueReadBuffer(c.q, y, CL_TRUE, 0, sizeof(float) * (size_t)M * N, out, 0, NULL, NULL));
        const double e_ours = max_abs_diff(out, ref, (size_t)M * N);
        double e_cb = -1;
#ifdef NF_BENCH_CLBLAST
        if (use_clblast) {
            if (run_clblast(&c, x, w, y, M, N, K)) {
                return 1;
            }
            CHECK(clFinish(c.q));
            CHECK(clEnqueueReadBuffer(c.q, y, CL_TRUE, 0, sizeof(float) * (size_t)M * N, out, 0, NULL, NULL));
            e_cb = max_abs_diff(out, ref, (size_t)M * N);
        }
#else
        (void)use_clblast;
#endif
        double t_ours = 1e30, t_cb = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            if (run_ours(&c, x, w, y, M, N, K)) {
                return 1;
            }
            CHECK(clFinish(c.q));
            double t = now_s() - t0;
            t_ours = t < t_ours ? t : t_ours;
#ifdef NF_BENCH_CLBLAST
            if (use_clblast) {
                t0 = now_s();
                if (run_clblast(&c, x, w, y, M, N, K)) {
                    return 1;
                }
                CHECK(clFinish(c.q));
                t = now_s() - t0;
                t_cb = t < t_cb ? t : t_cb;
            }
#endif
        }
        char shape[64];
        snprintf(shape, sizeof(shape), "%d x %d x %d", M, K, N);
        printf("%-22s %12.2f %12.2f %14.3g %14.3g %14.2f\n", shape, flops / t_ours * 1e-9,
               t_cb < 1e30 ? flops / t_cb * 1e-9 : 0.0, e_ours, e_cb, flops / t_blas * 1e-9);
        fflush(stdout);
        clReleaseMemObject(x);
        clReleaseMemObject(w);
        clReleaseMemObject(y);
        free(hx);
        free(hw);
        free(ref);
        free(out);
    }
    clReleaseKernel(c.lin);
    clReleaseProgram(prog);
    clReleaseCommandQueue(c.q);
    clReleaseContext(c.ctx);
    return 0;
}
