/* tabstar-verbalize.c -- TabSTAR's verbalizer (spec tabstar.md §2), as
 * upstream's TabSTARVerbalizer (tabstar 1.2.2, with pandas 3.1, numpy 2.4,
 * scikit-learn 1.9) fits and applies it, to the bit:
 *
 *   fit(X, y)   the column dtypes as pandas.read_csv gives them; y without
 *               nulls; column names normalized (normalize_col_name); each
 *               column numerical or text (is_numerical_feature); the values
 *               converted (numbers as float, text as Python str(), missing
 *               text "Unknown Value"); constant columns (nunique == 1) noted
 *               for dropping; per kept numerical column a StandardScaler and
 *               the 11 boundaries of a QuantileTransformer; the target's
 *               LabelEncoder (classification) or StandardScaler (regression).
 *   transform   per row: the target tokens, the text cells (training order),
 *               the numerical cells (sorted by name) with a bin label and a
 *               clipped z-score.
 *
 * numpy's pairwise summation, percentile ("linear"), linspace and interp,
 * and Python's round / repr are reproduced operation by operation (the
 * build has -ffp-contract=off), so the strings are byte-equal and the
 * z-scores float32-equal to upstream's (tests/tabstar-predict.sh). */
#include "tabstar-verbalize.h"
#include "tabular-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF_TAB_UNKNOWN      "Unknown Value" /* preprocessing/nulls.py MISSING_VALUE */
#define NF_TAB_MAX_CAT      50              /* detection.py MAX_NUMERIC_FOR_CATEGORICAL */
#define NF_TAB_Z_MAX        3.0             /* scaler.py Z_MAX_ABS_VAL */
#define NF_TAB_N_BINS       10              /* binning.py VERBALIZED_QUANTILE_BINS */
#define NF_TAB_MAX_QUANT    1000            /* n_quantiles = min(1000, n) */
#define NF_TAB_AUTO_CLASSES 10              /* --task auto: an int64 target with at most this many values */

const char * nf__tab_dtype_name(int dtype) {
    static const char * const n[] = {"int64", "float64", "bool", "object", "object"};
    return dtype >= 0 && dtype <= NF_TAB_DT_OBJECT ? n[dtype] : "?";
}

/* ---- Python's formatting ---------------------------------------------------- */

/* binning.py format_float on a boundary -- an np.float64, so round(x, 4) is
 * numpy's: rint(x * 1e4) / 1e4 (ties to even on the scaled product, not
 * Python's correctly rounded round()); str(int(r)) if r is integral (-0.0
 * gives "0"), else f"{r:.4f}" without trailing zeros / point */
void nf__tab_format_float(double x, char * buf, size_t n) {
    char t[400];
    const double r = rint(x * 10000.0) / 10000.0;
    if (isfinite(r) && r == floor(r)) {
        if (r == 0)
            snprintf(buf, n, "0");
        else
            snprintf(buf, n, "%.0f", r);
        return;
    }
    snprintf(t, sizeof(t), "%.4f", r);
    size_t L = strlen(t);
    if (strchr(t, '.')) {
        while (L && t[L - 1] == '0') t[--L] = 0;
        if (L && t[L - 1] == '.') t[--L] = 0;
    }
    snprintf(buf, n, "%s", t);
}

/* ---- numpy's arithmetic ----------------------------------------------------- */

/* sklearn StandardScaler.fit on n values (no NaN): _incremental_mean_and_var
 * from zero, _is_constant_feature -> scale 1 */
static int nf_std_scaler(const double * x, int64_t n, double * mean, double * scale) {
    double * t = calloc((size_t) (n ? n : 1), sizeof(double));
    if (!t) return 0;
    const double cnt = (double) n;
    const double sum = nf__np_sum(x, n);
    const double m = (0.0 + sum) / cnt;
    const double T = sum / cnt;
    for (int64_t i = 0; i < n; i++) t[i] = x[i] - T;
    const double corr = nf__np_sum(t, n);
    for (int64_t i = 0; i < n; i++) t[i] = t[i] * t[i];
    double nuv = nf__np_sum(t, n);
    nuv -= corr * corr / cnt;
    const double var = nuv / cnt;
    free(t);
    const double eps = DBL_EPSILON;
    const double ub = cnt * eps * var + (cnt * m * eps) * (cnt * m * eps);
    *mean = m;
    *scale = var <= ub ? 1.0 : sqrt(var);
    return 1;
}

