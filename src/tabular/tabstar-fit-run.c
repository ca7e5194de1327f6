/* tabstar-fit-run.c -- TabSTAR's fit on a table (spec finetune.md §3.1-§3.4):
 *
 *   1. the class of every row (the target's values sorted as LabelEncoder /
 *      np.unique sort them, from a verbalizer fitted on the whole table) and
 *      split_to_val (tabstar-fit-pieces.c);
 *   2. the verbalizer fitted on the train part only, the train and the
 *      validation part verbalized into cells (tabstar-cells.c) and their
 *      targets transformed (LabelEncoder ids / clipped z-scores);
 *   3. the LoRA arena of the training step (src/models/tabstar-train.h), A
 *      initialised with kaiming_uniform_(a=sqrt(5))'s distribution, U(-1/sqrt(in),
 *      1/sqrt(in)), from nofall's own generator (nf__tsf_init_a: numpy's legacy
 *      RandomState(fnv1a32(module name) ^ seed).random_sample) -- not torch's
 *      global generator, which upstream's init, batches and dropout share and
 *      no other engine reproduces; the parity fixtures write these A into
 *      upstream's model), B = 0;
 *   4. the loop (tabstar-fit.c), the final adapter merged into the weights;
 *   5. DIR: model.safetensors (the 295 keys, merged) + config.json +
 *      vocab.txt (a model directory predict loads), verbalizer.json (the
 *      fitted state), split.json (the row ids of both parts),
 *      training-log.jsonl (one JSON object per epoch, then the final one).
 *
 * The training step is tabstar-train.h's. */
#include "tabstar-fit.h"
#include "tabstar-verbalize.h"
#include "tabstar-predict.h"
#include "io/nf-io.h"
#include "models/tabstar-cells.h"
#include "core/model.h"
#include "core/weights.h"
#include "models/tabstar-train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void nf__tsf_init_a(const char * module, int64_t r, int64_t in, uint64_t seed, float * a) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char * p = (const unsigned char *) module; *p; p++) h = (h ^ *p) * 16777619u;
    struct nf_np_rng g;
    nf__np_rng_seed(&g, h ^ (uint32_t) seed);
    const double bound = 1.0 / sqrt((double) in);
    for (int64_t k = 0; k < r * in; k++) { /* random_sample: 53 bits of two outputs */
        const uint32_t x = nf__np_rng_u32(&g) >> 5, y = nf__np_rng_u32(&g) >> 6;
        const double u = ((double) x * 67108864.0 + (double) y) / 9007199254740992.0;
        a[k] = (float) ((2.0 * u - 1.0) * bound);
    }
}

/* ---- the tables --------------------------------------------------------------------- */

int nf__tsf_subset(const nf_table * t, const int64_t * rows, int64_t n, nf_table * out, nf_err * err) {
    memset(out, 0, sizeof(*out));
    const struct nf_csv_table * s = &t->csv;
    struct nf_csv_table * d = &out->csv;
    snprintf(d->path, sizeof(d->path), "%s", s->path);
    d->n_rows = n;
    d->n_cols = s->n_cols;
    d->cols = calloc((size_t) (s->n_cols > 0 ? s->n_cols : 1), sizeof(*d->cols));
    if (!d->cols) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int j = 0; j < s->n_cols; j++) {
        const struct nf_csv_column * a = &s->cols[j];
        struct nf_csv_column * b = &d->cols[j];
        b->name = a->name; /* borrowed, as every string */
        b->type = a->type;
        b->bools = a->bools;
        b->raw = malloc((size_t) (n > 0 ? n : 1) * sizeof(char *));
        b->missing = malloc((size_t) (n > 0 ? n : 1));
        b->num = a->num ? malloc((size_t) (n > 0 ? n : 1) * sizeof(double)) : NULL;
        if (!b->raw || !b->missing || (a->num && !b->num)) {
            nf__tsf_subset_free(out);
            return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        }
        for (int64_t i = 0; i < n; i++) {
            b->raw[i] = a->raw[rows[i]];
            b->missing[i] = a->missing[rows[i]];
            b->n_missing += b->missing[i] != 0;
            if (b->num) b->num[i] = a->num[rows[i]];
        }
    }
    return NF_OK;
}

void nf__tsf_subset_free(nf_table * t) {
    for (int j = 0; t->csv.cols && j < t->csv.n_cols; j++) {
        free(t->csv.cols[j].raw);
        free(t->csv.cols[j].missing);
        free(t->csv.cols[j].num);
    }
    free(t->csv.cols);
    memset(t, 0, sizeof(*t));
}

