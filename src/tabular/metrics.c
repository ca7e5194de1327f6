/* metrics.c -- a prediction scored against the test table's target column
 * (nofall-tabular.h nf_predictor_score; docs/tables.md "Summary and
 * metrics"), as scikit-learn 1.9 computes them on the written outputs:
 *
 *   accuracy   accuracy_score(y, argmax of the probabilities (the first on ties))
 *   log_loss   log_loss(y, P, labels=classes): P clipped to [eps, 1 - eps]
 *              (eps of float64), the mean of -log P[true class]; no
 *              renormalisation
 *   roc_auc    binary: roc_auc_score(y, P[:, 1]); multiclass:
 *              roc_auc_score(y, P, multi_class="ovr", average="macro",
 *              labels=classes): roc_curve's points (ties one point, the
 *              trapezoid between them); a class absent from y makes its
 *              curve undefined: NaN, as sklearn's (a warning there)
 *   r2, rmse, mae   r2_score (a constant y: 1 if every prediction is exact,
 *              else 0), root_mean_squared_error, mean_absolute_error
 *
 * Sums are numpy's pairwise sums (nf__np_sum), so the values agree with
 * sklearn's to the last bits or nearly (reference/metrics_fixture.py,
 * tests/fixtures/tables/metrics.txt, test-tables). A test label that is no
 * training class counts as wrong for the accuracy and leaves log-loss and
 * ROC-AUC undefined (sklearn refuses it with labels=classes). Rows without
 * a target value are not scored. */
#include "tabular-impl.h"
#include "weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct nf_sc {
    double s;
    int pos;
};
static int nf_cmp_sc_desc(const void * a, const void * b) {
    const double x = ((const struct nf_sc *) a)->s, y = ((const struct nf_sc *) b)->s;
    return x > y ? -1 : x < y;
}

/* roc_auc_score of 0/1 labels pos and scores s (n values): NaN without both
 * classes. roc_curve: the cumulative counts at each distinct score (from the
 * highest), the points collinear with their neighbours dropped
 * (drop_intermediate), (0, 0) first; then np.trapezoid. d: 3 (n + 1) doubles */
static double nf_binary_auc(const int * pos, const double * s, int64_t n, struct nf_sc * w, double * d) {
    int64_t np_ = 0;
    for (int64_t i = 0; i < n; i++) np_ += pos[i] != 0;
    if (np_ == 0 || np_ == n) return NAN;
    for (int64_t i = 0; i < n; i++) w[i] = (struct nf_sc){s[i], pos[i] != 0};
    qsort(w, (size_t) n, sizeof(*w), nf_cmp_sc_desc);
    double *fps = d, *tps = d + (n + 1), *t = d + 2 * (n + 1);
    double tp = 0, fp = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        tp += w[i].pos;
        fp += !w[i].pos;
        if (i + 1 < n && w[i + 1].s == w[i].s) continue;
        fps[m] = fp, tps[m] = tp, m++;
    }
    int64_t k = 0; /* kept points, in place */
    for (int64_t i = 0; i < m; i++) {
        const int keep = i == 0 || i == m - 1 || fps[i - 1] - 2 * fps[i] + fps[i + 1] != 0 ||
                         tps[i - 1] - 2 * tps[i] + tps[i + 1] != 0;
        if (keep) t[k++] = (double) i;
    }
    double px = 0, py = 0;
    const double F = fps[m - 1], T = tps[m - 1];
    for (int64_t j = 0; j < k; j++) {
        const int64_t i = (int64_t) t[j];
        const double x = fps[i] / F, y = tps[i] / T;
        t[j] = (x - px) * (y + py) / 2.0; /* np.trapezoid's terms (i >= j: read before written) */
        px = x, py = y;
    }
    return nf__np_sum(t, k);
}

