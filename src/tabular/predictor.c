/* predictor.c -- the Mitra predictor on tables (nofall-tabular.h), as
 * AutoGluon feeds Mitra (README "predict"; spec shared/specs/mitra.md §5):
 *
 *   pandas.read_csv typing (src/io/csv.c, or the caller's columns: table.c)
 *   -> label cleaning: classes = the sorted distinct labels (<= 10)
 *   -> AutoMLPipelineFeatureGenerator: two-valued columns to 0/1
 *      (AsTypeFeatureGenerator), text NaN -> '' (FillNa), text -> category
 *      codes (values seen < 2 times in training: -1; categories in code point
 *      order), constant columns and exact duplicates dropped, categories after
 *      the numeric columns; ISO 8601 date columns -> DatetimeFeatureGenerator
 *      (the UTC nanoseconds, year, month, day, dayofweek; unreadable -> the
 *      training mean), after the categories; free text refused (ag-types.c)
 *   -> Mitra's Preprocessor: NaN -> training mean, singular columns dropped,
 *      +-1 mirror per feature (and the regression mirror) drawn from the seed
 *      or given, float32, NaN/Inf -> 0; regression target min-max scaled
 *   -> one forward per ensemble member (support = the whole training table;
 *      above 8,192 rows one per 1,024 test rows, each with its own random
 *      8,192-row subset drawn as numpy's RandomState draws it: np-random.c),
 *      probabilities / de-normalised predictions averaged. */
#include "tabular-impl.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NF_FEAT_NUM, NF_FEAT_BOOL, NF_FEAT_CAT, NF_FEAT_DATE };
static const char * const nf_date_part[] = {"", ".year", ".month", ".day", ".dayofweek"};

/* one input column and what the feature generation made of it */
struct nf_feat {
    int col;           /* index in the training table */
    int kind;          /* NF_FEAT_*             */
    int is_int;        /* pandas int64 in train */
    double true_num;   /* bool: the value mapped to 1 */
    char true_int[24]; /* bool of an int64 / uint64 column: that value's digits (exact) */
    const char * true_str;
    char ** cats; /* category: sorted categories (count >= 2); bools: False, True, then '' */
    int bools;    /* the training column holds Python bools (and missing values) */
    int64_t n_cats;
    double * xs;          /* generated values (NaN missing; codes -1 for a missing category) */
    const char * dropped; /* why it was dropped, or NULL */
    int kept;             /* index in the model order, or -1 */
    double mean;
    int part;          /* date: 0 the nanoseconds, 1 year, 2 month, 3 day, 4 dayofweek */
    int64_t date_fill; /* date: the value for a missing or unreadable one (UTC ns) */
    char * name;       /* date: the generated feature's name (e.g. "d.year"), else NULL */
};

struct nf_predictor {
    struct nf_csv_table tr; /* the predictor's own copy of the training table */
    int ycol;
    int task; /* NF_PREDICT_CLASSIFICATION / NF_PREDICT_REGRESSION */
    /* classification */
    int64_t n_classes;
    char * class_name[NF_PREDICTOR_MAX_CLASSES];
    char class_num[NF_PREDICTOR_MAX_CLASSES][40]; /* a numeric class as str() prints it */
    int64_t * yc;
    /* regression */
    double *yv, y_min, y_max;
    struct nf_feat * feats;
    int n_feats;
    int * order; /* kept features after Mitra's singular check, in model order */
    int n_order;
    double * mean; /* per kept feature */
    int64_t n_est;
    int * signs;     /* n_est x n_order */
    int * regmirror; /* n_est */
    double forward_ms;
    uint64_t seed; /* the support subsets' RandomState (AutoGluon's Mitra `seed`) */
    struct nf_predict_stats stats;
    nf_predictor_progress_fn progress; /* nf_predictor_set_progress */
    void * progress_user;
};

