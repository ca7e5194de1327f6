/* fuzz-npy.c -- libFuzzer target: the .npy reader (nf__npy_parse, the checks
 * behind nf__npy_read) on arbitrary bytes. Accepted arrays must hold exactly
 * shape x dtype bytes, all of them read. */
#include "io/nf-io.h"

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    struct nf_npy a;
    if (nf__npy_parse(data, size, "fuzz.npy", &a, &err) == NF_OK) {
        uint64_t n = 1;
        for (int d = 0; d < a.ndim; d++) n *= (uint64_t) a.shape[d];
        if (n * nf__npy_dtype_size(a.dtype) != a.nbytes) __builtin_trap();
        volatile unsigned char sink = 0;
        for (size_t b = 0; b < a.nbytes; b++) sink ^= ((const unsigned char *) a.data)[b];
        (void) sink;
        nf__npy_free(&a);
    }
    return 0;
}
