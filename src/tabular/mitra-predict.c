/* mitra-predict.c -- the Mitra part of the table predictor (nofall-tabular.h;
 * the fit: mitra-fit.c): the test table's checks and transform, one forward
 * per ensemble member (above 8,192 training rows one per 1,024 test rows,
 * each with its random support subset), the averages, and the outputs
 * (predictions.csv, probabilities.csv, logits.npy) and report items. */
#include "mitra-impl.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* transform_X: mean imputation, mirror, float32, NaN/Inf -> 0 */
static void nf_pred_matrix(const struct nf_mitra * p, double * const * xq, int64_t nq, const int * sign, float * out) {
    const int64_t n = xq ? nq : p->tr.n_rows;
    const int F = p->n_order;
    for (int j = 0; j < F; j++) {
        const struct nf_feat * f = &p->feats[p->order[j]];
        const double * x = xq ? xq[p->order[j]] : f->xs;
        for (int64_t r = 0; r < n; r++) {
            double v = isnan(x[r]) ? p->mean[j] : x[r];
            v *= sign[j];
            float g = (float) v;
            if (isnan(g) || isinf(g)) g = 0.0f;
            out[r * F + j] = g;
        }
    }
}

int nf__mitra_train_matrix(const struct nf_mitra * p, int64_t e, float * out, nf_err * err) {
    if (e < 0 || e >= p->n_est) return nf__err_set(err, NF_ERR_ARG, "ensemble member %lld", (long long) e);
    nf_pred_matrix(p, NULL, 0, p->signs + e * p->n_order, out);
    return NF_OK;
}

static const char * nf_col_type_name(const struct nf_csv_column * c) {
    if (c->user_type == NF_USER_TYPE_CATEGORY) return "category";
    if (c->user_type == NF_USER_TYPE_DATETIME) return "datetime64[ns]";
    return c->type == NF_CSV_INT     ? "int64"
           : c->type == NF_CSV_FLOAT ? "float64"
           : c->type == NF_CSV_BOOL  ? "bool"
                                     : "object";
}

/* the first row of a text column that is neither missing nor a number (n: none) */
static int64_t nf_first_non_number(const struct nf_csv_column * c, int64_t n) {
    int64_t r = 0;
    double d;
    int ii;
    while (r < n && (c->missing[r] || nf__csv_parse_number(c->raw[r], &d, &ii))) r++;
    return r;
}

/* the test table: the training columns (the target optional), no others; a
 * numeric training column reads as numbers. tcol: each feature's column in test */
static int nf_pred_check(const struct nf_mitra * p, const struct nf_csv_table * te, int * tcol, nf_err * err) {
    char ef[512], et[512], ec[256];
    nf__esc(ef, sizeof(ef), p->tr.path);
    nf__esc(et, sizeof(et), te->path);
    const int64_t nq = te->n_rows;
    if (nq < 1) return nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", et);
    for (int c = 0; c < te->n_cols; c++) {
        if (nf__csv_find(&p->tr, te->cols[c].name) < 0)
            return nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' is not in the training table %s", et,
                               nf__esc(ec, sizeof(ec), te->cols[c].name), ef);
    }
    for (int i = 0; i < p->n_feats; i++) {
        const struct nf_feat * f = &p->feats[i];
        const struct nf_csv_column * tc = &p->tr.cols[f->col];
        nf__esc(ec, sizeof(ec), tc->name);
        const int t = nf__csv_find(te, tc->name);
        if (t < 0)
            return nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' of the training table %s is missing", et, ec, ef);
        if (tcol) tcol[i] = t;
        const struct nf_csv_column * qc = &te->cols[t];
        if (f->kind == NF_FEAT_DATE && f->part == 0) { /* dates: ISO 8601, missing, or no date at all */
            for (int64_t r = 0; r < nq; r++) {
                int64_t ns;
                if (qc->missing[r]) continue;
                if (qc->type != NF_CSV_TEXT)
                    return nf__err_set(err, NF_ERR_INPUT,
                                       "%s: column '%s' holds numbers; in the training table %s it holds dates", et, ec,
                                       ef);
                if (nf__iso_datetime_ns(qc->raw[r], &ns) || !nf__date_maybe(qc->raw[r])) continue;
                char ev[256];
                return nf__err_set(err, NF_ERR_INPUT,
                                   "%s: row %lld, column '%s': '%s' is not an ISO 8601 date/time, and the column holds "
                                   "dates; nofall reads dates only as ISO 8601 (YYYY-MM-DD[ HH:MM[:SS[.f]]][Z|+HH:MM])",
                                   et, (long long) r + 1, ec, nf__esc(ev, sizeof(ev), qc->raw[r]));
            }
        }
        /* numbers in training, strings in the test table: pandas' astype fails,
         * except for a 0/1 column, which compares (every string is no number: 0) */
        if (tc->type != NF_CSV_TEXT && qc->type == NF_CSV_TEXT && !qc->bools && f->kind != NF_FEAT_BOOL) {
            const int64_t r = nf_first_non_number(qc, nq);
            if (r == nq) continue; /* a text column of numbers (e.g. a DataFrame's object column) */
            char ev[256];
            return nf__err_set(err, NF_ERR_INPUT,
                               "%s: row %lld, column '%s': '%s' is not a number (the column is %s in %s)", et,
                               (long long) r + 1, ec, nf__esc(ev, sizeof(ev), qc->raw[r]), nf_col_type_name(tc), ef);
        }
    }
    return NF_OK;
}