static int nf_cmp_double(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* the 11 boundaries: QuantileTransformer(n_quantiles=min(1000, n),
 * uniform).fit(values) then inverse_transform(np.linspace(0, 1, 11)), i.e.
 * references = linspace(0, 1, nq); quantiles = nanpercentile(values,
 * references * 100) ("linear": q / 100, (n-1) q, numpy's _lerp); b =
 * interp(levels, references, quantiles), b[0] = quantiles[0], b[10] =
 * quantiles[-1]. sklearn 1.9 applies no maximum.accumulate. */
static int nf_boundaries(const double * x, int64_t n, double b[11], int64_t * nq_out) {
    double * v = malloc((size_t) n * sizeof(double));
    const int64_t nq = n < NF_TAB_MAX_QUANT ? n : NF_TAB_MAX_QUANT;
    double * ref = malloc((size_t) nq * sizeof(double));
    double * qu = malloc((size_t) nq * sizeof(double));
    if (!v || !ref || !qu) {
        free(v);
        free(ref);
        free(qu);
        return 0;
    }
    memcpy(v, x, (size_t) n * sizeof(double));
    qsort(v, (size_t) n, sizeof(double), nf_cmp_double);
    const double step = 1.0 / (double) (nq - 1);
    for (int64_t i = 0; i < nq; i++) ref[i] = (double) i * step + 0.0;
    ref[nq - 1] = 1.0;
    for (int64_t i = 0; i < nq; i++) {
        const double q = (ref[i] * 100.0) / 100.0;
        const double vi = (double) (n - 1) * q;
        if (vi >= (double) (n - 1)) {
            qu[i] = v[n - 1];
            continue;
        }
        const double prev = floor(vi);
        const int64_t j = (int64_t) prev;
        const double g = vi - prev;
        const double a = v[j], bb = v[j + 1];
        const double d = bb - a;
        qu[i] = g >= 0.5 ? bb - d * (1 - g) : a + d * g;
    }
    const double lstep = 1.0 / (double) NF_TAB_N_BINS;
    for (int k = 0; k <= NF_TAB_N_BINS; k++) {
        const double xv = k == NF_TAB_N_BINS ? 1.0 : (double) k * lstep + 0.0;
        /* np.interp: j with ref[j] <= x < ref[j+1] */
        int64_t lo = 0, hi = nq - 1;
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if (ref[mid] <= xv)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int64_t j = lo;
        double r;
        if (j == nq - 1 || ref[j] == xv)
            r = qu[j];
        else {
            const double slope = (qu[j + 1] - qu[j]) / (ref[j + 1] - ref[j]);
            r = slope * (xv - ref[j]) + qu[j];
            if (isnan(r)) {
                r = slope * (xv - ref[j + 1]) + qu[j + 1];
                if (isnan(r) && qu[j] == qu[j + 1]) r = qu[j];
            }
        }
        b[k] = r;
    }
    b[0] = qu[0];
    b[NF_TAB_N_BINS] = qu[nq - 1];
    *nq_out = nq;
    free(v);
    free(ref);
    free(qu);
    return 1;
}

/* ---- pandas' view of a column ------------------------------------------------ */

/* the dtype pandas.read_csv gives a column of the CSV reader's table (csv.c
 * types it; a table built from columns may hold True / False text) */
static int nf_col_dtype(const struct nf_csv_column * c, int64_t n) {
    if (c->user_type == NF_USER_TYPE_CATEGORY || c->user_type == NF_USER_TYPE_TEXT) return NF_TAB_DT_OBJECT;
    if (c->type == NF_CSV_INT) return NF_TAB_DT_INT;
    if (c->type == NF_CSV_FLOAT) return NF_TAB_DT_FLOAT;
    if (c->type == NF_CSV_BOOL) return NF_TAB_DT_BOOL;
    int any = 0, b;
    for (int64_t r = 0; r < n; r++) {
        if (c->missing[r]) continue;
        if (!nf__csv_is_bool(c->raw[r], &b)) return NF_TAB_DT_OBJECT;
        any = 1;
    }
    if (!any) return NF_TAB_DT_OBJECT;
    return c->n_missing ? NF_TAB_DT_OBJBOOL : NF_TAB_DT_BOOL;
}

/* Python str.isdigit() for ASCII text (non-ASCII digits, e.g. '²', are not
 * recognised: such a value counts as non-numeric) */
static int nf_isdigit_str(const char * s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* the numeric value of a non-missing field of an int64 / float64 / bool column */
static double nf_col_number(const struct nf_csv_column * c, int dtype, int64_t r) {
    int b = 0;
    if (dtype == NF_TAB_DT_BOOL || dtype == NF_TAB_DT_OBJBOOL)
        return c->missing[r] ? NAN : (nf__csv_is_bool(c->raw[r], &b), (double) b);
    if (dtype == NF_TAB_DT_INT) return c->num[r]; /* int64 or uint64, as a double */
    return c->num[r];
}

/* str(value) of a text cell as convert_series_to_textual gives it (NULL:
 * missing -> "Unknown Value"); buf for formatted numbers */
static const char * nf_col_text(const struct nf_csv_column * c, int dtype, int64_t r, char * buf, size_t n) {
    int b = 0;
    if (c->missing[r]) return NF_TAB_UNKNOWN;
    switch (dtype) {
        case NF_TAB_DT_INT: snprintf(buf, n, "%lld", strtoll(c->raw[r], NULL, 10)); return buf;
        case NF_TAB_DT_FLOAT: {
            double x = c->num[r];
            const char * p = c->raw[r];
            while (*p == ' ' || *p == '\t') p++;
            if (x == 0 && *p == '-') x = -0.0; /* pandas reads "-0.0" as -0.0: str() "-0.0" */
            nf__py_float_repr(x, buf, n);
            return buf;
        }
        case NF_TAB_DT_BOOL:
        case NF_TAB_DT_OBJBOOL: nf__csv_is_bool(c->raw[r], &b); return b ? "True" : "False";
        default: return c->raw[r];
    }
}

static int nf_cmp_str(const void * a, const void * b) { return strcmp(*(char * const *) a, *(char * const *) b); }

/* distinct strings of a sorted array */
static int64_t nf_distinct_sorted(char ** s, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || strcmp(s[i], s[i - 1]) != 0) d++;
    return d;
}

/* normalize_col_name (texts.py) */
static char * nf_normalize_name(const char * in) {
    const size_t L = strlen(in);
    char * s = malloc(L + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < L; i++) {
        if (in[i] == '\n' || in[i] == '\r' || in[i] == '\t')
            s[k++] = ' ';
        else if ((unsigned char) in[i] == 0xC2 && (unsigned char) in[i + 1] == 0xA0) {
            s[k++] = ' ';
            i++;
        } else
            s[k++] = in[i];
    }
    s[k] = 0;
    if (strchr(s, ' '))
        for (char * p = s; *p; p++)
            if (*p == '_' || *p == '-' || *p == '.' || *p == ':') *p = ' ';
    for (char * p = s; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7F) *p = ' ';
    return s;
}

/* replace_whitespaces: [\x00-\x1F\x7F] -> ' ' */
static void nf_replace_ctrl(char * s) {
    for (; *s; s++)
        if ((unsigned char) *s < 0x20 || *s == 0x7F) *s = ' ';
}

static char * nf_cell(const char * a, const char * col, const char * b, const char * value) {
    const size_t n = strlen(a) + strlen(col) + strlen(b) + strlen(value) + 1;
    char * s = malloc(n);
    if (!s) return NULL;
    snprintf(s, n, "%s%s%s%s", a, col, b, value);
    return s;
}

/* ---- fit ------------------------------------------------------------------- */

void nf__tab_verbalizer_free(struct nf_tab_verbalizer * v) {
    if (!v) return;
    free(v->target);
    free(v->y_name);
    if (v->classes)
        for (int64_t k = 0; k < v->n_classes; k++) free(v->classes[k]);
    free(v->classes);
    for (int i = 0; v->cols && i < v->n_cols; i++) {
        free(v->cols[i].name);
        free(v->cols[i].norm);
        for (int k = 0; k < 12; k++) free(v->cols[i].labels[k]);
    }
    free(v->cols);
    free(v->out);
    memset(v, 0, sizeof(*v));
}

/* the numbers of a numerical column (convert_series_to_numeric): numeric
 * dtypes as float; an object column's digit strings as float, its one
 * distinct non-numeric token as NaN (two or more: upstream's ValueError) */
static int nf_col_to_numbers(const struct nf_csv_table * t, int ci, const char * norm, double * out, nf_err * err) {
    const struct nf_csv_column * c = &t->cols[ci];
    const int dt = nf_col_dtype(c, t->n_rows);
    char e1[512], e2[256], e3[256], e4[256];
    if (dt != NF_TAB_DT_OBJECT) {
        for (int64_t r = 0; r < t->n_rows; r++) out[r] = c->missing[r] ? NAN : nf_col_number(c, dt, r);
        return NF_OK;
    }
    const char * tok = NULL;
    int64_t tok_row = 0;
    for (int64_t r = 0; r < t->n_rows; r++) {
        if (c->missing[r] || nf_isdigit_str(c->raw[r])) continue;
        if (!tok) {
            tok = c->raw[r];
            tok_row = r;
        } else if (strcmp(tok, c->raw[r]) != 0)
            return nf__err_set(err, NF_ERR_INPUT,
                               "%s: column '%s' (numerical in the training table): two different non-numeric values, "
                               "'%s' (row %lld) and '%s' (row %lld); upstream reads exactly one as missing "
                               "(ValueError: \"Missing values detected ... Should be only one!\")",
                               nf__esc(e1, sizeof(e1), t->path), nf__esc(e2, sizeof(e2), norm),
                               nf__esc(e3, sizeof(e3), tok), (long long) tok_row + 1,
                               nf__esc(e4, sizeof(e4), c->raw[r]), (long long) r + 1);
    }
    for (int64_t r = 0; r < t->n_rows; r++)
        out[r] = c->missing[r] || (tok && strcmp(c->raw[r], tok) == 0) ? NAN : strtod(c->raw[r], NULL);
    return NF_OK;
}

static int nf_fit_target(const struct nf_csv_table * t, int ti, int task, struct nf_tab_verbalizer * v, nf_err * err) {
    const struct nf_csv_column * c = &t->cols[ti];
    const int64_t n = t->n_rows;
    char e1[512], e2[256], e3[256];
    nf__esc(e1, sizeof(e1), t->path);
    nf__esc(e2, sizeof(e2), c->name);
    v->target_dtype = nf_col_dtype(c, n);
    if (c->n_missing) {
        int64_t first = 0;
        while (!c->missing[first]) first++;
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: target column '%s' has %lld missing values (row %lld first); upstream refuses a "
                           "target with nulls",
                           e1, e2, (long long) c->n_missing, (long long) first + 1);
    }
    const int dt = v->target_dtype;
    /* distinct values, sorted as LabelEncoder sorts them */
    int64_t nd = 0;
    char ** labels = NULL;
    double * nums = NULL;
    if (dt == NF_TAB_DT_OBJECT) {
        labels = malloc((size_t) n * sizeof(char *));
        if (!labels) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < n; r++) labels[r] = c->raw[r];
        qsort(labels, (size_t) n, sizeof(char *), nf_cmp_str);
        nd = nf_distinct_sorted(labels, n);
    } else {
        nums = malloc((size_t) n * sizeof(double));
        if (!nums) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < n; r++) nums[r] = nf_col_number(c, dt, r);
        for (int64_t r = 0; r < n; r++)
            if (!isfinite(nums[r])) {
                free(nums);
                return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, target column '%s': %s is not a finite number", e1,
                                   (long long) r + 1, e2, nf__esc(e3, sizeof(e3), c->raw[r]));
            }
        qsort(nums, (size_t) n, sizeof(double), nf_cmp_double);
        for (int64_t r = 0; r < n; r++)
            if (r == 0 || nums[r] != nums[r - 1]) nd++;
    }
    int rc = NF_OK;
    if (task == NF_PREDICT_AUTO) {
        if (dt == NF_TAB_DT_OBJECT || dt == NF_TAB_DT_BOOL) {
            task = NF_PREDICT_CLASSIFICATION;
            v->task_why = dt == NF_TAB_DT_BOOL ? "auto: a bool target" : "auto: a text (object) target";
        } else if (dt == NF_TAB_DT_INT && nd <= NF_TAB_AUTO_CLASSES) {
            task = NF_PREDICT_CLASSIFICATION;
            v->task_why = "auto: an int64 target with at most 10 distinct values";
        } else {
            task = NF_PREDICT_REGRESSION;
            v->task_why = dt == NF_TAB_DT_INT ? "auto: an int64 target with more than 10 distinct values"
                                              : "auto: a float64 target";
        }
    } else
        v->task_why = "--task";
    v->regression = task == NF_PREDICT_REGRESSION;
    if (v->regression) {
        if (dt == NF_TAB_DT_OBJECT)
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: target column '%s' is text (object), not numbers: a regression needs a numeric "
                             "target (--task classification?)",
                             e1, e2);
        else if (nd < 2)
            rc = nf__err_set(err, NF_ERR_INPUT,
                             "%s: target column '%s' is constant (%s in all %lld rows): nothing to regress on", e1, e2,
                             nf__esc(e3, sizeof(e3), c->raw[0]), (long long) n);
        else {
            double * y = malloc((size_t) n * sizeof(double));
            if (!y) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            for (int64_t r = 0; y && r < n; r++) y[r] = nf_col_number(c, dt, r);
            if (y && !nf_std_scaler(y, n, &v->y_mean, &v->y_scale))
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            free(y);
        }
    } else if (nd < 2) {
        rc = nf__err_set(err, NF_ERR_INPUT,
                         "%s: target column '%s' has one class only ('%s'); a classification needs at least 2", e1, e2,
                         nf__esc(e3, sizeof(e3), c->raw[0]));
    } else {
        v->n_classes = nd;
        v->classes = calloc((size_t) nd, sizeof(char *));
        if (!v->classes) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        int64_t k = 0;
        for (int64_t r = 0; rc == NF_OK && r < n; r++) {
            char b[64];
            const char * s;
            if (labels) {
                if (r && strcmp(labels[r], labels[r - 1]) == 0) continue;
                s = labels[r];
            } else {
                if (r && nums[r] == nums[r - 1]) continue;
                if (dt == NF_TAB_DT_INT)
                    snprintf(b, sizeof(b), "%lld", (long long) nums[r]);
                else if (dt == NF_TAB_DT_BOOL)
                    snprintf(b, sizeof(b), "%s", nums[r] != 0 ? "True" : "False");
                else
                    nf__py_float_repr(nums[r], b, sizeof(b));
                s = b;
            }
            if (!(v->classes[k++] = strdup(s))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        }
    }
    free(labels);
    free(nums);
    return rc;
}