static int nf_cmp_str(const void * a, const void * b) {
    return strcmp(*(const char * const *) a, *(const char * const *) b);
}
static int nf_cmp_dbl(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* an int64 / uint64 field as str() prints it: the digits as written, no
 * blanks, no '+', no leading zeros ("-0" is "0"); exact beyond 2^53, where
 * the column's doubles are not */
static void nf_int_digits(const char * s, char * out, size_t n) {
    size_t k = 0;
    while (isspace((unsigned char) *s)) s++;
    const int neg = *s == '-';
    if (*s == '+' || *s == '-') s++;
    while (*s == '0' && isdigit((unsigned char) s[1])) s++;
    if (neg && *s != '0' && k + 1 < n) out[k++] = '-';
    while (isdigit((unsigned char) *s) && k + 1 < n) out[k++] = *s++;
    out[k] = 0;
}
/* the numeric order of such digit strings */
static int nf_cmp_int_digits(const void * a, const void * b) {
    const char *x = *(const char *const *) a, *y = *(const char *const *) b;
    const int nx = *x == '-', ny = *y == '-';
    if (nx != ny) return nx ? -1 : 1;
    const size_t lx = strlen(x), ly = strlen(y);
    const int c = lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
    return nx ? -c : c;
}

/* an int64 / uint64 column's fields as digits (dg), and its distinct values,
 * exactly, in numeric order (ps[0 .. returned count), pointing into dg) */
static int64_t nf_int_sorted(const struct nf_csv_column * c, int64_t n, char (*dg)[24], char ** ps) {
    for (int64_t r = 0; r < n; r++) {
        nf_int_digits(c->raw[r], dg[r], sizeof(dg[r]));
        ps[r] = dg[r];
    }
    qsort(ps, (size_t) n, sizeof(char *), nf_cmp_int_digits);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || strcmp(ps[i], ps[i - 1]) != 0) ps[u++] = ps[i];
    return u;
}

/* distinct values of an int64 / uint64 column (none missing), exactly; the
 * largest into true_int */
static int nf_int_distinct(const struct nf_csv_column * c, int64_t n, char * true_int, int64_t * nd, nf_err * err) {
    char(*dg)[24] = malloc((size_t) (n ? n : 1) * sizeof(*dg));
    char ** ps = malloc((size_t) (n ? n : 1) * sizeof(char *));
    if (!dg || !ps) {
        free(dg);
        free(ps);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    *nd = nf_int_sorted(c, n, dg, ps);
    snprintf(true_int, 24, "%s", *nd ? ps[*nd - 1] : "");
    free(dg);
    free(ps);
    return NF_OK;
}

/* a numeric cell == a 0/1 column's value 1: an int64 / uint64 cell against an
 * int column's value by its digits, else as doubles */
static int nf_is_true_num(const struct nf_feat * f, const struct nf_csv_column * c, int64_t r) {
    if (c->type == NF_CSV_INT && f->true_int[0]) {
        char d[24];
        nf_int_digits(c->raw[r], d, sizeof(d));
        return strcmp(d, f->true_int) == 0;
    }
    return c->num[r] == f->true_num;
}

/* a text cell as AutoGluon sees it after FillNa: missing -> "" */
static const char * nf_text(const struct nf_csv_column * c, int64_t r) { return c->missing[r] ? "" : c->raw[r]; }

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

/* the code of a value among the categories (-1: unseen; s NULL: a value of
 * another kind, which pandas' category lookup never matches) */
static int64_t nf_find_cat(char ** cats, int64_t n, int bools, const char * s) {
    if (!s) return -1;
    if (bools) { /* at most False, True, '': bools sort before strings (pandas' safe_sort) */
        for (int64_t i = 0; i < n; i++)
            if (strcmp(cats[i], s) == 0) return i;
        return -1;
    }
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

/* the target: task, classes, encoded labels */
static int nf_pred_target(struct nf_predictor * p, int task_opt, nf_err * err) {
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
    int64_t u = 0, un = 0; /* distinct labels; distinct as doubles */
    int has_nan = 0;
    char(*digits)[24] = NULL; /* an int target's fields as str() prints them */
    if (y->type == NF_CSV_INT) {
        /* labels compared as integers, exactly (pandas' int64 / uint64) */
        if (!(digits = malloc((size_t) n * sizeof(*digits)))) {
            free(tmp);
            free(s);
            return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        }
        u = nf_int_sorted(y, n, digits, s);
        un = nf_distinct_num(y->num, n, tmp, &has_nan); /* tmp: the sorted doubles, as regression reads them */
    } else if (y->type != NF_CSV_TEXT) {
        u = un = nf_distinct_num(y->num, n, tmp, &has_nan);
    } else {
        for (int64_t r = 0; r < n; r++) s[r] = y->raw[r];
        qsort(s, (size_t) n, sizeof(char *), nf_cmp_str);
        for (int64_t i = 0; i < n; i++)
            if (i == 0 || strcmp(s[i], s[i - 1]) != 0) s[u++] = s[i];
    }
    int task = task_opt;
    if (task == NF_PREDICT_AUTO) {
        /* autogluon.core.utils.infer_problem_type */
        const double ratio = (double) u / (double) n, thr = n > 1000 ? 0.05 : 0.1;
        if (u == 2 || y->type == NF_CSV_TEXT)
            task = NF_PREDICT_CLASSIFICATION;
        else if (ratio <= thr && u <= 1000) {
            int ints = 1; /* an int64 / uint64 dtype; floats: y.astype(int) equal to y */
            for (int64_t i = 0; y->type != NF_CSV_INT && i < u; i++)
                ints &= tmp[i] == floor(tmp[i]) && fabs(tmp[i]) < 9.2e18;
            task = ints ? NF_PREDICT_CLASSIFICATION : NF_PREDICT_REGRESSION;
        } else
            task = NF_PREDICT_REGRESSION;
    }
    p->task = task;
    int rc = NF_OK;
    if (task == NF_PREDICT_REGRESSION) {
        if (y->type == NF_CSV_TEXT) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) is not numeric: no regression", e1, e2);
        } else if (!(un >= 2)) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) is constant: nothing to regress", e1, e2);
        } else if (!(p->yv = malloc((size_t) n * sizeof(double)))) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        } else {
            p->y_min = tmp[0];
            p->y_max = tmp[un - 1];
            if (!isfinite(p->y_min) || !isfinite(p->y_max))
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) holds an infinite value", e1, e2);
            memcpy(p->yv, y->num, (size_t) n * sizeof(double));
        }
    } else {
        if (u < 2)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) has one class only: nothing to classify",
                             e1, e2);
        else if (u > NF_PREDICTOR_MAX_CLASSES)
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' (the target) has %lld classes; Mitra takes at most %d",
                             e1, e2, (long long) u, NF_PREDICTOR_MAX_CLASSES);
        else if (!(p->yc = malloc((size_t) n * sizeof(int64_t))))
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        else {
            p->n_classes = u;
            for (int64_t k = 0; k < u; k++) p->class_name[k] = NULL;
            for (int64_t r = 0; r < n; r++) {
                int64_t k = 0;
                if (y->type == NF_CSV_TEXT) {
                    while (strcmp(s[k], y->raw[r]) != 0) k++;
                } else if (digits) {
                    while (strcmp(s[k], digits[r]) != 0) k++;
                } else {
                    while (tmp[k] != y->num[r]) k++;
                }
                p->yc[r] = k;
                if (p->class_name[k]) continue;
                /* str() of the label as pandas typed it: text as written, bools
                 * True / False, int64 digits ("+05" is "5"), float64 its repr
                 * ("1" in a float column is "1.0") */
                if (y->type == NF_CSV_INT)
                    snprintf(p->class_num[k], sizeof(p->class_num[k]), "%s", digits[r]);
                else if (y->type == NF_CSV_FLOAT)
                    nf__py_float_repr(y->num[r], p->class_num[k], sizeof(p->class_num[k]));
                p->class_name[k] = y->type == NF_CSV_INT || y->type == NF_CSV_FLOAT ? p->class_num[k] : y->raw[r];
            }
        }
    }
    free(tmp);
    free(s);
    free(digits);
    return rc;
}

