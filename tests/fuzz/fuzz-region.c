/* fuzz-region.c -- libFuzzer target: SpTransformer's FASTA input
 * (nf_seq_fasta, src/genomics/seq-input.c) through htslib's faidx: the first
 * byte picks what the rest is --
 *   0: a --region string on a fixed FASTA (two records, its .fai built by htslib),
 *   1: the FASTA's bytes (no .fai: htslib builds one), read whole and as c1:2-9,
 *   2: the .fai's bytes beside the fixed FASTA (src/io/fai.c checks it first).
 * An accepted input's ids must all be 0..4 and its shape B x L with L > 0. */
#include "nofall-genomics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static char dir[64], fixed[128], fuzzed[128], fuzzed_fai[128], idx_fa[128], idx_fai[128];
static const char fasta[] = ">c1 first\nACGTACGTAC\nGTNNacgt\n>c2\nTTTTGGGGCCCCAAAA\nACGU\n";

static int put(const char * path, const void * p, size_t n) {
    FILE * f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void check(const char * path, const char * region) {
    nf_seq s;
    nf_err err;
    if (nf_seq_fasta(&s, path, region, 1, 3, &err) == NF_OK) {
        if (s.B < 1 || s.L < 7) __builtin_trap();
        for (int64_t i = 0; i < s.B * s.L; i++)
            if (s.ids[i] < 0 || s.ids[i] > 4) __builtin_trap();
    }
    nf_seq_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/fuzz-region-XXXXXX");
        if (!mkdtemp(dir)) abort();
        snprintf(fixed, sizeof(fixed), "%s/fixed.fa", dir);
        snprintf(fuzzed, sizeof(fuzzed), "%s/fuzzed.fa", dir);
        snprintf(fuzzed_fai, sizeof(fuzzed_fai), "%s/fuzzed.fa.fai", dir);
        snprintf(idx_fa, sizeof(idx_fa), "%s/idx.fa", dir);
        snprintf(idx_fai, sizeof(idx_fai), "%s/idx.fa.fai", dir);
        if (put(fixed, fasta, sizeof(fasta) - 1) || put(idx_fa, fasta, sizeof(fasta) - 1)) abort();
        check(fixed, NULL); /* builds fixed.fa.fai */
    }
    if (size < 1) return 0;
    const uint8_t mode = data[0] % 3;
    data++;
    size--;
    if (mode == 0) {
        char * region = malloc(size + 1);
        if (!region) return 0;
        memcpy(region, data, size);
        region[size] = 0;
        check(fixed, region);
        free(region);
    } else if (mode == 1) {
        unlink(fuzzed_fai);
        if (put(fuzzed, data, size)) return 0;
        check(fuzzed, NULL);
        check(fuzzed, "c1:2-9");
        unlink(fuzzed_fai);
    } else {
        if (put(idx_fai, data, size)) return 0;
        check(idx_fa, NULL);
        check(idx_fa, "c2:3-18");
    }
    return 0;
}
