/* cmd-predict.c -- `nofall predict`: Mitra on CSV tables, preprocessed as
 * AutoGluon feeds Mitra (README "predict"; spec shared/specs/mitra.md §5):
 *
 *   pandas.read_csv typing (src/io/csv.c)
 *   -> label cleaning: classes = the sorted distinct labels (<= 10)
 *   -> AutoMLPipelineFeatureGenerator: two-valued columns to 0/1
 *      (AsTypeFeatureGenerator), text NaN -> '' (FillNa), text -> category
 *      codes (values seen < 2 times in training: -1; categories in code point
 *      order), constant columns and exact duplicates dropped, categories after
 *      the numeric columns
 *   -> Mitra's Preprocessor: NaN -> training mean, singular columns dropped,
 *      +-1 mirror per feature (and the regression mirror) drawn from --seed,
 *      float32, NaN/Inf -> 0; regression target min-max scaled
 *   -> one forward per ensemble member (support = the whole training table),
 *      probabilities / de-normalised predictions averaged.
 *
 * Outputs (one set, outset.c): predictions.csv, probabilities.csv
 * (classification), logits.npy, report.json. Every bad table is an error
 * naming file / row / column, before the model is loaded. */
#include "cli.h"
#include "weights.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * const nf_pred_artifacts[] = {"predictions.csv", "probabilities.csv", "logits.npy", "report.json"};
#define NF_PRED_N_ARTIFACTS 4
#define NF_PRED_MAX_CLASSES 10

enum { NF_TASK_AUTO, NF_TASK_CLS, NF_TASK_REG };
enum { NF_FEAT_NUM, NF_FEAT_BOOL, NF_FEAT_CAT };

struct nf_pred_opts {
    const char *model, *train, *test, *target, *device, *out;
    int task, mirror;
    int64_t n_est;
    uint64_t seed;
};

/* one input column and what the feature generation made of it */
struct nf_feat {
    int col, tcol;   /* index in train / test */
    int kind;        /* NF_FEAT_*             */
    int is_int;      /* pandas int64 in train */
    double true_num; /* bool: the value mapped to 1 */
    const char * true_str;
    char ** cats; /* category: sorted categories (count >= 2) */
    int64_t n_cats;
    double *xs, *xq;      /* generated values (NaN missing; codes -1 for a missing category) */
    const char * dropped; /* why it was dropped, or NULL */
};

