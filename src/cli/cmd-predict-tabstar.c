/* cmd-predict-tabstar.c -- `nofall predict` on a TabSTAR model directory
 * (README "TabSTAR"): the verbalizer (models/tabstar-verbalize.c) fitted on
 * the whole --train table, the --test table verbalized into cells, one
 * forward (optionally with a PEFT LoRA adapter merged), the outputs as one
 * verified set:
 *
 *   logits.npy          float32 (n_test, C)
 *   probabilities.npy   classification: softmax over the C target tokens
 *   predictions.npy     regression: float32, the logit inverse-scaled with
 *                       the target's StandardScaler (as upstream's
 *                       inverse_transform on float32 z-scores)
 *   class_ids.npy       classification: int64 argmax
 *   predictions.csv     the class label (str() of the class, as upstream's
 *                       classes_) or the value, in test-row order
 *   cells.json          the verbalized test rows ("nofall-tabstar-cells/1";
 *                       `nofall run --cells` on it gives the same logits)
 *   report.json         the columns (numerical / text / dropped, why), the
 *                       classes or the target scaler, adapter, device, markers
 *
 * Every bad table is an error naming file / row / column before --out is
 * touched or the model is loaded. */
#include "cli.h"
#include "opts.h"
#include "core/model.h"
#include "io/nf-io.h"
#include "models/tabstar-cells.h"
#include "models/tabstar-verbalize.h"
#include "nofall-tabular.h"
#include "text/nf-text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * const nf_tp_artifacts[] = {"logits.npy",    "probabilities.npy", "predictions.npy",
                                               "class_ids.npy", "predictions.csv",   "cells.json",
                                               "report.json"};
#define NF_TP_N_ARTIFACTS ((int) (sizeof(nf_tp_artifacts) / sizeof(nf_tp_artifacts[0])))

struct nf_tp_opts {
    const char *model, *adapter, *train, *test, *target, *device, *out;
    int task;
    int progress; /* --quiet / --progress, parsed as Mitra's predict does; no bar is drawn yet */
};

static int nf_tp_parse(int argc, char ** argv, struct nf_tp_opts * o) {
    struct nf_cli_opts v;
    memset(o, 0, sizeof(*o));
    if (!nf_cli_opts_parse(NF_M(PREDICT_TAB), argc, argv, 1, NULL, &v)) return 0;
    o->model = nf_cli_opt_str(&v, NF_O_MODEL, NULL);
    o->adapter = nf_cli_opt_str(&v, NF_O_ADAPTER, NULL);
    o->train = nf_cli_opt_str(&v, NF_O_TRAIN, NULL);
    o->test = nf_cli_opt_str(&v, NF_O_TEST, NULL);
    o->target = nf_cli_opt_str(&v, NF_O_TARGET, NULL);
    o->device = nf_cli_opt_str(&v, NF_O_DEVICE, "cpu");
    o->out = nf_cli_opt_str(&v, NF_O_OUT, NULL);
    const char * task = nf_cli_opt_str(&v, NF_O_TASK, "auto");
    o->task = strcmp(task, "classification") == 0 ? NF_PREDICT_CLASSIFICATION
              : strcmp(task, "regression") == 0   ? NF_PREDICT_REGRESSION
                                                  : NF_PREDICT_AUTO;
    o->progress = v.set[NF_O_QUIET] ? NF_PROGRESS_QUIET : v.set[NF_O_PROGRESS] ? NF_PROGRESS_FORCE : NF_PROGRESS_AUTO;
    if (!o->model || !o->train || !o->test || !o->target || !o->out) {
        fprintf(stderr,
                "error: predict needs --model DIR --train TRAIN.csv --test TEST.csv --target COLUMN --out OUT\n");
        return 0;
    }
    return 1;
}

/* the shortest text that reads back as the float32 f */
static void nf_tp_fmt_f32(char * buf, size_t n, float f) {
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, n, "%.*g", p, (double) f);
        if ((float) strtod(buf, NULL) == f) return;
    }
}

