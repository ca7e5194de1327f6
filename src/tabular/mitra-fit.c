/* mitra-fit.c -- the fit of the Mitra part of the table predictor
 * (nofall-tabular.h; predict: mitra-predict.c), as AutoGluon feeds Mitra
 * (README "predict"; spec shared/specs/mitra.md §5):
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
#include "mitra-impl.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char * const nf_date_part[] = {"", ".year", ".month", ".day", ".dayofweek"};

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
int nf__mitra_is_true_num(const struct nf_feat * f, const struct nf_csv_column * c, int64_t r) {
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
int64_t nf__mitra_find_cat(char ** cats, int64_t n, int bools, const char * s) {
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

/* the target: task, classes, encoded labels */
static int nf_pred_target(struct nf_mitra * p, int task_opt, nf_err * err) {
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
double nf__mitra_date_value(int part, int64_t ns) {
    int64_t y;
    int mo, d, dow;
    nf__civil_from_ns(ns, &y, &mo, &d, &dow);
    return part == 0 ? (double) ns : part == 1 ? (double) y : part == 2 ? mo : part == 3 ? d : dow;
}

/* AutoGluon's special types of a text column (ag-types.c): free text is
 * refused; a date column becomes DatetimeFeatureGenerator's five features
 * (appended to p->feats; the caller sees them by their column) */
static int nf_pred_special(struct nf_mitra * p, int c, double * tmp, nf_err * err) {
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
    char ef[512], ec[256], ev[256];
    nf__esc(ef, sizeof(ef), p->tr.path);
    nf__esc(ec, sizeof(ec), tc->name);
    /* a type the user gave (docs/tables.md "Column types"): AutoGluon infers
     * dates and free text only for object columns */
    if (tc->user_type == NF_USER_TYPE_CATEGORY) return NF_OK;
    if (tc->user_type == NF_USER_TYPE_TEXT)
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: column '%s' is given the type text: AutoGluon derives binned text statistics and "
                           "n-gram counts from a text column, which nofall does not compute for Mitra; give it the "
                           "type category, or drop it",
                           ef, ec);
    bad = -1;
    const int t = tc->user_type == NF_USER_TYPE_DATETIME ? NF_AG_DATETIME : nf__ag_special_type(tc, ns, &bad, err);
    if (t < 0) return t;
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
        for (int64_t r = 0; r < ns; r++) f->xs[r] = nf__mitra_date_value(part, v[r]);
        rc = nf_pred_drop_unique(f, tc, ns, tmp, err);
    }
    free(v);
    return rc;
}

static int nf_pred_features(struct nf_mitra * p, nf_err * err) {
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
            /* a category the user gave (pandas' category dtype): no FillNa,
             * missing values stay NaN (code -1), counted as one value */
            f->nan_cat = tc->user_type == NF_USER_TYPE_CATEGORY;
            int64_t nv = 0;
            for (int64_t r = 0; r < ns; r++)
                if (!f->nan_cat || !tc->missing[r]) strs[nv++] = (char *) nf_text(tc, r);
            qsort(strs, (size_t) nv, sizeof(char *), nf_cmp_str);
            nd = f->nan_cat && nv < ns;
            for (int64_t i = 0; i < nv; i++)
                if (i == 0 || strcmp(strs[i], strs[i - 1]) != 0) nd++;
            if (nd == 2) {
                f->kind = NF_FEAT_BOOL;
                f->true_str = strs[nv - 1]; /* the larger in code point order ('' = missing is smallest) */
            } else {
                f->kind = NF_FEAT_CAT;
                /* categories: values seen at least twice, sorted */
                int64_t k = 0;
                for (int64_t i = 0; i < nv;) {
                    int64_t j = i;
                    while (j < nv && strcmp(strs[j], strs[i]) == 0) j++;
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
                f->xs[r] = numeric ? nf__mitra_is_true_num(f, tc, r) : (strcmp(nf_text(tc, r), f->true_str) == 0);
            else if (f->kind == NF_FEAT_CAT)
                f->xs[r] = (double) nf__mitra_find_cat(f->cats, f->n_cats, f->bools,
                                                       f->nan_cat && tc->missing[r] ? NULL : nf_text(tc, r));
            else
                f->xs[r] = tc->num[r];
        }
        rc = nf_pred_drop_unique(f, tc, ns, tmp, err);
    }
    free(tmp);
    if (rc != NF_OK) return rc;
    /* DropDuplicatesFeatureGenerator: numeric (incl. 0/1) by value, categories by partition; first kept */
    return nf__mitra_drop_duplicates(p, ns, err);
    return NF_OK;
}