static int nf_cmp_str(const void * a, const void * b) {
    return strcmp(*(const char * const *) a, *(const char * const *) b);
}
static int nf_cmp_dbl(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* a text cell as AutoGluon sees it after FillNa: missing -> "" */
static const char * nf_text(const struct nf_csv_column * c, int64_t r) { return c->missing[r] ? "" : c->raw[r]; }

static uint64_t nf_splitmix(uint64_t * s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* distinct values of a column, missing counted as one value; sorted copies out */
static int64_t nf_distinct_num(const double * v, int64_t n, double * tmp, int * has_nan) {
    int64_t m = 0;
    *has_nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            *has_nan = 1;
        else
            tmp[m++] = v[i];
    }
    qsort(tmp, (size_t) m, sizeof(double), nf_cmp_dbl);
    int64_t u = 0;
    for (int64_t i = 0; i < m; i++)
        if (i == 0 || tmp[i] != tmp[i - 1]) tmp[u++] = tmp[i];
    return u + *has_nan;
}

static int64_t nf_find_cat(char ** cats, int64_t n, const char * s) {
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(cats[mid], s);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* both vectors the same values, NaN where the other has NaN */
static int nf_same_values(const double * a, const double * b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return 0;
        if (!isnan(a[i]) && a[i] != b[i]) return 0;
    }
    return 1;
}
/* the same partition of the rows: category codes (-1 = missing) relabelled
 * in first-appearance order on both sides, then compared; codes < n_a, n_b */
static int nf_same_partition(const double * a, int64_t n_a, const double * b, int64_t n_b, int64_t n) {
    int64_t * la = malloc((size_t) (n_a + 1) * sizeof(int64_t));
    int64_t * lb = malloc((size_t) (n_b + 1) * sizeof(int64_t));
    int same = la && lb;
    for (int64_t k = 0; same && k <= n_a; k++) la[k] = -1;
    for (int64_t k = 0; same && k <= n_b; k++) lb[k] = -1;
    int64_t next_a = 0, next_b = 0;
    for (int64_t i = 0; same && i < n; i++) {
        const int64_t ca = (int64_t) a[i] + 1, cb = (int64_t) b[i] + 1;
        if (la[ca] < 0) la[ca] = next_a++;
        if (lb[cb] < 0) lb[cb] = next_b++;
        same = la[ca] == lb[cb];
    }
    free(la);
    free(lb);
    return same;
}

static const char * nf_col_type_name(const struct nf_csv_column * c) {
    return c->type == NF_CSV_INT ? "int64" : c->type == NF_CSV_FLOAT ? "float64" : "object";
}

struct nf_pred {
    struct nf_csv_table tr, te;
    int ycol;
    int task; /* NF_TASK_CLS / NF_TASK_REG */
    /* classification */
    int64_t n_classes;
    char * class_name[NF_PRED_MAX_CLASSES];
    int64_t * yc;
    /* regression */
    double *yv, y_min, y_max;
    struct nf_feat * feats;
    int n_feats;
    int * order; /* kept features after Mitra's singular check, in model order */
    int n_order;
    double * mean; /* per kept feature */
};

static void nf_pred_free(struct nf_pred * p) {
    for (int i = 0; i < p->n_feats; i++) {
        free(p->feats[i].cats);
        free(p->feats[i].xs);
        free(p->feats[i].xq);
    }
    free(p->feats);
    free(p->order);
    free(p->mean);
    free(p->yc);
    free(p->yv);
    nf__csv_free(&p->tr);
    nf__csv_free(&p->te);
}

/* the target: task, classes, encoded labels */
static int nf_pred_target(struct nf_pred * p, const struct nf_pred_opts * o, nf_err * err) {
    const struct nf_csv_column * y = &p->tr.cols[p->ycol];
    const int64_t n = p->tr.n_rows;
    char e1[512], e2[256];
    nf__esc(e1, sizeof(e1), p->tr.path);
    nf__esc(e2, sizeof(e2), y->name);
    for (int64_t r = 0; r < n; r++)
        if (y->missing[r])
            return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s' (the target): missing value", e1,
                               (long long) r + 1, e2);
    double * tmp = malloc((size_t) n * sizeof(double));
    char ** s = malloc((size_t) n * sizeof(char *));
    if (!tmp || !s) {
        free(tmp);
        free(s);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int64_t u = 0;
    int has_nan = 0;
    if (y->type != NF_CSV_TEXT) {
        u = nf_distinct_num(y->num, n, tmp, &has_nan);
    } else {
        for (int64_t r = 0; r < n; r++) s[r] = y->raw[r];
        qsort(s, (size_t) n, sizeof(char *), nf_cmp_str);
        for (int64_t i = 0; i < n; i++)
            if (i == 0 || strcmp(s[i], s[i - 1]) != 0) s[u++] = s[i];
    }
    int task = o->task;
    if (task == NF_TASK_AUTO) {
        /* autogluon.core.utils.infer_problem_type */
        const double ratio = (double) u / (double) n, thr = n > 1000 ? 0.05 : 0.1;
        if (u == 2 || y->type == NF_CSV_TEXT)
            task = NF_TASK_CLS;
        else if (ratio <= thr && u <= 1000) {
            int ints = 1;
            for (int64_t i = 0; i < u; i++) ints &= tmp[i] == floor(tmp[i]) && fabs(tmp[i]) < 9.2e18;
            task = ints ? NF_TASK_CLS : NF_TASK_REG;
        } else
            task = NF_TASK_REG;
    }
    p->task = task;
    int rc = NF_OK;
    if (task == NF_TASK_REG) {
        if (y->type == NF_CSV_TEXT) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) is not numeric: no regression", e1, e2);
        } else if (!(u >= 2)) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) is constant: nothing to regress", e1, e2);
        } else if (!(p->yv = malloc((size_t) n * sizeof(double)))) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        } else {
            p->y_min = tmp[0];
            p->y_max = tmp[u - 1];
            if (!isfinite(p->y_min) || !isfinite(p->y_max))
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) holds an infinite value", e1, e2);
            memcpy(p->yv, y->num, (size_t) n * sizeof(double));
        }
    } else {
        if (u < 2)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) has one class only: nothing to classify",
                             e1, e2);
        else if (u > NF_PRED_MAX_CLASSES)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) has %lld classes; Mitra takes at most %d",
                             e1, e2, (long long) u, NF_PRED_MAX_CLASSES);
        else if (!(p->yc = malloc((size_t) n * sizeof(int64_t))))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else {
            p->n_classes = u;
            for (int64_t k = 0; k < u; k++) p->class_name[k] = NULL;
            for (int64_t r = 0; r < n; r++) {
                int64_t k = 0;
                if (y->type == NF_CSV_TEXT) {
                    while (strcmp(s[k], y->raw[r]) != 0) k++;
                } else {
                    while (tmp[k] != y->num[r]) k++;
                }
                p->yc[r] = k;
                if (!p->class_name[k]) p->class_name[k] = y->raw[r]; /* as written, first occurrence */
            }
        }
    }
    free(tmp);
    free(s);
    return rc;
}