/* the kind of a column's non-missing values: 0 numbers, 1 strings, 2 bools */
static int nf_value_kind(const struct nf_csv_column * c) { return c->bools ? 2 : c->type == NF_CSV_TEXT ? 1 : 0; }

/* a test column through the fitted feature generation */
static void nf_pred_transform(const struct nf_feat * f, int numeric, const struct nf_csv_column * qc, int64_t nq,
                              double * xq) {
    /* a 0/1 column's test column of strings against numbers (a CSV column with a
         * value that is no number): pandas compares str with a number, never equal */
    const int strings = f->kind == NF_FEAT_BOOL && numeric && qc->type == NF_CSV_TEXT && !qc->bools &&
                        nf_first_non_number(qc, nq) < nq;
    for (int64_t r = 0; r < nq; r++) {
        /* a test cell: numeric columns read as numbers (bools as 0/1), text
             * as text; a text value of another kind than training's (a number
             * or a bool against strings, a string against bools) matches no
             * category, as in pandas; missing is '' whatever the kind */
        double v = NAN;
        const char * s = qc->missing[r]                            ? (f->nan_cat ? NULL : "")
                         : nf_value_kind(qc) == (f->bools ? 2 : 1) ? qc->raw[r]
                                                                   : NULL;
        if (numeric) {
            if (!qc->missing[r]) {
                int ii;
                if (qc->type != NF_CSV_TEXT || qc->bools)
                    v = qc->num[r];
                else
                    nf__csv_parse_number(qc->raw[r], &v, &ii);
            }
        }
        int64_t t;
        if (f->kind == NF_FEAT_DATE) /* checked: ISO, missing, or no date at all */
            xq[r] = nf__mitra_date_value(
                f->part,
                qc->type == NF_CSV_TEXT && !qc->missing[r] && nf__iso_datetime_ns(qc->raw[r], &t) ? t : f->date_fill);
        else if (f->kind == NF_FEAT_BOOL)
            xq[r] = numeric
                        ? (!strings && (qc->type == NF_CSV_INT ? nf__mitra_is_true_num(f, qc, r) : v == f->true_num))
                        : (s && strcmp(s, f->true_str) == 0);
        else if (f->kind == NF_FEAT_CAT)
            xq[r] = (double) nf__mitra_find_cat(f->cats, f->n_cats, f->bools, s);
        else if (f->is_int) /* int64 in training: missing -> 0, then astype(int64) */
            xq[r] = isnan(v) ? 0.0 : (isfinite(v) ? trunc(v) : v);
        else
            xq[r] = v;
    }
}
int nf__mitra_table_matrix(const struct nf_mitra * p, const nf_table * t, int64_t e, float * out, nf_err * err) {
    if (e < 0 || e >= p->n_est) return nf__err_set(err, NF_ERR_ARG, "ensemble member %lld", (long long) e);
    const int64_t nq = t->csv.n_rows;
    int * tcol = malloc((size_t) (p->n_feats + 1) * sizeof(int));
    double ** xq = calloc((size_t) p->n_feats + 1, sizeof(double *));
    int rc = !tcol || !xq ? nf__err_set(err, NF_ERR_NOMEM, "out of memory") : nf_pred_check(p, &t->csv, tcol, err);
    for (int j = 0; rc == NF_OK && j < p->n_order; j++) {
        const int i = p->order[j];
        if (!(xq[i] = malloc((size_t) (nq + 1) * sizeof(double))))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else
            nf_pred_transform(&p->feats[i], p->tr.cols[p->feats[i].col].type != NF_CSV_TEXT, &t->csv.cols[tcol[i]], nq,
                              xq[i]);
    }
    if (rc == NF_OK) nf_pred_matrix(p, xq, nq, p->signs + e * p->n_order, out);
    for (int i = 0; xq && i < p->n_feats; i++) free(xq[i]);
    free(xq);
    free(tcol);
    return rc;
}

