/* cmd-run.c -- `nofall run`: one forward on one device, verified artifacts, markers.
 *
 * Every marker is the result of a check made in this run:
 *   MODEL_DEVICE / INPUT_DEVICE / LOGITS_DEVICE  where the driver says the
 *       weights / uploaded inputs / logits tensor live;
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
#include "opts.h"
#include "weights.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char * const nf_run_artifacts[] = {
    "support_x.npy", "support_y.npy", "query_x.npy", "logits.npy", "class_ids.npy", "report.json",
};
#define NF_RUN_N_ARTIFACTS (sizeof(nf_run_artifacts) / sizeof(nf_run_artifacts[0]))

struct nf_run_opts {
    const char *model, *device, *out, *sx, *sy, *qx, *trace;
    uint64_t seed;
    int precision;
    int64_t chunk_rows, query_chunk;
};

/* Read the artifacts back and check shape, dtype and finiteness. */
static int nf_run_verify_assets(const char * dir, const struct nf_cli_table * t, int out_ndim,
                                const int64_t * out_shape, int width, int has_classes, nf_err * err) {
    char p[4096];
    struct nf_npy a;
    struct {
        const char * f;
        enum nf_npy_dtype dt;
        int nd;
        int64_t s0, s1;
    } want[5] = {
        {"support_x.npy", NF_NPY_F4, 2, t->n_support, t->n_features},
        {"support_y.npy", t->yc ? NF_NPY_I8 : NF_NPY_F4, 1, t->n_support, 0},
        {"query_x.npy", NF_NPY_F4, 2, t->n_query, t->n_features},
        {"logits.npy", NF_NPY_F4, out_ndim, out_shape[0], out_ndim > 1 ? out_shape[1] : 0},
        {"class_ids.npy", NF_NPY_I8, 1, t->n_query, 0},
    };
    for (int i = 0; i < (has_classes ? 5 : 4); i++) {
        nf__path_join(p, sizeof(p), dir, want[i].f);
        NF_TRY(nf__npy_read(p, &a, err));
        int ok = a.dtype == want[i].dt && a.ndim == want[i].nd && a.shape[0] == want[i].s0 &&
                 (a.ndim < 2 || a.shape[1] == want[i].s1);
        if (ok && a.dtype == NF_NPY_F4) {
            for (size_t e = 0; e < a.nbytes / 4; e++) ok &= isfinite(((const float *) a.data)[e]) != 0;
        }
        if (ok && i == 4) {
            for (int64_t e = 0; e < a.shape[0]; e++) {
                int64_t c = ((const int64_t *) a.data)[e];
                ok &= c >= 0 && c < width;
            }
        }
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype or non-finite values", p);
    }
    /* report.json: strict JSON, an object with its markers */
    nf__path_join(p, sizeof(p), dir, "report.json");
    cJSON * doc = NULL;
    NF_TRY(nf__json_read_file(p, &doc, err));
    const int ok = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "markers"));
    cJSON_Delete(doc);
    if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back without its markers", p);
    return NF_OK;
}

static int nf_run_parse(int argc, char ** argv, struct nf_run_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(RUN_MITRA), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->out = nf_cli_opt_str(&v, NF_O_OUT, NULL);
    o->seed = v.set[NF_O_SEED] ? (uint64_t) v.i[NF_O_SEED] : 42;
    o->sx = nf_cli_opt_str(&v, NF_O_SUPPORT_X, NULL);
    o->sy = nf_cli_opt_str(&v, NF_O_SUPPORT_Y, NULL);
    o->qx = nf_cli_opt_str(&v, NF_O_QUERY_X, NULL);
    o->trace = nf_cli_opt_str(&v, NF_O_TRACE, NULL);
    o->chunk_rows = v.i[NF_O_CHUNK_ROWS];
    o->query_chunk = v.i[NF_O_QUERY_CHUNK];
    nf_cli_parse_precision(nf_cli_opt_str(&v, NF_O_PRECISION, "exact"), &o->precision);
    if (!o->model || !o->out) {
        fprintf(stderr, "error: run needs --model DIR and --out OUTDIR\n");
        return 0;
    }
    if (!o->model[0]) {
        fprintf(stderr, "error: --model needs a directory, got ''\n");
        return 0;
    }
    int nfiles = (o->sx != NULL) + (o->sy != NULL) + (o->qx != NULL);
    if (nfiles != 0 && nfiles != 3) {
        fprintf(stderr, "error: give all of --support-x, --support-y, --query-x, or none\n");
        return 0;
    }
    return 1;
}

