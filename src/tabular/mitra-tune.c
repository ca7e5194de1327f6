/* mitra-tune.c -- fine-tuning Mitra for a fitted table predictor
 * (nofall-tabular.h nf_predictor_finetune), as AutoGluon's MitraClassifier /
 * MitraRegressor.fit does with fine_tune=True (spec shared/specs/finetune.md
 * §1.2-§1.8; README "Fine-tuning"):
 *
 *   validation rows: a validation table (transformed by the predictor's
 *     fitted feature generation and Preprocessor, as predict transforms test
 *     rows; its target column required), else upstream's internal split of
 *     the training rows (nf__mitra_split_internal: the stratified split for
 *     classification; regression's 20% drawn from RandomState(seed) where
 *     upstream uses the unseeded global RNG) -- then Mitra's Preprocessor is
 *     refit on the training part (means, singular columns, the target's
 *     range), as upstream's trainer fits it on X_train;
 *   the loop: nf__finetune_ex (mitra-finetune.c) on each member's arrays,
 *     as upstream's _train_ensemble (§1.8): the members one after another,
 *     each from the pretrained weights with its own mirror signs (and
 *     regression mirror), all continuing one RandomState; with more than one
 *     member each one's fine-tuned weights are kept as a host copy;
 *   afterwards: the trainer's RandomState is kept, and each prediction
 *     continues it (upstream's trainer.predict after fit): per member, per
 *     1,024-row test chunk a support order of the whole training table, the
 *     member's weights written into the model first. */
#include "mitra-impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Mitra's Preprocessor refit on the training part of the internal split: the
 * target's range (regression), the means and singular columns; the mirror
 * signs kept when the kept columns are the same, else drawn again (seed-
 * derived) or refused (signs given explicitly) */
static int nf_tune_refit(struct nf_mitra * p, const int64_t * rows, int64_t n_rows, nf_err * err) {
    char e1[512];
    nf__esc(e1, sizeof(e1), p->tr.path);
    if (p->task == NF_PREDICT_REGRESSION) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < n_rows; i++) {
            const double y = p->yv[rows[i]];
            lo = y < lo ? y : lo;
            hi = y > hi ? y : hi;
        }
        if (!(hi > lo))
            return nf__err_set(err, NF_ERR_INPUT,
                               "%s: the target is constant on the training part of the validation split: nothing to "
                               "regress (give a validation table)",
                               e1);
        p->y_min = lo;
        p->y_max = hi;
    }
    const int old_f = p->n_order;
    int * old_order = p->order;
    double * old_mean = p->mean;
    p->order = NULL;
    p->mean = NULL;
    p->n_order = 0;
    for (int i = 0; i < p->n_feats; i++)
        if (p->feats[i].dropped && strcmp(p->feats[i].dropped, "singular (Mitra)") == 0) p->feats[i].dropped = NULL;
    int rc = nf__mitra_pre_fit(p, rows, n_rows, err);
    int same = rc == NF_OK && p->n_order == old_f;
    for (int j = 0; same && j < old_f; j++) same = p->order[j] == old_order[j];
    if (rc == NF_OK && !same) {
        if (p->mirror_file) {
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: on the training part of the validation split the Preprocessor keeps other columns "
                             "than the mirror signs of %s name (a column is constant there); give a validation table",
                             e1, p->mirror_file);
        } else {
            int * s = realloc(p->signs, (size_t) (p->n_est * p->n_order + 1) * sizeof(int));
            if (!s)
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            else {
                p->signs = s;
                nf__mitra_draw_signs(p);
            }
        }
    }
    if (rc == NF_OK) nf__mitra_set_kept(p);
    free(old_order);
    free(old_mean);
    return rc;
}

/* a validation table's target cell r: its class id (classification, one of
 * the training classes) or its value (regression) */
