/* gemm-candidates.c - compare CPU SGEMM candidate libraries for nofall (issue #9).
 *
 * Each candidate is dlopen()ed, so none is a link dependency.  For every shape it
 * computes C = A * B^T row-major (A is MxK, B is NxK, as LINEAR does: x * W^T) and
 * prints GFLOP/s (best of reps, wall clock), the max error against a double
 * reference in units of eps * sum_k |a_ik * b_jk|, whether two repeated calls give
 * byte-identical results, and whether the result with 1 thread equals the result
 * with the default OpenMP thread count.
 *
 * Usage: gemm-candidates [candidate ...]
 *   candidates: openblas-debian  openblas-scipy  blis  onednn   (default: all)
 *   env SCIPY_OPENBLAS_LIB: path of libscipy_openblas.so
 *       GEMM_LABEL: label printed on the summary ROW line instead of the name
 *
 * Build: gcc -O2 -std=c11 -fopenmp gemm-candidates.c -o gemm-candidates -ldl -lm
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- library-independent interface ---- */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *,
                             int64_t, const float *, int64_t, float, float *, int64_t);

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    const char *name;
    void *lib;
    cblas_sgemm_fn cblas;
    dnnl_sgemm_fn dnnl;
    void (*set_threads)(void *lib, int n); /* library-specific thread setter */
} cand_t;

static void gemm(const cand_t *c, int M, int N, int K, const float *A, const float *B,
                 float *C) {
    if (c->cblas)
        c->cblas(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, M, N, K, 1.0f, A, K, B, K,
                 0.0f, C, N);
    else {
        int st = c->dnnl('N', 'T', M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        if (st != 0) {
            fprintf(stderr, "dnnl_sgemm failed: status %d\n", st);
            exit(1);
        }
    }
}

static void *sym(void *lib, const char *s) { return lib ? dlsym(lib, s) : NULL; }

/* ---- thread setters ---- */
static void thr_openblas(void *lib, int n) {
    void (*f)(int) = (void (*)(int))sym(lib, "openblas_set_num_threads");
    if (f) f(n);
    omp_set_num_threads(n);
}
static void thr_scipy(void *lib, int n) {
    void (*f)(int) = (void (*)(int))sym(lib, "scipy_openblas_set_num_threads");
    if (f) f(n);
}
static void thr_blis(void *lib, int n) {
    void (*f)(long) = (void (*)(long))sym(lib, "bli_thread_set_num_threads");
    if (f) f(n);
    omp_set_num_threads(n);
}
static void thr_omp(void *lib, int n) {
    (void)lib;
    omp_set_num_threads(n);
}

/* ---- identification ---- */
static void ident_openblas(void *lib, const char *pfx) {
    char s[96];
    snprintf(s, sizeof s, "%sopenblas_get_corename", pfx);
    char *(*core)(void) = (char *(*)(void))sym(lib, s);
    snprintf(s, sizeof s, "%sopenblas_get_config", pfx);
    char *(*cfg)(void) = (char *(*)(void))sym(lib, s);
    snprintf(s, sizeof s, "%sopenblas_get_num_threads", pfx);
    int (*nt)(void) = (int (*)(void))sym(lib, s);
    printf("  corename: %s\n", core ? core() : "?");
    printf("  config:   %s\n", cfg ? cfg() : "?");
    if (nt) printf("  library threads: %d\n", nt());
    const char *ct = getenv("OPENBLAS_CORETYPE");
    if (ct) printf("  OPENBLAS_CORETYPE=%s (set by hand in the environment)\n", ct);
}

static void ident_blis(void *lib) {
    int (*qid)(void) = (int (*)(void))sym(lib, "bli_arch_query_id");
    const char *(*astr)(int) = (const char *(*)(int))sym(lib, "bli_arch_string");
    const char *(*ver)(void) = (const char *(*)(void))sym(lib, "bli_info_get_version_str");
    long (*omp)(void) = (long (*)(void))sym(lib, "bli_info_get_enable_openmp");
    int id = qid ? qid() : -1;
    printf("  version: %s  openmp: %ld\n", ver ? ver() : "?", omp ? omp() : -1L);
    printf("  arch: id %d = %s\n", id, (astr && id >= 0) ? astr(id) : "?");
}

typedef struct {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;

static const char *dnnl_isa_name(int v) {
    /* dnnl_cpu_isa_t values of oneDNN 2.x */
    switch (v) {
    case 0x0: return "all/default";
    case 0x1: return "sse41";
    case 0x3: return "avx";
    case 0x7: return "avx2";
    case 0x407: return "avx2_vnni";
    case 0xf: return "avx512_mic";
    case 0x1f: return "avx512_mic_4ops";
    case 0x27: return "avx512_core";
    case 0x67: return "avx512_core_vnni";
    case 0xe7: return "avx512_core_bf16";
    case 0x3e7: return "avx512_core_amx";
    default: return "unknown";
    }
}

static void ident_dnnl(void *lib) {
    const dnnl_version_t *(*ver)(void) = (const dnnl_version_t *(*)(void))sym(lib, "dnnl_version");
    int (*isa)(void) = (int (*)(void))sym(lib, "dnnl_get_effective_cpu_isa");
    int (*fpm)(int *) = (int (*)(int *))sym(lib, "dnnl_get_default_fpmath_mode");
    if (ver) {
        const dnnl_version_t *v = ver();
        printf("  version: %d.%d.%d (%s) cpu_runtime 0x%x\n", v->major, v->minor, v->patch,
               v->hash ? v->hash : "?", v->cpu_runtime);
    }
    if (isa) {
        int i = isa();
        printf("  effective max cpu isa: 0x%x = %s\n", i, dnnl_isa_name(i));
    }
    if (fpm) {
        static const char *n[] = {"strict", "bf16", "f16", "any", "tf32"};
        int m = -1;
        if (fpm(&m) != 0) m = -1;
        printf("  default fpmath mode: %d = %s\n", m, (m >= 0 && m < 5) ? n[m] : "?");
    }
}

/* ---- helpers ---- */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 40) / (double)(1ull << 23) - 1.0);
}