/* AutoGluon's feature generation, column by column, then the drops */
/* DropUniqueFeatureGenerator: one value (NaN counted) in training */
static int nf_pred_drop_unique(struct nf_feat * f, const struct nf_csv_column * tc, int64_t ns, double * tmp,
                               nf_err * err) {
    int hn;
    for (int64_t r = 0; r < ns; r++) tmp[r] = f->kind == NF_FEAT_CAT && f->xs[r] < 0 ? NAN : f->xs[r];
    double * t2 = malloc((size_t) (ns + 1) * sizeof(double));
    if (!t2) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t ud = nf_distinct_num(tmp, ns, t2, &hn);
    free(t2);
    int all_rare = f->kind == NF_FEAT_CAT;
    for (int64_t r = 0; all_rare && r < ns; r++) all_rare = f->xs[r] < 0;
    if (ud <= 1)
        f->dropped = tc->n_missing == ns ? "all missing" : all_rare ? "every value rare (an id column)" : "constant";
    else if (f->kind == NF_FEAT_CAT && (double) ud > 0.99 * (double) ns)
        f->dropped = "unique per row";
    return NF_OK;
}

/* a date feature of one value (UTC ns) */
static double nf_date_value(int part, int64_t ns) {
    int64_t y;
    int mo, d, dow;
    nf__civil_from_ns(ns, &y, &mo, &d, &dow);
    return part == 0 ? (double) ns : part == 1 ? (double) y : part == 2 ? mo : part == 3 ? d : dow;
}

/* AutoGluon's special types of a text column (ag-types.c): free text is
 * refused; a date column becomes DatetimeFeatureGenerator's five features
 * (appended to p->feats; the caller sees them by their column) */