static int nf_tp_csv_field(FILE * f, const char * s) {
    int q = s[0] == 0 || strpbrk(s, ",\"\r\n") != NULL || s[0] == ' ' || s[strlen(s) - 1] == ' ';
    if (!q) return fputs(s, f) >= 0;
    if (fputc('"', f) == EOF) return 0;
    for (const char * c = s; *c; c++) {
        if (*c == '"' && fputc('"', f) == EOF) return 0;
        if (fputc(*c, f) == EOF) return 0;
    }
    return fputc('"', f) != EOF;
}

static cJSON * nf_tp_columns_json(const struct nf_tab_verbalizer * v) {
    cJSON * cols = cJSON_CreateObject();
    cJSON * num = cJSON_AddArrayToObject(cols, "numerical");
    cJSON * txt = cJSON_AddArrayToObject(cols, "text");
    cJSON * drop = cJSON_AddArrayToObject(cols, "dropped");
    for (int j = 0; j < v->n_out; j++) { /* kept: in cell order */
        const struct nf_tab_vcol * c = &v->cols[v->out[j]];
        cJSON * o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "normalized", c->norm);
        cJSON_AddStringToObject(o, "dtype", nf__tab_dtype_name(c->dtype));
        cJSON_AddStringToObject(o, "why", c->why);
        cJSON_AddNumberToObject(o, "cell", (double) (j + (v->regression ? 1 : v->n_classes)));
        if (c->numerical) {
            cJSON_AddNumberToObject(o, "mean", c->mean);
            cJSON_AddNumberToObject(o, "scale", c->scale);
            cJSON_AddNumberToObject(o, "n_quantiles", (double) c->n_quantiles);
            cJSON * b = cJSON_AddArrayToObject(o, "boundaries");
            for (int k = 0; k < 11; k++) cJSON_AddItemToArray(b, cJSON_CreateNumber(c->bounds[k]));
            cJSON * l = cJSON_AddArrayToObject(o, "bin_labels");
            for (int k = 0; k < 12; k++) cJSON_AddItemToArray(l, cJSON_CreateString(c->labels[k]));
        }
        cJSON_AddItemToArray(c->numerical ? num : txt, o);
    }
    for (int i = 0; i < v->n_cols; i++) {
        const struct nf_tab_vcol * c = &v->cols[i];
        if (!c->dropped) continue;
        cJSON * o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "normalized", c->norm);
        cJSON_AddStringToObject(o, "dtype", nf__tab_dtype_name(c->dtype));
        cJSON_AddStringToObject(o, "kind", c->numerical ? "numerical" : "text");
        cJSON_AddStringToObject(o, "reason", c->dropped);
        cJSON_AddItemToArray(drop, o);
    }
    return cols;
}

/* the outputs read back: shapes, dtypes, values, the cells as written */
static int nf_tp_verify(const char * dir, const struct nf_tab_cells * c, const float * logits,
                        const struct nf__wordpiece * wp, nf_err * err) {
    char p[4096];
    const int64_t B = c->n_rows, C = c->n_targets;
    NF_TRY(nf_tab_verify_outputs(dir, c, logits, err));
    struct nf_csv_table back;
    nf__path_join(p, sizeof(p), dir, "predictions.csv");
    NF_TRY(nf__csv_read(p, &back, err));
    const int ok2 = back.n_rows == B && back.n_cols == 1;
    nf__csv_free(&back);
    if (!ok2) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape", p);
    struct nf_tab_cells c2;
    nf__path_join(p, sizeof(p), dir, "cells.json");
    NF_TRY(nf__tab_cells_load(p, wp, &c2, err));
    int ok3 = c2.n_rows == B && c2.n_cells == c->n_cells && c2.n_targets == C && c2.n_strings == c->n_strings &&
              memcmp(c2.x_num, c->x_num, (size_t) (B * c->n_cells) * sizeof(float)) == 0;
    for (int64_t u = 0; ok3 && u < c->n_strings; u++) ok3 = strcmp(c2.strings[u], c->strings[u]) == 0;
    nf__tab_cells_free(&c2);
    return ok3 ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: read back different", p);
}