static int nf_tune_val_target(const struct nf_mitra * p, const struct nf_csv_table * v, int vc, int64_t r,
                              int64_t * k_out, double * y_out, nf_err * err) {
    const struct nf_csv_column * c = &v->cols[vc];
    const struct nf_csv_column * y = &p->tr.cols[p->ycol];
    char ev[512], en[256], ex[256];
    nf__esc(ev, sizeof(ev), v->path);
    nf__esc(en, sizeof(en), c->name);
    if (c->missing[r])
        return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s' (the target): missing value", ev,
                           (long long) r + 1, en);
    double num = NAN;
    int ii, is_num = c->type != NF_CSV_TEXT || c->bools;
    if (is_num)
        num = c->num[r];
    else
        is_num = nf__csv_parse_number(c->raw[r], &num, &ii);
    if (p->task == NF_PREDICT_REGRESSION) {
        if (!is_num || !isfinite(num))
            return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s' (the target): '%s' is not a finite number",
                               ev, (long long) r + 1, en, nf__esc(ex, sizeof(ex), c->raw[r]));
        *y_out = num;
        return NF_OK;
    }
    for (int64_t k = 0; k < p->n_classes; k++) {
        int64_t t = 0;
        while (t < p->tr.n_rows && p->yc[t] != k) t++; /* the class's first training row */
        const int match = y->type == NF_CSV_TEXT && !y->bools ? strcmp(c->raw[r], y->raw[t]) == 0
                                                              : is_num && num == y->num[t];
        if (match) {
            *k_out = k;
            return NF_OK;
        }
    }
    return nf__err_set(err, NF_ERR_INPUT,
                       "%s: row %lld, column '%s' (the target): '%s' is not a class of the training table", ev,
                       (long long) r + 1, en, nf__esc(ex, sizeof(ex), c->raw[r]));
}

struct nf_tune_arrays {
    float *xtr, *xval, *ytr;
    int64_t *ytrc, *yvalc;
    double * yval;
};

static void nf_tune_arrays_free(struct nf_tune_arrays * a) {
    free(a->xtr);
    free(a->xval);
    free(a->ytr);
    free(a->ytrc);
    free(a->yvalc);
    free(a->yval);
}

/* the training rows' targets as member e's Preprocessor gives them to the trainer */
static void nf_tune_train_y(const struct nf_mitra * p, int64_t e, const int64_t * rows, int64_t n,
                            struct nf_tune_arrays * a) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows ? rows[i] : i;
        if (p->task == NF_PREDICT_CLASSIFICATION) {
            a->ytrc[i] = p->yc[r];
        } else {
            double y = (p->yv[r] - p->y_min) / (p->y_max - p->y_min);
            if (p->regmirror[e]) y = 1 - y;
            a->ytr[i] = (float) y;
        }
    }
}

/* member e's arrays (its mirror signs; regression: its mirrored target) into
 * a (freed first): the training rows and the validation rows, each in
 * upstream's order (sp: the internal split, or NULL with a validation table) */
static int nf_tune_member_arrays(struct nf_mitra * p, int64_t e, const nf_table * val, const struct nf_mitra_split * sp,
                                 int64_t n_tr, int64_t n_val, struct nf_tune_arrays * a, nf_err * err) {
    nf_tune_arrays_free(a);
    *a = (struct nf_tune_arrays){0};
    const int cls = p->task == NF_PREDICT_CLASSIFICATION, F = p->n_order;
    const int64_t N = p->tr.n_rows;
    float * all = malloc((size_t) (N * F + 1) * sizeof(float));
    a->xtr = malloc((size_t) (n_tr * F + 1) * sizeof(float));
    a->xval = malloc((size_t) (n_val * F + 1) * sizeof(float));
    a->ytr = malloc((size_t) (N + 1) * sizeof(float));
    a->ytrc = malloc((size_t) (N + 1) * sizeof(int64_t));
    a->yvalc = malloc((size_t) (n_val + 1) * sizeof(int64_t));
    a->yval = malloc((size_t) (n_val + 1) * sizeof(double));
    int rc = !all || !a->xtr || !a->xval || !a->ytr || !a->ytrc || !a->yvalc || !a->yval
                 ? nf__err_set(err, NF_ERR_NOMEM, "out of memory for the fine-tuning arrays")
                 : NF_OK;
    if (rc == NF_OK) rc = nf__mitra_train_matrix(p, e, all, err);
    if (rc == NF_OK && val) {
        memcpy(a->xtr, all, (size_t) (N * F) * sizeof(float));
        rc = nf__mitra_table_matrix(p, val, e, a->xval, err);
        const int vc = nf__csv_find(&val->csv, p->tr.cols[p->ycol].name);
        for (int64_t r = 0; rc == NF_OK && r < n_val; r++)
            rc = nf_tune_val_target(p, &val->csv, vc, r, &a->yvalc[r], &a->yval[r], err);
        if (rc == NF_OK) nf_tune_train_y(p, e, NULL, N, a);
    } else if (rc == NF_OK) {
        for (int64_t i = 0; i < n_val; i++) {
            const int64_t r = sp->val[i];
            memcpy(a->xval + i * F, all + r * F, (size_t) F * sizeof(float));
            if (cls)
                a->yvalc[i] = p->yc[r];
            else
                a->yval[i] = p->yv[r];
        }
        for (int64_t i = 0; i < n_tr; i++) memcpy(a->xtr + i * F, all + sp->train[i] * F, (size_t) F * sizeof(float));
        nf_tune_train_y(p, e, sp->train, n_tr, a);
    }
    free(all);
    return rc;
}

