/* cmd-run.c -- `nofall run`: one forward of any model on one device,
 * verified artifacts, markers. The model makes its own input (nofall.h
 * nf_model_inputs: seeded, or from the files its options name), writes its
 * own artifacts and reads them back (nf_model_write_outputs /
 * nf_model_check_outputs); this file knows no model.
 *
 * Every marker is the result of a check made in this run:
 *   MODEL_DEVICE / INPUT_DEVICE / LOGITS_DEVICE  where the driver says the
 *       weights / uploaded inputs / output tensor live;
 *   OUTPUT_DEVICE  the device(s) that executed the forward's ops (op records);
 *   CPU_FALLBACK   true iff any of those differs from the requested device;
 *   ASSETS_VERIFIED  the written files were read back and checked.
 *
 * The artifacts are one set (README "Output sets"): written into a private
 * staging directory next to --out, read back, and swapped in as a whole
 * (outset.c); a failed or interrupted run leaves the previous set as it was.
 * Every check that can fail without the forward (arguments, --out usable and
 * not locked by another run, --trace distinct from the inputs, the model and
 * the artifacts, and writable) runs before it. */
#include "cli.h"
#include "nofall-genomics.h"
#include "nofall-plot.h"
#include "opts.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* run's options: the command's own, and those a model type takes (its
 * nf_model_type_run_options, by key) */
enum {
    NF_RF_CLI,   /* --model, --device, ...                                 */
    NF_RF_INPUT, /* an input option (nf_model_inputs)                     */
    NF_RF_SEQ,   /* a sequence input read here (seq-input.c)              */
    NF_RF_SET,   /* a model option (nf_model_set_option)                  */
    NF_RF_ADAPTER,
};
struct nf_run_flag {
    const char *flag, *key;
    int where, is_file; /* is_file: a file the run reads (--trace must not be it); ranges: options.def */
};
static const struct nf_run_flag nf_run_flags[] = {
    {"--model", "model", NF_RF_CLI, 0},
    {"--device", "device", NF_RF_CLI, 0},
    {"--out", "out", NF_RF_CLI, 0},
    {"--trace", "trace", NF_RF_CLI, 0},
    {"--plot", "plot", NF_RF_CLI, 0},
    {"--precision", "precision", NF_RF_CLI, 0},
    {"--seed", "seed", NF_RF_INPUT, 0},
    {"--support-x", "support_x", NF_RF_INPUT, 1},
    {"--support-y", "support_y", NF_RF_INPUT, 1},
    {"--query-x", "query_x", NF_RF_INPUT, 1},
    {"--length", "positions", NF_RF_INPUT, 0},
    {"--cells", "cells", NF_RF_INPUT, 1},
    {"--tokens", "tokens", NF_RF_SEQ, 1},
    {"--sequence", "sequence", NF_RF_SEQ, 0},
    {"--fasta", "fasta", NF_RF_SEQ, 1},
    {"--region", "region", NF_RF_SEQ, 0},
    {"--context", "context", NF_RF_SEQ, 0},
    {"--strand", "strand", NF_RF_CLI, 0},
    {"--chunk-rows", "chunk_rows", NF_RF_SET, 0},
    {"--query-chunk", "query_chunk", NF_RF_SET, 0},
    {"--adapter", "adapter", NF_RF_ADAPTER, 0},
};
#define NF_RUN_N_FLAGS ((int) (sizeof(nf_run_flags) / sizeof(nf_run_flags[0])))

struct nf_run_opts {
    char type[64];
    const char * value[NF_RUN_N_FLAGS]; /* by flag; NULL: not given */
    int64_t num[NF_RUN_N_FLAGS];
    int precision;
};

static int nf_run_flag_index(const char * key) {
    for (int i = 0; i < NF_RUN_N_FLAGS; i++)
        if (strcmp(nf_run_flags[i].key, key) == 0) return i;
    return -1;
}
static const char * nf_run_opt(const struct nf_run_opts * o, const char * key) {
    return o->value[nf_run_flag_index(key)];
}

/* the input options given, as nf_model_inputs / nf_model_type_check_inputs take them */
static int nf_run_input_opts(const struct nf_run_opts * o, int with_seq, const char ** keys, const char ** values) {
    int n = 0;
    for (int i = 0; i < NF_RUN_N_FLAGS; i++) {
        const int w = nf_run_flags[i].where;
        if (o->value[i] && (w == NF_RF_INPUT || (with_seq && w == NF_RF_SEQ))) {
            keys[n] = nf_run_flags[i].key;
            values[n++] = o->value[i];
        }
    }
    return n;
}

