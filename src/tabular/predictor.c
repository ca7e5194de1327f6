/* predictor.c -- the table predictor of nofall-tabular.h: one pipeline (fit,
 * check, predict, the outputs, report.json's items) whose every step
 * dispatches to the part of the model it was fitted for -- Mitra's
 * AutoGluon preprocessing and ensembling (mitra-fit.c, mitra-predict.c),
 * TabSTAR's verbalizer (tabstar-verbalize.c, tabstar-predict.c) -- and the
 * outputs both parts write alike (predictions.csv, probabilities.csv). */
#include "mitra-impl.h"
#include "tabstar-predict.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nf_predictor {
    struct nf_mitra * mi;   /* model_type "mitra"   */
    struct nf_tabstar * ts; /* model_type "tabstar" */
};

/* ---- the outputs both parts write ------------------------------------------------ */
int nf__tab_csv_field(FILE * f, const char * s) {
    int q = s[0] == 0 || strpbrk(s, ",\"\r\n") != NULL || s[0] == ' ' || s[strlen(s) - 1] == ' ';
    if (!q) return fputs(s, f) >= 0;
    if (fputc('"', f) == EOF) return 0;
    for (const char * c = s; *c; c++) {
        if (*c == '"' && fputc('"', f) == EOF) return 0;
        if (fputc(*c, f) == EOF) return 0;
    }
    return fputc('"', f) != EOF;
}

int nf__tab_file_close(FILE * f, int ok) {
    ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    return ok;
}

int nf__tab_write_probabilities(const char * dir, const char * const * classes, int K, int64_t n, const double * p,
                                nf_err * err) {
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "probabilities.csv");
    FILE * f = fopen(path, "w");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
    int ok = 1;
    for (int k = 0; ok && k < K; k++) ok = (!k || fputc(',', f) != EOF) && nf__tab_csv_field(f, classes[k]);
    ok = ok && fputc('\n', f) != EOF;
    for (int64_t r = 0; ok && r < n; r++)
        for (int k = 0; ok && k < K; k++) ok = fprintf(f, k + 1 < K ? "%.17g," : "%.17g\n", p[r * K + k]) > 0;
    if (!nf__tab_file_close(f, ok)) return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    return NF_OK;
}

/* ---- the pipeline ------------------------------------------------------------------- */
int nf_predictor_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * opts,
                     nf_predictor ** out, nf_err * err) {
    *out = NULL;
    const char * type = opts && opts->model_type ? opts->model_type : "mitra";
    const int tabstar = strcmp(type, "tabstar") == 0;
    if (!tabstar && strcmp(type, "mitra") != 0) {
        char e[256];
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_fit: no table predictor for model type '%s' (mitra, tabstar)",
                           nf__esc(e, sizeof(e), type));
    }
    if (tabstar && (!train || !target))
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_fit: no training table or target");
    nf_predictor * p = calloc(1, sizeof(*p));
    if (!p) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const int rc = tabstar ? nf__tsp_fit(train, target, opts, &p->ts, err)
                           : nf__mitra_fit(train, target, opts, &p->mi, err);
    if (rc != NF_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return NF_OK;
}

void nf_predictor_free(nf_predictor * p) {
    if (!p) return;
    nf__mitra_free(p->mi);
    nf__tsp_free(p->ts);
    free(p);
}

const char * nf_predictor_model_type(const nf_predictor * p) { return p->ts ? "tabstar" : "mitra"; }

int nf_predictor_check_table(const nf_predictor * p, const nf_table * test, nf_err * err) {
    if (!p || !test) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_check_table: no predictor or table");
    return p->ts ? nf__tsp_check_table(p->ts, test, err) : nf__mitra_check_table(p->mi, test, err);
}

int nf_predictor_check_model(const nf_predictor * p, const nf_model * m, const char * model_name, nf_err * err) {
    if (!p || !m) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_check_model: no predictor or model");
    return p->ts ? nf__tsp_check_model(m, model_name, err) : nf__mitra_check_model(p->mi, m, model_name, err);
}

int nf_predictor_finetune(nf_predictor * p, nf_model * m, const nf_table * val, const struct nf_finetune_opts * o,
                          struct nf_finetune_result * res, nf_err * err) {
    if (!p || !m || !o || !res) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_finetune: a NULL argument");
    if (p->ts) return nf__err_set(err, NF_ERR_UNSUPPORTED, "fine-tuning is implemented for Mitra, not TabSTAR");
    return nf__mitra_finetune(p->mi, m, val, o, res, err);
}

