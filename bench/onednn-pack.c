/* onednn-pack.c -- does prepacking LINEAR's weights pay? oneDNN's matmul
 * primitive on x (M, K) · Wᵀ (W stored (N, K) row-major) with W in its plain
 * layout (what the cpu backend hands it every call) against W reordered once
 * into the layout the primitive picks for weights format `any`; fp32
 * (beside dnnl_sgemm, the exact mode's GEMM) and bf16 (bf16 x bf16 -> f32,
 * the bf16-autocast mode's). Rate = 2 M N K / the best of reps, in CPU
 * seconds of the process (run it with OMP_NUM_THREADS=1 for one core's rate).
 * usage: nofall-onednn-pack M N K [reps]. A benchmark: it asserts nothing. */
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

#define CK(x)                                                  \
    do {                                                       \
        dnnl_status_t st_ = (x);                               \
        if (st_ != dnnl_success) {                             \
            fprintf(stderr, "%s: status %d\n", #x, (int) st_); \
            exit(1);                                           \
        }                                                      \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int M, N, K, reps;

/* best CPU s of one execute of a matmul (dt operands, f32 dst), W plain (N, K) or packed */
static double run_matmul(dnnl_data_type_t dt, const void * a, const void * w, float * c, int packed, char * impl,
                         size_t impl_n) {
    dnnl_memory_desc_t a_md, b_md, b_plain, c_md;
    dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    CK(dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dt, dnnl_ab));
    CK(dnnl_memory_desc_init_by_tag(&b_plain, 2, bd, dt, dnnl_ba));
    CK(dnnl_memory_desc_init_by_tag(&b_md, 2, bd, dt, packed ? dnnl_format_tag_any : dnnl_ba));
    CK(dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    CK(dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md));
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
    const char * s = NULL;
    CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s));
    snprintf(impl, impl_n, "%s", s);
    const dnnl_memory_desc_t * wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_t prim;
    CK(dnnl_primitive_create(&prim, pd));
    dnnl_memory_t am, bm, cm, wsrc = NULL;
    CK(dnnl_memory_create(&am, &a_md, eng, (void *) a));
    CK(dnnl_memory_create(&cm, &c_md, eng, c));
    if (packed) { /* W reordered once into the primitive's layout */
        CK(dnnl_memory_create(&wsrc, &b_plain, eng, (void *) w));
        CK(dnnl_memory_create(&bm, wmd, eng, DNNL_MEMORY_ALLOCATE));
        dnnl_primitive_desc_t rpd;
        CK(dnnl_reorder_primitive_desc_create(&rpd, &b_plain, eng, wmd, eng, NULL));
        dnnl_primitive_t r;
        CK(dnnl_primitive_create(&r, rpd));
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, wsrc}, {DNNL_ARG_TO, bm}};
        CK(dnnl_primitive_execute(r, strm, 2, ra));
        CK(dnnl_stream_wait(strm));
        dnnl_primitive_destroy(r);
        dnnl_primitive_desc_destroy(rpd);
    } else {
        CK(dnnl_memory_create(&bm, &b_plain, eng, (void *) w));
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t = cpu_s();
        CK(dnnl_primitive_execute(prim, strm, 3, args));
        CK(dnnl_stream_wait(strm));
        const double d = cpu_s() - t;
        if (r > 0 && d < best) best = d; /* r == 0: warm-up */
    }
    dnnl_memory_destroy(am);
    dnnl_memory_destroy(bm);
    dnnl_memory_destroy(cm);
    if (wsrc) dnnl_memory_destroy(wsrc);
    dnnl_primitive_destroy(prim);
    return best;
}

static uint16_t bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: nofall-onednn-pack M N K [reps]\n");
        return 2;
    }
    M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 10;
    if (M < 1 || N < 1 || K < 1 || reps < 1) return 2;
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    const size_t na = (size_t) M * K, nw = (size_t) N * K;
    float *A = malloc(na * 4), *W = malloc(nw * 4), *C = malloc((size_t) M * N * 4);
    uint16_t *Ab = malloc(na * 2), *Wb = malloc(nw * 2);
    if (!A || !W || !C || !Ab || !Wb) return 1;
    for (size_t i = 0; i < na; i++) A[i] = (float) ((i * 7919) % 13) * 0.1f - 0.6f, Ab[i] = bf16(A[i]);
    for (size_t i = 0; i < nw; i++) W[i] = (float) ((i * 104729) % 11) * 0.05f - 0.25f, Wb[i] = bf16(W[i]);
    double sg = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t = cpu_s();
        dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
        const double d = cpu_s() - t;
        if (r > 0 && d < sg) sg = d;
    }
    char i1[128], i2[128], i3[128], i4[128];
    const double f0 = run_matmul(dnnl_f32, A, W, C, 0, i1, sizeof(i1));
    const double f1 = run_matmul(dnnl_f32, A, W, C, 1, i2, sizeof(i2));
    const double b0 = run_matmul(dnnl_bf16, Ab, Wb, C, 0, i3, sizeof(i3));
    const double b1 = run_matmul(dnnl_bf16, Ab, Wb, C, 1, i4, sizeof(i4));
    const double fl = 2.0 * M * N * K / 1e9;
    printf("%dx%dx%d GFLOP/s (CPU s): sgemm %.1f | f32 plain %.1f packed %.1f (%.2fx) | bf16 plain %.1f packed %.1f "
           "(%.2fx) | bf16 packed / sgemm %.2fx\n",
           M, N, K, fl / sg, fl / f0, fl / f1, f0 / f1, fl / b0, fl / b1, b0 / b1, sg / b1);
    printf("  impl: f32 plain %s, f32 packed %s, bf16 plain %s, bf16 packed %s\n", i1, i2, i3, i4);
    return 0;
}
