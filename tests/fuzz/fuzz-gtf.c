/* fuzz-gtf.c -- libFuzzer target: the GTF reader (nf_genes_load,
 * src/genomics/genes.c, through htslib's hts_getline; plain, gzip or bgzip
 * bytes alike) on arbitrary bytes written to a temp file, then the strand
 * lookup of an accepted one at a few positions. A loaded gene index has at
 * least one gene and answers 0..3. */
#include "nofall-genomics.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (!path[0]) {
        char dir[64];
        snprintf(dir, sizeof(dir), "/tmp/fuzz-gtf-XXXXXX");
        if (!mkdtemp(dir)) abort();
        snprintf(path, sizeof(path), "%s/genes.gtf", dir);
    }
    FILE * f = fopen(path, "wb");
    if (!f) return 0;
    const int ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) != 0 || !ok) return 0;
    nf_genes * gs = NULL;
    nf_err err;
    if (nf_genes_load(path, &gs, &err) != NF_OK) {
        if (gs) __builtin_trap(); /* nothing handed out on failure */
        return 0;
    }
    if (nf_genes_count(gs) < 1) __builtin_trap();
    static const char * const contigs[] = {"chr1", "1", "c1", ""};
    static const int64_t pos[] = {0, 1, 2, 100, 1000000, INT64_MAX};
    for (size_t c = 0; c < sizeof(contigs) / sizeof(*contigs); c++)
        for (size_t p = 0; p < sizeof(pos) / sizeof(*pos); p++)
            for (int pc = 0; pc < 2; pc++) {
                const int s = nf_genes_strands(gs, contigs[c], pos[p], pc);
                if (s < 0 || s > 3) __builtin_trap();
            }
    nf_genes_free(gs);
    return 0;
}