/* AutoGluon's feature generation, column by column, then the drops */
static int nf_pred_features(struct nf_pred * p, nf_err * err) {
    const int64_t ns = p->tr.n_rows, nq = p->te.n_rows;
    char ef[512], et[512], ec[256];
    nf__esc(ef, sizeof(ef), p->tr.path);
    nf__esc(et, sizeof(et), p->te.path);
    /* the test table: the training columns (the target optional), no others */
    for (int c = 0; c < p->te.n_cols; c++) {
        if (nf__csv_find(&p->tr, p->te.cols[c].name) < 0)
            return nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' is not in the training table %s", et,
                               nf__esc(ec, sizeof(ec), p->te.cols[c].name), ef);
    }
    p->feats = calloc((size_t) p->tr.n_cols, sizeof(*p->feats));
    double * tmp = malloc((size_t) (ns + 1) * sizeof(double));
    if (!p->feats || !tmp) {
        free(tmp);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int rc = NF_OK;
    for (int c = 0; c < p->tr.n_cols && rc == NF_OK; c++) {
        if (c == p->ycol) continue;
        const struct nf_csv_column * tc = &p->tr.cols[c];
        struct nf_feat * f = &p->feats[p->n_feats++];
        f->col = c;
        f->tcol = nf__csv_find(&p->te, tc->name);
        nf__esc(ec, sizeof(ec), tc->name);
        if (f->tcol < 0) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' of the training table %s is missing", et, ec, ef);
            break;
        }
        const struct nf_csv_column * qc = &p->te.cols[f->tcol];
        const int numeric = tc->type != NF_CSV_TEXT;
        if (numeric && qc->type == NF_CSV_TEXT) {
            int64_t r = 0;
            double d;
            int ii;
            while (r < nq && (qc->missing[r] || nf__csv_parse_number(qc->raw[r], &d, &ii))) r++;
            char ev[256];
            rc = nf__err_set(
                err, NF_ERR_INPUT, "%s: row %lld, column '%s': '%s' is not a number (the column is %s in %s)", et,
                (long long) r + 1, ec, nf__esc(ev, sizeof(ev), r < nq ? qc->raw[r] : ""), nf_col_type_name(tc), ef);
            break;
        }
        f->xs = malloc((size_t) (ns ? ns : 1) * sizeof(double));
        f->xq = malloc((size_t) (nq ? nq : 1) * sizeof(double));
        if (!f->xs || !f->xq) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        f->is_int = tc->type == NF_CSV_INT;
        /* distinct values, missing counted as a value (AsTypeFeatureGenerator) */
        int64_t nd;
        char ** strs = NULL;
        if (numeric) {
            int has_nan;
            nd = nf_distinct_num(tc->num, ns, tmp, &has_nan);
            if (nd == 2) {
                f->kind = NF_FEAT_BOOL;
                f->true_num = has_nan ? tmp[0] : tmp[1]; /* the larger value; never NaN */
            }
        } else {
            strs = malloc((size_t) (ns ? ns : 1) * sizeof(char *));
            if (!strs) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t r = 0; r < ns; r++) strs[r] = (char *) nf_text(tc, r);
            qsort(strs, (size_t) ns, sizeof(char *), nf_cmp_str);
            nd = 0;
            for (int64_t i = 0; i < ns; i++)
                if (i == 0 || strcmp(strs[i], strs[i - 1]) != 0) nd++;
            if (nd == 2) {
                f->kind = NF_FEAT_BOOL;
                f->true_str = strs[ns - 1]; /* the larger in code point order ('' = missing is smallest) */
            } else {
                f->kind = NF_FEAT_CAT;
                /* categories: values seen at least twice, sorted */
                int64_t k = 0;
                for (int64_t i = 0; i < ns;) {
                    int64_t j = i;
                    while (j < ns && strcmp(strs[j], strs[i]) == 0) j++;
                    if (j - i >= 2) strs[k++] = strs[i];
                    i = j;
                }
                f->cats = strs;
                f->n_cats = k;
                strs = NULL;
            }
        }
        free(strs);
        /* generated values */
        for (int64_t r = 0; r < ns; r++) {
            if (f->kind == NF_FEAT_BOOL)
                f->xs[r] = numeric ? (tc->num[r] == f->true_num) : (strcmp(nf_text(tc, r), f->true_str) == 0);
            else if (f->kind == NF_FEAT_CAT)
                f->xs[r] = (double) nf_find_cat(f->cats, f->n_cats, nf_text(tc, r));
            else
                f->xs[r] = tc->num[r];
        }
        for (int64_t r = 0; r < nq; r++) {
            /* a test cell: numeric columns read as numbers, text as text */
            double v = NAN;
            const char * s = nf_text(qc, r);
            if (numeric) {
                if (!qc->missing[r]) {
                    int ii;
                    if (qc->type != NF_CSV_TEXT)
                        v = qc->num[r];
                    else
                        nf__csv_parse_number(qc->raw[r], &v, &ii);
                }
            }
            if (f->kind == NF_FEAT_BOOL)
                f->xq[r] = numeric ? (v == f->true_num) : (strcmp(s, f->true_str) == 0);
            else if (f->kind == NF_FEAT_CAT)
                f->xq[r] = (double) nf_find_cat(f->cats, f->n_cats, s);
            else if (f->is_int) /* int64 in training: missing -> 0, then astype(int64) */
                f->xq[r] = isnan(v) ? 0.0 : (isfinite(v) ? trunc(v) : v);
            else
                f->xq[r] = v;
        }
        /* DropUniqueFeatureGenerator: one value (NaN counted) in training */
        int hn;
        for (int64_t r = 0; r < ns; r++) tmp[r] = f->kind == NF_FEAT_CAT && f->xs[r] < 0 ? NAN : f->xs[r];
        double * t2 = malloc((size_t) (ns + 1) * sizeof(double));
        if (!t2) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        int64_t ud = nf_distinct_num(tmp, ns, t2, &hn);
        free(t2);
        int all_rare = f->kind == NF_FEAT_CAT;
        for (int64_t r = 0; all_rare && r < ns; r++) all_rare = f->xs[r] < 0;
        if (ud <= 1)
            f->dropped = tc->n_missing == ns ? "all missing"
                         : all_rare          ? "every value rare (an id column)"
                                             : "constant";
        else if (f->kind == NF_FEAT_CAT && (double) ud > 0.99 * (double) ns)
            f->dropped = "unique per row";
    }
    free(tmp);
    if (rc != NF_OK) return rc;
    /* DropDuplicatesFeatureGenerator: numeric (incl. 0/1) by value, categories by partition; first kept */
    for (int i = 0; i < p->n_feats; i++) {
        struct nf_feat * a = &p->feats[i];
        if (a->dropped) continue;
        for (int j = 0; j < i; j++) {
            struct nf_feat * b = &p->feats[j];
            if (b->dropped || (a->kind == NF_FEAT_CAT) != (b->kind == NF_FEAT_CAT)) continue;
            if (a->kind == NF_FEAT_CAT ? nf_same_partition(a->xs, a->n_cats, b->xs, b->n_cats, ns)
                                       : nf_same_values(a->xs, b->xs, ns)) {
                a->dropped = "duplicate";
                break;
            }
        }
    }
    return NF_OK;
}