int nf_predictor_tabstar_fit(nf_predictor * p, nf_model * m, const char * model_dir, const nf_table * train,
                             const struct nf_tabstar_fit_opts * o, struct nf_tabstar_fit_result * res, nf_err * err) {
    if (!p || !m || !model_dir || !train)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_tabstar_fit: a NULL argument");
    if (!p->ts) return nf__err_set(err, NF_ERR_UNSUPPORTED, "a Mitra predictor: TabSTAR's fit takes a TabSTAR one");
    return nf__tsp_tabstar_fit(p->ts, m, model_dir, train, o, res, err);
}

int nf_predictor_tabstar_use_fit(nf_predictor * p, const char * model_dir, const nf_table * train, int * used,
                                 nf_err * err) {
    int u = 0;
    if (used) *used = 0;
    if (!p || !model_dir || !train)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_tabstar_use_fit: a NULL argument");
    if (!p->ts) return NF_OK; /* Mitra: nothing to take */
    NF_TRY(nf__tsp_use_fit(p->ts, model_dir, train, &u, err));
    if (used) *used = u;
    return NF_OK;
}

int nf_predictor_merge_adapter(nf_predictor * p, nf_model * m, const char * dir, nf_err * err) {
    if (!p || !m || !dir) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_merge_adapter: a NULL argument");
    if (!p->ts) return nf__err_set(err, NF_ERR_UNSUPPORTED, "a Mitra model takes no adapter (TabSTAR's LoRA)");
    return nf__tsp_merge_adapter(p->ts, m, dir, err);
}

int nf_predictor_predict_part(nf_predictor * p, nf_model * m, const nf_table * test, int64_t begin, int64_t end,
                              double * out, float * logits, int64_t * rows_begin, int64_t * rows_end, nf_err * err) {
    if (!p || !m || !test || !out) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_predict: a NULL argument");
    if (p->mi) return nf__mitra_predict_part(p->mi, m, test, begin, end, out, logits, rows_begin, rows_end, err);
    if (begin != 0 || (end != 0 && end != test->csv.n_rows))
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "a TabSTAR prediction is one forward over every test row");
    NF_TRY(nf__tsp_predict(p->ts, m, test, out, logits, err));
    if (rows_begin) *rows_begin = 0;
    if (rows_end) *rows_end = test->csv.n_rows;
    return NF_OK;
}

int nf_predictor_predict(nf_predictor * p, nf_model * m, const nf_table * test, double * out, float * logits,
                         nf_err * err) {
    return nf_predictor_predict_part(p, m, test, 0, 0, out, logits, NULL, NULL, err);
}

int nf_predictor_logits_shape(const nf_predictor * p, int64_t n_test, int64_t shape[3]) {
    const int64_t K = nf_predictor_n_outputs(p);
    if (p->ts) {
        shape[0] = n_test;
        shape[1] = K;
        return 2;
    }
    shape[0] = nf_predictor_n_estimators(p);
    shape[1] = n_test;
    shape[2] = K;
    return nf_predictor_task(p) == NF_PREDICT_CLASSIFICATION ? 3 : 2;
}

int nf_predictor_n_artifacts(const nf_predictor * p) { return p->ts ? nf__tsp_n_artifacts() : 3; }
const char * nf_predictor_artifact(const nf_predictor * p, int i) {
    static const char * const mitra[3] = {"predictions.csv", "probabilities.csv", "logits.npy"};
    if (p->ts) return nf__tsp_artifact(i);
    return i >= 0 && i < 3 ? mitra[i] : NULL;
}

int nf_predictor_write_outputs(nf_predictor * p, const char * dir, int64_t n_test, const double * out,
                               const float * logits, int64_t * class_counts, nf_err * err) {
    if (!p || !dir || !out || !logits)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_write_outputs: a NULL argument");
    if (class_counts) memset(class_counts, 0, (size_t) nf_predictor_n_classes(p) * sizeof(int64_t));
    return p->ts ? nf__tsp_write_outputs(p->ts, dir, n_test, out, logits, class_counts, err)
                 : nf__mitra_predict_write_outputs(p->mi, dir, n_test, out, logits, class_counts, err);
}

