/* fuzz-safetensors.c -- libFuzzer target: the safetensors reader (nf__st_parse,
 * the checks behind nf__st_open) on arbitrary bytes. Any result code is
 * fine; a crash, a hang or a sanitizer report is a bug. Accepted files must
 * describe tensors inside the buffer: every byte of every tensor is read.
 * Built with -DNOFALL_FUZZ=ON (tools/test.sh stage 4; docs/hostile-input.md "Fuzzing"). */
#include "io/nf-io.h"

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    struct nf_safetensors st;
    if (nf__st_parse(data, size, "fuzz.safetensors", &st, &err) == NF_OK) {
        uint64_t total = 0;
        for (int i = 0; i < st.n_tensors; i++) {
            const struct nf_st_tensor * t = &st.tensors[i];
            const unsigned char * p = nf__st_data(&st, t);
            volatile unsigned char sink = 0;
            for (uint64_t b = 0; b < t->end - t->begin; b++) sink ^= p[b];
            (void) sink;
            total += t->end - t->begin;
            (void) nf__st_find(&st, t->name);
        }
        /* the tensors tile the data section exactly */
        if (total != st.data_size) __builtin_trap();
        nf__st_close(&st);
    }
    return 0;
}
