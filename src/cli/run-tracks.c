/* run-tracks.c -- `nofall run --fasta F --region chr:start-end [--strand +|-]`
 * on SpTransformer: beside the .npy set, the per-position tracks with
 * coordinates (docs/sequences.md), through nofall-genomics.h nf_seq_track_*:
 *   tracks.tsv         contig, 1-based pos, strand, acceptor, donor, tissues
 *   acceptor.bedGraph  0-based half-open, the acceptor probability
 *   donor.bedGraph     the same for donor
 * Every record of the input is scored on its own (rows appended in record
 * order). The positions scored are the ones the .npy rows are: the input
 * minus its context flanks (mode given: the flanks are the region's own
 * bases; mode pad: N). */
#include "cli.h"
#include "nofall-genomics.h"
#include "io/nf-io.h"

#include <string.h>

const char * const nf_run_track_files[] = {"tracks.tsv", "acceptor.bedGraph", "donor.bedGraph", NULL};

int nf_run_tracks(nf_model * m, const struct nf_seq * seq, const char * strand, const char * dir, nf_err * err) {
    int64_t ctx = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) ctx = ci.num;
    const int64_t n = seq->L - 2 * ctx;
    char tsv[4096], acc[4096], don[4096];
    nf__path_join(tsv, sizeof(tsv), dir, nf_run_track_files[0]);
    nf__path_join(acc, sizeof(acc), dir, nf_run_track_files[1]);
    nf__path_join(don, sizeof(don), dir, nf_run_track_files[2]);
    int rc = NF_OK;
    for (int64_t b = 0; rc == NF_OK && b < seq->B; b++) {
        nf_seq_track t;
        char name[64];
        snprintf(name, sizeof(name), "sequence%lld", (long long) b + 1);
        const char * contig = seq->names && seq->names[b] ? seq->names[b] : seq->B > 1 ? name : NULL;
        /* ids[0] is at starts[b] in mode given; pad's flanks are not the file's */
        const int64_t first = (seq->starts ? seq->starts[b] : 1) + (seq->pad ? 0 : ctx);
        rc = nf_seq_track_score(m, seq->ids + b * seq->L, n, ctx, ctx, strand ? strand[0] : '+', contig, first, 0, &t,
                                err);
        if (rc == NF_OK) rc = nf_seq_track_write_tsv(&t, tsv, b > 0, err);
        if (rc == NF_OK) rc = nf_seq_track_write_bedgraph(&t, 1, acc, b > 0, err);
        if (rc == NF_OK) rc = nf_seq_track_write_bedgraph(&t, 2, don, b > 0, err);
        nf_seq_track_free(&t);
    }
    return rc;
}