int nf__metrics_classification(const int64_t * y, const double * P, int64_t n, int K, double * acc, double * ll,
                               double * auc, nf_err * err) {
    *acc = *ll = *auc = NAN;
    if (n < 1 || K < 2) return NF_OK;
    double * d = malloc((size_t) 3 * (size_t) (n + 1) * sizeof(double));
    double * s = malloc((size_t) (n + 1) * sizeof(double));
    int * pos = malloc((size_t) (n + 1) * sizeof(int));
    struct nf_sc * w = malloc((size_t) (n + 1) * sizeof(*w));
    if (!d || !s || !pos || !w) {
        free(d), free(s), free(pos), free(w);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int64_t right = 0, unknown = 0;
    for (int64_t i = 0; i < n; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (P[i * K + k] > P[i * K + best]) best = k;
        right += y[i] == best;
        unknown += y[i] < 0 || y[i] >= K;
    }
    *acc = (double) right / (double) n;
    if (!unknown) {
        const double eps = 2.220446049250313e-16; /* np.finfo(np.float64).eps */
        for (int64_t i = 0; i < n; i++) {
            double p = P[i * K + y[i]];
            p = p < eps ? eps : p > 1 - eps ? 1 - eps : p;
            d[i] = -log(p);
        }
        *ll = nf__np_sum(d, n) / (double) n;
        if (K == 2) {
            for (int64_t i = 0; i < n; i++) pos[i] = y[i] == 1, s[i] = P[i * K + 1];
            *auc = nf_binary_auc(pos, s, n, w, d);
        } else {
            double * a = malloc((size_t) K * sizeof(double));
            if (!a) {
                free(d), free(s), free(pos), free(w);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            for (int k = 0; k < K; k++) {
                for (int64_t i = 0; i < n; i++) pos[i] = y[i] == k, s[i] = P[i * K + k];
                a[k] = nf_binary_auc(pos, s, n, w, d);
            }
            *auc = nf__np_sum(a, K) / (double) K; /* np.average: NaN if any class's is */
            free(a);
        }
    }
    free(d), free(s), free(pos), free(w);
    return NF_OK;
}

int nf__metrics_regression(const double * y, const double * yhat, int64_t n, double * r2, double * rmse, double * mae,
                           nf_err * err) {
    *r2 = *rmse = *mae = NAN;
    if (n < 1) return NF_OK;
    double * d = malloc((size_t) n * sizeof(double));
    if (!d) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) d[i] = (y[i] - yhat[i]) * (y[i] - yhat[i]);
    const double ss_res = nf__np_sum(d, n);
    *rmse = sqrt(ss_res / (double) n);
    for (int64_t i = 0; i < n; i++) d[i] = fabs(y[i] - yhat[i]);
    *mae = nf__np_sum(d, n) / (double) n;
    if (n >= 2) {
        const double mean = nf__np_sum(y, n) / (double) n;
        for (int64_t i = 0; i < n; i++) d[i] = (y[i] - mean) * (y[i] - mean);
        const double ss_tot = nf__np_sum(d, n);
        *r2 = ss_tot != 0 ? 1 - ss_res / ss_tot : ss_res == 0 ? 1.0 : 0.0;
    }
    free(d);
    return NF_OK;
}

/* a test label's class: its text as the class names are written (str() of
 * the value as pandas typed it), else (a number) the class of equal value; -1 */
static int64_t nf_label_class(const nf_predictor * p, const struct nf_csv_column * c, int64_t r) {
    char buf[64];
    const char * s = c->raw[r];
    int b;
    if (c->type == NF_CSV_FLOAT) {
        nf__py_float_repr(c->num[r], buf, sizeof(buf));
        s = buf;
    } else if ((c->type == NF_CSV_BOOL || c->bools) && nf__csv_is_bool(c->raw[r], &b)) {
        s = b ? "True" : "False";
    }
    const int64_t K = nf_predictor_n_classes(p);
    for (int64_t k = 0; k < K; k++)
        if (strcmp(nf_predictor_class_name(p, k), s) == 0) return k;
    double v, w;
    int ii;
    if (c->type == NF_CSV_TEXT || !nf__csv_parse_number(c->raw[r], &v, &ii)) return -1;
    for (int64_t k = 0; k < K; k++)
        if (nf__csv_parse_number(nf_predictor_class_name(p, k), &w, &ii) && w == v) return k;
    return -1;
}

int nf_predictor_score(const nf_predictor * p, const nf_table * test, const double * out, struct nf_predict_metrics * m,
                       nf_err * err) {
    memset(m, 0, sizeof(*m));
    m->task = nf_predictor_task(p);
    m->accuracy = m->log_loss = m->roc_auc = m->r2 = m->rmse = m->mae = NAN;
    const int c = nf_table_find(test, nf_predictor_target(p));
    if (c < 0) return NF_OK;
    const struct nf_csv_column * col = &test->csv.cols[c];
    const int64_t n = test->csv.n_rows;
    const int K = (int) nf_predictor_n_outputs(p);
    int64_t * rows = malloc((size_t) (n + 1) * sizeof(int64_t));
    int64_t * yc = malloc((size_t) (n + 1) * sizeof(int64_t));
    double * yv = malloc((size_t) (n + 1) * sizeof(double));
    double * sel = malloc((size_t) (n + 1) * (size_t) K * sizeof(double));
    int rc = NF_OK;
    if (!rows || !yc || !yv || !sel) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (int64_t r = 0; rc == NF_OK && r < n; r++) {
        if (col->missing[r]) continue;
        if (m->task == NF_PREDICT_CLASSIFICATION) {
            yc[k] = nf_label_class(p, col, r);
            m->n_unknown += yc[k] < 0;
            memcpy(sel + k * K, out + r * K, (size_t) K * sizeof(double));
        } else {
            double v;
            int ii;
            if (col->type == NF_CSV_TEXT && !nf__csv_parse_number(col->raw[r], &v, &ii)) {
                k = 0; /* a target of text: no regression metrics */
                break;
            }
            yv[k] = col->type == NF_CSV_TEXT ? v : col->num[r];
            sel[k] = out[r];
        }
        rows[k++] = r;
    }
    m->n_rows = k;
    if (rc == NF_OK && k > 0) {
        if (m->task == NF_PREDICT_CLASSIFICATION)
            rc = nf__metrics_classification(yc, sel, k, K, &m->accuracy, &m->log_loss, &m->roc_auc, err);
        else
            rc = nf__metrics_regression(yv, sel, k, &m->r2, &m->rmse, &m->mae, err);
    }
    free(rows), free(yc), free(yv), free(sel);
    return rc;
}

static void nf_json_num(char * buf, size_t n, size_t * len, const char * key, double v) {
    char t[64];
    nf__py_float_repr(v, t, sizeof(t));
    nf__msg_append(buf, n, len, ", \"%s\": %s", key, isfinite(v) ? t : "null");
}

char * nf_predict_metrics_json(const struct nf_predict_metrics * m) {
    char buf[512];
    size_t len = 0;
    buf[0] = 0;
    nf__msg_append(buf, sizeof(buf), &len, "{\"rows\": %lld", (long long) m->n_rows);
    if (m->task == NF_PREDICT_CLASSIFICATION) {
        nf__msg_append(buf, sizeof(buf), &len, ", \"unknown_labels\": %lld", (long long) m->n_unknown);
        nf_json_num(buf, sizeof(buf), &len, "accuracy", m->accuracy);
        nf_json_num(buf, sizeof(buf), &len, "log_loss", m->log_loss);
        nf_json_num(buf, sizeof(buf), &len, "roc_auc", m->roc_auc);
    } else {
        nf_json_num(buf, sizeof(buf), &len, "r2", m->r2);
        nf_json_num(buf, sizeof(buf), &len, "rmse", m->rmse);
        nf_json_num(buf, sizeof(buf), &len, "mae", m->mae);
    }
    nf__msg_append(buf, sizeof(buf), &len, "}");
    return strdup(buf);
}

int nf_predictor_summary(const nf_predictor * p, int64_t n_test, const int64_t * class_counts,
                         const struct nf_predict_metrics * m, const char * dir, char * buf, size_t n) {
    size_t len = 0;
    if (!n) return 0;
    buf[0] = 0;
    const int cls = nf_predictor_task(p) == NF_PREDICT_CLASSIFICATION;
    const int64_t K = cls ? nf_predictor_n_classes(p) : 0;
    nf__msg_append(buf, n, &len, "predicted %lld rows (%s", (long long) n_test,
                   !cls     ? "regression"
                   : K == 2 ? "binary"
                            : "multiclass");
    for (int64_t k = 0; k < K; k++) {
        char e[64];
        nf__msg_append(buf, n, &len, "%s%s", k ? ", " : ": ", nf__esc(e, sizeof(e), nf_predictor_class_name(p, k)));
        if (class_counts) nf__msg_append(buf, n, &len, " %lld", (long long) class_counts[k]);
    }
    nf__msg_append(buf, n, &len, ") into %s (", dir);
    for (int i = 0, k = 0; i < nf_predictor_n_artifacts(p); i++) { /* the files there (regression: no probabilities) */
        char path[4200];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, nf_predictor_artifact(p, i));
        if (stat(path, &st) == 0) nf__msg_append(buf, n, &len, "%s%s", k++ ? ", " : "", nf_predictor_artifact(p, i));
    }
    nf__msg_append(buf, n, &len, ", report.json)");
    if (m && m->n_rows > 0) {
        if (cls)
            nf__msg_append(buf, n, &len, "; on the %lld rows with %s: accuracy %.4f, log-loss %.4g, ROC-AUC %.4f",
                           (long long) m->n_rows, nf_predictor_target(p), m->accuracy, m->log_loss, m->roc_auc);
        else
            nf__msg_append(buf, n, &len, "; on the %lld rows with %s: R2 %.4f, RMSE %.4g, MAE %.4g",
                           (long long) m->n_rows, nf_predictor_target(p), m->r2, m->rmse, m->mae);
        if (m->n_unknown)
            nf__msg_append(buf, n, &len, " (%lld labels no training class: counted wrong; no log-loss, ROC-AUC)",
                           (long long) m->n_unknown);
    }
    return 1;
}
