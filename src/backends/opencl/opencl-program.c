/*
 * opencl-program.c -- the OpenCL backend's program: built from the embedded
 * kernel files (kernels-*.cl) with exact-math options, through a binary cache.
 *
 * Program binary cache: $NOFALL_CACHE_DIR/opencl, else
 * $XDG_CACHE_HOME/nofall/opencl, else ~/.cache/nofall/opencl, file
 * <64-bit FNV-1a of source (all the kernel files)+options+device+driver>.bin. Any cache problem
 * silently means "build from source" (it is a build cache, not a compute
 * fallback). NOFALL_OPENCL_NO_CACHE=1 disables it.
 *
 * Test hook: NOFALL_OPENCL_TEST_BREAK_BUILD=1 appends a line with a syntax
 * error to the program source, so that tests can check that a kernel build
 * failure is reported as NF_ERR_DEVICE with the build log.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- program binary cache ----------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void * data, size_t n) {
    const unsigned char * p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t fnv1a_str(uint64_t h, const char * s) {
    return fnv1a(h, s, strlen(s) + 1); /* include the NUL as a separator */
}

/* mkdir -p; returns 0 on success */
static int mkdirs(char * path) {
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
static cl_program cache_load(struct nf_cl * c, const char * path, uint64_t hash, const char * opts) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char magic[8];
    uint64_t h = 0, len = 0;
    unsigned char * bin = NULL;
    cl_program prog = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, NF_CL_CACHE_MAGIC, 8) != 0 || fread(&h, sizeof(h), 1, f) != 1 ||
        h != hash || fread(&len, sizeof(len), 1, f) != 1 || len == 0 || len > ((uint64_t) 1 << 30)) {
        goto done;
    }
    bin = malloc((size_t) len);
    if (!bin || fread(bin, 1, (size_t) len, f) != (size_t) len) {
        goto done;
    }
    {
        size_t sz = (size_t) len;
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
static void cache_store(struct nf_cl * c, const char * dir, const char * path, uint64_t hash) {
    size_t sz = 0;
    if (clGetProgramInfo(c->program, CL_PROGRAM_BINARY_SIZES, sizeof(sz), &sz, NULL) != CL_SUCCESS || sz == 0) {
        return;
    }
    unsigned char * bin = malloc(sz);
    if (!bin) {
        return;
    }
    unsigned char * bins[1] = {bin};
    if (clGetProgramInfo(c->program, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) != CL_SUCCESS) {
        free(bin);
        return;
    }
    char d[1024];
    snprintf(d, sizeof(d), "%s", dir);
    char tmp[1200];
    if (mkdirs(d) != 0 || snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long) getpid()) >= (int) sizeof(tmp)) {
        free(bin);
        return;
    }
    FILE * f = fopen(tmp, "wb");
    if (!f) {
        free(bin);
        return;
    }
    uint64_t len = sz;
    int ok = fwrite(NF_CL_CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&hash, sizeof(hash), 1, f) == 1 &&
             fwrite(&len, sizeof(len), 1, f) == 1 && fwrite(bin, 1, sz, f) == sz;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
    }
    free(bin);
}

/* ---- build -------------------------------------------------------------------- */

/* Build options. Never: -cl-fast-relaxed-math, -cl-unsafe-math-optimizations,
 * -cl-mad-enable, -cl-finite-math-only (nor -cl-denorms-are-zero). */
void nf__cl_build_options(const struct nf_cl * c, const char * clc_version, char * out, size_t n) {
    /* "OpenCL C 1.2 ..." -> major.minor */
    int maj = 1, min = 0;
    if (sscanf(clc_version, "OpenCL C %d.%d", &maj, &min) != 2) {
        maj = 1;
        min = 0;
    }
    out[0] = '\0';
    size_t w = 0;
#define APPEND(s)                                                        \
    do {                                                                 \
        int nf__w = snprintf(out + w, n - w, "%s%s", w ? " " : "", (s)); \
        if (nf__w > 0 && (size_t) nf__w < n - w) w += (size_t) nf__w;    \
    } while (0)
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
    snprintf(geo, sizeof(geo),
             "-DNF_LIN_TM=%d -DNF_LIN_TN=%d -DNF_LIN_TK=%d -DNF_LIN_WX=%d -DNF_LIN_WY=%d -DNF_LIN_VEC=%d", c->lin.tm,
             c->lin.tn, c->lin.tk, c->lin.wx, c->lin.wy, c->lin.vec);
    APPEND(geo);
#undef APPEND
}

int nf__cl_build_program(struct nf_cl * c, const char * opts, char * dev_name, char * drv, char * plat_name,
                         nf_err * err) {
    /* source (+ the test hook's broken line) */
    const int broken = c->opt_break_build;
    static const char broken_line[] = "\n/* opencl.test_break_build=1 */ this is not OpenCL C ;\n";
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
                           snprintf(path, sizeof(path), "%s/%016" PRIx64 ".bin", dir, hash) < (int) sizeof(path);
    if (have_cache) {
        c->program = cache_load(c, path, hash, opts);
        if (c->program) {
            free(src);
            return NF_OK;
        }
    }

    cl_int rc = CL_SUCCESS;
    const char * srcs[1] = {src};
    c->program = clCreateProgramWithSource(c->context, 1, srcs, &len, &rc);
    free(src);
    CL_CHECK(rc, err, "clCreateProgramWithSource");
    rc = clBuildProgram(c->program, 1, &c->device, opts, NULL, NULL);
    if (rc != CL_SUCCESS) {
        size_t log_len = 0;
        char * log = NULL;
        if (clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_len) == CL_SUCCESS &&
            log_len > 0 && (log = malloc(log_len + 1)) != NULL) {
            if (clGetProgramBuildInfo(c->program, c->device, CL_PROGRAM_BUILD_LOG, log_len, log, NULL) != CL_SUCCESS) {
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
                    nf__cl_err_name(rc), (int) rc, opts, broken ? " [opencl.test_break_build=1]" : "", shown);
        free(log);
        return NF_ERR_DEVICE;
    }
    if (have_cache) {
        cache_store(c, dir, path, hash);
    }
    return NF_OK;
}