int nf__tsf_targets(const struct nf_tab_verbalizer * v, const nf_table * table, int64_t * y_class, double * y_value,
                    nf_err * err) {
    const struct nf_csv_table * t = &table->csv;
    char e1[160], e2[160], e3[160];
    nf__esc(e1, sizeof(e1), t->path);
    nf__esc(e2, sizeof(e2), v->target);
    const int ci = nf__csv_find(t, v->target);
    if (ci < 0) return nf__err_set(err, NF_ERR_INPUT, "%s: no target column '%s'", e1, e2);
    const struct nf_csv_column * c = &t->cols[ci];
    const int dt = v->target_dtype;
    for (int64_t r = 0; r < t->n_rows; r++) {
        if (c->missing[r])
            return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, target column '%s': missing; upstream refuses it", e1,
                               (long long) r + 1, e2);
        int bv = 0;
        double x = 0.0;
        if (dt == NF_TAB_DT_BOOL || dt == NF_TAB_DT_OBJBOOL)
            x = (nf__csv_is_bool(c->raw[r], &bv), (double) bv);
        else if (dt != NF_TAB_DT_OBJECT)
            x = c->num[r];
        if (v->regression) { /* transform_clipped_z_scores */
            const double s = (x - v->y_mean) / v->y_scale;
            y_value[r] = s < -3.0 ? -3.0 : s > 3.0 ? 3.0 : s;
            continue;
        }
        char b[64];
        const char * s = b;
        if (dt == NF_TAB_DT_OBJECT)
            s = c->raw[r];
        else if (dt == NF_TAB_DT_INT)
            snprintf(b, sizeof(b), "%lld", (long long) x);
        else if (dt == NF_TAB_DT_BOOL || dt == NF_TAB_DT_OBJBOOL)
            snprintf(b, sizeof(b), "%s", x != 0 ? "True" : "False");
        else
            nf__py_float_repr(x, b, sizeof(b));
        int64_t k = 0;
        while (k < v->n_classes && strcmp(v->classes[k], s) != 0) k++;
        if (k == v->n_classes)
            return nf__err_set(err, NF_ERR_INPUT,
                               "%s: row %lld, target column '%s': class '%s' is not among the training part's "
                               "classes (LabelEncoder refuses it)",
                               e1, (long long) r + 1, e2, nf__esc(e3, sizeof(e3), s));
        y_class[r] = k;
    }
    return NF_OK;
}

/* the text cache's size for the strings of both tables (a string in both counted twice: a bound) */
static int64_t nf_tsf_cache_bytes(const struct nf_tab_cells * a, const struct nf_tab_cells * b) {
    int64_t tokens = 0;
    for (int64_t u = 0; u < a->n_strings; u++) tokens += a->token_lengths[u];
    for (int64_t u = 0; u < b->n_strings; u++) tokens += b->token_lengths[u];
    return tokens * NF_TAB_D * (int64_t) sizeof(float);
}

/* one batch of cells rows: the distinct strings they use (first use order),
 * their tokens back to back, the cell map and x_num */
struct nf_tsf_bb {
    int32_t *ids, *lens, *cell, *map;
    float * x_num;
    int64_t cap_ids, cap_rows;
};
static void nf_tsf_bb_free(struct nf_tsf_bb * bb) {
    free(bb->ids), free(bb->lens), free(bb->cell), free(bb->map), free(bb->x_num);
    memset(bb, 0, sizeof(*bb));
}

static int nf_tsf_bb_alloc(struct nf_tsf_bb * bb, const struct nf_tab_cells * c, int64_t rows) {
    bb->cap_rows = rows;
    const int64_t cells = rows * c->n_cells, ns = c->n_strings;
    bb->lens = malloc((size_t) (cells > ns ? ns : cells) * sizeof(int32_t) + 4);
    bb->cell = malloc((size_t) cells * sizeof(int32_t) + 4);
    bb->x_num = malloc((size_t) cells * sizeof(float) + 4);
    bb->map = malloc((size_t) ns * sizeof(int32_t) + 4);
    bb->cap_ids = (cells > ns ? ns : cells) * c->max_len;
    bb->ids = malloc((size_t) bb->cap_ids * sizeof(int32_t) + 4);
    if (bb->map)
        for (int64_t u = 0; u < ns; u++) bb->map[u] = -1;
    return bb->lens && bb->cell && bb->x_num && bb->map && bb->ids;
}

static void nf_tsf_bb_fill(struct nf_tsf_bb * bb, const struct nf_tab_cells * c, const int64_t * rows, int64_t nb,
                           struct nf_tab_batch * b) {
    const int64_t S = c->n_cells;
    int64_t n_str = 0, off = 0;
    for (int64_t i = 0; i < nb; i++)
        for (int64_t j = 0; j < S; j++) {
            const int64_t u = c->cells[rows[i] * S + j];
            if (bb->map[u] < 0) {
                bb->map[u] = (int32_t) n_str;
                const int64_t L = c->token_lengths[u];
                bb->lens[n_str++] = (int32_t) L;
                for (int64_t q = 0; q < L; q++) bb->ids[off + q] = (int32_t) c->token_ids[u * c->max_len + q];
                off += L;
            }
            bb->cell[i * S + j] = bb->map[u];
            bb->x_num[i * S + j] = c->x_num[rows[i] * S + j];
        }
    for (int64_t i = 0; i < nb; i++) /* reset the map for the next batch */
        for (int64_t j = 0; j < S; j++) bb->map[c->cells[rows[i] * S + j]] = -1;
    b->ids = bb->ids, b->lens = bb->lens, b->n_str = n_str, b->cell = bb->cell, b->x_num = bb->x_num;
    b->B = nb, b->S = S, b->C = c->n_targets;
}

/* ---- the step over tabstar-train.h ---------------------------------------------------- */

struct nf_tsf_real {
    struct nf_tab_train * t;
    const struct nf_tab_cells *tr, *va;
    const int64_t *yc_tr, *yc_va;
    const double *yv_tr, *yv_va;
    struct nf_tsf_bb bb_tr, bb_va;
    int64_t * yc;
    float * yv;
    int64_t * seq;
};

