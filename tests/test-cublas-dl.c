/*
 * test-cublas-dl.c -- the cuda backend loads cuBLAS only when a cuda device is
 * opened (src/backends/cuda/cublas-dl.c): a process that never opens one does
 * not map libcublas, and the loader finds the library and every function the
 * backend calls. Needs no GPU: cuBLAS's status names work without a device.
 * Built for the real CUDA backend only (the emulator has no libcublas).
 */
#define NF_CUBLAS_DL_NO_MACROS /* the table's members by name */
#include "../src/backends/cuda/cuda-impl.h"

#include <stdio.h>
#include <string.h>

static int mapped(const char * lib) { /* is lib in this process's address space? */
    FILE * f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, lib)) found = 1;
    fclose(f);
    return found;
}

int main(void) {
    int fails = 0;
    nf_backend * be = NULL;
    nf_err err = {0};
    /* the cpu device does not load cuBLAS */
    if (nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        printf("FAIL cpu: %s\n", err.msg);
        return 1;
    }
    nf_backend_free(be);
    if (mapped("libcublas") != 0) {
        printf("FAIL libcublas is mapped before any cuda device was opened\n");
        fails++;
    } else {
        printf("ok   libcublas is not mapped by a process without a cuda device\n");
    }
    if (nf__cublas_load("cuda:test", &err) != NF_OK) {
        printf("FAIL load: %s\n", err.msg);
        return 1;
    }
    if (mapped("libcublas") != 1) {
        printf("FAIL libcublas is not mapped after the load\n");
        fails++;
    }
    int n = 0, null = 0;
#define NF_T(f) n++, null += nf__cublas_dl.f == NULL;
    NF_CUBLAS_FNS(NF_T)
#undef NF_T
    const char * s = null ? NULL : nf__cublas_dl.cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED);
    if (null || !s || strcmp(s, "CUBLAS_STATUS_NOT_INITIALIZED") != 0) {
        printf("FAIL %d of %d functions missing; status name \"%s\"\n", null, n, s ? s : "(null)");
        fails++;
    } else {
        printf("ok   loaded cuBLAS: %d functions; cublasGetStatusName through the table says %s\n", n, s);
    }
    if (nf__cublas_load("cuda:test", &err) != NF_OK) { /* a second load is a no-op */
        printf("FAIL second load: %s\n", err.msg);
        fails++;
    }
    return fails ? 1 : 0;
}
