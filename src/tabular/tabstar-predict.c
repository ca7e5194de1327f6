/* tabstar-predict.c -- the TabSTAR part of the table predictor
 * (nofall-tabular.h; README "TabSTAR"): the verbalizer (tabstar-verbalize.c)
 * fitted on the whole training table, the test table verbalized into cells
 * ("nofall-tabstar-cells/1", models/tabstar-cells.c), one forward (a PEFT
 * LoRA adapter optionally merged), and the outputs:
 *
 *   logits.npy          float32 (n_test, C)
 *   probabilities.npy   classification: softmax over the C target tokens (fp32)
 *   probabilities.csv   the same, a column per class (the shared writer, as Mitra's)
 *   predictions.npy     regression: float32, the logit inverse-scaled with
 *                       the target's StandardScaler (as upstream's
 *                       inverse_transform on float32 z-scores)
 *   class_ids.npy       classification: int64 argmax of the logits
 *   predictions.csv     the class label (str() of the class, as upstream's
 *                       classes_) or the value, in test-row order
 *   cells.json          the verbalized test rows (`nofall run --cells` on it
 *                       gives the same logits)
 * and report.json's items: the columns (numerical / text / dropped, why), the
 * classes or the target scaler, the adapter. */
#include "tabstar-predict.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char * const nf_tsp_artifacts[] = {"logits.npy",    "probabilities.npy", "predictions.npy",
                                                "class_ids.npy", "predictions.csv",   "probabilities.csv",
                                                "cells.json"};

int nf__tsp_n_artifacts(void) { return (int) (sizeof(nf_tsp_artifacts) / sizeof(nf_tsp_artifacts[0])); }
const char * nf__tsp_artifact(int i) { return i >= 0 && i < nf__tsp_n_artifacts() ? nf_tsp_artifacts[i] : NULL; }

void nf__tsp_free(struct nf_tabstar * p) {
    if (!p) return;
    nf__tab_verbalizer_free(&p->v);
    cJSON_Delete(p->doc);
    nf__tab_cells_free(&p->c);
    free(p->logits);
    free(p->train);
    free(p->fit_json);
    free(p);
}