static int nf_real_grad(void * u, const int64_t * rows, int64_t nb, float scale, float * loss, nf_err * err) {
    struct nf_tsf_real * r = u;
    struct nf_tab_batch b;
    nf_tsf_bb_fill(&r->bb_tr, r->tr, rows, nb, &b);
    for (int64_t i = 0; i < nb; i++) {
        if (r->yc_tr) r->yc[i] = r->yc_tr[rows[i]];
        if (r->yv_tr) r->yv[i] = (float) r->yv_tr[rows[i]];
    }
    return nf__tab_train_grad(r->t, &b, r->yc_tr ? r->yc : NULL, r->yv_tr ? r->yv : NULL, scale, loss, NULL, err);
}
static int nf_real_update(void * u, double lr, double beta1, nf_err * err) {
    return nf__tab_train_update(((struct nf_tsf_real *) u)->t, lr, beta1, 0.999, 1e-8, 0.01, 1.0f, NULL, err);
}
static int nf_real_eval(void * u, int64_t begin, int64_t end, float * logits, float * loss, nf_err * err) {
    struct nf_tsf_real * r = u;
    struct nf_tab_batch b;
    const int64_t nb = end - begin;
    for (int64_t i = 0; i < nb; i++) {
        r->seq[i] = begin + i;
        if (r->yc_va) r->yc[i] = r->yc_va[begin + i];
        if (r->yv_va) r->yv[i] = (float) r->yv_va[begin + i];
    }
    nf_tsf_bb_fill(&r->bb_va, r->va, r->seq, nb, &b);
    return nf__tab_train_eval(r->t, &b, r->yc_va ? r->yc : NULL, r->yv_va ? r->yv : NULL, logits, loss, err);
}
static int nf_real_read(void * u, float * w, nf_err * err) {
    return nf__tab_train_read(((struct nf_tsf_real *) u)->t, 0, w, err);
}
static int nf_real_write(void * u, const float * w, nf_err * err) {
    return nf__tab_train_write(((struct nf_tsf_real *) u)->t, 0, w, err);
}

/* ---- the output directory ------------------------------------------------------------ */

static int nf_tsf_copy(const char * from_dir, const char * to_dir, const char * name, nf_err * err) {
    char a[4096], b[4096], buf[65536];
    nf__path_join(a, sizeof(a), from_dir, name);
    nf__path_join(b, sizeof(b), to_dir, name);
    FILE *in = fopen(a, "rb"), *out = in ? fopen(b, "wb") : NULL;
    int rc = NF_OK;
    size_t k;
    if (!in || !out) rc = nf__err_set(err, NF_ERR_IO, "%s: cannot %s", !in ? a : b, !in ? "read" : "write");
    while (rc == NF_OK && (k = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, k, out) != k) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", b);
    if (in) fclose(in);
    if (out && fclose(out) != 0 && rc == NF_OK) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", b);
    return rc;
}

static int nf_tsf_write_json(const char * dir, const char * name, cJSON * doc, int lines, nf_err * err) {
    char p[4096];
    nf__path_join(p, sizeof(p), dir, name);
    char * s = lines ? NULL : cJSON_Print(doc);
    FILE * f = fopen(p, "wb");
    int rc = NF_OK;
    if (!f) rc = nf__err_set(err, NF_ERR_IO, "%s: cannot write", p);
    if (rc == NF_OK && !lines && (!s || fputs(s, f) < 0 || fputc('\n', f) == EOF))
        rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", p);
    for (cJSON * it = lines ? doc->child : NULL; rc == NF_OK && it; it = it->next) {
        char * l = cJSON_PrintUnformatted(it);
        if (!l || fputs(l, f) < 0 || fputc('\n', f) == EOF) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", p);
        free(l);
    }
    if (f && fclose(f) != 0 && rc == NF_OK) rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", p);
    free(s);
    return rc;
}

static cJSON * nf_tsf_verbalizer_json(const struct nf_tab_verbalizer * v) {
    cJSON * d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "format", "nofall-tabstar-verbalizer/1");
    cJSON_AddStringToObject(d, "task", v->regression ? "regression" : "classification");
    cJSON_AddStringToObject(d, "target", v->target);
    cJSON_AddStringToObject(d, "target_dtype", nf__tab_dtype_name(v->target_dtype));
    if (v->regression) {
        cJSON_AddNumberToObject(d, "y_mean", v->y_mean);
        cJSON_AddNumberToObject(d, "y_scale", v->y_scale);
    } else {
        cJSON * cl = cJSON_AddArrayToObject(d, "classes");
        for (int64_t k = 0; k < v->n_classes; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(v->classes[k]));
    }
    cJSON * cols = cJSON_AddArrayToObject(d, "columns");
    for (int j = 0; j < v->n_cols; j++) {
        const struct nf_tab_vcol * c = &v->cols[j];
        cJSON * o = cJSON_CreateObject();
        cJSON_AddItemToArray(cols, o);
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "normalized", c->norm);
        cJSON_AddStringToObject(o, "dtype", nf__tab_dtype_name(c->dtype));
        cJSON_AddBoolToObject(o, "numerical", c->numerical);
        if (c->dropped) {
            cJSON_AddStringToObject(o, "dropped", c->dropped);
            continue;
        }
        if (!c->numerical) continue;
        cJSON_AddNumberToObject(o, "mean", c->mean);
        cJSON_AddNumberToObject(o, "scale", c->scale);
        cJSON * b = cJSON_AddArrayToObject(o, "bounds");
        for (int k = 0; k < 11; k++) cJSON_AddItemToArray(b, cJSON_CreateNumber(c->bounds[k]));
        cJSON * l = cJSON_AddArrayToObject(o, "labels");
        for (int k = 0; k < 12; k++) cJSON_AddItemToArray(l, cJSON_CreateString(c->labels[k] ? c->labels[k] : ""));
    }
    return d;
}