static const struct nf_tab_verbalizer * nf_sort_ctx;
static int nf_cmp_out(const void * a, const void * b) {
    return strcmp(nf_sort_ctx->cols[*(const int *) a].norm, nf_sort_ctx->cols[*(const int *) b].norm);
}

/* one feature column: numerical or text (is_numerical_feature), converted,
 * constant or fitted */
static int nf_fit_column(const struct nf_csv_table * t, struct nf_tab_vcol * vc, double * num, char ** strs,
                         nf_err * err) {
    const struct nf_csv_column * c = &t->cols[vc->src];
    const int64_t n = t->n_rows;
    char e1[512], e2[256];
    nf__esc(e1, sizeof(e1), t->path);
    nf__esc(e2, sizeof(e2), c->name);
    if (c->user_type == NF_USER_TYPE_DATETIME)
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s: column '%s' is given the type datetime: TabSTAR encodes dates with skrub's "
                           "DatetimeEncoder, which nofall does not implement; give it the type category or text, or "
                           "drop it",
                           e1, e2);
    vc->dtype = nf_col_dtype(c, n);
    /* valid values: not NaN / None, finite */
    int64_t n_valid = 0;
    for (int64_t r = 0; r < n; r++)
        if (!c->missing[r] && (c->type == NF_CSV_TEXT || isfinite(c->num[r]))) n_valid++;
    if (n_valid == 0) {
        vc->numerical = 0;
        vc->why = "text: no valid value";
    } else if (vc->dtype != NF_TAB_DT_OBJECT && vc->dtype != NF_TAB_DT_OBJBOOL) {
        vc->numerical = 1;
        vc->why = vc->dtype == NF_TAB_DT_BOOL ? "numerical: bool dtype (0/1)" : "numerical: numeric dtype";
    } else if (vc->dtype == NF_TAB_DT_OBJBOOL) {
        vc->numerical = 0; /* at most 2 distinct values */
        vc->why = "text: object column of True/False with missing values (str(): True / False)";
    } else {
        /* is_mostly_numerical: > 50 distinct valid values, at most one of them not str.isdigit() */
        int64_t k = 0;
        for (int64_t r = 0; r < n; r++)
            if (!c->missing[r]) strs[k++] = c->raw[r];
        qsort(strs, (size_t) k, sizeof(char *), nf_cmp_str);
        int64_t nd = 0, nonnum = 0;
        for (int64_t i = 0; i < k; i++)
            if (i == 0 || strcmp(strs[i], strs[i - 1]) != 0) {
                nd++;
                nonnum += !nf_isdigit_str(strs[i]);
            }
        vc->numerical = nd > NF_TAB_MAX_CAT && nonnum <= 1;
        vc->why = vc->numerical ? "numerical: object column, > 50 distinct values, at most one not a digit string"
                  : nd > NF_TAB_MAX_CAT ? "text: object column, more than one distinct non-digit value"
                                        : "text: object column, at most 50 distinct values";
    }
    if (vc->numerical) {
        NF_TRY(nf_col_to_numbers(t, vc->src, vc->norm, num, err));
        /* nunique (NaN not counted) */
        int64_t k = 0;
        for (int64_t r = 0; r < n; r++)
            if (!isnan(num[r])) num[k++] = num[r]; /* the non-NaN values, in row order */
        double * sorted = malloc((size_t) (k ? k : 1) * sizeof(double));
        if (!sorted) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        memcpy(sorted, num, (size_t) k * sizeof(double));
        qsort(sorted, (size_t) k, sizeof(double), nf_cmp_double);
        int64_t nd = 0;
        for (int64_t i = 0; i < k; i++)
            if (i == 0 || sorted[i] != sorted[i - 1]) nd++;
        free(sorted);
        if (nd == 1) {
            vc->dropped = "constant (nunique == 1 in the training table)";
            return NF_OK;
        }
        for (int64_t i = 0; i < k; i++)
            if (isinf(num[i]))
                return nf__err_set(err, NF_ERR_INPUT,
                                   "%s: column '%s' (numerical) holds an infinite value; upstream's StandardScaler "
                                   "refuses infinity",
                                   e1, e2);
        if (!nf_std_scaler(num, k, &vc->mean, &vc->scale) || !nf_boundaries(num, k, vc->bounds, &vc->n_quantiles))
            return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        char B[11][400];
        for (int i = 0; i <= NF_TAB_N_BINS; i++) nf__tab_format_float(vc->bounds[i], B[i], sizeof(B[i]));
        int mn = 0, mx = 0; /* min / max of the formatted strings (code-point order) */
        for (int i = 1; i <= NF_TAB_N_BINS; i++) {
            if (strcmp(B[i], B[mn]) < 0) mn = i;
            if (strcmp(B[i], B[mx]) > 0) mx = i;
        }
        char lab[1024];
        for (int i = 0; i < 12; i++) {
            if (i == 0)
                snprintf(lab, sizeof(lab), "Lower than %s (Quantile 0%%)", B[mn]);
            else if (i == 11)
                snprintf(lab, sizeof(lab), "Higher than %s (Quantile 100%%)", B[mx]);
            else
                snprintf(lab, sizeof(lab), "%s to %s (Quantile %d - %d%%)", B[i - 1], B[i], 10 * (i - 1), 10 * i);
            if (!(vc->labels[i] = strdup(lab))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        }
        return NF_OK;
    }
    /* text: nunique of the str() values, "Unknown Value" for missing (a
     * numeric dtype gets here only without a valid value) */
    char buf[64];
    char ** own = calloc((size_t) n, sizeof(char *));
    if (!own) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = NF_OK;
    for (int64_t r = 0; r < n && rc == NF_OK; r++) {
        const char * s = nf_col_text(c, vc->dtype, r, buf, sizeof(buf));
        if (s == buf && !(s = own[r] = strdup(buf))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        strs[r] = (char *) s;
    }
    if (rc == NF_OK) {
        qsort(strs, (size_t) n, sizeof(char *), nf_cmp_str);
        if (nf_distinct_sorted(strs, n) == 1) vc->dropped = "constant (nunique == 1 in the training table)";
    }
    for (int64_t r = 0; r < n; r++) free(own[r]);
    free(own);
    return rc;
}

int nf__tab_verbalizer_fit(const nf_table * train, const char * target, int task, struct nf_tab_verbalizer * v,
                           nf_err * err) {
    memset(v, 0, sizeof(*v));
    const struct nf_csv_table * t = &train->csv;
    char e1[512], e2[256], e3[256];
    nf__esc(e1, sizeof(e1), t->path);
    const int ti = nf__csv_find(t, target);
    if (ti < 0)
        return nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (--target)", e1, nf__esc(e2, sizeof(e2), target));
    if (t->n_rows < 2)
        return nf__err_set(err, NF_ERR_INPUT, "%s: %lld data rows; need at least 2", e1, (long long) t->n_rows);
    int rc = NF_OK;
    double * num = malloc((size_t) t->n_rows * sizeof(double));
    char ** strs = malloc((size_t) t->n_rows * sizeof(char *));
    v->target = strdup(target);
    v->y_name = nf_normalize_name(target);
    v->cols = calloc((size_t) (t->n_cols ? t->n_cols : 1), sizeof(*v->cols));
    v->out = malloc((size_t) (t->n_cols ? t->n_cols : 1) * sizeof(int));
    if (!num || !strs || !v->target || !v->y_name || !v->cols || !v->out) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = nf_fit_target(t, ti, task, v, err)) != NF_OK) goto done;
    for (int i = 0; i < t->n_cols; i++) {
        if (i == ti) continue;
        struct nf_tab_vcol * vc = &v->cols[v->n_cols++];
        vc->src = i;
        vc->name = strdup(t->cols[i].name);
        vc->norm = nf_normalize_name(t->cols[i].name);
        if (!vc->name || !vc->norm) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int j = 0; j + 1 < v->n_cols; j++)
            if (strcmp(v->cols[j].norm, vc->norm) == 0) {
                rc = nf__err_set(err, NF_ERR_INPUT,
                                 "%s: columns '%s' and '%s' have the same normalized name '%s' (upstream's "
                                 "normalize_col_name); rename one",
                                 e1, nf__esc(e2, sizeof(e2), v->cols[j].name), nf__esc(e3, sizeof(e3), vc->name),
                                 vc->norm);
                goto done;
            }
        if ((rc = nf_fit_column(t, vc, num, strs, err)) != NF_OK) goto done;
    }
    if (v->n_cols == 0) {
        rc = nf__err_set(err, NF_ERR_INPUT, "%s: no feature column besides the target", e1);
        goto done;
    }
    /* the cell order: text columns in training order, then numerical ones sorted by name */
    for (int i = 0; i < v->n_cols; i++)
        if (!v->cols[i].dropped && !v->cols[i].numerical) v->out[v->n_out++] = i;
    const int n_text = v->n_out;
    for (int i = 0; i < v->n_cols; i++)
        if (!v->cols[i].dropped && v->cols[i].numerical) v->out[v->n_out++] = i;
    nf_sort_ctx = v;
    qsort(v->out + n_text, (size_t) (v->n_out - n_text), sizeof(int), nf_cmp_out);
    nf_sort_ctx = NULL;
