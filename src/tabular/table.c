/* table.c -- nf_table: a CSV file read as pandas.read_csv types it, or
 * columns added one by one (the Python package's DataFrames and arrays).
 * Every column keeps the fields as text (raw) too: the numeric ones as the
 * shortest text that reads back as the same double, as a CSV would hold it. */
#include "tabular-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char * nf_column_type_name(int type) {
    return type == NF_COLUMN_INT64 ? "int64" : type == NF_COLUMN_FLOAT64 ? "float64" : "object";
}

int nf_table_read_csv(const char * path, nf_table ** out, nf_err * err) { return nf_table_read(path, NULL, out, err); }

int nf_table_read(const char * path, const struct nf_table_read_opts * o, nf_table ** out, nf_err * err) {
    *out = NULL;
    if (!path) return nf__err_set(err, NF_ERR_ARG, "nf_table_read: no path");
    const int sep = o ? o->sep : 0;
    if (sep < 0 || sep > 127 || sep == '"' || sep == '\n' || sep == '\r')
        return nf__err_set(err, NF_ERR_ARG, "%s: the separator must be one ASCII character, not a quote or a line end",
                           path);
    nf_table * t = calloc(1, sizeof(*t));
    if (!t) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = nf__csv_read_sep(path, sep, &t->csv, err);
    if (rc != NF_OK) {
        free(t);
        return rc;
    }
    *out = t;
    return NF_OK;
}

int nf_table_new(const char * name, int64_t n_rows, nf_table ** out, nf_err * err) {
    *out = NULL;
    if (n_rows < 0) return nf__err_set(err, NF_ERR_ARG, "nf_table_new: %lld rows", (long long) n_rows);
    nf_table * t = calloc(1, sizeof(*t));
    if (!t) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    snprintf(t->csv.path, sizeof(t->csv.path), "%s", name ? name : "table");
    t->csv.n_rows = n_rows;
    *out = t;
    return NF_OK;
}

void nf_table_free(nf_table * t) {
    if (!t) return;
    nf__csv_free(&t->csv);
    free(t);
}

int64_t nf_table_n_rows(const nf_table * t) { return t->csv.n_rows; }
int nf_table_n_cols(const nf_table * t) { return t->csv.n_cols; }
const char * nf_table_col_name(const nf_table * t, int i) {
    return i >= 0 && i < t->csv.n_cols ? t->csv.cols[i].name : NULL;
}
int nf_table_col_type(const nf_table * t, int i) {
    if (i < 0 || i >= t->csv.n_cols) return -1;
    const enum nf_csv_type ty = t->csv.cols[i].type;
    return ty == NF_CSV_INT || ty == NF_CSV_BOOL ? NF_COLUMN_INT64
           : ty == NF_CSV_FLOAT                  ? NF_COLUMN_FLOAT64
                                                 : NF_COLUMN_TEXT;
}
int nf_table_find(const nf_table * t, const char * name) { return nf__csv_find(&t->csv, name); }

static void nf_col_release(struct nf_csv_column * c, int64_t n) {
    if (c->raw)
        for (int64_t r = 0; r < n; r++) free(c->raw[r]);
    free(c->raw);
    free(c->name);
    free(c->num);
    free(c->missing);
    memset(c, 0, sizeof(*c));
}