/* ---- predict ------------------------------------------------------------------- */
int nf__mitra_check_table(const struct nf_mitra * p, const nf_table * test, nf_err * err) {
    if (!p || !test) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_check_table: no predictor or table");
    return nf_pred_check(p, &test->csv, NULL, err);
}

static double nf_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

/* the model takes a table: support_x, support_y (i64 labels: a classifier), query_x */
static int nf_pred_model(const nf_model * m, int * class_labels, int64_t * n_classes, nf_err * err) {
    static const char * const names[3] = {"support_x", "support_y", "query_x"};
    int ok = nf_model_n_inputs(m) == 3;
    for (int i = 0; ok && i < 3; i++) {
        const struct nf_input_desc * d = nf_model_input(m, i);
        ok = strcmp(d->name, names[i]) == 0 && d->ndim == (i == 1 ? 1 : 2) && (i == 1 || d->dtype == NF_ARRAY_F32);
        if (ok && i == 1) {
            *class_labels = d->dtype == NF_ARRAY_I64;
            *n_classes = d->n_classes;
        }
    }
    if (!ok)
        return nf__err_set(err, NF_ERR_UNSUPPORTED,
                           "model type %s does not take a table (support_x, support_y, query_x)", nf_model_type(m));
    return NF_OK;
}

/* The support of a forward and the query rows it predicts, as AutoGluon's
 * Mitra forms them (spec §5.4; README "More than 8,192 training rows"):
 *
 *   n_train <= 8,192: the whole training table, one forward per member over
 *     every test row (upstream: a random permutation of the table per
 *     1,024-query chunk; the order of the support rows does not change the
 *     result but for rounding, so nofall keeps the table's order and lets the
 *     model stream the queries);
 *   n_train > 8,192: per member and per 1,024-row chunk of the test rows (in
 *     order), support = the rows rng.choice(n_train, 8192, replace=False)
 *     picks, in the order picked, one forward per chunk. rng is ONE
 *     np.random.RandomState(get_numpy_seed(seed)) shared by the members
 *     (MitraBase._train_ensemble), and the draws it makes are, in order:
 *       fit:     per member, TrainerFinetune.train -> evaluate(X, y, X_val =
 *                the training table, as nofall fits): one draw per 1,024-row
 *                chunk of the training table (no fine-tuning: no other draw);
 *       predict: per member, one draw per 1,024-row chunk of the test table.
 *     Each nf_predictor_predict call is the first prediction after the fit. */
#define NF_PRED_MAX_SUPPORT 8192
#define NF_PRED_QUERY_CHUNK 1024

static int nf_pred_opt(nf_model * m, const char * key, int64_t v, nf_err * err) {
    return nf_model_set_option(m, key, v, err);
}