static int nf_tp_main(const struct nf_tp_opts * o, nf_err * err) {
    nf_table *tr = NULL, *te = NULL;
    struct nf_tab_verbalizer v;
    memset(&v, 0, sizeof(v));
    cJSON * doc = NULL;
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_tab_cells c;
    memset(&c, 0, sizeof(c));
    float *logits = NULL, *probs = NULL, *pred = NULL;
    int64_t * cls = NULL;
    struct nf_outset os;
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    char p[4096];
    int rc;
    /* the tables, the fit, the cells: every bad table fails before --out is touched */
    if ((rc = nf_table_read_csv(o->train, &tr, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_table_read_csv(o->test, &te, err)) != NF_OK) goto out_nolock;
    if ((rc = nf__tab_verbalizer_fit(tr, o->target, o->task, &v, err)) != NF_OK) goto out_nolock;
    if ((rc = nf__tab_verbalize(&v, te, &doc, err)) != NF_OK) goto out_nolock;

    if ((rc = nf_outset_begin(&os, o->out, nf_tp_artifacts, NF_TP_N_ARTIFACTS, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_cli_backend_init(o->device, 0, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    char adapter[4400] = "none";
    if (o->adapter && (rc = nf__tab_merge_adapter(m, o->adapter, adapter, sizeof(adapter), err)) != NF_OK) goto done;
    const struct nf__wordpiece * wp = nf__tab_vocab(m);
    if ((rc = nf__tab_cells_build(doc, o->test, wp, &c, err)) != NF_OK) goto done;
    const int64_t B = c.n_rows, C = c.n_targets;
    logits = malloc((size_t) (B * C) * sizeof(float));
    probs = malloc((size_t) (B * C) * sizeof(float));
    pred = malloc((size_t) B * sizeof(float));
    cls = malloc((size_t) B * sizeof(int64_t));
    if (!logits || !probs || !pred || !cls) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    struct nf_array in[5];
    nf__tab_cells_arrays(&c, in);
    nf_cli_test_delay("forward");
    const double t0 = nf_cli_now_ms();
    if ((rc = nf_model_forward(m, in, 5, logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_cli_now_ms() - t0;
    int finite = 1;
    for (int64_t i = 0; i < B * C; i++) finite &= isfinite(logits[i]) != 0;
    if (!finite) {
        rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        goto done;
    }
    int64_t * counts = calloc((size_t) C, sizeof(int64_t));
    if (!counts) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t r = 0; r < B; r++) {
        const float * x = logits + r * C;
        if (c.regression) {
            /* sklearn inverse_transform on float32 z: X *= scale_; X += mean_ (float32 in place) */
            const float zs = (float) ((double) x[0] * v.y_scale);
            pred[r] = (float) ((double) zs + v.y_mean);
            continue;
        }
        /* softmax in fp32 (upstream: torch.softmax(logits.float(), dim=1)) */
        float mx = x[0];
        for (int64_t k = 1; k < C; k++) mx = x[k] > mx ? x[k] : mx;
        double sum = 0;
        for (int64_t k = 0; k < C; k++) sum += exp((double) x[k] - mx);
        for (int64_t k = 0; k < C; k++) probs[r * C + k] = (float) (exp((double) x[k] - mx) / sum);
        cls[r] = nf_cli_argmax(x, (int) C);
        counts[cls[r]]++;
    }
    const int64_t lsh[2] = {B, C}, vsh[1] = {B};
    nf_outset_path(&os, "logits.npy", p, sizeof(p));
    rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, logits, err);
    if (rc == NF_OK && c.regression) {
        nf_outset_path(&os, "predictions.npy", p, sizeof(p));
        rc = nf__npy_write(p, NF_NPY_F4, 1, vsh, pred, err);
    } else if (rc == NF_OK) {
        nf_outset_path(&os, "probabilities.npy", p, sizeof(p));
        rc = nf__npy_write(p, NF_NPY_F4, 2, lsh, probs, err);
        nf_outset_path(&os, "class_ids.npy", p, sizeof(p));
        if (rc == NF_OK) rc = nf__npy_write(p, NF_NPY_I8, 1, vsh, cls, err);
    }
    if (rc == NF_OK) {
        nf_outset_path(&os, "predictions.csv", p, sizeof(p));
        FILE * f = fopen(p, "w");
        int ok = f != NULL && nf_tp_csv_field(f, v.target) && fputc('\n', f) != EOF;
        for (int64_t r = 0; ok && r < B; r++) {
            char b[64];
            if (c.regression) nf_tp_fmt_f32(b, sizeof(b), pred[r]);
            ok = nf_tp_csv_field(f, c.regression ? b : v.classes[cls[r]]) && fputc('\n', f) != EOF;
        }
        if (f) {
            ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
            ok &= fclose(f) == 0;
        }
        if (!ok) rc = nf__err_set(err, NF_ERR_IO, "%s: cannot write", p);
    }
    if (rc == NF_OK) {
        nf_outset_path(&os, "cells.json", p, sizeof(p));
        rc = nf__json_write_file(p, doc, err);
    }
    char shape[64], classes[4096] = "none";
    size_t len = 0;
    snprintf(shape, sizeof(shape), "%lldx%lld", (long long) B, (long long) C);
    if (!c.regression) {
        classes[0] = 0;
        for (int64_t k = 0; k < C; k++) {
            char en[128];
            nf__msg_append(classes, sizeof(classes), &len, "%s%s:%lld", k ? "," : "",
                           nf__esc(en, sizeof(en), v.classes[k]), (long long) counts[k]);
        }
    }
    free(counts);
    if (rc != NF_OK) goto done;
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    cJSON * rep = cJSON_CreateObject();
    nf_run_report_common(rep, o->model, m, be);
    cJSON_AddStringToObject(rep, "train", o->train);
    cJSON_AddStringToObject(rep, "test", o->test);
    cJSON_AddStringToObject(rep, "target", v.target);
    cJSON_AddStringToObject(rep, "target_normalized", v.y_name);
    cJSON_AddStringToObject(rep, "target_dtype", nf__tab_dtype_name(v.target_dtype));
    cJSON_AddStringToObject(rep, "task", c.regression ? "regression" : "classification");
    cJSON_AddStringToObject(rep, "task_rule", v.task_why);
    cJSON_AddStringToObject(rep, "verbalizer_fit", "the whole --train table");
    cJSON_AddNumberToObject(rep, "n_train", (double) nf_table_n_rows(tr));
    cJSON_AddNumberToObject(rep, "n_test", (double) B);
    cJSON_AddNumberToObject(rep, "n_cells", (double) c.n_cells);
    cJSON_AddNumberToObject(rep, "n_target_tokens", (double) C);
    cJSON_AddNumberToObject(rep, "distinct_strings", (double) c.n_strings);
    cJSON_AddItemToObject(rep, "columns", nf_tp_columns_json(&v));
    if (c.regression) {
        cJSON_AddNumberToObject(rep, "target_mean", v.y_mean);
        cJSON_AddNumberToObject(rep, "target_scale", v.y_scale);
    } else {
        cJSON * cl = cJSON_AddArrayToObject(rep, "classes");
        for (int64_t k = 0; k < C; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(v.classes[k]));
    }
    cJSON_AddStringToObject(rep, "adapter", adapter);
    nf_run_markers_json(rep, &meas, shape, classes, finite, wall_ms);
    nf_outset_path(&os, "report.json", p, sizeof(p));
    rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    if (rc != NF_OK) goto done;
    if ((rc = nf_tp_verify(os.staging, &c, logits, wp, err)) != NF_OK) goto done;
    nf_run_markers_print(&meas, be, shape, classes, finite, wall_ms, 1);
    rc = nf_run_commit(&os, NULL, "", NULL, err);
done:
    nf_outset_end(&os);
out_nolock:
    free(logits);
    free(probs);
    free(pred);
    free(cls);
    nf__tab_cells_free(&c);
    nf_model_free(m);
    nf_backend_free(be);
    cJSON_Delete(doc);
    nf__tab_verbalizer_free(&v);
    nf_table_free(tr);
    nf_table_free(te);
    return rc;
}

int nf_cmd_predict_tabstar(int argc, char ** argv) {
    struct nf_tp_opts o;
    if (!nf_tp_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_tp_main(&o, &err), &err);
}
