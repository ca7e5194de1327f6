/* sgemm.c -- the machine's rate of the cpu backend's GEMM (oneDNN sgemm) on
 * the GEMM shapes of a Mitra forward (x·Wᵀ, row-major), for the ratios
 * bench/cpu-vs-torch.sh prints.
 * usage: nofall-sgemm M N K [reps]; prints GFLOPS=<rate>. A benchmark. */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

int main(int argc, char ** argv) {
    if (argc < 4) { fprintf(stderr, "usage: nofall-sgemm M N K [reps]\n"); return 2; }
    const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 10;
    if (M < 1 || N < 1 || K < 1 || reps < 1) { fprintf(stderr, "bad sizes\n"); return 2; }
    float * A = malloc(sizeof(float) * (size_t) M * (size_t) K);
    float * B = malloc(sizeof(float) * (size_t) N * (size_t) K);
    float * C = malloc(sizeof(float) * (size_t) M * (size_t) N);
    if (!A || !B || !C) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t) M * (size_t) K; i++) A[i] = (float) (i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t) N * (size_t) K; i++) B[i] = (float) (i % 5) * 0.1f;
    dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now_s();
        dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        t = now_s() - t;
        if (t < best) best = t;
    }
    printf("SGEMM=%dx%dx%d\nGFLOPS=%.2f\n", M, N, K, 2.0 * M * N * K / best / 1e9);
    free(A); free(B); free(C);
    return 0;
}