void nf__mitra_finetune_members_free(struct nf_mitra * p) {
    for (int64_t e = 0; p->ft_weights && e < p->n_est; e++) free(p->ft_weights[e]);
    free(p->ft_weights);
    free(p->ft_members);
    p->ft_weights = NULL;
    p->ft_members = NULL;
    p->ft_n_weights = 0;
}

int nf__mitra_finetune(struct nf_mitra * p, nf_model * m, const nf_table * val, const struct nf_finetune_opts * o,
                       struct nf_finetune_result * res, nf_err * err) {
    if (!p || !m || !o || !res) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_finetune: a NULL argument");
    NF_TRY(nf__mitra_check_model(p, m, "the model", err));
    const int cls = p->task == NF_PREDICT_CLASSIFICATION;
    const int64_t N = p->tr.n_rows, E = p->n_est;
    struct nf_mitra_split sp = {0};
    struct nf_tune_arrays a = {0};
    int rc = NF_OK;
    int64_t n_tr = N, n_val = 0;
    if (!val) {
        rc = nf__mitra_split_internal(o->seed, cls ? p->yc : NULL, N, &sp, err);
        if (rc == NF_OK && (sp.n_train < 2 || sp.n_val < 1))
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: %lld rows are too few to split off validation rows (give a validation table)",
                             p->tr.path, (long long) N);
        if (rc == NF_OK) rc = nf_tune_refit(p, sp.train, sp.n_train, err);
        n_tr = sp.n_train;
        n_val = sp.n_val;
    } else {
        n_val = val->csv.n_rows;
        const int vc = nf__csv_find(&val->csv, p->tr.cols[p->ycol].name);
        char ev[512], en[256];
        if (vc < 0)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (the target; a validation table needs it)",
                             nf__esc(ev, sizeof(ev), val->csv.path), nf__esc(en, sizeof(en), p->tr.cols[p->ycol].name));
        else if (n_val < 1)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", nf__esc(ev, sizeof(ev), val->csv.path));
    }
    /* upstream's members one after another (finetune.md §1.8): each from the
     * pretrained weights with its own mirror, all on one RandomState */
    struct nf_np_rng * rng = NULL;
    struct nf_finetune_result * mres = NULL;
    float ** mw = NULL;
    float * w0 = NULL;
    int64_t nw = 0;
    if (rc == NF_OK && (!(rng = malloc(sizeof(*rng))) || !(mres = calloc((size_t) E, sizeof(*mres))) ||
                        (E > 1 && !(mw = calloc((size_t) E, sizeof(*mw))))))
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK && E > 1) rc = nf__finetune_weights_get(m, &w0, &nw, err); /* the pretrained weights */
    for (int64_t e = 0; rc == NF_OK && e < E; e++) {
        if (e > 0) rc = nf__finetune_weights_set(m, w0, nw, err);
        if (rc == NF_OK) rc = nf_tune_member_arrays(p, e, val, val ? NULL : &sp, n_tr, n_val, &a, err);
        if (rc != NF_OK) break;
        const struct nf_finetune_data d = {
            .n_train = n_tr,
            .n_val = n_val,
            .n_features = p->n_order,
            .x_train = a.xtr,
            .x_val = a.xval,
            .y_train_class = cls ? a.ytrc : NULL,
            .y_val_class = cls ? a.yvalc : NULL,
            .y_train_value = cls ? NULL : a.ytr,
            .y_val_value = cls ? NULL : a.yval,
            .y_min = p->y_min,
            .y_max = p->y_max,
            .y_mirror = p->regmirror[e],
        };
        rc = nf__finetune_ex(m, &d, o, &mres[e], e ? rng : NULL, rng, err);
        if (rc == NF_OK && E > 1) rc = nf__finetune_weights_get(m, &mw[e], &nw, err);
    }
    if (rc == NF_OK) {
        free(p->ft_rng);
        p->ft_rng = rng;
        rng = NULL;
        p->ft_opts = *o;
        p->ft_opts.on_step = NULL;
        p->ft_opts.on_batch = NULL;
        p->ft_opts.user = NULL;
        *res = p->ft_res = mres[E - 1];
        p->ft_n_train = n_tr;
        p->ft_n_val = n_val;
        p->ft_internal = val == NULL;
        nf__mitra_finetune_members_free(p);
        p->ft_members = mres;
        p->ft_weights = mw;
        p->ft_n_weights = nw;
        mres = NULL;
        mw = NULL;
    }
    for (int64_t e = 0; mw && e < E; e++) free(mw[e]);
    free(mw);
    free(mres);
    free(w0);
    free(rng);
    nf_tune_arrays_free(&a);
    nf__mitra_split_free(&sp);
    return rc;
}