static int nf_run_main(const struct nf_run_opts * o, nf_err * err) {
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_cli_table t = {0};
    float * logits = NULL;
    int64_t * cls = NULL;
    struct nf_outset os;
    struct nf_cli_outfile tr;
    memset(&tr, 0, sizeof(tr));
    tr.fd = tr.slot = -1;
    char trace_in_out[4096] = "";
    int rc;
    /* --out locked and staged, --trace checked and created: before any work */
    NF_TRY(nf_outset_begin(&os, o->out, nf_run_artifacts, (int) NF_RUN_N_ARTIFACTS, err));
    const char * inputs[3] = {o->sx, o->sy, o->qx};
    static const char * const input_flags[3] = {"--support-x", "--support-y", "--query-x"};
    if ((rc = nf_run_check_trace(o->trace, o->model, inputs, input_flags, 3, &os, nf_run_artifacts,
                                 (int) NF_RUN_N_ARTIFACTS, trace_in_out, sizeof(trace_in_out), err)) != NF_OK)
        goto done;
    if (o->trace && !trace_in_out[0] && (rc = nf_cli_outfile_open(&tr, o->trace, "--trace", err)) != NF_OK) goto done;
    /* the device first: an absent device fails before any work */
    if ((rc = nf_cli_backend_init(o->device, o->precision, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, o->trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    if (o->chunk_rows > 0 && (rc = nf_model_set_option(m, "chunk_rows", o->chunk_rows, err)) != NF_OK) goto done;
    if (o->query_chunk > 0 && (rc = nf_model_set_option(m, "query_chunk", o->query_chunk, err)) != NF_OK) goto done;
    int class_labels = 0;
    int64_t n_classes = 0;
    if ((rc = nf_cli_table_model(m, &class_labels, &n_classes, err)) != NF_OK) goto done;
    if (o->sx)
        rc = nf_cli_table_load(o->sx, o->sy, o->qx, class_labels, &t, err);
    else
        rc = nf_cli_table_generate(o->seed, 16, 8, 13, class_labels,
                                   class_labels ? (int) (n_classes < 10 ? n_classes : 10) : 0, &t, err);
    if (rc != NF_OK) goto done;
    int out_ndim = 0, width = 0;
    int64_t out_shape[NF_ARRAY_MAX_DIMS];
    if ((rc = nf_cli_output_shape(m, &t, &out_ndim, out_shape, &width, err)) != NF_OK) goto done;

    logits = malloc((size_t) (t.n_query * width) * sizeof(float));
    cls = malloc((size_t) t.n_query * sizeof(int64_t));
    if (!logits || !cls) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    struct nf_array in[NF_CLI_TABLE_INPUTS];
    nf_cli_table_arrays(&t, in);
    nf_cli_test_delay("forward");
    const double t0 = nf_cli_now_ms();
    if ((rc = nf_model_forward(m, in, NF_CLI_TABLE_INPUTS, logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_cli_now_ms() - t0;

    int finite = 1;
    for (int64_t i = 0; i < t.n_query * width; i++) finite &= isfinite(logits[i]) != 0;
    if (!finite) {
        rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        goto done;
    }
    for (int64_t r = 0; r < t.n_query; r++) cls[r] = nf_cli_argmax(logits + r * width, width);
    const int has_classes = width > 1;

    /* artifacts: into the staging directory; read back once all are there */
    char p[4096];
    if ((rc = nf_cli_table_write(os.staging, &t, err)) != NF_OK) goto done;
    int64_t sh[2] = {t.n_query, width};
    nf_outset_path(&os, "logits.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_F4, out_ndim, out_shape, logits, err)) != NF_OK) goto done;
    nf_cli_test_delay("write");
    if (has_classes) {
        nf_outset_path(&os, "class_ids.npy", p, sizeof(p));
        if ((rc = nf__npy_write(p, NF_NPY_I8, 1, sh, cls, err)) != NF_OK) goto done;
    }

    /* placement, measured */
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;

    char shape[64] = "1", classes[4096] = "";
    size_t cl = 1;
    for (int d = 0; d < out_ndim; d++) nf__msg_append(shape, sizeof(shape), &cl, "x%lld", (long long) out_shape[d]);
    cl = 0;
    if (has_classes) {
        for (int64_t r = 0; r < t.n_query && cl + 24 < sizeof(classes); r++) {
            cl += (size_t) snprintf(classes + cl, sizeof(classes) - cl, r ? ",%lld" : "%lld", (long long) cls[r]);
        }
    } else {
        snprintf(classes, sizeof(classes), "none");
    }

    /* report.json (temp name + rename, like everything else) */
    cJSON * rep = cJSON_CreateObject();
    nf_run_report_common(rep, o->model, m, be);
    cJSON_AddStringToObject(rep, "input_source", o->sx ? "files" : "generated");
    if (!o->sx) cJSON_AddNumberToObject(rep, "seed", (double) o->seed);
    nf_cli_report_passes(rep, m);
    nf_run_markers_json(rep, &meas, shape, classes, finite, wall_ms);
    nf_outset_path(&os, "report.json", p, sizeof(p));
    rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    if (rc != NF_OK) goto done;
    rc = nf_run_verify_assets(os.staging, &t, out_ndim, out_shape, width, has_classes, err);
    const int assets_verified = rc == NF_OK; /* the set read back and checked */
    if (!assets_verified) goto done;
    if ((rc = nf_run_finish(be, o->trace, trace_in_out, &tr, &os, err)) != NF_OK) goto done;
    nf_run_markers_print(&meas, be, shape, classes, finite, wall_ms, assets_verified);
    rc = nf_run_commit(&os, o->trace, trace_in_out, &tr, err);
done:
    nf_cli_outfile_abort(&tr);
    nf_outset_end(&os);
    free(logits);
    free(cls);
    nf_cli_table_free(&t);
    nf_model_free(m);
    nf_backend_free(be);
    return rc;
}

int nf_cmd_run(int argc, char ** argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model") == 0) {
            char type[64];
            nf_cli_model_type(argv[i + 1], type, sizeof(type));
            if (strcmp(type, "sptransformer") == 0) return nf_cmd_run_spt(argc, argv);
            if (strcmp(type, "tabstar") == 0) return nf_cmd_run_tabstar(argc, argv);
            break;
        }
    }
    struct nf_run_opts o;
    if (!nf_run_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_run_main(&o, &err), &err);
}