int nf__mitra_predict_part(struct nf_mitra * p, nf_model * m, const nf_table * test, int64_t begin, int64_t end,
                           double * out, float * logits_out, int64_t * rows_begin, int64_t * rows_end, nf_err * err) {
    if (!p || !m || !test || !out) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_predict: a NULL argument");
    const struct nf_csv_table * te = &test->csv;
    const int64_t ns = p->tr.n_rows, nq = te->n_rows;
    if (end == 0) end = nq;
    if (begin < 0 || begin > end || end > nq)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_predict_part: rows [%lld, %lld) of %lld", (long long) begin,
                           (long long) end, (long long) nq);
    if (rows_begin) *rows_begin = 0;
    if (rows_end) *rows_end = 0;
    p->forward_ms = 0;
    memset(&p->stats, 0, sizeof(p->stats));
    int * tcol = malloc((size_t) (p->n_feats + 1) * sizeof(int));
    if (!tcol) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf_pred_check(p, te, tcol, err);
    int class_labels = 0;
    int64_t model_classes = 0;
    if (rc == NF_OK) rc = nf_pred_model(m, &class_labels, &model_classes, err);
    if (rc == NF_OK && class_labels != (p->task == NF_PREDICT_CLASSIFICATION))
        rc = nf__err_set(err, NF_ERR_ARG, "the target is a %s task but the model is a %s",
                         p->task == NF_PREDICT_CLASSIFICATION ? "classification" : "regression",
                         class_labels ? "classifier" : "regressor");
    if (rc == NF_OK && class_labels && model_classes < p->n_classes)
        rc = nf__err_set(err, NF_ERR_ARG, "the target has %lld classes; the model has %lld outputs",
                         (long long) p->n_classes, (long long) model_classes);
    if (rc != NF_OK) {
        free(tcol);
        return rc;
    }
    const int F = p->n_order;
    const int K = class_labels ? (int) p->n_classes : 1;
    const int64_t width = class_labels ? model_classes : 1;
    /* fine-tuned: every 1,024-row chunk its support order from the trainer's stream */
    const int subsets = ns > NF_PRED_MAX_SUPPORT || p->ft_rng;
    const int64_t nsub = ns > NF_PRED_MAX_SUPPORT ? NF_PRED_MAX_SUPPORT : ns; /* support rows a forward */
    const int64_t nql = subsets ? (nq < NF_PRED_QUERY_CHUNK ? nq : NF_PRED_QUERY_CHUNK) : nq; /* queries a forward */
    const int ranged = begin > 0 || end < nq;
    /* the rows this call predicts: above 8,192 training rows the 1,024-row
     * chunks starting in [begin, end); else the model's passes starting there */
    int64_t r0 = 0, r1 = nq;
    if (subsets) {
        r0 = (begin + NF_PRED_QUERY_CHUNK - 1) / NF_PRED_QUERY_CHUNK * NF_PRED_QUERY_CHUNK;
        r1 = (end + NF_PRED_QUERY_CHUNK - 1) / NF_PRED_QUERY_CHUNK * NF_PRED_QUERY_CHUNK;
        r0 = r0 < nq ? r0 : nq;
        r1 = r1 < nq ? r1 : nq;
    }
    double ** xq = calloc((size_t) p->n_feats + 1, sizeof(double *));
    float * xs = malloc((size_t) (ns * F) * sizeof(float));
    float * xqm = malloc((size_t) (nq * F) * sizeof(float));
    float * ys = malloc((size_t) ns * sizeof(float));
    int64_t * ysi = malloc((size_t) ns * sizeof(int64_t));
    float * logits = malloc((size_t) (nql * width) * sizeof(float));
    double * acc = calloc((size_t) (nq * K), sizeof(double));
    float * xsub = subsets ? malloc((size_t) (nsub * F) * sizeof(float)) : NULL;
    float * ysub = subsets ? malloc((size_t) nsub * sizeof(float)) : NULL;
    int64_t * ysubi = subsets ? malloc((size_t) nsub * sizeof(int64_t)) : NULL;
    int64_t * perm = subsets ? malloc((size_t) ns * sizeof(int64_t)) : NULL;
    struct nf_np_rng * rng = subsets ? malloc(sizeof(*rng)) : NULL;
    int nomem = !xq || !xs || !xqm || !ys || !ysi || !logits || !acc ||
                (subsets && (!xsub || !ysub || !ysubi || !perm || !rng));
    for (int j = 0; !nomem && j < F; j++) {
        const int i = p->order[j];
        if (!(xq[i] = malloc((size_t) nq * sizeof(double))))
            nomem = 1;
        else
            nf_pred_transform(&p->feats[i], p->tr.cols[p->feats[i].col].type != NF_CSV_TEXT, &te->cols[tcol[i]], nq,
                              xq[i]);
    }
    if (nomem) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK && p->ft_rng) {
        *rng = *p->ft_rng; /* upstream's trainer.predict after fit: the same RandomState */
    } else if (rc == NF_OK && subsets) {
        /* the fit's draws: every member's evaluate on the training table */
        nf__np_rng_seed(rng, nf__np_seed(p->seed));
        const int64_t fit_chunks = (ns + NF_PRED_QUERY_CHUNK - 1) / NF_PRED_QUERY_CHUNK;
        for (int64_t d = 0; d < p->n_est * fit_chunks; d++) nf__np_choice(rng, ns, nsub, perm, NULL);
    }
    /* the model's passes starting in [begin, end) (an MPI shard; the whole
     * forward's plan, so those rows come out byte-identical to it) */
    int opts_set = 0;
    if (rc == NF_OK && ranged && !subsets) {
        if ((rc = nf_pred_opt(m, "query_begin", begin, err)) == NF_OK &&
            (rc = nf_pred_opt(m, "query_end", end, err)) == NF_OK)
            opts_set = 1;
        else
            rc = nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s cannot predict a part of the test rows: %s",
                             nf_model_type(m), err->msg);
    }
    p->stats.support_rows = nsub;
    p->stats.query_chunk = subsets ? NF_PRED_QUERY_CHUNK : 0;
    p->stats.subsets = subsets;
    /* the progress callback's unit: the forwards this call runs */
    int64_t fw_total = 0, fw_done = 0;
    for (int64_t c = 0; c * NF_PRED_QUERY_CHUNK < (subsets ? nq : 1); c++)
        if (!subsets || (c * NF_PRED_QUERY_CHUNK >= r0 && c * NF_PRED_QUERY_CHUNK < r1)) fw_total++;
    fw_total *= p->n_est;
    for (int64_t e = 0; rc == NF_OK && e < p->n_est; e++) {
        /* a fine-tuned ensemble: this member's weights (mitra-tune.c) */
        if (p->ft_weights && (rc = nf__finetune_weights_set(m, p->ft_weights[e], p->ft_n_weights, err)) != NF_OK) break;
        const int * sign = p->signs + e * F;
        const int regm = p->regmirror[e];
        nf_pred_matrix(p, NULL, 0, sign, xs);
        nf_pred_matrix(p, xq, nq, sign, xqm);
        if (class_labels) {
            memcpy(ysi, p->yc, (size_t) ns * sizeof(int64_t));
        } else {
            for (int64_t r = 0; r < ns; r++) {
                double y = (p->yv[r] - p->y_min) / (p->y_max - p->y_min);
                if (regm) y = 1 - y;
                ys[r] = (float) y;
            }
        }
        const int64_t n_fw = subsets ? (nq + NF_PRED_QUERY_CHUNK - 1) / NF_PRED_QUERY_CHUNK : 1;
        for (int64_t c = 0; rc == NF_OK && c < n_fw; c++) {
            const int64_t q0 = subsets ? c * NF_PRED_QUERY_CHUNK : 0;
            const int64_t cq = subsets ? (nq - q0 < NF_PRED_QUERY_CHUNK ? nq - q0 : NF_PRED_QUERY_CHUNK) : nq;
            const float * sx = xs;
            const float * sy = ys;
            const int64_t * syi = ysi;
            if (subsets) {
                /* this chunk's support: drawn whether or not this call predicts it */
                nf__np_choice(rng, ns, nsub, perm, NULL);
                if (q0 < r0 || q0 >= r1) continue;
                for (int64_t i = 0; i < nsub; i++) {
                    memcpy(xsub + i * F, xs + perm[i] * F, (size_t) F * sizeof(float));
                    if (class_labels)
                        ysubi[i] = ysi[perm[i]];
                    else
                        ysub[i] = ys[perm[i]];
                }
                sx = xsub;
                sy = ysub;
                syi = ysubi;
            }
            struct nf_array in[3];
            memset(in, 0, sizeof(in));
            in[0] = (struct nf_array){
                .name = "support_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {nsub, F}, .data = (void *) sx};
            if (class_labels)
                in[1] = (struct nf_array){
                    .name = "support_y", .dtype = NF_ARRAY_I64, .ndim = 1, .shape = {nsub}, .data = (void *) syi};
            else
                in[1] = (struct nf_array){
                    .name = "support_y", .dtype = NF_ARRAY_F32, .ndim = 1, .shape = {nsub}, .data = (void *) sy};
            in[2] = (struct nf_array){
                .name = "query_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {cq, F}, .data = (void *) (xqm + q0 * F)};
            const double t0 = nf_now_ms();
            if ((rc = nf_model_forward(m, in, 3, logits, err)) != NF_OK) break;
            p->forward_ms += nf_now_ms() - t0;
            int64_t passes = 1, lo = 0, hi = cq;
            nf_err e2 = {0};
            if (nf_model_get_option(m, "support_passes", &passes, &e2) != NF_OK) passes = 1;
            if (opts_set && (nf_model_get_option(m, "query_rows_begin", &lo, &e2) != NF_OK ||
                             nf_model_get_option(m, "query_rows_end", &hi, &e2) != NF_OK)) {
                rc = nf__err_set(err, NF_ERR_UNSUPPORTED, "model type %s does not say which query rows it computed",
                                 nf_model_type(m));
                break;
            }
            if (!subsets) {
                r0 = lo;
                r1 = hi;
            }
            p->stats.forwards++;
            if (p->progress) p->progress(p->progress_user, ++fw_done, fw_total);
            p->stats.support_passes += passes;
            for (int64_t rl = subsets ? 0 : lo; rl < (subsets ? cq : hi) && rc == NF_OK; rl++) {
                const int64_t r = q0 + rl;
                const float * l = logits + rl * width;
                for (int k = 0; k < K; k++) {
                    if (!isfinite(l[k])) {
                        rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
                        break;
                    }
                    if (logits_out) logits_out[(e * nq + r) * K + k] = l[k];
                }
                if (rc != NF_OK) break;
                if (class_labels) {
                    double mx = l[0], s = 0;
                    for (int k = 1; k < K; k++) mx = l[k] > mx ? l[k] : mx;
                    for (int k = 0; k < K; k++) s += exp((double) l[k] - mx);
                    for (int k = 0; k < K; k++) acc[r * K + k] += exp((double) l[k] - mx) / s;
                } else {
                    float y = l[0];
                    if (regm) y = 1.0f - y;
                    acc[r] += (double) y * (p->y_max - p->y_min) + p->y_min;
                }
            }
        }
    }
    if (opts_set) {
        nf_err e2 = {0};
        nf_pred_opt(m, "query_begin", 0, &e2);
        nf_pred_opt(m, "query_end", 0, &e2);
    }
    if (rc == NF_OK) {
        for (int64_t i = 0; i < nq * K; i++) out[i] = i >= r0 * K && i < r1 * K ? acc[i] / (double) p->n_est : 0.0;
        if (logits_out && ranged)
            for (int64_t e = 0; e < p->n_est; e++)
                for (int64_t i = 0; i < nq * K; i++)
                    if (i < r0 * K || i >= r1 * K) logits_out[e * nq * K + i] = 0.0f;
        if (rows_begin) *rows_begin = r0;
        if (rows_end) *rows_end = r1;
        p->stats.rows_begin = r0;
        p->stats.rows_end = r1;
    }
    if (xq)
        for (int i = 0; i < p->n_feats; i++) free(xq[i]);
    free(xq);
    free(xs);
    free(xqm);
    free(ys);
    free(ysi);
    free(logits);
    free(acc);
    free(xsub);
    free(ysub);
    free(ysubi);
    free(perm);
    free(rng);
    free(tcol);
    return rc;
}

int nf__mitra_predict(struct nf_mitra * p, nf_model * m, const nf_table * test, double * out, float * logits_out,
                      nf_err * err) {
    return nf__mitra_predict_part(p, m, test, 0, 0, out, logits_out, NULL, NULL, err);
}

void nf__mitra_last_stats(const struct nf_mitra * p, struct nf_predict_stats * out) { *out = p->stats; }

/* ---- accessors ------------------------------------------------------------------ */
double nf__mitra_forward_ms(const struct nf_mitra * p) { return p->forward_ms; }
void nf__mitra_set_progress(struct nf_mitra * p, nf_predictor_progress_fn fn, void * user) {
    if (!p) return;
    p->progress = fn;
    p->progress_user = user;
}
int nf__mitra_task(const struct nf_mitra * p) { return p->task; }
int64_t nf__mitra_n_train(const struct nf_mitra * p) { return p->tr.n_rows; }
int64_t nf__mitra_n_estimators(const struct nf_mitra * p) { return p->n_est; }
int64_t nf__mitra_n_outputs(const struct nf_mitra * p) {
    return p->task == NF_PREDICT_CLASSIFICATION ? p->n_classes : 1;
}
const char * nf__mitra_target(const struct nf_mitra * p) { return p->tr.cols[p->ycol].name; }
int64_t nf__mitra_n_classes(const struct nf_mitra * p) {
    return p->task == NF_PREDICT_CLASSIFICATION ? p->n_classes : 0;
}
const char * nf__mitra_class_name(const struct nf_mitra * p, int64_t k) {
    return p->task == NF_PREDICT_CLASSIFICATION && k >= 0 && k < p->n_classes ? p->class_name[k] : NULL;
}
void nf__mitra_target_range(const struct nf_mitra * p, double * y_min, double * y_max) {
    *y_min = p->task == NF_PREDICT_REGRESSION ? p->y_min : 0;
    *y_max = p->task == NF_PREDICT_REGRESSION ? p->y_max : 0;
}
int nf__mitra_n_columns(const struct nf_mitra * p) { return p->n_feats; }
int nf__mitra_column(const struct nf_mitra * p, int i, struct nf_column_info * out) {
    memset(out, 0, sizeof(*out));
    if (i < 0 || i >= p->n_feats) return 0;
    const struct nf_feat * f = &p->feats[i];
    out->name = f->name ? f->name : p->tr.cols[f->col].name;
    out->csv_type = nf_col_type_name(&p->tr.cols[f->col]);
    out->kind = f->kind == NF_FEAT_CAT    ? "category"
                : f->kind == NF_FEAT_BOOL ? "bool"
                : f->kind == NF_FEAT_DATE ? "datetime"
                                          : "numeric";
    out->dropped = f->dropped;
    out->kept = f->kept;
    out->mean = f->kept >= 0 ? f->mean : NAN;
    if (f->kind == NF_FEAT_CAT) {
        out->n_categories = f->n_cats;
        out->categories = (const char * const *) f->cats;
    }
    if (f->kind == NF_FEAT_BOOL) {
        out->true_str = f->true_str;
        out->true_num = f->true_num;
    }
    return 1;
}
int nf__mitra_n_kept(const struct nf_mitra * p) { return p->n_order; }
int nf__mitra_kept(const struct nf_mitra * p, int j) { return j >= 0 && j < p->n_order ? p->order[j] : -1; }
const int * nf__mitra_mirror_signs(const struct nf_mitra * p, int64_t e) {
    return e >= 0 && e < p->n_est ? p->signs + e * p->n_order : NULL;
}
int nf__mitra_regression_mirror(const struct nf_mitra * p, int64_t e) {
    return e >= 0 && e < p->n_est ? p->regmirror[e] : 0;
}

/* ---- the model, the outputs, the report ----------------------------------------- */
int nf__mitra_check_model(const struct nf_mitra * p, const nf_model * m, const char * model_name, nf_err * err) {
    int class_labels = 0;
    int64_t n_classes = 0;
    NF_TRY(nf_pred_model(m, &class_labels, &n_classes, err));
    const int is_cls = p->task == NF_PREDICT_CLASSIFICATION;
    if (class_labels != is_cls)
        return nf__err_set(err, NF_ERR_ARG, "the target is a %s task but %s is a %s",
                           is_cls ? "classification" : "regression", model_name ? model_name : "the model",
                           class_labels ? "classifier" : "regressor");
    return NF_OK;
}

/* predictions.csv (the argmax class, or the value), probabilities.csv, logits.npy */
int nf__mitra_predict_write_outputs(const struct nf_mitra * p, const char * dir, int64_t nq, const double * acc,
                                    const float * logits, int64_t * class_counts, nf_err * err) {
    char path[4096];
    const int is_cls = p->task == NF_PREDICT_CLASSIFICATION;
    const int K = (int) nf__mitra_n_outputs(p);
    nf__path_join(path, sizeof(path), dir, "predictions.csv");
    FILE * f = fopen(path, "w");
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
    int ok = nf__tab_csv_field(f, nf__mitra_target(p)) && fputc('\n', f) != EOF;
    for (int64_t r = 0; ok && r < nq; r++) {
        if (is_cls) {
            int best = 0;
            for (int k = 1; k < K; k++)
                if (acc[r * K + k] > acc[r * K + best]) best = k;
            if (class_counts) class_counts[best]++;
            ok = nf__tab_csv_field(f, p->class_name[best]) && fputc('\n', f) != EOF;
        } else {
            ok = fprintf(f, "%.17g\n", acc[r]) > 0;
        }
    }
    if (!nf__tab_file_close(f, ok)) return nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
    if (is_cls) {
        const char * names[NF_PREDICTOR_MAX_CLASSES];
        for (int k = 0; k < K; k++) names[k] = p->class_name[k];
        NF_TRY(nf__tab_write_probabilities(dir, names, K, nq, acc, err));
    }
    const int64_t sh[3] = {p->n_est, nq, K};
    nf__path_join(path, sizeof(path), dir, "logits.npy");
    return nf__npy_write(path, NF_NPY_F4, is_cls ? 3 : 2, sh, logits, err);
}

int nf__mitra_verify_outputs(const struct nf_mitra * p, const char * dir, int64_t nq, nf_err * err) {
    char path[4096];
    struct nf_npy a;
    nf__path_join(path, sizeof(path), dir, "logits.npy");
    NF_TRY(nf__npy_read(path, &a, err));
    const int ok = a.dtype == NF_NPY_F4 && a.shape[0] == p->n_est && a.shape[1] == nq;
    nf__npy_free(&a);
    struct nf_csv_table back;
    nf__path_join(path, sizeof(path), dir, "predictions.csv");
    NF_TRY(nf__csv_read(path, &back, err));
    const int ok2 = back.n_rows == nq && back.n_cols == 1;
    nf__csv_free(&back);
    if (!ok || !ok2) return nf__err_set(err, NF_ERR_IO, "%s: artifacts read back wrong", dir);
    return NF_OK;
}

/* report.json's items (README "predict"): the forwards, the tables, the fit's decisions */
cJSON * nf__mitra_report(const struct nf_mitra * p, const nf_model * m, const nf_table * test) {
    cJSON * rep = cJSON_CreateObject();
    const int is_cls = p->task == NF_PREDICT_CLASSIFICATION;
    const int F = p->n_order, K = (int) nf__mitra_n_outputs(p);
    const int64_t ns = p->tr.n_rows, n_est = p->n_est;
    /* the model's query passes (its last forward), then how the forwards were
     * formed (README "More than 8,192 training rows") */
    static const char * const keys[3] = {"query_chunk_used", "support_passes", "kv_cache_bytes"};
    static const char * const names[3] = {"query_chunk", "support_passes", "kv_cache_bytes"};
    cJSON * qb = NULL;
    for (int i = 0; i < 3; i++) {
        int64_t v = 0;
        nf_err e = {0};
        if (nf_model_get_option(m, keys[i], &v, &e) != NF_OK) break;
        if (!qb) qb = cJSON_AddObjectToObject(rep, "queries");
        cJSON_AddNumberToObject(qb, names[i], (double) v);
    }
    if (!qb) qb = cJSON_AddObjectToObject(rep, "queries");
    const int subsets = ns > NF_PREDICTOR_MAX_SUPPORT;
    cJSON_AddNumberToObject(qb, "support_rows", (double) (subsets ? NF_PREDICTOR_MAX_SUPPORT : ns));
    cJSON_AddBoolToObject(qb, "support_subsets", subsets);
    if (subsets) cJSON_AddNumberToObject(qb, "subset_query_chunk", (double) NF_PREDICTOR_QUERY_CHUNK);
    cJSON_AddNumberToObject(qb, "forwards", (double) p->stats.forwards);
    cJSON_AddNumberToObject(qb, "support_passes_total", (double) p->stats.support_passes);
    cJSON_AddStringToObject(rep, "train", p->tr.path);
    cJSON_AddStringToObject(rep, "test", test->csv.path);
    cJSON_AddStringToObject(rep, "target", nf__mitra_target(p));
    cJSON_AddStringToObject(rep, "task", is_cls ? "classification" : "regression");
    cJSON_AddNumberToObject(rep, "n_train", (double) ns);
    cJSON_AddNumberToObject(rep, "n_test", (double) test->csv.n_rows);
    cJSON_AddNumberToObject(rep, "n_estimators", (double) n_est);
    cJSON_AddNumberToObject(rep, "seed", (double) p->seed);
    cJSON_AddBoolToObject(rep, "mirror", !p->no_mirror);
    if (p->mirror_file) cJSON_AddStringToObject(rep, "mirror_signs_file", p->mirror_file);
    if (p->ft_rng) nf__mitra_finetune_report(p, rep);
    cJSON * kept = cJSON_AddArrayToObject(rep, "columns_kept");
    cJSON * dropped = cJSON_AddArrayToObject(rep, "columns_dropped");
    for (int j = 0; j < F + p->n_feats; j++) {
        /* the kept columns in model order, then the dropped ones in training order */
        struct nf_column_info ci;
        nf__mitra_column(p, j < F ? p->order[j] : j - F, &ci);
        if (j >= F && !ci.dropped) continue;
        cJSON * c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "name", ci.name);
        cJSON_AddStringToObject(c, "type", ci.kind);
        cJSON_AddStringToObject(c, "csv_type", ci.csv_type);
        if (j < F) {
            if (strcmp(ci.kind, "category") == 0) {
                cJSON * cats = cJSON_AddArrayToObject(c, "categories");
                for (int64_t k = 0; k < ci.n_categories; k++)
                    cJSON_AddItemToArray(cats, cJSON_CreateString(ci.categories[k]));
            } else if (strcmp(ci.kind, "bool") == 0) {
                if (ci.true_str)
                    cJSON_AddStringToObject(c, "true_value", ci.true_str);
                else
                    cJSON_AddNumberToObject(c, "true_value", ci.true_num);
            }
            cJSON_AddNumberToObject(c, "mean", isfinite(ci.mean) ? ci.mean : 0);
            cJSON_AddItemToArray(kept, c);
        } else {
            cJSON_AddStringToObject(c, "reason", ci.dropped);
            cJSON_AddItemToArray(dropped, c);
        }
    }
    if (is_cls) {
        cJSON * cl = cJSON_AddArrayToObject(rep, "classes");
        for (int k = 0; k < K; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(p->class_name[k]));
    } else {
        cJSON_AddNumberToObject(rep, "y_min", p->y_min);
        cJSON_AddNumberToObject(rep, "y_max", p->y_max);
        cJSON * rm = cJSON_AddArrayToObject(rep, "regression_mirror");
        for (int64_t e = 0; e < n_est; e++) cJSON_AddItemToArray(rm, cJSON_CreateBool(p->regmirror[e]));
    }
    cJSON * mi = cJSON_AddArrayToObject(rep, "mirror_signs");
    for (int64_t e = 0; e < n_est; e++) {
        cJSON * row = cJSON_CreateArray();
        for (int j = 0; j < F; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(p->signs[e * F + j]));
        cJSON_AddItemToArray(mi, row);
    }
    return rep;
}