static int nf_run_parse(int argc, char ** argv, struct nf_run_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            nf_model_type_of(argv[i + 1], o->type, sizeof(o->type));
            break;
        }
    }
    /* the option table's rows for this model type's run (options.def) */
    const uint32_t mask = nf_cli_variant_of_type(o->type, NF_M(RUN_MITRA), NF_M(RUN_SPT), NF_M(RUN_TAB));
    if (!nf_cli_opts_parse(mask, argc, argv, 1, NULL, &v)) return 0;
    for (int k = 0; k < NF_RUN_N_FLAGS; k++) {
        const int id = nf_cli_opt_id_of(nf_run_flags[k].flag, mask);
        if (id < 0 || !v.set[id]) continue;
        o->value[k] = v.s[id];
        o->num[k] = v.i[id];
        if (strcmp(nf_run_flags[k].flag, "--precision") == 0) nf_cli_parse_precision(v.s[id], &o->precision);
    }
    const char * model = nf_run_opt(o, "model");
    if (!model || !nf_run_opt(o, "out")) {
        fprintf(stderr, "error: run needs --model DIR and --out OUTDIR\n");
        return 0;
    }
    if (!model[0]) {
        fprintf(stderr, "error: --model needs a directory, got ''\n");
        return 0;
    }
    const char *keys[NF_RUN_N_FLAGS], *values[NF_RUN_N_FLAGS];
    const int n = nf_run_input_opts(o, 1, keys, values);
    nf_err err = {0};
    if (nf_model_type_check_inputs(o->type, n, keys, values, &err) != NF_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 0;
    }
    return 1;
}

/* SpTransformer's sequence inputs (--tokens, --sequence, --fasta [--region],
 * --context): read by nofall-genomics.h's nf_seq_* and handed to the model
 * as its "tokens" array. */
static int nf_run_seq_inputs(const struct nf_run_opts * o, nf_model * m, nf_inputs ** out, nf_seq * keep,
                             nf_err * err) {
    const char *tokens = nf_run_opt(o, "tokens"), *fasta = nf_run_opt(o, "fasta"), *ctx = nf_run_opt(o, "context");
    const int pad = ctx ? (strcmp(ctx, "genome") == 0 ? NF_SEQ_GENOME : strcmp(ctx, "pad") == 0) : !(tokens || fasta);
    int64_t context = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    nf_seq s = {0};
    int rc;
    if (tokens)
        rc = nf_seq_npy(&s, tokens, pad, context, err);
    else if (fasta)
        rc = nf_seq_fasta(&s, fasta, nf_run_opt(o, "region"), pad, context, err);
    else
        rc = nf_seq_string(&s, nf_run_opt(o, "sequence"), pad, context, err);
    if (rc == NF_OK && keep && nf_seq_tiled_needed(m, &s)) { /* longer than a window: tiles, no .npy */
        *keep = s;
        return NF_OK;
    }
    int64_t * ids = rc == NF_OK ? malloc((size_t) (s.B * s.L > 0 ? s.B * s.L : 1) * sizeof(int64_t)) : NULL;
    if (rc == NF_OK && !ids) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK) {
        for (int64_t i = 0; i < s.B * s.L; i++) ids[i] = s.ids[i];
        const struct nf_array t = {"tokens", NF_ARRAY_I64, 2, {s.B, s.L}, ids};
        char flank[32];
        snprintf(flank, sizeof(flank), "%lld", (long long) s.flank);
        const char * keys[3] = {"source", "context", "flank"};
        const char * values[3] = {s.source, nf_seq_mode_name(&s), flank};
        rc = nf_model_inputs_given(m, &t, 1, 3, keys, values, out, err);
    }
    free(ids);
    if (rc == NF_OK && keep)
        *keep = s; /* the tracks' input */
    else
        nf_seq_free(&s);
    return rc;
}

/* report.json: the common members, the model's, how the queries went, the markers */
static int nf_run_report(const char * path, const struct nf_run_opts * o, nf_model * m, const nf_backend * be,
                         const nf_seq * seq, const struct nf_run_outputs * res, const struct nf_run_meas * meas,
                         double wall_ms, nf_err * err) {
    cJSON * rep = cJSON_CreateObject();
    cJSON * mine = cJSON_Parse(res->report);
    if (!rep || !mine) {
        cJSON_Delete(rep);
        cJSON_Delete(mine);
        return nf__err_set(err, NF_ERR_NOMEM, "report.json: out of memory");
    }
    nf_run_report_common(rep, nf_run_opt(o, "model"), m, be);
    if (seq->ids) nf_seq_report_region(rep, m, seq, nf_run_opt(o, "region"), nf_run_opt(o, "strand"));
    while (mine->child) {
        cJSON * c = cJSON_DetachItemViaPointer(mine, mine->child);
        cJSON_AddItemToObject(rep, c->string, c);
    }
    cJSON_Delete(mine);
    nf_run_report_passes(rep, m);
    nf_run_markers_json(rep, meas, res->shape, res->classes, 1, wall_ms);
    const int rc = nf__json_write_file(path, rep, err);
    cJSON_Delete(rep);
    return rc;
}