static int nf_pred_special(struct nf_predictor * p, int c, double * tmp, nf_err * err) {
    const struct nf_csv_column * tc = &p->tr.cols[c];
    const int64_t ns = p->tr.n_rows;
    int64_t bad;
    if (tc->type != NF_CSV_TEXT || tc->bools) return NF_OK; /* bools: no date, no free text */
    /* two distinct values (missing counted) are 0/1 before any type inference */
    {
        int64_t first = -1, nd = 0;
        for (int64_t r = 0; r < ns && nd < 3; r++) {
            if (first < 0) {
                first = r, nd = 1;
            } else if (strcmp(nf_text(tc, r), nf_text(tc, first)) != 0) {
                int64_t q = first + 1;
                while (q < r && strcmp(nf_text(tc, q), nf_text(tc, r)) != 0) q++;
                if (q == r) nd++;
            }
        }
        if (nd == 2) return NF_OK;
    }
    const int t = nf__ag_special_type(tc, ns, &bad, err);
    if (t < 0) return t;
    char ef[512], ec[256], ev[256];
    nf__esc(ef, sizeof(ef), p->tr.path);
    nf__esc(ec, sizeof(ec), tc->name);
    if (t == NF_AG_TEXT)
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: column '%s' is free text by AutoGluon's rule (unique values average 3 or more words): "
                           "AutoGluon derives binned text statistics and n-gram counts from it, which nofall does not "
                           "compute; drop the column from both tables",
                           ef, ec);
    if (t == NF_AG_DATE_UNSURE || (t == NF_AG_DATETIME && bad >= 0))
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: row %lld, column '%s': '%s' might be a date to pandas.to_datetime, and %s; nofall "
                           "reads dates only as ISO 8601 (YYYY-MM-DD[ HH:MM[:SS[.f]]][Z|+HH:MM]): write the column's "
                           "dates that way",
                           ef, (long long) bad + 1, ec, nf__esc(ev, sizeof(ev), tc->raw[bad]),
                           t == NF_AG_DATETIME ? "the column holds dates (AutoGluon makes date features of it)"
                                               : "whether AutoGluon reads the column as dates depends on it");
    if (t != NF_AG_DATETIME) return NF_OK;
    /* DatetimeFeatureGenerator: pd.to_datetime(utc=True); unreadable -> the training mean, int(Series.mean()) */
    int64_t * v = malloc((size_t) ns * sizeof(int64_t));
    if (!v) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t ng = 0;
    for (int64_t r = 0; r < ns; r++) {
        int64_t x;
        if (!tc->missing[r] && nf__iso_datetime_ns(tc->raw[r], &x)) tmp[ng++] = (double) x;
    }
    const int64_t fill = (int64_t) (nf__np_sum(tmp, ng) / (double) ng);
    for (int64_t r = 0; r < ns; r++)
        if (tc->missing[r] || !nf__iso_datetime_ns(tc->raw[r], &v[r])) v[r] = fill;
    int rc = NF_OK;
    for (int part = 0; part < 5 && rc == NF_OK; part++) {
        struct nf_feat * f = &p->feats[p->n_feats++];
        f->col = c;
        f->kind = NF_FEAT_DATE;
        f->part = part;
        f->date_fill = fill;
        const size_t len = strlen(tc->name) + strlen(nf_date_part[part]) + 1;
        f->name = malloc(len);
        f->xs = malloc((size_t) ns * sizeof(double));
        if (!f->name || !f->xs) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(f->name, len, "%s%s", tc->name, nf_date_part[part]);
        for (int64_t r = 0; r < ns; r++) f->xs[r] = nf_date_value(part, v[r]);
        rc = nf_pred_drop_unique(f, tc, ns, tmp, err);
    }
    free(v);
    return rc;
}

