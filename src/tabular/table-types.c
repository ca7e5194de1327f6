/* table-types.c -- column types given by the user (nofall-tabular.h
 * nf_table_set_type; docs/tables.md "Column types"): what
 * pandas.read_csv(dtype={col: type}) gives AutoGluon and TabSTAR. The
 * column is converted in place: "category" and "text" become text columns
 * of the values as written, "numeric" a float64 column, "datetime" a text
 * column whose values are all ISO 8601; the type is kept on the column
 * (user_type) for the preprocessing (mitra-fit.c, tabstar-verbalize.c). */
#include "tabular-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char * const nf_type_names[] = {"", "category", "numeric", "text", "datetime"};

int nf_user_type_of(const char * name) {
    if (!name) return -1;
    for (int k = 1; k <= NF_USER_TYPE_DATETIME; k++)
        if (strcasecmp(name, nf_type_names[k]) == 0) return k;
    if (strcasecmp(name, "float") == 0 || strcasecmp(name, "float64") == 0) return NF_USER_TYPE_NUMERIC;
    return -1;
}

const char * nf_user_type_name(int type) {
    return type >= 0 && type <= NF_USER_TYPE_DATETIME ? nf_type_names[type] : "";
}

int nf_table_col_user_type(const nf_table * t, int i) {
    return t && i >= 0 && i < t->csv.n_cols ? t->csv.cols[i].user_type : NF_USER_TYPE_NONE;
}

int nf_table_set_type(nf_table * t, const char * col, const char * type, const char * origin, nf_err * err) {
    char et[512], ec[256], ev[256], eo[64];
    if (!t || !col || !type) return nf__err_set(err, NF_ERR_ARG, "nf_table_set_type: no table, column or type");
    nf__esc(et, sizeof(et), t->csv.path);
    nf__esc(ec, sizeof(ec), col);
    nf__esc(eo, sizeof(eo), origin ? origin : "column type");
    const int ut = nf_user_type_of(type);
    if (ut < 0)
        return nf__err_set(err, NF_ERR_INPUT,
                           "%s %s=%s: unknown type '%s' (category, numeric (or float), text, datetime)", eo, ec,
                           nf__esc(ev, sizeof(ev), type), ev);
    const int c = nf__csv_find(&t->csv, col);
    if (c < 0) return nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' (%s %s=%s)", et, ec, eo, ec, type);
    struct nf_csv_column * cc = &t->csv.cols[c];
    const int64_t n = t->csv.n_rows;
    if (ut == NF_USER_TYPE_NUMERIC) {
        if (cc->type == NF_CSV_INT || cc->type == NF_CSV_FLOAT) {
            cc->type = NF_CSV_FLOAT; /* int64 -> float64 (num holds the values) */
            cc->user_type = ut;
            return NF_OK;
        }
        /* text and bools: every value a number or a bool (1 / 0) (pd.to_numeric / astype(float)); checked before any change */
        double * v = malloc((size_t) (n ? n : 1) * sizeof(double));
        if (!v) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < n; r++) {
            int ii, b;
            if (cc->missing[r]) {
                v[r] = NAN;
            } else if (nf__csv_parse_number(cc->raw[r], &v[r], &ii)) {
            } else if (nf__csv_is_bool(cc->raw[r], &b)) {
                v[r] = b;
            } else {
                free(v);
                return nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s': '%s' is not a number (%s %s=%s)", et,
                                   (long long) r + 1, ec, nf__esc(ev, sizeof(ev), cc->raw[r]), eo, ec, type);
            }
        }
        memcpy(cc->num, v, (size_t) n * sizeof(double));
        free(v);
        cc->type = NF_CSV_FLOAT;
        cc->bools = 0;
        cc->user_type = ut;
        return NF_OK;
    }
    if (ut == NF_USER_TYPE_DATETIME) {
        for (int64_t r = 0; r < n; r++) {
            int64_t ns;
            if (cc->missing[r]) continue;
            if (cc->type != NF_CSV_TEXT || !nf__iso_datetime_ns(cc->raw[r], &ns))
                return nf__err_set(err, NF_ERR_INPUT,
                                   "%s: row %lld, column '%s': '%s' is not a date nofall reads (%s %s=%s): write the "
                                   "dates as ISO 8601 (YYYY-MM-DD[ HH:MM[:SS[.f]]][Z|+HH:MM])",
                                   et, (long long) r + 1, ec, nf__esc(ev, sizeof(ev), cc->raw[r]), eo, ec, type);
        }
    }
    /* category, text, datetime: a text column of the values as written */
    for (int64_t r = 0; r < n; r++) cc->num[r] = NAN;
    cc->type = NF_CSV_TEXT;
    cc->bools = 0;
    cc->user_type = ut;
    return NF_OK;
}

int nf_table_set_type_spec(nf_table * t, const char * spec, int must_exist, const char * origin, nf_err * err) {
    char eo[64], es[512];
    if (!t || !spec) return nf__err_set(err, NF_ERR_ARG, "nf_table_set_type_spec: no table or spec");
    const char * eq = strrchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return nf__err_set(err, NF_ERR_INPUT, "%s '%s': expected COLUMN=TYPE (category, numeric, text, datetime)",
                           nf__esc(eo, sizeof(eo), origin ? origin : "column type"), nf__esc(es, sizeof(es), spec));
    char * col = strndup(spec, (size_t) (eq - spec));
    if (!col) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = NF_OK;
    if (must_exist || nf__csv_find(&t->csv, col) >= 0)
        rc = nf_table_set_type(t, col, eq + 1, origin, err);
    else if (nf_user_type_of(eq + 1) < 0)
        rc = nf_table_set_type(t, col, eq + 1, origin, err); /* the unknown type's message */
    free(col);
    return rc;
}