/* a new column slot, its name checked and copied, its arrays allocated */
static int nf_table_new_col(nf_table * t, const char * name, struct nf_csv_column ** out, nf_err * err) {
    char et[512], en[256];
    nf__esc(et, sizeof(et), t->csv.path);
    if (!name) return nf__err_set(err, NF_ERR_ARG, "%s: a column without a name", et);
    if (!nf__utf8_valid(name, strlen(name)))
        return nf__err_set(err, NF_ERR_INPUT, "%s: column name '%s' is not valid UTF-8", et,
                           nf__esc(en, sizeof(en), name));
    if (nf__csv_find(&t->csv, name) >= 0)
        return nf__err_set(err, NF_ERR_INPUT, "%s: column '%s' twice", et, nf__esc(en, sizeof(en), name));
    struct nf_csv_column * cols = realloc(t->csv.cols, (size_t) (t->csv.n_cols + 1) * sizeof(*cols));
    if (!cols) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    t->csv.cols = cols;
    struct nf_csv_column * c = &cols[t->csv.n_cols];
    memset(c, 0, sizeof(*c));
    const size_t n = (size_t) (t->csv.n_rows ? t->csv.n_rows : 1);
    c->name = strdup(name);
    c->raw = calloc(n, sizeof(char *));
    c->num = malloc(n * sizeof(double));
    c->missing = calloc(n, 1);
    if (!c->name || !c->raw || !c->num || !c->missing) {
        nf_col_release(c, 0);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return NF_OK;
}

/* the shortest %.*g text that reads back as v */
static void nf_fmt_double(char * buf, size_t n, double v) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* a new column's end: counted in the table on success, released on failure */
static int nf_col_done(nf_table * t, struct nf_csv_column * c, int rc) {
    if (rc != NF_OK) {
        nf_col_release(c, t->csv.n_rows);
        return rc;
    }
    nf__csv_index_add(&t->csv, t->csv.n_cols++);
    return NF_OK;
}

int nf_table_add_numeric(nf_table * t, const char * name, const double * values, int is_int, nf_err * err) {
    struct nf_csv_column * c;
    const int64_t n = t->csv.n_rows;
    char et[512], en[256];
    if (!values && n) return nf__err_set(err, NF_ERR_ARG, "nf_table_add_numeric: no values");
    NF_TRY(nf_table_new_col(t, name, &c, err));
    int rc = NF_OK;
    c->type = is_int ? NF_CSV_INT : NF_CSV_FLOAT;
    for (int64_t r = 0; r < n && rc == NF_OK; r++) {
        const double v = values[r];
        char b[64];
        c->num[r] = v;
        if (isnan(v)) {
            if (is_int)
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s': missing value in an int64 column",
                                 nf__esc(et, sizeof(et), t->csv.path), (long long) r + 1,
                                 nf__esc(en, sizeof(en), name));
            c->missing[r] = 1;
            c->n_missing++;
            b[0] = 0;
        } else if (is_int) {
            if (!(v == floor(v) && v >= -9223372036854775808.0 && v < 18446744073709551616.0)) { /* int64 or uint64 */
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s': %.17g is not an int64 or uint64",
                                 nf__esc(et, sizeof(et), t->csv.path), (long long) r + 1, nf__esc(en, sizeof(en), name),
                                 v);
                break;
            }
            snprintf(b, sizeof(b), "%.0f", v == 0 ? 0.0 : v); /* -0.0 is 0 */
        } else if (isinf(v)) {
            snprintf(b, sizeof(b), "%s", v > 0 ? "inf" : "-inf");
        } else
            nf_fmt_double(b, sizeof(b), v);
        if (!(c->raw[r] = strdup(b))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    return nf_col_done(t, c, rc);
}

int nf_table_add_int(nf_table * t, const char * name, const void * values, int is_unsigned, nf_err * err) {
    struct nf_csv_column * c;
    const int64_t n = t->csv.n_rows;
    if (!values && n) return nf__err_set(err, NF_ERR_ARG, "nf_table_add_int: no values");
    NF_TRY(nf_table_new_col(t, name, &c, err));
    c->type = NF_CSV_INT;
    int rc = NF_OK;
    for (int64_t r = 0; r < n && rc == NF_OK; r++) {
        char b[32];
        if (is_unsigned) {
            const uint64_t v = ((const uint64_t *) values)[r];
            c->num[r] = (double) v;
            snprintf(b, sizeof(b), "%llu", (unsigned long long) v);
        } else {
            const int64_t v = ((const int64_t *) values)[r];
            c->num[r] = (double) v;
            snprintf(b, sizeof(b), "%lld", (long long) v);
        }
        if (!(c->raw[r] = strdup(b))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    return nf_col_done(t, c, rc);
}

int nf_table_add_bool(nf_table * t, const char * name, const signed char * values, nf_err * err) {
    struct nf_csv_column * c;
    const int64_t n = t->csv.n_rows;
    if (!values && n) return nf__err_set(err, NF_ERR_ARG, "nf_table_add_bool: no values");
    NF_TRY(nf_table_new_col(t, name, &c, err));
    c->bools = 1;
    for (int64_t r = 0; r < n; r++) {
        const int miss = values[r] < 0;
        c->missing[r] = (char) miss;
        c->n_missing += miss;
        c->num[r] = miss ? NAN : values[r] != 0;
        if (!(c->raw[r] = strdup(miss ? "" : values[r] ? "True" : "False"))) {
            nf_col_release(c, n);
            return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        }
    }
    c->type = c->n_missing ? NF_CSV_TEXT : NF_CSV_BOOL; /* pandas: bool, or object with NaN */
    nf__csv_index_add(&t->csv, t->csv.n_cols++);
    return NF_OK;
}

int nf_table_add_text(nf_table * t, const char * name, const char * const * values, const unsigned char * missing,
                      nf_err * err) {
    struct nf_csv_column * c;
    const int64_t n = t->csv.n_rows;
    char et[512], en[256];
    if (!values && n) return nf__err_set(err, NF_ERR_ARG, "nf_table_add_text: no values");
    NF_TRY(nf_table_new_col(t, name, &c, err));
    int rc = NF_OK;
    c->type = NF_CSV_TEXT;
    for (int64_t r = 0; r < n && rc == NF_OK; r++) {
        c->num[r] = NAN;
        const char * s = values[r];
        if (!s || (missing && missing[r])) {
            c->missing[r] = 1;
            c->n_missing++;
            s = "";
        } else if (!nf__utf8_valid(s, strlen(s))) {
            rc = nf__err_set(err, NF_ERR_INPUT, "%s: row %lld, column '%s': not valid UTF-8",
                             nf__esc(et, sizeof(et), t->csv.path), (long long) r + 1, nf__esc(en, sizeof(en), name));
            break;
        }
        if (!(c->raw[r] = strdup(s))) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    return nf_col_done(t, c, rc);
}

int nf__csv_clone(const struct nf_csv_table * src, struct nf_csv_table * dst, nf_err * err) {
    memset(dst, 0, sizeof(*dst));
    memcpy(dst->path, src->path, sizeof(dst->path));
    dst->n_rows = src->n_rows;
    dst->cols = calloc((size_t) (src->n_cols ? src->n_cols : 1), sizeof(*dst->cols));
    if (!dst->cols) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const size_t n = (size_t) (src->n_rows ? src->n_rows : 1);
    for (int i = 0; i < src->n_cols; i++) {
        const struct nf_csv_column * s = &src->cols[i];
        struct nf_csv_column * d = &dst->cols[i];
        dst->n_cols = i + 1;
        d->type = s->type;
        d->bools = s->bools;
        d->n_missing = s->n_missing;
        d->user_type = s->user_type;
        d->name = strdup(s->name);
        d->raw = calloc(n, sizeof(char *));
        d->num = malloc(n * sizeof(double));
        d->missing = malloc(n);
        if (!d->name || !d->raw || !d->num || !d->missing) goto nomem;
        memcpy(d->num, s->num, (size_t) src->n_rows * sizeof(double));
        memcpy(d->missing, s->missing, (size_t) src->n_rows);
        for (int64_t r = 0; r < src->n_rows; r++)
            if (!(d->raw[r] = strdup(s->raw[r]))) goto nomem;
    }
    for (int i = 0; i < dst->n_cols; i++) nf__csv_index_add(dst, i);
    return NF_OK;
nomem:
    nf__csv_free(dst);
    return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
}

/* ---- tables as pandas reads them (docs/tables.md) ---------------------------------- */

int nf_table_sep_hint(const nf_table * t, char * buf, size_t n) {
    if (n) buf[0] = '\0';
    if (!t || t->csv.n_cols != 1 || n == 0) return 0;
    static const char seps[] = "\t;|,";
    for (const char * s = seps; *s; s++) {
        if (!strchr(t->csv.cols[0].name, *s)) continue;
        if (*s == '\t')
            snprintf(buf, n, "; the header is one column holding tabs: a tab-separated table? --sep tab");
        else
            snprintf(buf, n, "; the header is one column holding '%c': a '%c'-separated table? --sep '%c'", *s, *s, *s);
        return 1;
    }
    return 0;
}

int nf_table_drop(nf_table * t, const char * names, int must_exist, nf_err * err) {
    if (!t || !names) return NF_OK;
    char et[512], en[256];
    nf__esc(et, sizeof(et), t->csv.path);
    char * list = strdup(names);
    if (!list) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int rc = NF_OK;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && rc == NF_OK;
         name = strtok_r(NULL, ",", &save)) {
        const int c = nf__csv_find(&t->csv, name);
        if (c < 0) {
            if (must_exist)
                rc = nf__err_set(err, NF_ERR_INPUT, "%s: no column '%s' to drop (--drop)", et,
                                 nf__esc(en, sizeof(en), name));
            continue;
        }
        nf_col_release(&t->csv.cols[c], t->csv.n_rows);
        memmove(&t->csv.cols[c], &t->csv.cols[c + 1], (size_t) (t->csv.n_cols - c - 1) * sizeof(t->csv.cols[0]));
        t->csv.n_cols--;
        nf__smap_free(&t->csv.index); /* rebuilt below: the indices moved */
        for (int k = 0; k < t->csv.n_cols; k++) nf__csv_index_add(&t->csv, k);
    }
    free(list);
    return rc;
}

int nf_table_index_like(const nf_table * t) {
    if (!t || t->csv.n_cols < 1 || t->csv.n_rows < 1) return 0;
    const struct nf_csv_column * c = &t->csv.cols[0];
    if (strcmp(c->name, "Unnamed: 0") != 0 || c->type != NF_CSV_INT) return 0;
    for (int64_t r = 0; r < t->csv.n_rows; r++)
        if (c->num[r] != (double) r) return 0;
    return 1;
}