int nf_predictor_verify_outputs(const nf_predictor * p, const char * dir, int64_t n_test, nf_err * err) {
    return p->ts ? nf__tsp_verify_outputs(p->ts, dir, n_test, err) : nf__mitra_verify_outputs(p->mi, dir, n_test, err);
}

char * nf_predictor_report_json(const nf_predictor * p, const nf_model * m, const nf_table * test, nf_err * err) {
    if (!p || !m || !test) {
        nf__err_set(err, NF_ERR_ARG, "nf_predictor_report_json: a NULL argument");
        return NULL;
    }
    cJSON * rep = p->ts ? nf__tsp_report(p->ts, test) : nf__mitra_report(p->mi, m, test);
    char * s = rep ? cJSON_PrintUnformatted(rep) : NULL;
    cJSON_Delete(rep);
    if (!s) nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    return s;
}

/* ---- the progress, the last prediction ------------------------------------------------ */
void nf_predictor_last_stats(const nf_predictor * p, struct nf_predict_stats * out) {
    if (p->ts)
        *out = p->ts->stats;
    else
        nf__mitra_last_stats(p->mi, out);
}
double nf_predictor_forward_ms(const nf_predictor * p) {
    return p->ts ? p->ts->forward_ms : nf__mitra_forward_ms(p->mi);
}
void nf_predictor_set_progress(nf_predictor * p, nf_predictor_progress_fn fn, void * user) {
    if (!p) return;
    if (p->mi) nf__mitra_set_progress(p->mi, fn, user);
    if (p->ts) {
        p->ts->progress = fn;
        p->ts->progress_user = user;
    }
}

/* ---- what the fit decided ------------------------------------------------------------- */
int nf_predictor_task(const nf_predictor * p) {
    if (p->ts) return p->ts->v.regression ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION;
    return nf__mitra_task(p->mi);
}
int64_t nf_predictor_n_train(const nf_predictor * p) { return p->ts ? p->ts->n_train : nf__mitra_n_train(p->mi); }
int64_t nf_predictor_n_estimators(const nf_predictor * p) { return p->ts ? 1 : nf__mitra_n_estimators(p->mi); }
int64_t nf_predictor_n_outputs(const nf_predictor * p) {
    if (p->ts) return p->ts->v.regression ? 1 : p->ts->v.n_classes;
    return nf__mitra_n_outputs(p->mi);
}
const char * nf_predictor_target(const nf_predictor * p) { return p->ts ? p->ts->v.target : nf__mitra_target(p->mi); }
int64_t nf_predictor_n_classes(const nf_predictor * p) {
    if (p->ts) return p->ts->v.regression ? 0 : p->ts->v.n_classes;
    return nf__mitra_n_classes(p->mi);
}
const char * nf_predictor_class_name(const nf_predictor * p, int64_t k) {
    if (p->ts) return k >= 0 && k < nf_predictor_n_classes(p) ? p->ts->v.classes[k] : NULL;
    return nf__mitra_class_name(p->mi, k);
}
void nf_predictor_target_range(const nf_predictor * p, double * y_min, double * y_max) {
    if (p->ts) {
        *y_min = *y_max = 0;
        return;
    }
    nf__mitra_target_range(p->mi, y_min, y_max);
}
int nf_predictor_n_columns(const nf_predictor * p) { return p->ts ? p->ts->v.n_cols : nf__mitra_n_columns(p->mi); }
int nf_predictor_column(const nf_predictor * p, int i, struct nf_column_info * out) {
    return p->ts ? nf__tsp_column(p->ts, i, out) : nf__mitra_column(p->mi, i, out);
}
int nf_predictor_n_kept(const nf_predictor * p) { return p->ts ? p->ts->v.n_out : nf__mitra_n_kept(p->mi); }
int nf_predictor_kept(const nf_predictor * p, int j) {
    if (p->ts) return j >= 0 && j < p->ts->v.n_out ? p->ts->v.out[j] : -1;
    return nf__mitra_kept(p->mi, j);
}
const int * nf_predictor_mirror_signs(const nf_predictor * p, int64_t e) {
    return p->ts ? NULL : nf__mitra_mirror_signs(p->mi, e);
}
int nf_predictor_regression_mirror(const nf_predictor * p, int64_t e) {
    return p->ts ? 0 : nf__mitra_regression_mirror(p->mi, e);
}
