/* fuzz-ckpt.c -- libFuzzer target for the torch.save (.ckpt) reader
 * (src/io/torch-ckpt.c). Built with the other fuzz targets (cmake
 * -DNOFALL_FUZZ=ON with clang) and run for a bounded time by tools/test.sh
 * from the seed corpus tests/fuzz/corpus/ckpt (the genuine torch.save files
 * of tests/fixtures/ckpt).
 * An input starting with "PK" is a whole archive (opened from memory with
 * libzip, every selected tensor read and each byte touched); any other input
 * is a data.pkl for the unpickler alone, with records data/0..data/3 of 24, 8,
 * 40 and 4096 bytes. Any result code is fine; a crash, a leak or a sanitizer
 * report is a bug. (libzip itself is not instrumented.) */
#include "io/nf-io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static int64_t nf_fuzz_record(void * ctx, const char * key, int64_t * entry) {
    (void) ctx;
    static const int64_t sizes[] = {24, 8, 40, 4096};
    if (key[0] >= '0' && key[0] <= '3' && key[1] == '\0') {
        *entry = key[0] - '0';
        return sizes[key[0] - '0'];
    }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    struct nf_ckpt ck;
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        if (nf__ckpt_open_mem(data, size, "fuzz.ckpt", &ck, &err) != NF_OK) return 0;
        struct nf_safetensors st;
        if (nf__ckpt_to_st(&ck, &st, &err) == NF_OK) {
            for (int i = 0; i < st.n_tensors; i++) {
                const struct nf_st_tensor * t = &st.tensors[i];
                const unsigned char * p = nf__st_data(&st, t);
                volatile unsigned char sink = 0;
                for (uint64_t b = 0; b < t->end - t->begin; b++) sink ^= p[b]; /* every byte in bounds */
                (void) sink;
            }
            nf__st_close(&st);
        }
        nf__ckpt_close(&ck);
        return 0;
    }
    memset(&ck, 0, sizeof(ck));
    nf__ckpt_parse_pickle(data, size, "fuzz/data.pkl", nf_fuzz_record, NULL, &ck, &err);
    for (int i = 0; i < ck.n_tensors; i++) {
        const struct nf_ckpt_tensor * t = &ck.tensors[i];
        const struct nf_ckpt_storage * s = &ck.storages[t->storage];
        /* the reader's promise: a non-empty tensor lies inside its storage */
        if (t->numel && (t->offset + t->numel > s->numel || !t->name[0])) abort();
        free(ck.tensors[i].name);
    }
    free(ck.tensors);
    for (int i = 0; i < ck.n_storages; i++) free(ck.storages[i].key);
    free(ck.storages);
    return 0;
}