/* Mitra's Preprocessor.fit: training means, singular columns; model order */
static int nf_pred_mitra_fit(struct nf_pred * p, nf_err * err) {
    const int64_t ns = p->tr.n_rows;
    p->order = malloc((size_t) (p->n_feats + 1) * sizeof(int));
    p->mean = malloc((size_t) (p->n_feats + 1) * sizeof(double));
    double * tmp = malloc((size_t) (ns + 1) * sizeof(double));
    if (!p->order || !p->mean || !tmp) {
        free(tmp);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    for (int pass = 0; pass < 2; pass++) { /* numeric (and 0/1) first, then categories */
        for (int i = 0; i < p->n_feats; i++) {
            struct nf_feat * f = &p->feats[i];
            if (f->dropped || (pass == 0) == (f->kind == NF_FEAT_CAT)) continue;
            double sum = 0;
            int64_t cnt = 0;
            for (int64_t r = 0; r < ns; r++)
                if (!isnan(f->xs[r])) sum += f->xs[r], cnt++;
            const double mean = cnt ? sum / (double) cnt : NAN;
            for (int64_t r = 0; r < ns; r++) tmp[r] = isnan(f->xs[r]) ? mean : f->xs[r];
            int hn;
            double * t2 = malloc((size_t) (ns + 1) * sizeof(double));
            if (!t2) {
                free(tmp);
                return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            }
            const int64_t u = nf_distinct_num(tmp, ns, t2, &hn);
            free(t2);
            if (u == 1) {
                f->dropped = "singular (Mitra)";
                continue;
            }
            p->mean[p->n_order] = mean;
            p->order[p->n_order++] = i;
        }
    }
    free(tmp);
    if (p->n_order == 0) {
        char e[512];
        return nf__err_set(err, NF_ERR_INPUT, "%s: no feature column is left after preprocessing",
                           nf__esc(e, sizeof(e), p->tr.path));
    }
    return NF_OK;
}

/* transform_X: mean imputation, mirror, float32, NaN/Inf -> 0 */
static void nf_pred_matrix(const struct nf_pred * p, int query, const int * sign, float * out) {
    const int64_t n = query ? p->te.n_rows : p->tr.n_rows;
    const int F = p->n_order;
    for (int j = 0; j < F; j++) {
        const struct nf_feat * f = &p->feats[p->order[j]];
        const double * x = query ? f->xq : f->xs;
        for (int64_t r = 0; r < n; r++) {
            double v = isnan(x[r]) ? p->mean[j] : x[r];
            v *= sign[j];
            float g = (float) v;
            if (isnan(g) || isinf(g)) g = 0.0f;
            out[r * F + j] = g;
        }
    }
}

static int nf_csv_write_field(FILE * f, const char * s) {
    int q = s[0] == 0 || strpbrk(s, ",\"\r\n") != NULL || s[0] == ' ' || s[strlen(s) - 1] == ' ';
    if (!q) return fputs(s, f) >= 0;
    if (fputc('"', f) == EOF) return 0;
    for (const char * c = s; *c; c++) {
        if (*c == '"' && fputc('"', f) == EOF) return 0;
        if (fputc(*c, f) == EOF) return 0;
    }
    return fputc('"', f) != EOF;
}

static int nf_pred_parse(int argc, char ** argv, struct nf_pred_opts * o) {
    static const char * const flags[] = {"--model", "--train",  "--test", "--target",    "--task", "--n-estimators",
                                         "--seed",  "--device", "--out",  "--no-mirror", NULL};
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
    o->n_est = 1;
    o->mirror = 1;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        char e[256];
        if (!nf_cli_is_flag(a, flags)) {
            fprintf(stderr, "error: unknown option %s\n", nf__esc(e, sizeof(e), a));
            return 0;
        }
        if (strcmp(a, "--no-mirror") == 0) {
            o->mirror = 0;
            continue;
        }
        const char * v = nf_cli_need_value(argc, argv, &i);
        int64_t n;
        if (!v) return 0;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--train") == 0)
            o->train = v;
        else if (strcmp(a, "--test") == 0)
            o->test = v;
        else if (strcmp(a, "--target") == 0)
            o->target = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--task") == 0) {
            if (strcmp(v, "auto") == 0)
                o->task = NF_TASK_AUTO;
            else if (strcmp(v, "classification") == 0)
                o->task = NF_TASK_CLS;
            else if (strcmp(v, "regression") == 0)
                o->task = NF_TASK_REG;
            else {
                fprintf(stderr, "error: --task takes auto, classification or regression, not '%s'\n",
                        nf__esc(e, sizeof(e), v));
                return 0;
            }
        } else if (strcmp(a, "--n-estimators") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1000, &o->n_est)) return 0;
        } else if (strcmp(a, "--seed") == 0) {
            if (!nf_cli_parse_int(a, v, 0, NF_CLI_SEED_MAX, &n)) return 0;
            o->seed = (uint64_t) n;
        }
    }
    if (!o->model || !o->train || !o->test || !o->target || !o->out) {
        fprintf(stderr,
                "error: predict needs --model DIR --train TRAIN.csv --test TEST.csv --target COLUMN --out OUT\n");
        return 0;
    }
    return 1;
}