static cJSON * nf_tsf_ids(const int64_t * a, int64_t n) {
    cJSON * r = cJSON_CreateArray();
    for (int64_t i = 0; r && i < n; i++) cJSON_AddItemToArray(r, cJSON_CreateNumber((double) a[i]));
    return r;
}

static int nf_tsf_outputs(nf_model * model, const char * model_dir, const char * dir,
                          const struct nf_tab_verbalizer * v, const struct nf_tsf_split * sp, const char * val_path,
                          const struct nf_tsf_result * res, nf_err * err) {
    NF_TRY(nf__mkdir_p(dir, err));
    const nf_tab * m = model->impl;
    const int64_t n = nf__tensor_numel(&m->weights.buf);
    float * host = malloc((size_t) (n > 0 ? n : 1) * sizeof(float));
    if (!host) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the weights");
    char p[4096];
    nf__path_join(p, sizeof(p), dir, "model.safetensors");
    int rc = nf__tensor_download(&m->weights.buf, host, err);
    if (rc == NF_OK) rc = nf__weights_save(&m->weights, host, p, err);
    free(host);
    if (rc == NF_OK) rc = nf_tsf_copy(model_dir, dir, "config.json", err);
    if (rc == NF_OK) rc = nf_tsf_copy(model_dir, dir, "vocab.txt", err);
    cJSON * d = nf_tsf_verbalizer_json(v);
    if (rc == NF_OK) rc = nf_tsf_write_json(dir, "verbalizer.json", d, 0, err);
    cJSON_Delete(d);
    d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "train", nf_tsf_ids(sp->train, sp->n_train));
    cJSON_AddItemToObject(d, "val", nf_tsf_ids(sp->val, sp->n_val));
    if (val_path) /* upstream's x_val: "val" are that table's rows */
        cJSON_AddStringToObject(d, "val_table", val_path);
    if (rc == NF_OK) rc = nf_tsf_write_json(dir, "split.json", d, 0, err);
    cJSON_Delete(d);
    d = cJSON_CreateArray();
    for (int e = 0; e < res->n_epochs; e++) {
        const struct nf_tsf_epoch * ep = &res->epochs[e];
        cJSON * o = cJSON_CreateObject();
        cJSON_AddItemToArray(d, o);
        cJSON_AddNumberToObject(o, "epoch", ep->epoch);
        cJSON_AddNumberToObject(o, "lr", ep->lr);
        cJSON_AddNumberToObject(o, "beta1", ep->beta1);
        cJSON_AddNumberToObject(o, "updates", ep->updates);
        cJSON_AddNumberToObject(o, "train_loss", ep->train_loss);
        cJSON_AddNumberToObject(o, "val_loss", ep->val_loss);
        cJSON_AddNumberToObject(o, "metric", isfinite(ep->metric) ? ep->metric : -1.0);
        cJSON_AddBoolToObject(o, "best", ep->best);
        cJSON_AddNumberToObject(o, "failed", ep->failed);
        cJSON_AddBoolToObject(o, "stopped", ep->stopped);
        cJSON_AddBoolToObject(o, "averaged", ep->averaged);
    }
    cJSON * f = cJSON_CreateObject();
    cJSON_AddItemToArray(d, f);
    cJSON_AddStringToObject(f, "final", res->n_averaged ? "averaged" : "best epoch");
    cJSON_AddNumberToObject(f, "best_epoch", res->best_epoch);
    cJSON_AddNumberToObject(f, "epochs_averaged", res->n_averaged);
    cJSON_AddNumberToObject(f, "threshold", res->threshold);
    cJSON_AddNumberToObject(f, "val_loss", res->final_val_loss);
    cJSON_AddNumberToObject(f, "metric", isfinite(res->final_metric) ? res->final_metric : -1.0);
    if (rc == NF_OK) rc = nf_tsf_write_json(dir, "training-log.jsonl", d, 1, err);
    cJSON_Delete(d);
    return rc;
}

/* ---- the fit ------------------------------------------------------------------------ */

/* the "split" of a fit given its validation table: every row of each, in order */
static int nf_tsf_whole(int64_t n, int64_t n_val, const char * val_path, struct nf_tsf_split * sp, nf_err * err) {
    char e1[512];
    if (n < 1 || n_val < 1)
        return nf__err_set(err, NF_ERR_INPUT, "%s: %lld training rows, %lld validation rows; the fit needs both",
                           nf__esc(e1, sizeof(e1), val_path), (long long) n, (long long) n_val);
    sp->n_train = n, sp->n_val = n_val;
    sp->train = malloc((size_t) n * sizeof(int64_t));
    sp->val = malloc((size_t) n_val * sizeof(int64_t));
    if (!sp->train || !sp->val) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) sp->train[i] = i;
    for (int64_t i = 0; i < n_val; i++) sp->val[i] = i;
    return NF_OK;
}

