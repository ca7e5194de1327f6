/* seq-run.c -- `nofall run` on SpTransformer's sequence inputs
 * (nofall-genomics.h "run on a sequence"; docs/sequences.md): report.json's
 * "region" (the positions the rows are), and a sequence longer than one
 * window scored in tiles: the tracks beside the report, no .npy, each
 * written and read back here; the markers, the trace and the swap of the
 * output set stay with the caller. */
#include "nofall-genomics.h"
#include "nofall-outputs.h"
#include "nofall-plot.h"
#include "annotate-impl.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t nf__seq_run_cfg(const nf_model * m, const char * key) {
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, key) == 0) return ci.num;
    return -1;
}

static double nf__seq_run_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

void nf_seq_report_region(cJSON * rep, const nf_model * m, const nf_seq * seq, const char * region,
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
    const int64_t ctx = nf__seq_run_cfg(m, "context_len"), n = seq->L - 2 * (ctx > 0 ? ctx : 0);
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

int nf_seq_run_tiled(nf_model * m, const nf_backend * be, const nf_seq * seq, const char * region, const char * strand,
                     const char * model_path, const char * dir, struct nf_run_meas * meas, double * wall_ms,
                     char * shape, size_t shape_n, char ** svg, nf_err * err) {
    const int64_t ctx = nf__seq_run_cfg(m, "context_len"), win = nf__seq_run_cfg(m, "max_seq_len");
    const int64_t n = seq->L - 2 * ctx, kept = seq->B < 8 ? seq->B : 8;
    float * keep = NULL; /* --plot: the first records' acceptor / donor rows */
    int64_t x0 = 1;
    if (svg) {
        *svg = NULL;
        if (!(keep = malloc((size_t) (2 * kept * n) * sizeof(float))))
            return nf__err_set(err, NF_ERR_NOMEM, "--plot: out of memory for %lld positions", (long long) (kept * n));
    }
    const double t0 = nf__seq_run_now_ms();
    int rc0 = nf__seq_tracks_write_keep(m, seq, NULL, strand, dir, keep, &x0, err);
    *wall_ms = nf__seq_run_now_ms() - t0;
    if (rc0 == NF_OK && svg && !(*svg = nf_plot_tracks_svg(region, seq->B, n, x0, keep, keep + kept * n, err)))
        rc0 = err->code;
    free(keep);
    NF_TRY(rc0);
    NF_TRY(nf_run_measure(m, be, meas, err));
    char p[4096];
    snprintf(shape, shape_n, "%lld,%lld,%lld", (long long) seq->B, (long long) n,
             (long long) nf__seq_run_cfg(m, "tissue_num") + 3);
    cJSON * rep = cJSON_CreateObject();
    if (!rep) return nf__err_set(err, NF_ERR_NOMEM, "report.json: out of memory");
    nf_run_report_common(rep, model_path, m, be);
    nf_seq_report_region(rep, m, seq, region, strand);
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
    nf_run_report_passes(rep, m);
    nf_run_markers_json(rep, meas, shape, "", 1, *wall_ms);
    nf__path_join(p, sizeof(p), dir, "report.json");
    const int rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    NF_TRY(rc);
    /* read back: the TSV holds a header and every position */
    int64_t lines = 0;
    nf__path_join(p, sizeof(p), dir, nf_seq_track_files[0]);
    FILE * f = fopen(p, "r");
    for (int c; f && (c = fgetc(f)) != EOF;) lines += c == '\n';
    if (f) fclose(f);
    if (lines != 1 + seq->B * n)
        return nf__err_set(err, NF_ERR_IO, "%s: read back %lld lines, wrote %lld", p, (long long) lines,
                           (long long) (1 + seq->B * n));
    return NF_OK;
}
