/* fuzz-fai.c -- libFuzzer target: the FASTA index check (nf__fai_check_text,
 * src/io/fai.c) on arbitrary bytes, against a FASTA of 1,000 bytes and a
 * bgzip-compressed one (no span check). An accepted index's every record
 * must lie within the plain FASTA: LINEBASES > 0 where LENGTH > 0, and the
 * last base's byte below 1,000, recomputed here in 128-bit arithmetic. */
#include "io/nf-io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

/* the fields of a line the check accepted (5 or 6 decimal fields after the name) */
static void verify_line(const char * p, const char * le) {
    long long v[6] = {0};
    int nf = 0;
    for (const char * q = p; q <= le; q++)
        if (q == le || *q == '\t') {
            if (nf > 0 && nf < 6) v[nf] = strtoll(p, NULL, 10);
            nf++;
            p = q + 1;
        }
    if (nf != 5 && nf != 6) __builtin_trap();
    if (v[1] > 0) {
        if (v[3] <= 0 || v[4] < v[3]) __builtin_trap();
        const __int128 last = (__int128) v[2] + (__int128) ((v[1] - 1) / v[3]) * v[4] + (v[1] - 1) % v[3];
        if (last >= 1000) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    const char * txt = (const char *) data;
    (void) nf__fai_check_text(txt, size, UINT64_MAX, "fuzz.fa.fai", "fuzz.fa.gz", &err);
    if (nf__fai_check_text(txt, size, 1000, "fuzz.fa.fai", "fuzz.fa", &err) != NF_OK) return 0;
    /* the check reads exactly [data, data + size); the verification below, a NUL-terminated copy */
    char * copy = malloc(size + 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    copy[size] = 0;
    for (char *p = copy, *end = copy + size; p < end;) {
        char * nl = memchr(p, '\n', (size_t) (end - p));
        char * le = nl ? nl : end;
        if (le > p && le[-1] == '\r') le--;
        if (memchr(p, 0, (size_t) (le - p))) break; /* strtoll stops at a NUL: not checkable this way */
        const char saved = *le;
        *le = 0; /* each field's strtoll ends within the line */
        verify_line(p, le);
        *le = saved;
        p = nl ? nl + 1 : end;
    }
    free(copy);
    return 0;
}