static int nf_pred_features(struct nf_predictor * p, nf_err * err) {
    const int64_t ns = p->tr.n_rows;
    p->feats = calloc((size_t) p->tr.n_cols * 5, sizeof(*p->feats)); /* a date column makes 5 */
    double * tmp = malloc((size_t) (ns + 1) * sizeof(double));
    if (!p->feats || !tmp) {
        free(tmp);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int rc = NF_OK;
    for (int c = 0; c < p->tr.n_cols && rc == NF_OK; c++) {
        if (c == p->ycol) continue;
        const struct nf_csv_column * tc = &p->tr.cols[c];
        if ((rc = nf_pred_special(p, c, tmp, err)) != NF_OK) break;
        if (p->n_feats && p->feats[p->n_feats - 1].col == c) continue; /* made date features */
        struct nf_feat * f = &p->feats[p->n_feats++];
        f->col = c;
        const int numeric = tc->type != NF_CSV_TEXT;
        f->xs = malloc((size_t) (ns ? ns : 1) * sizeof(double));
        if (!f->xs) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            break;
        }
        f->is_int = tc->type == NF_CSV_INT;
        f->bools = tc->bools;
        /* distinct values, missing counted as a value (AsTypeFeatureGenerator) */
        int64_t nd = 0;
        char ** strs = NULL;
        if (tc->type == NF_CSV_INT) { /* compared as integers, exactly (doubles merge values beyond 2^53) */
            if ((rc = nf_int_distinct(tc, ns, f->true_int, &nd, err)) != NF_OK) break;
            if (nd == 2) {
                f->kind = NF_FEAT_BOOL;
                f->true_num = strtod(f->true_int, NULL);
            }
        } else if (numeric) {
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
                if (tc->bools && k > 0 && strs[0][0] == 0) { /* '' after the bools */
                    char * e = strs[0];
                    memmove(strs, strs + 1, (size_t) (k - 1) * sizeof(char *));
                    strs[k - 1] = e;
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
                f->xs[r] = numeric ? nf_is_true_num(f, tc, r) : (strcmp(nf_text(tc, r), f->true_str) == 0);
            else if (f->kind == NF_FEAT_CAT)
                f->xs[r] = (double) nf_find_cat(f->cats, f->n_cats, f->bools, nf_text(tc, r));
            else
                f->xs[r] = tc->num[r];
        }
        rc = nf_pred_drop_unique(f, tc, ns, tmp, err);
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
static int nf_pred_mitra_fit(struct nf_predictor * p, nf_err * err) {
    const int64_t ns = p->tr.n_rows;
    p->order = malloc((size_t) (p->n_feats + 1) * sizeof(int));
    p->mean = malloc((size_t) (p->n_feats + 1) * sizeof(double));
    double * tmp = malloc((size_t) (ns + 1) * sizeof(double));
    if (!p->order || !p->mean || !tmp) {
        free(tmp);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    for (int pass = 0; pass < 3; pass++) { /* numeric (and 0/1) first, then categories, then dates */
        for (int i = 0; i < p->n_feats; i++) {
            struct nf_feat * f = &p->feats[i];
            const int fpass = f->kind == NF_FEAT_CAT ? 1 : f->kind == NF_FEAT_DATE ? 2 : 0;
            if (f->dropped || fpass != pass) continue;
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
static void nf_pred_matrix(const struct nf_predictor * p, double * const * xq, int64_t nq, const int * sign,
                           float * out) {
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

static const char * nf_col_type_name(const struct nf_csv_column * c) {
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
static int nf_pred_check(const struct nf_predictor * p, const struct nf_csv_table * te, int * tcol, nf_err * err) {
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
        const char * s = qc->missing[r] ? "" : nf_value_kind(qc) == (f->bools ? 2 : 1) ? qc->raw[r] : NULL;
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
            xq[r] = nf_date_value(
                f->part,
                qc->type == NF_CSV_TEXT && !qc->missing[r] && nf__iso_datetime_ns(qc->raw[r], &t) ? t : f->date_fill);
        else if (f->kind == NF_FEAT_BOOL)
            xq[r] = numeric ? (!strings && (qc->type == NF_CSV_INT ? nf_is_true_num(f, qc, r) : v == f->true_num))
                            : (s && strcmp(s, f->true_str) == 0);
        else if (f->kind == NF_FEAT_CAT)
            xq[r] = (double) nf_find_cat(f->cats, f->n_cats, f->bools, s);
        else if (f->is_int) /* int64 in training: missing -> 0, then astype(int64) */
            xq[r] = isnan(v) ? 0.0 : (isfinite(v) ? trunc(v) : v);
        else
            xq[r] = v;
    }
}

/* ---- mirror signs given explicitly --------------------------------------------- */
static int nf_pred_mirror_given(struct nf_predictor * p, const struct nf_mirror_spec * s, nf_err * err) {
    const int F = p->n_order;
    char src[600], en[256], eo[256];
    nf__esc(src, sizeof(src), s->source ? s->source : "mirror signs");
    const int64_t E = p->n_est;
    if (!s->signs) return nf__err_set(err, NF_ERR_ARG, "%s: no signs", src);
    if (s->n_columns != F) {
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: %d kept columns, the preprocessing of %s keeps %d (first kept: '%s')", src,
                           s->n_columns, nf__esc(eo, sizeof(eo), p->tr.path), F,
                           nf__esc(en, sizeof(en), p->tr.cols[p->feats[p->order[0]].col].name));
    }
    for (int j = 0; j < F; j++) {
        const char * want = p->tr.cols[p->feats[p->order[j]].col].name;
        if (!s->columns || !s->columns[j] || strcmp(s->columns[j], want) != 0)
            return nf__err_set(err, NF_ERR_INPUT, "%s: kept column %d is '%s', the preprocessing's is '%s'", src, j + 1,
                               s->columns && s->columns[j] ? nf__esc(eo, sizeof(eo), s->columns[j]) : "(none)",
                               nf__esc(en, sizeof(en), want));
    }
    if (s->n_estimators != E)
        return nf__err_set(err, NF_ERR_INPUT, "%s: %lld lists of signs (ensemble members), the predictor has %lld", src,
                           (long long) s->n_estimators, (long long) E);
    for (int64_t e = 0; e < E; e++) {
        for (int j = 0; j < F; j++) {
            const int v = s->signs[e * F + j];
            if (v != 1 && v != -1)
                return nf__err_set(err, NF_ERR_INPUT, "%s: member %lld, column '%s': sign %d (not 1 or -1)", src,
                                   (long long) e + 1, nf__esc(en, sizeof(en), s->columns[j]), v);
            p->signs[e * F + j] = v;
        }
        if (s->regression_mirror) {
            const int v = s->regression_mirror[e];
            if (v != 0 && v != 1)
                return nf__err_set(err, NF_ERR_INPUT, "%s: member %lld: regression mirror %d (not 0 or 1)", src,
                                   (long long) e + 1, v);
            p->regmirror[e] = p->task == NF_PREDICT_REGRESSION ? v : 0;
        }
    }
    return NF_OK;
}

struct nf_mirror_owned {
    struct nf_mirror_spec spec; /* first: the public part */
    char * source;
    char ** names;
    int * signs;
    int * regmirror;
};

int nf_mirror_spec_read(const char * path, struct nf_mirror_spec ** out, nf_err * err) {
    *out = NULL;
    cJSON * doc = NULL;
    char ep[600];
    nf__esc(ep, sizeof(ep), path ? path : "");
    if (!path) return nf__err_set(err, NF_ERR_ARG, "nf_mirror_spec_read: no path");
    NF_TRY(nf__json_read_file(path, &doc, err));
    struct nf_mirror_owned * o = calloc(1, sizeof(*o));
    int rc = NF_OK;
    if (!o) {
        cJSON_Delete(doc);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    const cJSON * cols = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "columns_kept") : NULL;
    const cJSON * signs = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "mirror_signs") : NULL;
    const cJSON * rm = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "regression_mirror") : NULL;
    if (!cJSON_IsObject(doc)) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: not a JSON object", ep);
        goto fail;
    }
    if (!cJSON_IsArray(cols) || cJSON_GetArraySize(cols) < 1) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: no \"columns_kept\" list (the kept columns' names)", ep);
        goto fail;
    }
    if (!cJSON_IsArray(signs) || cJSON_GetArraySize(signs) < 1) {
        rc = nf__err_set(err, NF_ERR_FORMAT, "%s: no \"mirror_signs\" list (one list of +-1 per ensemble member)", ep);
        goto fail;
    }
    const int F = cJSON_GetArraySize(cols);
    const int E = cJSON_GetArraySize(signs);
    o->names = calloc((size_t) F, sizeof(char *));
    o->signs = malloc((size_t) E * (size_t) F * sizeof(int));
    if (!o->names || !o->signs) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    o->spec.n_columns = F;
    o->spec.n_estimators = E;
    for (int j = 0; j < F; j++) {
        const cJSON * c = cJSON_GetArrayItem(cols, j);
        if (cJSON_IsObject(c)) c = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (!cJSON_IsString(c)) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: columns_kept[%d] is neither a name nor an object with a \"name\"",
                             ep, j);
            goto fail;
        }
        if (!(o->names[j] = strdup(c->valuestring))) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    for (int e = 0; e < E; e++) {
        const cJSON * row = cJSON_GetArrayItem(signs, e);
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != F) {
            rc = nf__err_set(err, NF_ERR_FORMAT, "%s: mirror_signs[%d] is not a list of %d signs (one per kept column)",
                             ep, e, F);
            goto fail;
        }
        for (int j = 0; j < F; j++) {
            const cJSON * v = cJSON_GetArrayItem(row, j);
            if (!cJSON_IsNumber(v) || (v->valuedouble != 1.0 && v->valuedouble != -1.0)) {
                rc = nf__err_set(err, NF_ERR_FORMAT, "%s: mirror_signs[%d][%d] is not 1 or -1", ep, e, j);
                goto fail;
            }
            o->signs[e * F + j] = (int) v->valuedouble;
        }
    }
    if (rm && !cJSON_IsNull(rm)) {
        if (!cJSON_IsArray(rm) || (cJSON_GetArraySize(rm) != E && cJSON_GetArraySize(rm) != 0)) {
            rc = nf__err_set(err, NF_ERR_FORMAT,
                             "%s: regression_mirror is not a list of %d booleans (one per ensemble member)", ep, E);
            goto fail;
        }
        if (cJSON_GetArraySize(rm) == E) {
            if (!(o->regmirror = malloc((size_t) E * sizeof(int)))) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                goto fail;
            }
            for (int e = 0; e < E; e++) {
                const cJSON * v = cJSON_GetArrayItem(rm, e);
                if (!cJSON_IsBool(v)) {
                    rc = nf__err_set(err, NF_ERR_FORMAT, "%s: regression_mirror[%d] is not true or false", ep, e);
                    goto fail;
                }
                o->regmirror[e] = cJSON_IsTrue(v);
            }
        }
    }
    if (!(o->source = strdup(path))) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    o->spec.source = o->source;
    o->spec.columns = (const char * const *) o->names;
    o->spec.signs = o->signs;
    o->spec.regression_mirror = o->regmirror;
    cJSON_Delete(doc);
    *out = &o->spec;
    return NF_OK;
