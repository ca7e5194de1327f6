/* fuzz-readers.c -- libFuzzer target for the safetensors and .npy readers.
 * Not part of ctest (it runs until stopped); build and run with:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L \
 *     -Iinclude -Isrc -Isrc/core tests/fuzz-readers.c src/io/safetensors.c src/io/npy.c \
 *     src/io/fileutil.c src/core/error.c -lcjson -o fuzz-readers && ./fuzz-readers -max_total_time=60
 * Each input is written to a file and opened as both formats; any result
 * code is fine, a crash or sanitizer report is a bug. */
#include "io/nf-io.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    char path[64];
    snprintf(path, sizeof(path), "/tmp/nf-fuzz-%d.bin", (int) getpid());
    FILE * f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    nf_err err;
    struct nf_safetensors st;
    if (nf__st_open(path, &st, &err) == NF_OK) {
        for (int i = 0; i < st.n_tensors; i++) {
            const struct nf_st_tensor * t = &st.tensors[i];
            const unsigned char * p = nf__st_data(&st, t);
            volatile unsigned char sink = 0;
            for (uint64_t b = 0; b < t->end - t->begin; b++) sink ^= p[b];   /* every byte in bounds */
            (void) sink;
        }
        nf__st_close(&st);
    }
    struct nf_npy a;
    if (nf__npy_read(path, &a, &err) == NF_OK) nf__npy_free(&a);
    remove(path);
    return 0;
}