void nf__tsf_fit_opts_default(struct nf_tsf_fit_opts * o) {
    memset(o, 0, sizeof(*o));
    nf__tsf_opts_default(&o->loop);
    o->task = NF_PREDICT_AUTO;
}

int nf__tsf_fit(nf_model * model, const char * model_dir, const nf_table * table, const char * target,
                const struct nf_tsf_fit_opts * o, struct nf_tab_verbalizer * v_out, struct nf_tsf_result * res,
                nf_err * err) {
    memset(res, 0, sizeof(*res));
    if (!model || strcmp(model->iface->type, "tabstar") != 0)
        return nf__err_set(err, NF_ERR_ARG, "TabSTAR fit: not a TabSTAR model");
    const int64_t n = table->csv.n_rows;
    struct nf_tab_verbalizer v_all, v;
    struct nf_tsf_split sp;
    nf_table ttr, tva;
    struct nf_tab_cells ctr, cva;
    cJSON *dtr = NULL, *dva = NULL;
    struct nf_tsf_real r;
    memset(&v_all, 0, sizeof(v_all)), memset(&v, 0, sizeof(v)), memset(&sp, 0, sizeof(sp));
    memset(&ttr, 0, sizeof(ttr)), memset(&tva, 0, sizeof(tva)), memset(&ctr, 0, sizeof(ctr));
    memset(&cva, 0, sizeof(cva)), memset(&r, 0, sizeof(r));
    int64_t * y_all = malloc((size_t) (n > 0 ? n : 1) * sizeof(int64_t));
    int rc = y_all ? NF_OK : nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK) rc = nf__tab_verbalizer_fit(table, target, o->task, &v_all, err);
    const int reg = v_all.regression;
    if (rc == NF_OK && o->val) /* upstream's x_val / y_val: both tables as they are */
        rc = nf_tsf_whole(n, o->val->csv.n_rows, o->val->csv.path, &sp, err);
    else if (rc == NF_OK) {
        if (!reg) rc = nf__tsf_targets(&v_all, table, y_all, NULL, err);
        if (rc == NF_OK) rc = nf__tsf_split_to_val(reg ? NULL : y_all, n, &sp, err);
    }
    if (rc == NF_OK) rc = nf__tsf_subset(table, sp.train, sp.n_train, &ttr, err);
    if (rc == NF_OK) rc = nf__tsf_subset(o->val ? o->val : table, sp.val, sp.n_val, &tva, err);
    if (rc == NF_OK)
        rc = nf__tab_verbalizer_fit(&ttr, target, reg ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION, &v, err);
    if (rc == NF_OK) rc = nf__tab_verbalize(&v, &ttr, &dtr, err);
    if (rc == NF_OK) rc = nf__tab_verbalize(&v, &tva, &dva, err);
    if (rc == NF_OK) rc = nf__tab_cells_build(dtr, table->csv.path, nf__tab_vocab(model), &ctr, err);
    if (rc == NF_OK) rc = nf__tab_cells_build(dva, table->csv.path, nf__tab_vocab(model), &cva, err);
    const int64_t C = reg ? 1 : v.n_classes, nb = o->loop.batch > o->loop.val_batch ? o->loop.batch : o->loop.val_batch;
    int64_t *yc_tr = NULL, *yc_va = NULL;
    double *yv_tr = NULL, *yv_va = NULL;
    if (rc == NF_OK) {
        yc_tr = malloc((size_t) sp.n_train * sizeof(int64_t)), yc_va = malloc((size_t) sp.n_val * sizeof(int64_t));
        yv_tr = malloc((size_t) sp.n_train * sizeof(double)), yv_va = malloc((size_t) sp.n_val * sizeof(double));
        r.yc = malloc((size_t) nb * sizeof(int64_t)), r.yv = malloc((size_t) nb * sizeof(float));
        r.seq = malloc((size_t) nb * sizeof(int64_t));
        if (!yc_tr || !yc_va || !yv_tr || !yv_va || !r.yc || !r.yv || !r.seq ||
            !nf_tsf_bb_alloc(&r.bb_tr, &ctr, o->loop.batch) || !nf_tsf_bb_alloc(&r.bb_va, &cva, o->loop.val_batch))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    if (rc == NF_OK) rc = nf__tsf_targets(&v, &ttr, yc_tr, yv_tr, err);
    if (rc == NF_OK) rc = nf__tsf_targets(&v, &tva, yc_va, yv_va, err);
    if (rc == NF_OK) rc = nf__tab_train_new(model->impl, C, &r.t, err);
    if (rc == NF_OK && o->dropout != 0.0f) /* the masks' generator apart from the permutations' */
        rc = nf__tab_train_dropout(r.t, o->dropout, o->loop.seed ^ 0x64726F706F7574ull, err);
    /* the text cache (finetune.md §3.5): text layers 0..5 once per distinct string of the fit -- room for
     * every token of the train and validation strings, no more (with dropout it serves the evaluations) */
    if (rc == NF_OK) rc = nf__tab_train_text_cache(r.t, nf_tsf_cache_bytes(&ctr, &cva), err);
    if (rc == NF_OK) nf__tab_train_text_cache_rows(r.t, NF_TAB_TRAIN_MIN_ROWS);
    float * w = NULL;
    if (rc == NF_OK) {
        const int64_t P = nf__tab_train_floats(r.t);
        w = calloc((size_t) P, sizeof(float));
        if (!w) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        if (w && o->init)
            memcpy(w, o->init, (size_t) P * sizeof(float));
        else if (w) /* kaiming_uniform_(a=sqrt(5))'s bound, nofall's generator (nf__tsf_init_a) */
            for (int i = 0; i < nf__tab_train_modules(r.t); i++) {
                const struct nf_tab_lora_module * md = nf__tab_train_module(r.t, i);
                nf__tsf_init_a(md->name, NF_TAB_LORA_R, md->in, o->loop.seed, w + md->off_a);
            }
        if (rc == NF_OK) rc = nf__tab_train_write(r.t, 0, w, err);
    }
    if (rc == NF_OK) {
        r.tr = &ctr, r.va = &cva;
        r.yc_tr = reg ? NULL : yc_tr, r.yc_va = reg ? NULL : yc_va;
        r.yv_tr = reg ? yv_tr : NULL, r.yv_va = reg ? yv_va : NULL;
        const struct nf_tsf_step s = {
            &r, nf__tab_train_floats(r.t), C, nf_real_grad, nf_real_update, nf_real_eval, nf_real_read, nf_real_write};
        rc = nf__tsf_run(&s, sp.n_train, sp.n_val, r.yc_va, r.yv_va, &o->loop, res, err);
        res->regression = reg;
    }
    if (rc == NF_OK) rc = nf__tab_train_merge(r.t, err);
    if (rc == NF_OK && o->out_dir)
        rc = nf_tsf_outputs(model, model_dir, o->out_dir, &v, &sp, o->val ? o->val->csv.path : NULL, res, err);
    if (rc == NF_OK && v_out) {
        *v_out = v;
        memset(&v, 0, sizeof(v));
    }
    if (r.t) nf__tab_train_free(r.t);
    free(w), free(y_all), free(yc_tr), free(yc_va), free(yv_tr), free(yv_va), free(r.yc), free(r.yv), free(r.seq);
    nf_tsf_bb_free(&r.bb_tr), nf_tsf_bb_free(&r.bb_va);
    nf__tab_cells_free(&ctr), nf__tab_cells_free(&cva);
    cJSON_Delete(dtr), cJSON_Delete(dva);
    nf__tsf_subset_free(&ttr), nf__tsf_subset_free(&tva);
    nf__tab_verbalizer_free(&v_all), nf__tab_verbalizer_free(&v);
    nf__tsf_split_free(&sp);
    if (rc != NF_OK) nf__tsf_result_free(res);
    return rc;
}