int nf__tsp_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * o,
                struct nf_tabstar ** out, nf_err * err) {
    *out = NULL;
    struct nf_tabstar * p = calloc(1, sizeof(*p));
    if (!p || !(p->train = strdup(train->csv.path))) {
        free(p);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    snprintf(p->adapter, sizeof(p->adapter), "none");
    snprintf(p->verbalizer_fit, sizeof(p->verbalizer_fit), "the whole --train table");
    p->n_train = train->csv.n_rows;
    const int rc = nf__tab_verbalizer_fit(train, target, o ? o->task : NF_PREDICT_AUTO, &p->v, err);
    if (rc != NF_OK) {
        nf__tsp_free(p);
        return rc;
    }
    *out = p;
    return NF_OK;
}

int nf__tsp_check_table(const struct nf_tabstar * p, const nf_table * test, nf_err * err) {
    cJSON * doc = NULL;
    const int rc = nf__tab_verbalize(&p->v, test, &doc, err);
    cJSON_Delete(doc);
    return rc;
}

int nf__tsp_check_model(const nf_model * m, const char * model_name, nf_err * err) {
    if (strcmp(nf_model_type(m), "tabstar") == 0) return NF_OK;
    return nf__err_set(err, NF_ERR_ARG, "the predictor was fitted for a TabSTAR model but %s is a %s model",
                       model_name ? model_name : "the model", nf_model_type(m));
}

int nf__tsp_merge_adapter(struct nf_tabstar * p, nf_model * m, const char * dir, nf_err * err) {
    NF_TRY(nf__tsp_check_model(m, NULL, err));
    return nf__tab_merge_adapter(m, dir, p->adapter, sizeof(p->adapter), err);
}

static double nf_tsp_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

int nf__tsp_predict(struct nf_tabstar * p, nf_model * m, const nf_table * test, double * out, float * logits_out,
                    nf_err * err) {
    NF_TRY(nf__tsp_check_model(m, NULL, err));
    /* the last prediction's cells and logits are the outputs' */
    cJSON_Delete(p->doc);
    p->doc = NULL;
    nf__tab_cells_free(&p->c);
    memset(&p->c, 0, sizeof(p->c));
    free(p->logits);
    p->logits = NULL;
    memset(&p->stats, 0, sizeof(p->stats));
    p->forward_ms = 0;
    p->wp = nf__tab_vocab(m);
    NF_TRY(nf__tab_verbalize(&p->v, test, &p->doc, err));
    NF_TRY(nf__tab_cells_build(p->doc, test->csv.path, p->wp, &p->c, err));
    const struct nf_tab_cells * c = &p->c;
    const int64_t B = c->n_rows, C = c->n_targets;
    if (!(p->logits = malloc((size_t) (B * C) * sizeof(float)))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    struct nf_array in[5];
    nf__tab_cells_arrays(c, in);
    const double t0 = nf_tsp_now_ms();
    NF_TRY(nf_model_forward(m, in, 5, p->logits, err));
    p->forward_ms = nf_tsp_now_ms() - t0;
    int finite = 1;
    for (int64_t i = 0; i < B * C; i++) finite &= isfinite(p->logits[i]) != 0;
    if (!finite) return nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
    for (int64_t r = 0; r < B; r++) {
        const float * x = p->logits + r * C;
        if (c->regression) {
            /* sklearn inverse_transform on float32 z: X *= scale_; X += mean_ (float32 in place) */
            const float zs = (float) ((double) x[0] * p->v.y_scale);
            out[r] = (double) (float) ((double) zs + p->v.y_mean);
            continue;
        }
        /* softmax in fp32 (upstream: torch.softmax(logits.float(), dim=1)) */
        float mx = x[0];
        for (int64_t k = 1; k < C; k++) mx = x[k] > mx ? x[k] : mx;
        double sum = 0;
        for (int64_t k = 0; k < C; k++) sum += exp((double) x[k] - mx);
        for (int64_t k = 0; k < C; k++) out[r * C + k] = (double) (float) (exp((double) x[k] - mx) / sum);
    }
    if (logits_out) memcpy(logits_out, p->logits, (size_t) (B * C) * sizeof(float));
    p->stats.forwards = 1;
    p->stats.rows_end = B;
    if (p->progress) p->progress(p->progress_user, 1, 1);
    return NF_OK;
}

/* the shortest text that reads back as the float32 f */
static void nf_tsp_fmt_f32(char * buf, size_t n, float f) {
    for (int k = 1; k <= 9; k++) {
        snprintf(buf, n, "%.*g", k, (double) f);
        if ((float) strtod(buf, NULL) == f) return;
    }
}

static int64_t nf_tsp_argmax(const float * x, int64_t C) {
    int64_t best = 0;
    for (int64_t k = 1; k < C; k++)
        if (x[k] > x[best]) best = k;
    return best;
}

int nf__tsp_write_outputs(const struct nf_tabstar * p, const char * dir, int64_t nq, const double * out,
                          const float * logits, int64_t * class_counts, nf_err * err) {
    const struct nf_tab_cells * c = &p->c;
    const int64_t B = c->n_rows, C = c->n_targets;
    if (!p->doc || nq != B) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_write_outputs: not the last prediction");
    char path[4096];
    float * vals = malloc((size_t) (B * C) * sizeof(float));
    int64_t * cls = malloc((size_t) B * sizeof(int64_t));
    int rc = NF_OK;
    if (!vals || !cls) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; rc == NF_OK && i < (c->regression ? B : B * C); i++) vals[i] = (float) out[i];
    for (int64_t r = 0; rc == NF_OK && !c->regression && r < B; r++) {
        cls[r] = nf_tsp_argmax(logits + r * C, C);
        if (class_counts) class_counts[cls[r]]++;
    }
    const int64_t lsh[2] = {B, C}, vsh[1] = {B};
    nf__path_join(path, sizeof(path), dir, "logits.npy");
    if (rc == NF_OK) rc = nf__npy_write(path, NF_NPY_F4, 2, lsh, logits, err);
    if (rc == NF_OK && c->regression) {
        nf__path_join(path, sizeof(path), dir, "predictions.npy");
        rc = nf__npy_write(path, NF_NPY_F4, 1, vsh, vals, err);
    } else if (rc == NF_OK) {
        nf__path_join(path, sizeof(path), dir, "probabilities.npy");
        rc = nf__npy_write(path, NF_NPY_F4, 2, lsh, vals, err);
        nf__path_join(path, sizeof(path), dir, "class_ids.npy");
        if (rc == NF_OK) rc = nf__npy_write(path, NF_NPY_I8, 1, vsh, cls, err);
        if (rc == NF_OK)
            rc = nf__tab_write_probabilities(dir, (const char * const *) p->v.classes, (int) C, B, out, err);
    }
    if (rc == NF_OK) {
        nf__path_join(path, sizeof(path), dir, "predictions.csv");
        FILE * f = fopen(path, "w");
        int ok = f != NULL && nf__tab_csv_field(f, p->v.target) && fputc('\n', f) != EOF;
        for (int64_t r = 0; ok && r < B; r++) {
            char b[64];
            if (c->regression) nf_tsp_fmt_f32(b, sizeof(b), vals[r]);
            ok = nf__tab_csv_field(f, c->regression ? b : p->v.classes[cls[r]]) && fputc('\n', f) != EOF;
        }
        if (f) ok = nf__tab_file_close(f, ok);
        if (!ok) rc = nf__err_set(err, NF_ERR_IO, "%s: cannot write", path);
    }
    if (rc == NF_OK) {
        nf__path_join(path, sizeof(path), dir, "cells.json");
        rc = nf__json_write_file(path, p->doc, err);
    }
    free(vals);
    free(cls);
    return rc;
}

/* the outputs read back: shapes, dtypes, values, the cells as written */
int nf__tsp_verify_outputs(const struct nf_tabstar * p, const char * dir, int64_t nq, nf_err * err) {
    const struct nf_tab_cells * c = &p->c;
    const int64_t B = c->n_rows, C = c->n_targets;
    char path[4096];
    if (!p->doc || nq != B) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_verify_outputs: not the last prediction");
    NF_TRY(nf__tab_check_arrays(c, p->logits, dir, err));
    for (int i = 0; i < (c->regression ? 1 : 2); i++) {
        struct nf_csv_table back;
        nf__path_join(path, sizeof(path), dir, i ? "probabilities.csv" : "predictions.csv");
        NF_TRY(nf__csv_read(path, &back, err));
        const int ok = back.n_rows == B && back.n_cols == (i ? C : 1);
        nf__csv_free(&back);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape", path);
    }
    struct nf_tab_cells c2;
    nf__path_join(path, sizeof(path), dir, "cells.json");
    NF_TRY(nf__tab_cells_load(path, p->wp, &c2, err));
    int ok = c2.n_rows == B && c2.n_cells == c->n_cells && c2.n_targets == C && c2.n_strings == c->n_strings &&
             memcmp(c2.x_num, c->x_num, (size_t) (B * c->n_cells) * sizeof(float)) == 0;
    for (int64_t u = 0; ok && u < c->n_strings; u++) ok = strcmp(c2.strings[u], c->strings[u]) == 0;
    nf__tab_cells_free(&c2);
    return ok ? NF_OK : nf__err_set(err, NF_ERR_IO, "%s: read back different", path);
}

static cJSON * nf_tsp_columns_json(const struct nf_tab_verbalizer * v) {
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

cJSON * nf__tsp_report(const struct nf_tabstar * p, const nf_table * test) {
    const struct nf_tab_verbalizer * v = &p->v;
    const int64_t C = v->regression ? 1 : v->n_classes;
    cJSON * rep = cJSON_CreateObject();
    cJSON_AddStringToObject(rep, "train", p->train);
    cJSON_AddStringToObject(rep, "test", test->csv.path);
    cJSON_AddStringToObject(rep, "target", v->target);
    cJSON_AddStringToObject(rep, "target_normalized", v->y_name);
    cJSON_AddStringToObject(rep, "target_dtype", nf__tab_dtype_name(v->target_dtype));
    cJSON_AddStringToObject(rep, "task", v->regression ? "regression" : "classification");
    cJSON_AddStringToObject(rep, "task_rule", v->task_why);
    cJSON_AddStringToObject(rep, "verbalizer_fit", p->verbalizer_fit);
    cJSON_AddNumberToObject(rep, "n_train", (double) p->n_train);
    cJSON_AddNumberToObject(rep, "n_test", (double) test->csv.n_rows);
    cJSON_AddNumberToObject(rep, "n_cells", (double) p->c.n_cells);
    cJSON_AddNumberToObject(rep, "n_target_tokens", (double) C);
    cJSON_AddNumberToObject(rep, "distinct_strings", (double) p->c.n_strings);
    cJSON_AddItemToObject(rep, "columns", nf_tsp_columns_json(v));
    if (v->regression) {
        cJSON_AddNumberToObject(rep, "target_mean", v->y_mean);
        cJSON_AddNumberToObject(rep, "target_scale", v->y_scale);
    } else {
        cJSON * cl = cJSON_AddArrayToObject(rep, "classes");
        for (int64_t k = 0; k < C; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(v->classes[k]));
    }
    cJSON_AddStringToObject(rep, "adapter", p->adapter);
    if (p->fit_json) cJSON_AddItemToObject(rep, "fine_tune", cJSON_Parse(p->fit_json));
    return rep;
}

int nf__tsp_column(const struct nf_tabstar * p, int i, struct nf_column_info * out) {
    memset(out, 0, sizeof(*out));
    if (i < 0 || i >= p->v.n_cols) return 0;
    const struct nf_tab_vcol * c = &p->v.cols[i];
    out->name = c->name;
    out->csv_type = nf__tab_dtype_name(c->dtype);
    out->kind = c->numerical ? "numerical" : "text";
    out->dropped = c->dropped;
    out->kept = -1;
    for (int j = 0; j < p->v.n_out; j++)
        if (p->v.out[j] == i) out->kept = j;
    out->mean = c->numerical && !c->dropped ? c->mean : NAN;
    return 1;
}