fail:
    cJSON_Delete(doc);
    nf_mirror_spec_free(&o->spec);
    return rc;
}

void nf_mirror_spec_free(struct nf_mirror_spec * s) {
    if (!s) return;
    struct nf_mirror_owned * o = (struct nf_mirror_owned *) s;
    if (o->names)
        for (int j = 0; j < s->n_columns; j++) free(o->names[j]);
    free(o->names);
    free(o->source);
    free(o->signs);
    free(o->regmirror);
    free(o);
}

/* ---- fit ----------------------------------------------------------------------- */
void nf_predictor_free(nf_predictor * p) {
    if (!p) return;
    for (int i = 0; i < p->n_feats; i++) {
        free(p->feats[i].cats);
        free(p->feats[i].xs);
        free(p->feats[i].name);
    }
    free(p->feats);
    free(p->order);
    free(p->mean);
    free(p->yc);
    free(p->yv);
    free(p->signs);
    free(p->regmirror);
    nf__csv_free(&p->tr);
    free(p);
}

int nf_predictor_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * opts,
                     nf_predictor ** out, nf_err * err) {
    *out = NULL;
    if (!train || !target) return nf__err_set(err, NF_ERR_ARG, "nf_predictor_fit: no training table or target");
    const struct nf_predictor_opts dflt = {0};
    const struct nf_predictor_opts * o = opts ? opts : &dflt;
    if (o->task != NF_PREDICT_AUTO && o->task != NF_PREDICT_CLASSIFICATION && o->task != NF_PREDICT_REGRESSION)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_fit: task %d", o->task);
    int64_t n_est = o->n_estimators ? o->n_estimators : (o->mirror ? o->mirror->n_estimators : 1);
    if (n_est < 1 || n_est > 100000)
        return nf__err_set(err, NF_ERR_ARG, "nf_predictor_fit: %lld ensemble members", (long long) n_est);
    char e1[512], e2[256];
    nf__esc(e1, sizeof(e1), train->csv.path);
    nf__esc(e2, sizeof(e2), target);
    const int ycol = nf__csv_find(&train->csv, target);
    if (ycol < 0) return nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (the target)", e1, e2);
    if (train->csv.n_rows < 2)
        return nf__err_set(err, NF_ERR_INPUT, "%s: %lld data rows; need at least 2", e1, (long long) train->csv.n_rows);
    nf_predictor * p = calloc(1, sizeof(*p));
    if (!p) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf__csv_clone(&train->csv, &p->tr, err);
    p->ycol = ycol;
    p->n_est = n_est;
    p->seed = o->seed;
    if (rc == NF_OK) rc = nf_pred_target(p, o->task, err);
    if (rc == NF_OK) rc = nf_pred_features(p, err);
    if (rc == NF_OK) rc = nf_pred_mitra_fit(p, err);
    const int F = p->n_order;
    if (rc == NF_OK) {
        p->signs = malloc((size_t) (n_est * F) * sizeof(int));
        p->regmirror = calloc((size_t) n_est, sizeof(int));
        if (!p->signs || !p->regmirror) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    if (rc == NF_OK && o->mirror) {
        rc = nf_pred_mirror_given(p, o->mirror, err);
    } else if (rc == NF_OK) {
        /* each member's draws, in AutoGluon's order: the regression mirror, then one sign per feature */
        uint64_t rng = o->seed;
        const int mirror = !o->no_mirror;
        for (int64_t e = 0; e < n_est; e++) {
            if (p->task == NF_PREDICT_REGRESSION) p->regmirror[e] = mirror ? (int) (nf__rng_next(&rng) >> 63) : 0;
            for (int j = 0; j < F; j++) p->signs[e * F + j] = mirror ? ((nf__rng_next(&rng) >> 63) ? -1 : 1) : 1;
        }
    }
    if (rc == NF_OK) {
        for (int i = 0; i < p->n_feats; i++) p->feats[i].kept = -1;
        for (int j = 0; j < F; j++) {
            p->feats[p->order[j]].kept = j;
            p->feats[p->order[j]].mean = p->mean[j];
        }
    }
    if (rc != NF_OK) {
        nf_predictor_free(p);
        return rc;
    }
    *out = p;
    return NF_OK;
}

/* ---- predict ------------------------------------------------------------------- */
int nf_predictor_check_table(const nf_predictor * p, const nf_table * test, nf_err * err) {
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

int nf_predictor_predict_part(nf_predictor * p, nf_model * m, const nf_table * test, int64_t begin, int64_t end,
                              double * out, float * logits_out, int64_t * rows_begin, int64_t * rows_end,
                              nf_err * err) {
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
    const int subsets = ns > NF_PRED_MAX_SUPPORT;
    const int64_t nsub = subsets ? NF_PRED_MAX_SUPPORT : ns; /* support rows a forward */
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
    if (rc == NF_OK && subsets) {
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

int nf_predictor_predict(nf_predictor * p, nf_model * m, const nf_table * test, double * out, float * logits_out,
                         nf_err * err) {
    return nf_predictor_predict_part(p, m, test, 0, 0, out, logits_out, NULL, NULL, err);
}

void nf_predictor_last_stats(const nf_predictor * p, struct nf_predict_stats * out) { *out = p->stats; }

/* ---- accessors ------------------------------------------------------------------ */
double nf_predictor_forward_ms(const nf_predictor * p) { return p->forward_ms; }
void nf_predictor_set_progress(nf_predictor * p, nf_predictor_progress_fn fn, void * user) {
    if (!p) return;
    p->progress = fn;
    p->progress_user = user;
}
int nf_predictor_task(const nf_predictor * p) { return p->task; }
int64_t nf_predictor_n_train(const nf_predictor * p) { return p->tr.n_rows; }
int64_t nf_predictor_n_estimators(const nf_predictor * p) { return p->n_est; }
int64_t nf_predictor_n_outputs(const nf_predictor * p) {
    return p->task == NF_PREDICT_CLASSIFICATION ? p->n_classes : 1;
}
const char * nf_predictor_target(const nf_predictor * p) { return p->tr.cols[p->ycol].name; }
int64_t nf_predictor_n_classes(const nf_predictor * p) {
    return p->task == NF_PREDICT_CLASSIFICATION ? p->n_classes : 0;
}
const char * nf_predictor_class_name(const nf_predictor * p, int64_t k) {
    return p->task == NF_PREDICT_CLASSIFICATION && k >= 0 && k < p->n_classes ? p->class_name[k] : NULL;
}
void nf_predictor_target_range(const nf_predictor * p, double * y_min, double * y_max) {
    *y_min = p->task == NF_PREDICT_REGRESSION ? p->y_min : 0;
    *y_max = p->task == NF_PREDICT_REGRESSION ? p->y_max : 0;
}
int nf_predictor_n_columns(const nf_predictor * p) { return p->n_feats; }
int nf_predictor_column(const nf_predictor * p, int i, struct nf_column_info * out) {
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
int nf_predictor_n_kept(const nf_predictor * p) { return p->n_order; }
int nf_predictor_kept(const nf_predictor * p, int j) { return j >= 0 && j < p->n_order ? p->order[j] : -1; }
const int * nf_predictor_mirror_signs(const nf_predictor * p, int64_t e) {
    return e >= 0 && e < p->n_est ? p->signs + e * p->n_order : NULL;
}
int nf_predictor_regression_mirror(const nf_predictor * p, int64_t e) {
    return e >= 0 && e < p->n_est ? p->regmirror[e] : 0;
}