static const char * nf_kind_name(const struct nf_feat * f) {
    return f->kind == NF_FEAT_CAT ? "category" : f->kind == NF_FEAT_BOOL ? "bool" : "numeric";
}

static int nf_predict_main(const struct nf_pred_opts * o, nf_err * err) {
    struct nf_pred p;
    memset(&p, 0, sizeof(p));
    nf_backend * be = NULL;
    nf_model * m = NULL;
    struct nf_outset os;
    float *xs = NULL, *xq = NULL, *ys = NULL, *logits = NULL, *all_logits = NULL;
    int * sign = NULL;
    int * regmirror = NULL;
    int * signs_all = NULL;
    double * acc = NULL;
    int64_t * ysi = NULL;
    int rc;
    memset(&os, 0, sizeof(os));
    os.lock_fd = -1;
    /* the tables first: every bad table fails before --out is touched */
    if ((rc = nf__csv_read(o->train, &p.tr, err)) != NF_OK) goto out_nolock;
    if ((rc = nf__csv_read(o->test, &p.te, err)) != NF_OK) goto out_nolock;
    {
        char e1[512], e2[256];
        if ((p.ycol = nf__csv_find(&p.tr, o->target)) < 0) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)", nf__esc(e1, sizeof(e1), o->train),
                             nf__esc(e2, sizeof(e2), o->target));
            goto out_nolock;
        }
        if (p.tr.n_rows < 2) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: %lld data rows; need at least 2",
                             nf__esc(e1, sizeof(e1), o->train), (long long) p.tr.n_rows);
            goto out_nolock;
        }
        if (p.te.n_rows < 1) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", nf__esc(e1, sizeof(e1), o->test));
            goto out_nolock;
        }
    }
    if ((rc = nf_pred_target(&p, o, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_pred_features(&p, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_pred_mitra_fit(&p, err)) != NF_OK) goto out_nolock;

    if ((rc = nf_outset_begin(&os, o->out, nf_pred_artifacts, NF_PRED_N_ARTIFACTS, err)) != NF_OK) goto out_nolock;
    if ((rc = nf_cli_backend_init(o->device, 0, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    int class_labels = 0;
    int64_t model_classes = 0;
    if ((rc = nf_cli_table_model(m, &class_labels, &model_classes, err)) != NF_OK) goto done;
    if (class_labels != (p.task == NF_TASK_CLS)) {
        rc = nf__err_set(err, NF_ERR_ARG, "the target is a %s task but --model %s is a %s",
                         p.task == NF_TASK_CLS ? "classification" : "regression", o->model,
                         class_labels ? "classifier" : "regressor");
        goto done;
    }
    if (class_labels && model_classes < p.n_classes) {
        rc = nf__err_set(err, NF_ERR_ARG, "the target has %lld classes; the model has %lld outputs",
                         (long long) p.n_classes, (long long) model_classes);
        goto done;
    }
    const int64_t ns = p.tr.n_rows, nq = p.te.n_rows;
    const int F = p.n_order;
    if (ns > 8192)
        fprintf(stderr,
                "warning: %lld training rows: AutoGluon's Mitra draws a random 8192-row support per 1024 queries; "
                "nofall uses all of them\n",
                (long long) ns);
    const int K = class_labels ? (int) p.n_classes : 1;
    const int64_t width = class_labels ? model_classes : 1;
    xs = malloc((size_t) (ns * F) * sizeof(float));
    xq = malloc((size_t) (nq * F) * sizeof(float));
    ys = malloc((size_t) ns * sizeof(float));
    ysi = malloc((size_t) ns * sizeof(int64_t));
    logits = malloc((size_t) (nq * width) * sizeof(float));
    all_logits = malloc((size_t) (o->n_est * nq * K) * sizeof(float));
    acc = calloc((size_t) (nq * K), sizeof(double));
    sign = malloc((size_t) F * sizeof(int));
    signs_all = malloc((size_t) (o->n_est * F) * sizeof(int));
    regmirror = calloc((size_t) o->n_est, sizeof(int));
    if (!xs || !xq || !ys || !ysi || !logits || !all_logits || !acc || !sign || !signs_all || !regmirror) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t rng = o->seed;
    double wall_ms = 0;
    for (int64_t e = 0; e < o->n_est; e++) {
        /* the member's draws, in AutoGluon's order: regression mirror, then one sign per feature */
        if (!class_labels) regmirror[e] = o->mirror ? (int) (nf_splitmix(&rng) >> 63) : 0;
        for (int j = 0; j < F; j++) sign[j] = o->mirror ? ((nf_splitmix(&rng) >> 63) ? -1 : 1) : 1;
        memcpy(signs_all + e * F, sign, (size_t) F * sizeof(int));
        nf_pred_matrix(&p, 0, sign, xs);
        nf_pred_matrix(&p, 1, sign, xq);
        struct nf_array in[3];
        memset(in, 0, sizeof(in));
        in[0] = (struct nf_array){.name = "support_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {ns, F}, .data = xs};
        if (class_labels) {
            memcpy(ysi, p.yc, (size_t) ns * sizeof(int64_t));
            in[1] = (struct nf_array){
                .name = "support_y", .dtype = NF_ARRAY_I64, .ndim = 1, .shape = {ns}, .data = ysi};
        } else {
            for (int64_t r = 0; r < ns; r++) {
                double y = (p.yv[r] - p.y_min) / (p.y_max - p.y_min);
                if (regmirror[e]) y = 1 - y;
                ys[r] = (float) y;
            }
            in[1] = (struct nf_array){.name = "support_y", .dtype = NF_ARRAY_F32, .ndim = 1, .shape = {ns}, .data = ys};
        }
        in[2] = (struct nf_array){.name = "query_x", .dtype = NF_ARRAY_F32, .ndim = 2, .shape = {nq, F}, .data = xq};
        const double t0 = nf_cli_now_ms();
        if ((rc = nf_model_forward(m, in, 3, logits, err)) != NF_OK) goto done;
        wall_ms += nf_cli_now_ms() - t0;
        for (int64_t r = 0; r < nq; r++) {
            const float * l = logits + r * width;
            for (int k = 0; k < K; k++) {
                if (!isfinite(l[k])) {
                    rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
                    goto done;
                }
                all_logits[(e * nq + r) * K + k] = l[k];
            }
            if (class_labels) {
                double mx = l[0], s = 0;
                for (int k = 1; k < K; k++) mx = l[k] > mx ? l[k] : mx;
                for (int k = 0; k < K; k++) s += exp((double) l[k] - mx);
                for (int k = 0; k < K; k++) acc[r * K + k] += exp((double) l[k] - mx) / s;
            } else {
                float y = l[0];
                if (regmirror[e]) y = 1.0f - y;
                acc[r] += (double) y * (p.y_max - p.y_min) + p.y_min;
            }
        }
    }
    for (int64_t i = 0; i < nq * K; i++) acc[i] /= (double) o->n_est;

    /* predictions.csv, probabilities.csv, logits.npy */
    char path[4096];
    struct nf_csv_column * yc = &p.tr.cols[p.ycol];
    char classes_marker[4096] = "";
    size_t cml = 0;
    {
        nf_outset_path(&os, "predictions.csv", path, sizeof(path));
        FILE * f = fopen(path, "w");
        if (!f) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
            goto done;
        }
        int ok = nf_csv_write_field(f, yc->name) && fputc('\n', f) != EOF;
        int64_t counts[NF_PRED_MAX_CLASSES] = {0};
        for (int64_t r = 0; ok && r < nq; r++) {
            if (class_labels) {
                int best = 0;
                for (int k = 1; k < K; k++)
                    if (acc[r * K + k] > acc[r * K + best]) best = k;
                counts[best]++;
                ok = nf_csv_write_field(f, p.class_name[best]) && fputc('\n', f) != EOF;
            } else {
                ok = fprintf(f, "%.17g\n", acc[r]) > 0;
            }
        }
        if (class_labels) {
            for (int k = 0; k < K; k++) {
                char en[128];
                nf__msg_append(classes_marker, sizeof(classes_marker), &cml, "%s%s:%lld", k ? "," : "",
                               nf__esc(en, sizeof(en), p.class_name[k]), (long long) counts[k]);
            }
        } else
            snprintf(classes_marker, sizeof(classes_marker), "none");
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
        if (!ok) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
            goto done;
        }
    }
    if (class_labels) {
        nf_outset_path(&os, "probabilities.csv", path, sizeof(path));
        FILE * f = fopen(path, "w");
        if (!f) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: cannot create", path);
            goto done;
        }
        int ok = 1;
        for (int k = 0; ok && k < K; k++) ok = (!k || fputc(',', f) != EOF) && nf_csv_write_field(f, p.class_name[k]);
        ok = ok && fputc('\n', f) != EOF;
        for (int64_t r = 0; ok && r < nq; r++)
            for (int k = 0; ok && k < K; k++) ok = fprintf(f, k + 1 < K ? "%.17g," : "%.17g\n", acc[r * K + k]) > 0;
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
        if (!ok) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: write failed", path);
            goto done;
        }
    }
    {
        int64_t sh[3] = {o->n_est, nq, K};
        nf_outset_path(&os, "logits.npy", path, sizeof(path));
        if ((rc = nf__npy_write(path, NF_NPY_F4, class_labels ? 3 : 2, sh, all_logits, err)) != NF_OK) goto done;
    }
    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    char shape[64];
    if (class_labels)
        snprintf(shape, sizeof(shape), "%lldx%lldx%d", (long long) o->n_est, (long long) nq, K);
    else
        snprintf(shape, sizeof(shape), "%lldx%lld", (long long) o->n_est, (long long) nq);

    /* report.json */
    {
        cJSON * rep = cJSON_CreateObject();
        nf_run_report_common(rep, o->model, m, be);
        cJSON_AddStringToObject(rep, "train", o->train);
        cJSON_AddStringToObject(rep, "test", o->test);
        cJSON_AddStringToObject(rep, "target", yc->name);
        cJSON_AddStringToObject(rep, "task", class_labels ? "classification" : "regression");
        cJSON_AddNumberToObject(rep, "n_train", (double) ns);
        cJSON_AddNumberToObject(rep, "n_test", (double) nq);
        cJSON_AddNumberToObject(rep, "n_estimators", (double) o->n_est);
        cJSON_AddNumberToObject(rep, "seed", (double) o->seed);
        cJSON_AddBoolToObject(rep, "mirror", o->mirror);
        cJSON * kept = cJSON_AddArrayToObject(rep, "columns_kept");
        for (int j = 0; j < F; j++) {
            const struct nf_feat * f = &p.feats[p.order[j]];
            cJSON * c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", p.tr.cols[f->col].name);
            cJSON_AddStringToObject(c, "type", nf_kind_name(f));
            cJSON_AddStringToObject(c, "csv_type", nf_col_type_name(&p.tr.cols[f->col]));
            if (f->kind == NF_FEAT_CAT) {
                cJSON * cats = cJSON_AddArrayToObject(c, "categories");
                for (int64_t k = 0; k < f->n_cats; k++) cJSON_AddItemToArray(cats, cJSON_CreateString(f->cats[k]));
            } else if (f->kind == NF_FEAT_BOOL) {
                if (f->true_str)
                    cJSON_AddStringToObject(c, "true_value", f->true_str);
                else
                    cJSON_AddNumberToObject(c, "true_value", f->true_num);
            }
            cJSON_AddNumberToObject(c, "mean", isfinite(p.mean[j]) ? p.mean[j] : 0);
            cJSON_AddItemToArray(kept, c);
        }
        cJSON * dropped = cJSON_AddArrayToObject(rep, "columns_dropped");
        for (int i = 0; i < p.n_feats; i++) {
            const struct nf_feat * f = &p.feats[i];
            if (!f->dropped) continue;
            cJSON * c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", p.tr.cols[f->col].name);
            cJSON_AddStringToObject(c, "type", nf_kind_name(f));
            cJSON_AddStringToObject(c, "csv_type", nf_col_type_name(&p.tr.cols[f->col]));
            cJSON_AddStringToObject(c, "reason", f->dropped);
            cJSON_AddItemToArray(dropped, c);
        }
        if (class_labels) {
            cJSON * cl = cJSON_AddArrayToObject(rep, "classes");
            for (int k = 0; k < K; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(p.class_name[k]));
        } else {
            cJSON_AddNumberToObject(rep, "y_min", p.y_min);
            cJSON_AddNumberToObject(rep, "y_max", p.y_max);
            cJSON * rm = cJSON_AddArrayToObject(rep, "regression_mirror");
            for (int64_t e = 0; e < o->n_est; e++) cJSON_AddItemToArray(rm, cJSON_CreateBool(regmirror[e]));
        }
        cJSON * mi = cJSON_AddArrayToObject(rep, "mirror_signs");
        for (int64_t e = 0; e < o->n_est; e++) {
            cJSON * row = cJSON_CreateArray();
            for (int j = 0; j < F; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(signs_all[e * F + j]));
            cJSON_AddItemToArray(mi, row);
        }
        nf_run_markers_json(rep, &meas, shape, classes_marker, 1, wall_ms);
        nf_outset_path(&os, "report.json", path, sizeof(path));
        rc = nf__json_write_file(path, rep, err);
        cJSON_Delete(rep);
        if (rc != NF_OK) goto done;
    }
    /* read back */
    int assets_verified = 0;
    {
        struct nf_npy a;
        nf_outset_path(&os, "logits.npy", path, sizeof(path));
        if ((rc = nf__npy_read(path, &a, err)) != NF_OK) goto done;
        const int ok = a.dtype == NF_NPY_F4 && a.shape[0] == o->n_est && a.shape[1] == nq;
        nf__npy_free(&a);
        struct nf_csv_table back;
        nf_outset_path(&os, "predictions.csv", path, sizeof(path));
        if ((rc = nf__csv_read(path, &back, err)) != NF_OK) goto done;
        const int ok2 = back.n_rows == nq && back.n_cols == 1;
        nf__csv_free(&back);
        cJSON * doc = NULL;
        nf_outset_path(&os, "report.json", path, sizeof(path));
        if ((rc = nf__json_read_file(path, &doc, err)) != NF_OK) goto done;
        cJSON_Delete(doc);
        assets_verified = ok && ok2;
        if (!assets_verified) {
            rc = nf__err_set(err, NF_ERR_IO, "%s: artifacts read back wrong", os.staging);
            goto done;
        }
    }
    nf_run_markers_print(&meas, be, shape, classes_marker, 1, wall_ms, assets_verified);
    rc = nf_run_commit(&os, NULL, "", NULL, err);
done:
    nf_outset_end(&os);
out_nolock:
    free(xs);
    free(xq);
    free(ys);
    free(ysi);
    free(logits);
    free(all_logits);
    free(acc);
    free(sign);
    free(signs_all);
    free(regmirror);
    nf_model_free(m);
    nf_backend_free(be);
    nf_pred_free(&p);
    return rc;
}

int nf_cmd_predict(int argc, char ** argv) {
    struct nf_pred_opts o;
    if (!nf_pred_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_predict_main(&o, &err), &err);
}