/* Mitra's Preprocessor.fit: training means, singular columns; model order.
 * rows: NULL (every training row) or the row ids it is fitted on (n_rows) */
int nf__mitra_pre_fit(struct nf_mitra * p, const int64_t * rows, int64_t n_rows, nf_err * err) {
    const int64_t ns = rows ? n_rows : p->tr.n_rows;
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
            for (int64_t i = 0; i < ns; i++) {
                const double v = f->xs[rows ? rows[i] : i];
                if (!isnan(v)) sum += v, cnt++;
            }
            const double mean = cnt ? sum / (double) cnt : NAN;
            for (int64_t i = 0; i < ns; i++) {
                const double v = f->xs[rows ? rows[i] : i];
                tmp[i] = isnan(v) ? mean : v;
            }
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

/* ---- mirror signs given explicitly --------------------------------------------- */
static int nf_pred_mirror_given(struct nf_mitra * p, const struct nf_mirror_spec * s, nf_err * err) {
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
void nf__mitra_free(struct nf_mitra * p) {
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
    free(p->mirror_file);
    free(p->ft_rng);
    nf__mitra_finetune_members_free(p);
    nf__csv_free(&p->tr);
    free(p);
}

/* each member's mirror draws, in AutoGluon's order: the regression mirror,
 * then one sign per feature (seed-derived; all +1 with no_mirror) */
void nf__mitra_draw_signs(struct nf_mitra * p) {
    uint64_t rng = p->seed;
    const int mirror = !p->no_mirror, F = p->n_order;
    for (int64_t e = 0; e < p->n_est; e++) {
        if (p->task == NF_PREDICT_REGRESSION) p->regmirror[e] = mirror ? (int) (nf__rng_next(&rng) >> 63) : 0;
        for (int j = 0; j < F; j++) p->signs[e * F + j] = mirror ? ((nf__rng_next(&rng) >> 63) ? -1 : 1) : 1;
    }
}

void nf__mitra_set_kept(struct nf_mitra * p) {
    for (int i = 0; i < p->n_feats; i++) p->feats[i].kept = -1;
    for (int j = 0; j < p->n_order; j++) {
        p->feats[p->order[j]].kept = j;
        p->feats[p->order[j]].mean = p->mean[j];
    }
}

int nf__mitra_fit(const nf_table * train, const char * target, const struct nf_predictor_opts * opts,
                  struct nf_mitra ** out, nf_err * err) {
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
    struct nf_mitra * p = calloc(1, sizeof(*p));
    if (!p) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf__csv_clone(&train->csv, &p->tr, err);
    p->ycol = ycol;
    p->n_est = n_est;
    p->seed = o->seed;
    p->no_mirror = o->no_mirror;
    if (rc == NF_OK && o->mirror && o->mirror->source && !(p->mirror_file = strdup(o->mirror->source)))
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    if (rc == NF_OK) rc = nf_pred_target(p, o->task, err);
    if (rc == NF_OK) rc = nf_pred_features(p, err);
    if (rc == NF_OK) rc = nf__mitra_pre_fit(p, NULL, 0, err);
    const int F = p->n_order;
    if (rc == NF_OK) {
        p->signs = malloc((size_t) (n_est * F) * sizeof(int));
        p->regmirror = calloc((size_t) n_est, sizeof(int));
        if (!p->signs || !p->regmirror) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    if (rc == NF_OK && o->mirror) {
        rc = nf_pred_mirror_given(p, o->mirror, err);
    } else if (rc == NF_OK) {
        nf__mitra_draw_signs(p);
    }
    if (rc == NF_OK) nf__mitra_set_kept(p);
    if (rc != NF_OK) {
        nf__mitra_free(p);
        return rc;
    }
    *out = p;
    return NF_OK;
}