/* ---- the public entry (nofall-tabular.h) ------------------------------------------- */

void nf_tabstar_fit_opts_default(struct nf_tabstar_fit_opts * o) {
    memset(o, 0, sizeof(*o));
    o->task = NF_PREDICT_AUTO;
    o->max_epochs = 50;
    o->patience = 5;
}

static void nf_tsf_epoch_public(const struct nf_tsf_epoch * ep, int max_epochs, struct nf_tabstar_epoch * e) {
    memset(e, 0, sizeof(*e));
    e->epoch = ep->epoch, e->max_epochs = max_epochs, e->lr = ep->lr, e->beta1 = ep->beta1;
    e->updates = ep->updates, e->train_loss = ep->train_loss, e->val_loss = ep->val_loss, e->metric = ep->metric;
    e->best = ep->best, e->failed = ep->failed, e->stopped = ep->stopped;
}

struct nf_tsf_tramp {
    const struct nf_tabstar_fit_opts * o;
};
static int nf_tsf_tramp_fn(void * u, const struct nf_tsf_epoch * ep) {
    const struct nf_tabstar_fit_opts * o = ((const struct nf_tsf_tramp *) u)->o;
    struct nf_tabstar_epoch e;
    nf_tsf_epoch_public(ep, o->max_epochs, &e);
    return o->on_epoch(o->user, &e);
}

/* the public options into the fit's (task: the caller's) */
static void nf_tsf_opts_public(const struct nf_tabstar_fit_opts * o, struct nf_tsf_tramp * t,
                               struct nf_tsf_fit_opts * fo) {
    nf__tsf_fit_opts_default(fo);
    if (!o) return;
    fo->task = o->task;
    fo->loop.max_epochs = o->max_epochs;
    fo->loop.patience = o->patience;
    fo->loop.average = !o->no_average;
    fo->loop.seed = o->seed;
    fo->val = o->val;
    fo->dropout = o->dropout;
    t->o = o;
    if (o->on_epoch) fo->loop.on_epoch = nf_tsf_tramp_fn, fo->loop.user = t;
}

static void nf_tsf_result_public(const struct nf_tsf_result * r, int val_table, struct nf_tabstar_fit_result * res) {
    memset(res, 0, sizeof(*res));
    res->epochs = r->n_epochs;
    res->best_epoch = r->best_epoch;
    res->epochs_averaged = r->n_averaged;
    res->val_loss = r->final_val_loss;
    res->metric = r->final_metric;
    res->stopped_at = r->n_epochs > 0 && r->epochs[r->n_epochs - 1].stopped ? r->n_epochs : -1;
    res->n_train = r->n_train;
    res->n_val = r->n_val;
    res->val_table = val_table;
    res->threshold = r->n_averaged ? r->threshold : 0.0;
    res->task = r->regression ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION;
}