static int nf_run_main(const struct nf_run_opts * o, nf_err * err) {
    nf_backend * be = NULL;
    nf_model * m = NULL;
    nf_inputs * in = NULL;
    nf_seq seq = {0};
    float * logits = NULL;
    struct nf_run_outputs res = {0};
    struct nf_outset os;
    struct nf_outfile tr;
    memset(&tr, 0, sizeof(tr));
    tr.fd = tr.slot = -1;
    char trace_in_out[4096] = "", p[4096];
    const char *model = nf_run_opt(o, "model"), *trace = nf_run_opt(o, "trace");
    const char *device = nf_run_opt(o, "device"), *adapter = nf_run_opt(o, "adapter");
    const char * const * base = nf_model_type_artifacts(o->type);
    const char * artifacts[48];
    int n_artifacts = 0, rc;
    while (base[n_artifacts] && n_artifacts < 40) artifacts[n_artifacts] = base[n_artifacts], n_artifacts++;
    for (int i = 0; strcmp(o->type, "sptransformer") == 0 && nf_seq_track_files[i]; i++)
        artifacts[n_artifacts++] = nf_seq_track_files[i]; /* a stale track is not carried over */
    artifacts[n_artifacts] = NULL;
    /* --out locked and staged, --trace checked and created: before any work */
    struct stat msb; /* --model X.ckpt: a regular file, named when it is not (a FIFO would block) */
    if (stat(model, &msb) == 0 && !S_ISDIR(msb.st_mode)) {
        int mfd;
        uint64_t msize;
        NF_TRY(nf__open_regular_flag("--model", model, &mfd, &msize, err));
        close(mfd);
    }
    NF_TRY(nf_outset_begin(&os, nf_run_opt(o, "out"), artifacts, n_artifacts, err));
    const char * inputs[NF_RUN_N_FLAGS];
    const char * input_flags[NF_RUN_N_FLAGS];
    int n_inputs = 0;
    for (int i = 0; i < NF_RUN_N_FLAGS; i++) {
        if (nf_run_flags[i].is_file && o->value[i]) {
            inputs[n_inputs] = o->value[i];
            input_flags[n_inputs++] = nf_run_flags[i].flag;
        }
    }
    if ((rc = nf_run_check_trace(trace, model, inputs, input_flags, n_inputs, &os, artifacts, n_artifacts, trace_in_out,
                                 sizeof(trace_in_out), err)) != NF_OK)
        goto done;
    if (trace && !trace_in_out[0] && (rc = nf_outfile_open(&tr, trace, "--trace", err)) != NF_OK) goto done;
    if (nf_run_opt(o, "plot") && ((rc = nf_out_check(nf_run_opt(o, "plot"), "--plot", err)) != NF_OK ||
                                  (rc = nf_plot_check_writable(nf_run_opt(o, "plot"), "--plot", err)) != NF_OK))
        goto done;
    /* the device first: an absent device fails before any work */
    if ((rc = nf_cli_backend_init(device ? device : "cpu", o->precision, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_cli_model_load(be, model, &m, err)) != NF_OK) goto done;
    char summary[4400] = "";
    if (adapter && (rc = nf_model_apply_adapter(m, adapter, summary, sizeof(summary), err)) != NF_OK) goto done;
    for (int i = 0; i < NF_RUN_N_FLAGS; i++) {
        if (nf_run_flags[i].where == NF_RF_SET && o->value[i] &&
            (rc = nf_model_set_option(m, nf_run_flags[i].key, o->num[i], err)) != NF_OK)
            goto done;
    }
    if (nf_run_opt(o, "tokens") || nf_run_opt(o, "sequence") || nf_run_opt(o, "fasta")) {
        rc = nf_run_seq_inputs(o, m, &in, &seq, err);
    } else {
        const char *keys[NF_RUN_N_FLAGS], *values[NF_RUN_N_FLAGS];
        const int n = nf_run_input_opts(o, 0, keys, values);
        rc = nf_model_inputs(m, n, keys, values, &in, err);
    }
    if (rc != NF_OK) goto done;
    char note[1024]; /* --context given on a --region: which positions the rows are */
    if (seq.ids && nf_seq_scored_note(m, &seq, nf_run_opt(o, "region"), note, sizeof(note)))
        fprintf(stderr, "note: %s\n", note);
    if (seq.ids && nf_seq_tiled_needed(m, &seq)) { /* longer than one window: tiles, the tracks and report.json */
        struct nf_run_meas tm;
        double tms;
        char shape[96], *svg = NULL; /* --plot: drawn from the tiles' rows */
        const char * plot = nf_run_opt(o, "plot");
        rc = nf_seq_run_tiled(m, be, &seq, nf_run_opt(o, "region"), nf_run_opt(o, "strand"), model, os.staging, &tm,
                              &tms, shape, sizeof(shape), plot ? &svg : NULL, err);
        if (rc == NF_OK && plot) rc = nf_plot_write(plot, "--plot", svg, err);
        nf_free(svg);
        if (rc == NF_OK && (rc = nf_run_finish(be, trace, trace_in_out, &tr, &os, err)) == NF_OK) {
            nf_run_markers_print(&tm, be, shape, "", 1, tms, 1);
            rc = nf_run_commit(&os, trace, trace_in_out, &tr, err);
        }
        goto done;
    }
    int out_ndim = 0;
    int64_t out_shape[NF_ARRAY_MAX_DIMS], n_out = 1;
    if ((rc = nf_model_output_shape(m, nf_inputs_arrays(in), nf_inputs_count(in), &out_ndim, out_shape, err)) != NF_OK)
        goto done;
    for (int d = 0; d < out_ndim; d++) n_out *= out_shape[d];
    logits = malloc((size_t) (n_out > 0 ? n_out : 1) * sizeof(float));
    if (!logits) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    nf_out_test_delay("forward");
    const double t0 = nf_cli_now_ms();
    if ((rc = nf_model_forward(m, nf_inputs_arrays(in), nf_inputs_count(in), logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_cli_now_ms() - t0;
    for (int64_t i = 0; i < n_out; i++) {
        if (!isfinite(logits[i])) {
            rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
            goto done;
        }
    }
    /* artifacts: into the staging directory; read back once all are there */
    if ((rc = nf_model_write_outputs(m, in, logits, adapter ? summary : NULL, os.staging, &res, err)) != NF_OK)
        goto done;
    /* --region / --strand: the per-position tracks beside them (nofall-genomics.h) */
    if ((nf_run_opt(o, "region") || nf_run_opt(o, "strand")) &&
        (rc = nf_seq_tracks_write(m, &seq, logits, nf_run_opt(o, "strand"), os.staging, err)) != NF_OK)
        goto done;
    nf_out_test_delay("write");
    struct nf_run_meas meas; /* placement, measured */
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    nf_outset_path(&os, "report.json", p, sizeof(p));
    if ((rc = nf_run_report(p, o, m, be, &seq, &res, &meas, wall_ms, err)) != NF_OK) goto done;
    rc = nf_model_check_outputs(m, in, logits, os.staging, err);
    if (rc == NF_OK) {
        cJSON * doc = NULL;
        rc = nf__json_read_file(p, &doc, err);
        if (rc == NF_OK && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "markers")))
            rc = nf__err_set(err, NF_ERR_IO, "%s: read back without its markers", p);
        cJSON_Delete(doc);
    }
    const int assets_verified = rc == NF_OK; /* the set read back and checked */
    if (!assets_verified) goto done;
    if (nf_run_opt(o, "plot")) { /* --plot FILE.svg (docs/plots.md) */
        char * svg = nf_plot_run_svg(m, in, logits, nf_run_opt(o, "region"), err);
        rc = svg ? nf_plot_write(nf_run_opt(o, "plot"), "--plot", svg, err) : err->code;
        nf_free(svg);
        if (rc != NF_OK) goto done;
    }
    if ((rc = nf_run_finish(be, trace, trace_in_out, &tr, &os, err)) != NF_OK) goto done;
    nf_run_markers_print(&meas, be, res.shape, res.classes, 1, wall_ms, assets_verified);
    rc = nf_run_commit(&os, trace, trace_in_out, &tr, err);
done:
    nf_outfile_abort(&tr);
    nf_outset_end(&os);
    free(logits);
    nf_free(res.report);
    nf_inputs_free(in);
    nf_seq_free(&seq);
    nf_model_free(m);
    nf_backend_free(be);
    return rc;
}

int nf_cmd_run(int argc, char ** argv) {
    struct nf_run_opts o;
    if (!nf_run_parse(argc, argv, &o)) return 2;
    nf_out_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_run_main(&o, &err), &err);
}
