/* run-tracks.c -- `nofall run --fasta F --region chr:start-end [--strand +|-]`
 * on SpTransformer: beside the .npy set, the per-position tracks with
 * coordinates (docs/sequences.md), written by nofall-genomics.h's
 * nf_seq_tracks_write; here the tiled run's report and markers:
 *   tracks.tsv         contig, 1-based pos, strand, acceptor, donor, tissues
 *   acceptor.bedGraph  0-based half-open, the acceptor probability
 *   donor.bedGraph     the same for donor
 * Every record of the input is scored on its own (rows appended in record
 * order). The positions scored are the ones the .npy rows are: the input
 * minus its context flanks (mode given: the flanks are the region's own
 * bases; mode pad: N; mode genome: the FASTA's bases beyond the region). */
#include "cli.h"
#include "nofall-genomics.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static int64_t nf_run_cfg(const nf_model * m, const char * key) {
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, key) == 0) return ci.num;
    return -1;
}

void nf_run_report_region(cJSON * rep, const nf_model * m, const struct nf_seq * seq, const char * region,
                          const char * strand) {
    if (!region && !strand) return;
    cJSON * r = cJSON_AddObjectToObject(rep, "region");
    if (!r) return;
    if (region) cJSON_AddStringToObject(r, "spec", region);
    cJSON_AddStringToObject(r, "strand", strand ? strand : "+");
    char note[1024];
    if (region) cJSON_AddStringToObject(r, "context", nf_seq_mode_name(seq));
    if (nf_seq_scored_note(m, seq, region, note, sizeof(note))) cJSON_AddStringToObject(r, "note", note);
    if (seq->mode == NF_SEQ_GENOME) { /* N where a flank runs past the contig's start / end */
        cJSON * pe = cJSON_AddArrayToObject(r, "n_past_contig_ends");
        for (int k = 0; pe && k < 2; k++) cJSON_AddItemToArray(pe, cJSON_CreateNumber((double) seq->past_ends[k]));
    }
    const int64_t ctx = nf_run_cfg(m, "context_len"), n = seq->L - 2 * (ctx > 0 ? ctx : 0);
    cJSON * recs = cJSON_AddArrayToObject(r, "records"); /* the positions the rows are, as tracks.tsv's */
    for (int64_t b = 0; recs && b < seq->B; b++) {
        cJSON * x = cJSON_CreateObject();
        if (!x) return;
        const int64_t first = (seq->starts ? seq->starts[b] : 1) + (seq->pad || ctx < 0 ? 0 : ctx);
        if (seq->names && seq->names[b]) cJSON_AddStringToObject(x, "contig", seq->names[b]);
        cJSON_AddNumberToObject(x, "start", (double) first);
        cJSON_AddNumberToObject(x, "end", (double) (first + n - 1));
        cJSON_AddItemToArray(recs, x);
    }
}

int nf_run_tiled(nf_model * m, const nf_backend * be, const struct nf_seq * seq, const char * region,
                 const char * strand, const char * model_path, const char * trace, const char * trace_in_out,
                 struct nf_cli_outfile * tr, struct nf_outset * os, nf_err * err) {
    const int64_t ctx = nf_run_cfg(m, "context_len"), win = nf_run_cfg(m, "max_seq_len");
    const double t0 = nf_cli_now_ms();
    NF_TRY(nf_seq_tracks_write(m, seq, NULL, strand, os->staging, err));
    const double wall_ms = nf_cli_now_ms() - t0;
    struct nf_run_meas meas;
    NF_TRY(nf_run_measure(m, be, &meas, err));
    const int64_t n = seq->L - 2 * ctx;
    char shape[96], p[4096];
    snprintf(shape, sizeof(shape), "%lld,%lld,%lld", (long long) seq->B, (long long) n,
             (long long) nf_run_cfg(m, "tissue_num") + 3);
    cJSON * rep = cJSON_CreateObject();
    if (!rep) return nf__err_set(err, NF_ERR_NOMEM, "report.json: out of memory");
    nf_run_report_common(rep, model_path, m, be);
    nf_run_report_region(rep, m, seq, region, strand);
    cJSON * t = cJSON_AddObjectToObject(rep, "tracks");
    cJSON_AddNumberToObject(t, "records", (double) seq->B);
    cJSON_AddNumberToObject(t, "positions_each", (double) n);
    cJSON_AddNumberToObject(t, "tile", (double) win);
    cJSON_AddNumberToObject(t, "tiles_each", (double) ((n + win - 1) / win));
    cJSON_AddNumberToObject(t, "context_len", (double) ctx);
    cJSON_AddStringToObject(t, "flank_mode", nf_seq_mode_name(seq));
    cJSON_AddStringToObject(t, "strand", strand ? strand : "+");
    cJSON * files = cJSON_AddArrayToObject(t, "files");
    for (int i = 0; nf_seq_track_files[i]; i++) cJSON_AddItemToArray(files, cJSON_CreateString(nf_seq_track_files[i]));
    nf_cli_report_passes(rep, m);
    nf_run_markers_json(rep, &meas, shape, "", 1, wall_ms);
    nf_outset_path(os, "report.json", p, sizeof(p));
    int rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    /* read back: the TSV holds a header and every position */
    int64_t lines = 0;
    if (rc == NF_OK) {
        nf_outset_path(os, nf_seq_track_files[0], p, sizeof(p));
        FILE * f = fopen(p, "r");
        for (int c; f && (c = fgetc(f)) != EOF;) lines += c == '\n';
        if (f) fclose(f);
        if (lines != 1 + seq->B * n)
            rc = nf__err_set(err, NF_ERR_IO, "%s: read back %lld lines, wrote %lld", p, (long long) lines,
                             (long long) (1 + seq->B * n));
    }
    if (rc == NF_OK) rc = nf_run_finish(be, trace, trace_in_out, tr, os, err);
    if (rc == NF_OK) nf_run_markers_print(&meas, be, shape, "", 1, wall_ms, 1);
    if (rc == NF_OK) rc = nf_run_commit(os, trace, trace_in_out, tr, err);
    return rc;
}