static double nf_tsf_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

int nf_tabstar_fit(nf_model * m, const char * model_dir, const nf_table * train, const char * target,
                   const struct nf_tabstar_fit_opts * o, const char * out_dir, struct nf_tabstar_fit_result * res,
                   nf_err * err) {
    if (!m || !model_dir || !train || !target)
        return nf__err_set(err, NF_ERR_ARG, "nf_tabstar_fit: no model, model directory, table or target");
    struct nf_tsf_fit_opts fo;
    struct nf_tsf_tramp t;
    nf_tsf_opts_public(o, &t, &fo);
    fo.out_dir = out_dir;
    struct nf_tsf_result r;
    const double t0 = nf_tsf_now_ms();
    const int rc = nf__tsf_fit(m, model_dir, train, target, &fo, NULL, &r, err);
    if (rc == NF_OK && res) nf_tsf_result_public(&r, fo.val != NULL, res);
    if (rc == NF_OK && res) res->wall_ms = nf_tsf_now_ms() - t0;
    if (rc == NF_OK) nf__tsf_result_free(&r);
    return rc;
}

static double nf_tsf_finite(double x) { return isfinite(x) ? x : -1.0; }

char * nf_tabstar_fit_json(const struct nf_tabstar_fit_opts * o, const struct nf_tabstar_fit_result * r,
                           const struct nf_tabstar_epoch * ep, int n_ep) {
    if (!o || !r) return NULL;
    cJSON * f = cJSON_CreateObject();
    if (!f) return NULL;
    cJSON_AddStringToObject(f, "task", r->task == NF_PREDICT_REGRESSION ? "regression" : "classification");
    cJSON_AddNumberToObject(f, "max_epochs", o->max_epochs);
    cJSON_AddNumberToObject(f, "patience", o->patience);
    cJSON_AddNumberToObject(f, "seed", (double) o->seed);
    cJSON_AddBoolToObject(f, "average", !o->no_average);
    cJSON_AddStringToObject(f, "validation", r->val_table ? "table" : "internal split");
    cJSON_AddNumberToObject(f, "n_train_rows", (double) r->n_train);
    cJSON_AddNumberToObject(f, "n_val_rows", (double) r->n_val);
    cJSON_AddNumberToObject(f, "epochs_run", r->epochs);
    cJSON_AddNumberToObject(f, "best_epoch", r->best_epoch);
    if (r->stopped_at >= 0)
        cJSON_AddNumberToObject(f, "stopped_at", r->stopped_at);
    else
        cJSON_AddNullToObject(f, "stopped_at");
    cJSON_AddStringToObject(f, "final", r->epochs_averaged ? "averaged" : "best epoch");
    cJSON_AddNumberToObject(f, "epochs_averaged", r->epochs_averaged);
    cJSON_AddNumberToObject(f, "threshold", r->threshold);
    cJSON_AddNumberToObject(f, "val_loss", r->val_loss);
    cJSON_AddNumberToObject(f, "metric", nf_tsf_finite(r->metric));
    cJSON_AddNumberToObject(f, "wall_ms", r->wall_ms);
    cJSON * a = cJSON_AddArrayToObject(f, "epochs");
    for (int i = 0; ep && i < n_ep; i++) {
        cJSON * e = cJSON_CreateObject();
        cJSON_AddItemToArray(a, e);
        cJSON_AddNumberToObject(e, "epoch", ep[i].epoch);
        cJSON_AddNumberToObject(e, "lr", ep[i].lr);
        cJSON_AddNumberToObject(e, "train_loss", ep[i].train_loss);
        cJSON_AddNumberToObject(e, "val_loss", ep[i].val_loss);
        cJSON_AddNumberToObject(e, "metric", nf_tsf_finite(ep[i].metric));
        cJSON_AddBoolToObject(e, "best", ep[i].best);
        cJSON_AddBoolToObject(e, "stopped", ep[i].stopped);
    }
    char * s = cJSON_PrintUnformatted(f);
    cJSON_Delete(f);
    return s;
}