static void *xmalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct {
    int M, N, K;
    int calls; /* calls per timed batch (small shapes are called many times) */
    const char *tag;
} shape_t;

static const shape_t shapes[] = {
    {4096, 1536, 512, 1, "L4096x1536x512"},
    {4096, 2048, 512, 1, "L4096x2048x512"},
    {4096, 512, 2048, 1, "L4096x512x2048"},
    {4096, 512, 512, 1, "L4096x512x512"},
    {64, 64, 128, 2000, "A64x64x128"},
    {16, 128, 64, 4000, "A16x128x64"},
    {4096, 2048, 512, 1, "REF4096x2048x512"},
    {8192, 128, 1408, 1, "C8192x128x1408"},
    {8192, 256, 256, 1, "C8192x256x256"},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Max error of C vs a double reference, in units of eps*sum|a*b|, over a sample of
 * rows (all rows when M is small). */
static double check_error(int M, int N, int K, const float *A, const float *B,
                          const float *C) {
    int rows = M <= 128 ? M : 96;
    double worst = 0.0;
    for (int r = 0; r < rows; r++) {
        int i = (M <= 128) ? r : (int)((long)r * (M - 1) / (rows - 1));
        for (int j = 0; j < N; j++) {
            double s = 0.0, sa = 0.0;
            const float *a = A + (size_t)i * K, *b = B + (size_t)j * K;
            for (int k = 0; k < K; k++) {
                double p = (double)a[k] * (double)b[k];
                s += p;
                sa += fabs(p);
            }
            double e = fabs((double)C[(size_t)i * N + j] - s) / (FLT_EPSILON * (sa + 1e-300));
            if (!(e <= worst)) worst = e; /* NaN propagates */
        }
    }
    return worst;
}

static int run_candidate(cand_t *c, int nthr) {
    printf("== %s  (OpenMP max threads %d, omp_get_num_procs %d)\n", c->name, nthr,
           omp_get_num_procs());
    double gf[NSHAPES], worst_err = 0.0;
    int all_det = 1, all_thr = 1;
    for (int s = 0; s < NSHAPES; s++) {
        const shape_t *sh = &shapes[s];
        int M = sh->M, N = sh->N, K = sh->K;
        size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
        float *A = xmalloc(na * 4), *B = xmalloc(nb * 4);
        float *C1 = xmalloc(nc * 4), *C2 = xmalloc(nc * 4), *C3 = xmalloc(nc * 4);
        rng_state = 0x1234567ull + (uint64_t)s * 977;
        for (size_t i = 0; i < na; i++) A[i] = frand();
        for (size_t i = 0; i < nb; i++) B[i] = frand();

        /* determinism: two calls on NaN-filled outputs must give identical bytes */
        memset(C1, 0xff, nc * 4);
        memset(C2, 0x7f, nc * 4);
        gemm(c, M, N, K, A, B, C1);
        gemm(c, M, N, K, A, B, C2);
        int det = memcmp(C1, C2, nc * 4) == 0;

        /* timing: best of reps; a rep is a batch of sh->calls calls */
        double flop = 2.0 * M * N * K * sh->calls, best = 1e30, spent = 0.0;
        for (int rep = 0; rep < 25 && (rep < 5 || spent < 1.5); rep++) {
            double t0 = now();
            for (int i = 0; i < sh->calls; i++) gemm(c, M, N, K, A, B, C2);
            double dt = now() - t0;
            spent += dt;
            if (dt < best) best = dt;
        }
        gf[s] = flop / best * 1e-9;
        det = det && memcmp(C1, C2, nc * 4) == 0; /* also vs. the timed calls */

        /* thread-count dependence: 1 thread vs default */
        c->set_threads(c->lib, 1);
        memset(C3, 0x7f, nc * 4);
        gemm(c, M, N, K, A, B, C3);
        c->set_threads(c->lib, nthr);
        int thr_same = memcmp(C1, C3, nc * 4) == 0;

        double err = check_error(M, N, K, A, B, C1);
        if (!(err <= worst_err)) worst_err = err;
        all_det &= det;
        all_thr &= thr_same;
        printf("  %-17s M=%5d N=%5d K=%5d x%-5d %8.1f GFLOP/s  err %.3g  repeat-identical %s"
               "  1thr==%dthr %s\n",
               sh->tag, M, N, K, sh->calls, gf[s], err, det ? "yes" : "NO", nthr,
               thr_same ? "yes" : "no");
        free(A); free(B); free(C1); free(C2); free(C3);
    }
    const char *label = getenv("GEMM_LABEL");
    printf("ROW|%s", label ? label : c->name);
    for (int s = 0; s < NSHAPES; s++) printf("|%.1f", gf[s]);
    printf("|%.3g|%s|%s\n", worst_err, all_det ? "yes" : "NO", all_thr ? "yes" : "no");
    fflush(stdout);
    return 0;
}

static void print_ident_header(const char *name) {
    const char *label = getenv("GEMM_LABEL");
    printf("== %s identification%s%s\n", name, label ? ": " : "", label ? label : "");
}

static int open_candidate(const char *name, cand_t *c) {
    memset(c, 0, sizeof *c);
    c->name = name;
    if (!strcmp(name, "openblas-debian")) {
        c->lib = dlopen("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                        RTLD_NOW | RTLD_LOCAL);
        if (!c->lib) goto fail;
        c->cblas = (cblas_sgemm_fn)sym(c->lib, "cblas_sgemm");
        c->set_threads = thr_openblas;
        print_ident_header(name);
        ident_openblas(c->lib, "");
    } else if (!strcmp(name, "openblas-scipy")) {
        const char *p = getenv("SCIPY_OPENBLAS_LIB");
        if (!p) p = "tmp/sob/scipy_openblas32/lib/libscipy_openblas.so";
        c->lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (!c->lib) goto fail;
        c->cblas = (cblas_sgemm_fn)sym(c->lib, "scipy_cblas_sgemm");
        c->set_threads = thr_scipy;
        thr_scipy(c->lib, omp_get_max_threads());
        print_ident_header(name);
        ident_openblas(c->lib, "scipy_");
    } else if (!strcmp(name, "blis")) {
        c->lib = dlopen("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
                        RTLD_NOW | RTLD_LOCAL);
        if (!c->lib) goto fail;
        c->cblas = (cblas_sgemm_fn)sym(c->lib, "cblas_sgemm");
        c->set_threads = thr_blis;
        thr_blis(c->lib, omp_get_max_threads()); /* BLIS is single-threaded by default */
        print_ident_header(name);
        ident_blis(c->lib);
    } else if (!strcmp(name, "onednn")) {
        c->lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!c->lib) goto fail;
        c->dnnl = (dnnl_sgemm_fn)sym(c->lib, "dnnl_sgemm");
        c->set_threads = thr_omp;
        print_ident_header(name);
        ident_dnnl(c->lib);
    } else {
        fprintf(stderr, "unknown candidate %s\n", name);
        return -1;
    }
    if (!c->cblas && !c->dnnl) {
        fprintf(stderr, "%s: sgemm symbol not found\n", name);
        return -1;
    }
    return 0;
fail:
    printf("== %s: not available (%s)\n", name, dlerror());
    printf("ROW|%s|unavailable\n", name);
    return -1;
}

int main(int argc, char **argv) {
    static const char *all[] = {"openblas-debian", "openblas-scipy", "blis", "onednn"};
    int n = argc > 1 ? argc - 1 : 4;
    const char **names = argc > 1 ? (const char **)(argv + 1) : all;
    int nthr = omp_get_max_threads();
    printf("OpenMP max threads: %d\n", nthr);
    for (int i = 0; i < n; i++) {
        cand_t c;
        if (open_candidate(names[i], &c) == 0) run_candidate(&c, nthr);
    }
    return 0;
}