void nf__mitra_finetune_report(const struct nf_mitra * p, cJSON * rep) {
    cJSON * f = cJSON_AddObjectToObject(rep, "fine_tune");
    const struct nf_finetune_opts * o = &p->ft_opts;
    cJSON_AddNumberToObject(f, "steps", (double) o->steps);
    cJSON_AddNumberToObject(f, "steps_run", (double) p->ft_res.steps_run);
    cJSON_AddNumberToObject(f, "best_step", (double) p->ft_res.best_step);
    if (p->ft_res.stopped_at >= 0)
        cJSON_AddNumberToObject(f, "stopped_at", (double) p->ft_res.stopped_at);
    else
        cJSON_AddNullToObject(f, "stopped_at");
    cJSON_AddNumberToObject(f, "best_val_loss", p->ft_res.best_val_loss);
    cJSON_AddNumberToObject(f, "lr", o->lr);
    cJSON_AddNumberToObject(f, "weight_decay", o->weight_decay);
    cJSON_AddNumberToObject(f, "warmup_steps", (double) o->warmup_steps);
    cJSON_AddNumberToObject(f, "patience", (double) o->patience);
    cJSON_AddNumberToObject(f, "seed", (double) o->seed);
    cJSON_AddBoolToObject(f, "keep_last", o->keep_last);
    cJSON_AddStringToObject(f, "validation", p->ft_internal ? "internal split" : "table");
    cJSON_AddNumberToObject(f, "n_train_rows", (double) p->ft_n_train);
    cJSON_AddNumberToObject(f, "n_val_rows", (double) p->ft_n_val);
    if (p->n_est > 1 && p->ft_members) { /* each member's run (the members above: the last one's) */
        cJSON * ms = cJSON_AddArrayToObject(f, "members");
        for (int64_t e = 0; e < p->n_est; e++) {
            const struct nf_finetune_result * r = &p->ft_members[e];
            cJSON * j = cJSON_CreateObject();
            cJSON_AddItemToArray(ms, j);
            cJSON_AddNumberToObject(j, "steps_run", (double) r->steps_run);
            cJSON_AddNumberToObject(j, "best_step", (double) r->best_step);
            if (r->stopped_at >= 0)
                cJSON_AddNumberToObject(j, "stopped_at", (double) r->stopped_at);
            else
                cJSON_AddNullToObject(j, "stopped_at");
            cJSON_AddNumberToObject(j, "best_val_loss", r->best_val_loss);
        }
    }
}