done:
    free(num);
    free(strs);
    if (rc != NF_OK) nf__tab_verbalizer_free(v);
    return rc;
}

/* ---- transform ----------------------------------------------------------- */

int nf__tab_verbalize(const struct nf_tab_verbalizer * v, const nf_table * test, cJSON ** out, nf_err * err) {
    *out = NULL;
    const struct nf_csv_table * t = &test->csv;
    char e1[512], e2[256];
    nf__esc(e1, sizeof(e1), t->path);
    /* the columns: the training ones (the target optional), no others */
    for (int i = 0; i < t->n_cols; i++) {
        if (strcmp(t->cols[i].name, v->target) == 0) continue;
        int found = 0;
        for (int j = 0; j < v->n_cols && !found; j++) found = strcmp(v->cols[j].name, t->cols[i].name) == 0;
        if (!found)
            return nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' is not a column of the training table", e1,
                               nf__esc(e2, sizeof(e2), t->cols[i].name));
    }
    int * src = malloc((size_t) v->n_cols * sizeof(int));
    if (!src) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int j = 0; j < v->n_cols; j++) {
        src[j] = nf__csv_find(t, v->cols[j].name);
        if (src[j] < 0) {
            free(src);
            return nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (a column of the training table)", e1,
                               nf__esc(e2, sizeof(e2), v->cols[j].name));
        }
    }
    if (t->n_rows < 1) {
        free(src);
        return nf__err_set(err, NF_ERR_INPUT, "%s: no data rows", e1);
    }
    const int64_t B = t->n_rows, C = v->regression ? 1 : v->n_classes, S = C + v->n_out;
    int rc = NF_OK;
    cJSON * d = cJSON_CreateObject();
    double * num = malloc((size_t) B * sizeof(double));
    char ** tg = calloc((size_t) C, sizeof(char *));
    /* per kept column: its cells (strings) and z-scores */
    char *** cell = calloc((size_t) v->n_out, sizeof(char **));
    float ** z = calloc((size_t) v->n_out, sizeof(float *));
    if (!d || !num || !tg || !cell || !z) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < C; k++) {
        char * val = NULL;
        if (!v->regression && !(val = strdup(v->classes[k]))) break;
        if (val) nf_replace_ctrl(val);
        tg[k] = v->regression ? nf_cell("Numerical Target Feature: ", v->y_name, "", "")
                              : nf_cell("Target Feature: ", v->y_name, "\nFeature Value: ", val);
        free(val);
        if (!tg[k]) break;
    }
    for (int j = 0; j < v->n_out; j++) {
        cell[j] = calloc((size_t) B, sizeof(char *));
        z[j] = calloc((size_t) B, sizeof(float));
        if (!cell[j] || !z[j]) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        const struct nf_tab_vcol * vc = &v->cols[v->out[j]];
        const struct nf_csv_column * c = &t->cols[src[v->out[j]]];
        if (vc->numerical) {
            if ((rc = nf_col_to_numbers(t, src[v->out[j]], vc->norm, num, err)) != NF_OK) goto done;
            for (int64_t r = 0; r < B; r++) {
                const double x = num[r];
                const char * lab;
                if (isinf(x)) {
                    rc = nf__err_set(err, NF_ERR_INPUT,
                                     "%s: row %lld, column '%s' (numerical): an infinite value; upstream's "
                                     "StandardScaler refuses infinity",
                                     e1, (long long) r + 1, nf__esc(e2, sizeof(e2), vc->name));
                    goto done;
                }
                if (isnan(x)) {
                    lab = NF_TAB_UNKNOWN;
                    z[j][r] = 0.0f;
                } else {
                    int bin = 0; /* np.digitize(x, b) = #{k : b_k <= x} */
                    while (bin <= NF_TAB_N_BINS && vc->bounds[bin] <= x) bin++;
                    lab = vc->labels[bin];
                    double s = (x - vc->mean) / vc->scale;
                    s = s < -NF_TAB_Z_MAX ? -NF_TAB_Z_MAX : s > NF_TAB_Z_MAX ? NF_TAB_Z_MAX : s;
                    z[j][r] = (float) s;
                }
                cell[j][r] = nf_cell("Predictive Feature: ", vc->norm, "\nFeature Value: ", lab);
                if (!cell[j][r]) {
                    rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                    goto done;
                }
            }
        } else {
            const int dt = nf_col_dtype(c, B);
            for (int64_t r = 0; r < B; r++) {
                char b[64];
                char * val = strdup(nf_col_text(c, dt, r, b, sizeof(b)));
                if (val) nf_replace_ctrl(val);
                cell[j][r] = val ? nf_cell("Predictive Feature: ", vc->norm, "\nFeature Value: ", val) : NULL;
                free(val);
                if (!cell[j][r]) {
                    rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                    goto done;
                }
            }
        }
    }
    for (int64_t k = 0; k < C; k++)
        if (!tg[k]) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
    cJSON_AddStringToObject(d, "format", "nofall-tabstar-cells/1");
    cJSON_AddStringToObject(d, "task", v->regression ? "regression" : "classification");
    cJSON_AddNumberToObject(d, "n_target_tokens", (double) C);
    cJSON_AddNumberToObject(d, "n_rows", (double) B);
    cJSON_AddNumberToObject(d, "n_cells", (double) S);
    cJSON * xt = cJSON_AddArrayToObject(d, "x_txt");
    cJSON * xn = cJSON_AddArrayToObject(d, "x_num");
    cJSON * cl = cJSON_AddArrayToObject(d, "classes");
    for (int64_t k = 0; k < C && !v->regression; k++) cJSON_AddItemToArray(cl, cJSON_CreateString(v->classes[k]));
    for (int64_t r = 0; r < B; r++) {
        cJSON * rt = cJSON_CreateArray();
        cJSON * rn = cJSON_CreateArray();
        if (!rt || !rn) {
            cJSON_Delete(rt);
            cJSON_Delete(rn);
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            goto done;
        }
        cJSON_AddItemToArray(xt, rt);
        cJSON_AddItemToArray(xn, rn);
        for (int64_t k = 0; k < C; k++) {
            cJSON_AddItemToArray(rt, cJSON_CreateString(tg[k]));
            cJSON_AddItemToArray(rn, cJSON_CreateNumber(0));
        }
        for (int j = 0; j < v->n_out; j++) {
            cJSON_AddItemToArray(rt, cJSON_CreateString(cell[j][r]));
            cJSON_AddItemToArray(rn, cJSON_CreateNumber((double) z[j][r]));
        }
    }
done:
    for (int j = 0; cell && j < v->n_out; j++) {
        for (int64_t r = 0; cell[j] && r < B; r++) free(cell[j][r]);
        free(cell[j]);
    }
    for (int j = 0; z && j < v->n_out; j++) free(z[j]);
    for (int64_t k = 0; tg && k < C; k++) free(tg[k]);
    free(cell);
    free(z);
    free(tg);
    free(num);
    free(src);
    if (rc != NF_OK)
        cJSON_Delete(d);
    else
        *out = d;
    return rc;
}