int nf__tsp_tabstar_fit(struct nf_tabstar * p, nf_model * m, const char * model_dir, const nf_table * train,
                        const struct nf_tabstar_fit_opts * o, struct nf_tabstar_fit_result * res, nf_err * err) {
    struct nf_tabstar_fit_opts po;
    if (o)
        po = *o;
    else
        nf_tabstar_fit_opts_default(&po);
    /* the predictor's task, as it resolved it on the whole table */
    po.task = p->v.regression ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION;
    struct nf_tsf_fit_opts fo;
    struct nf_tsf_tramp t;
    nf_tsf_opts_public(&po, &t, &fo);
    struct nf_tab_verbalizer v;
    struct nf_tsf_result r;
    memset(&v, 0, sizeof(v));
    const double t0 = nf_tsf_now_ms();
    NF_TRY(nf__tsf_fit(m, model_dir, train, p->v.target, &fo, &v, &r, err));
    struct nf_tabstar_fit_result pr;
    nf_tsf_result_public(&r, po.val != NULL, &pr);
    pr.wall_ms = nf_tsf_now_ms() - t0;
    if (res) *res = pr;
    /* the fit's summary for report.json (nf__tsp_report: "fine_tune") */
    struct nf_tabstar_epoch * ep = malloc((size_t) (r.n_epochs > 0 ? r.n_epochs : 1) * sizeof(*ep));
    for (int i = 0; ep && i < r.n_epochs; i++) nf_tsf_epoch_public(&r.epochs[i], po.max_epochs, &ep[i]);
    free(p->fit_json);
    p->fit_json = ep ? nf_tabstar_fit_json(&po, &pr, ep, r.n_epochs) : NULL;
    free(ep);
    snprintf(p->adapter, sizeof(p->adapter),
             "fine-tuned (upstream's fit): %d epochs, best %d, %d averaged; the train part's verbalizer", r.n_epochs,
             r.best_epoch, r.n_averaged);
    nf__tsf_result_free(&r);
    v.task_why = p->v.task_why;     /* the task as decided on the whole table (a static string) */
    nf__tab_verbalizer_free(&p->v); /* upstream predicts with the train part's verbalizer */
    p->v = v;
    snprintf(p->verbalizer_fit, sizeof(p->verbalizer_fit), "%s",
             po.val ? "the whole --train table (the fit's train part; --val validated)"
                    : "the train part of upstream's split_to_val (the fit's)");
    return NF_OK;
}

/* predict --no-fine-tune on a directory nofall's fit wrote: the verbalizer it
 * was trained with (verbalizer.json), refitted on --train's rows of its train
 * part (split.json) -- the same fit reproduces every derived field -- and
 * checked equal to verbalizer.json, so that a different --train is refused */
int nf__tsp_use_fit(struct nf_tabstar * p, const char * model_dir, const nf_table * train, int * used, nf_err * err) {
    *used = 0;
    char pv[4096], ps[4096], e1[512];
    nf__path_join(pv, sizeof(pv), model_dir, "verbalizer.json");
    nf__path_join(ps, sizeof(ps), model_dir, "split.json");
    FILE * f = fopen(pv, "rb");
    if (!f) return NF_OK; /* not a directory nofall's fit wrote */
    fclose(f);
    cJSON *saved = NULL, *split = NULL, *mine = NULL;
    int64_t * ids = NULL;
    nf_table sub;
    struct nf_tab_verbalizer v;
    memset(&sub, 0, sizeof(sub)), memset(&v, 0, sizeof(v));
    int rc = nf__json_read_file(pv, &saved, err);
    if (rc == NF_OK) rc = nf__json_read_file(ps, &split, err);
    const cJSON * tr = split ? cJSON_GetObjectItemCaseSensitive(split, "train") : NULL;
    const int64_t n = cJSON_GetArraySize(tr), rows = train->csv.n_rows;
    if (rc == NF_OK && (!cJSON_IsArray(tr) || n < 1))
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no \"train\" row ids", nf__esc(e1, sizeof(e1), ps));
    if (rc == NF_OK && !(ids = malloc((size_t) n * sizeof(int64_t))))
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (const cJSON * it = tr ? tr->child : NULL; rc == NF_OK && it; it = it->next, k++) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (double) rows ||
            it->valuedouble != (double) (int64_t) it->valuedouble)
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: train row id %lld is not a row of --train (%lld data rows): predict on a fine-tuned "
                             "directory takes the --train table it was fine-tuned on",
                             nf__esc(e1, sizeof(e1), ps), (long long) k, (long long) rows);
        else
            ids[k] = (int64_t) it->valuedouble;
    }
    if (rc == NF_OK) rc = nf__tsf_subset(train, ids, n, &sub, err);
    if (rc == NF_OK)
        rc = nf__tab_verbalizer_fit(&sub, p->v.target,
                                    p->v.regression ? NF_PREDICT_REGRESSION : NF_PREDICT_CLASSIFICATION, &v, err);
    if (rc == NF_OK) { /* as written and read back (a non-finite number reads back null) */
        cJSON * d = nf_tsf_verbalizer_json(&v);
        char * txt = d ? cJSON_Print(d) : NULL;
        if (!txt || !(mine = cJSON_Parse(txt))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        free(txt);
        cJSON_Delete(d);
    }
    if (rc == NF_OK && !cJSON_Compare(mine, saved, 1))
        rc = nf__err_set(err, NF_ERR_INPUT,
                         "%s: the verbalizer the model was fine-tuned with differs from the one --train's rows of "
                         "split.json give (another --train table, --target or --task?); predict on a fine-tuned "
                         "directory takes the --train table it was fine-tuned on",
                         nf__esc(e1, sizeof(e1), pv));
    if (rc == NF_OK) {
        v.task_why = p->v.task_why; /* the task as decided on the whole table (a static string) */
        nf__tab_verbalizer_free(&p->v);
        p->v = v;
        memset(&v, 0, sizeof(v));
        snprintf(p->verbalizer_fit, sizeof(p->verbalizer_fit), "%s",
                 "the fine-tuned model's train part (its verbalizer.json, split.json)");
        *used = 1;
    }
    nf__tab_verbalizer_free(&v);
    nf__tsf_subset_free(&sub);
    free(ids);
    cJSON_Delete(saved), cJSON_Delete(split), cJSON_Delete(mine);
    return rc;
}
