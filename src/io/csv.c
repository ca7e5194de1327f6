/* csv.c -- CSV tables (RFC 4180, via Debian's libcsv) into typed columns.
 *
 * The file is read whole (size-capped) and checked as UTF-8 field by field;
 * the first record is the header; every record must have as many fields as
 * the header. Columns are typed the way pandas.read_csv types them with its
 * defaults (nf_csv_type_column): int64 / uint64, float64, bool, or text.
 * Missing = pandas' default NA strings (the empty field among them).
 * Blank lines are skipped and a UTF-8 BOM is dropped, as pandas does. */
#include "nf-io.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NF_CSV_MAX_BYTES ((size_t) 1 << 31)
#define NF_CSV_MAX_COLS  100000

/* pandas' default na_values (pandas/_libs/parsers.pyx STR_NA_VALUES) */
static const char * const nf_csv_na[] = {
    "",     "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A",  "NA",       "NULL", "NaN",     "None",     "n/a",  "nan",  "null",
};

int nf__csv_is_na(const char * s) {
    for (size_t i = 0; i < sizeof(nf_csv_na) / sizeof(nf_csv_na[0]); i++)
        if (strcmp(s, nf_csv_na[i]) == 0) return 1;
    return 0;
}

/* A number as pandas reads one: decimal (no hex), optional exponent, blanks
 * (isspace) around it allowed; inf / infinity with a sign or none, exactly
 * (no blanks); a finite literal that overflows a double (1e400) is no
 * number. *is_int: an integer literal that fits int64. */
#define NF_CSV_SPACE " \t\n\v\f\r" /* pandas' isspace_ascii */
int nf__csv_parse_number(const char * s, double * out, int * is_int) {
    {
        const char * p = s + (*s == '+' || *s == '-');
        if (strcasecmp(p, "inf") == 0 || strcasecmp(p, "infinity") == 0) { /* exactly: no blanks */
            *out = (*s == '-') ? -INFINITY : INFINITY;
            *is_int = 0;
            return 1;
        }
    }
    while (*s && strchr(NF_CSV_SPACE, *s)) s++;
    const char * p = s;
    if (*p == '+' || *p == '-') p++;
    int digits = 0, intlit = 1;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        intlit = 0;
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        intlit = 0;
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    const char * end = p;
    while (*p && strchr(NF_CSV_SPACE, *p)) p++;
    if (*p) return 0;
    char buf[512];
    size_t n = (size_t) (end - s);
    if (n >= sizeof(buf)) {
        intlit = 0; /* a long literal: strtod on a copy of it all */
        char * c = malloc(n + 1);
        if (!c) return 0;
        memcpy(c, s, n);
        c[n] = 0;
        errno = 0;
        *out = strtod(c, NULL);
        free(c);
        if (errno == ERANGE && isinf(*out)) return 0; /* overflow (1e400): pandas reads no number */
    } else {
        memcpy(buf, s, n);
        buf[n] = 0;
        if (intlit) {
            errno = 0;
            long long v = strtoll(buf, NULL, 10);
            if (errno == ERANGE)
                intlit = 0;
            else
                *out = (double) v;
        }
        if (!intlit) {
            errno = 0;
            *out = strtod(buf, NULL);
            if (errno == ERANGE && isinf(*out)) return 0;
        }
    }
    *is_int = intlit;
    return 1;
}

struct nf_csv_state {
    const char * name;
    struct nf_csv_table * t;
    /* the record being read */
    char ** fields;
    int n_fields, cap_fields;
    int64_t record; /* 0 = header */
    int64_t cap_rows;
    int failed;
    nf_err * err;
};

/* the first failure wins; later callbacks do nothing */
static void nf_csv_fail(struct nf_csv_state * st, int code, const char * msg) {
    if (st->failed) return;
    st->failed = 1;
    nf__err_set(st->err, code, "%s", msg);
}

static void nf_csv_field(void * s, size_t len, void * data) {
    struct nf_csv_state * st = data;
    if (st->failed) return;
    if (st->n_fields == st->cap_fields) {
        int nc = st->cap_fields ? st->cap_fields * 2 : 16;
        if (nc > NF_CSV_MAX_COLS + 1) nc = NF_CSV_MAX_COLS + 1;
        if (st->n_fields >= nc) {
            char m[600];
            snprintf(m, sizeof(m), "%s: row %lld: more than %d fields", st->name, (long long) st->record,
                     NF_CSV_MAX_COLS);
            nf_csv_fail(st, NF_ERR_FORMAT, m);
            return;
        }
        char ** f = realloc(st->fields, (size_t) nc * sizeof(char *));
        if (!f) {
            nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
            return;
        }
        st->fields = f;
        st->cap_fields = nc;
    }
    const char * src = s ? (const char *) s : "";
    if (!nf__utf8_valid(src, len) || memchr(src, 0, len)) {
        const char * col = (st->record > 0 && st->n_fields < st->t->n_cols) ? st->t->cols[st->n_fields].name : NULL;
        char ec[256], msg[900];
        if (st->record == 0)
            snprintf(msg, sizeof(msg), "%s: header, column %d: not valid UTF-8", st->name, st->n_fields + 1);
        else
            snprintf(msg, sizeof(msg), "%s: row %lld, column %d ('%s'): not valid UTF-8 (or a NUL byte)", st->name,
                     (long long) st->record, st->n_fields + 1, col ? nf__esc(ec, sizeof(ec), col) : "?");
        nf_csv_fail(st, NF_ERR_FORMAT, msg);
        return;
    }
    char * c = malloc(len + 1);
    if (!c) {
        nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
        return;
    }
    memcpy(c, src, len);
    c[len] = 0;
    st->fields[st->n_fields++] = c;
}

/* libcsv trims spaces and tabs around unquoted fields by default; pandas does not */
static int nf_csv_no_space(unsigned char c) {
    (void) c;
    return 0;
}

static void nf_csv_drop_fields(struct nf_csv_state * st) {
    for (int i = 0; i < st->n_fields; i++) free(st->fields[i]);
    st->n_fields = 0;
}

/* Duplicate header names renamed as pandas' C parser renames them (its header
 * mangling): named columns first, then the "Unnamed: i" ones, each name seen
 * before gets ".k" with k its count so far, stepping past names the header
 * already holds (a, a, a.1 -> a, a.2, a.1). Checked against pandas 2.3 on
 * random headers. Linear in the header's size: both name sets are hashed. */

/* a set of owned names, each with an int (a count, or unused) */
struct nf_csv_names {
    struct nf__smap map; /* name -> slot */
    char ** key;
    int * val;
    int n, cap;
};
static void nf_csv_names_free(struct nf_csv_names * s) {
    for (int k = 0; k < s->n; k++) free(s->key[k]);
    free(s->key);
    free(s->val);
    nf__smap_free(&s->map);
}
static int nf_csv_names_find(const struct nf_csv_names * s, const char * name) {
    return nf__smap_get(&s->map, name, strlen(name));
}
/* the slot of name, added with value 0 when absent; -1 out of memory */
static int nf_csv_names_add(struct nf_csv_names * s, const char * name) {
    const int k = nf_csv_names_find(s, name);
    if (k >= 0) return k;
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 64;
        char ** key = realloc(s->key, (size_t) cap * sizeof(*key));
        if (!key) return -1;
        s->key = key;
        int * val = realloc(s->val, (size_t) cap * sizeof(*val));
        if (!val) return -1;
        s->val = val;
        s->cap = cap;
    }
    char * c = strdup(name);
    if (!c) return -1;
    if (nf__smap_put(&s->map, c, strlen(c), s->n) != 0) {
        free(c);
        return -1;
    }
    s->key[s->n] = c;
    s->val[s->n] = 0;
    return s->n++;
}

/* pandas' loop over one column: counts[old] steps on until "old.k" is neither
 * in the header nor counted; 0 or the new name (*renamed) */
static int nf_csv_mangle_one(struct nf_csv_names * counts, const struct nf_csv_names * header, const char * old,
                             char ** renamed) {
    const int ko = nf_csv_names_find(counts, old);
    int cur = ko >= 0 ? counts->val[ko] : 0;
    char * name = NULL;
    while (cur > 0) {
        counts->val[ko] = cur + 1;
        free(name);
        const size_t len = strlen(old) + 24;
        if (!(name = malloc(len))) return -1;
        snprintf(name, len, "%s.%d", old, cur);
        if (nf_csv_names_find(header, name) >= 0) {
            cur++;
        } else {
            const int k = nf_csv_names_find(counts, name);
            cur = k >= 0 ? counts->val[k] : 0;
        }
    }
    const int kc = nf_csv_names_add(counts, name ? name : old);
    if (kc < 0) {
        free(name);
        return -1;
    }
    counts->val[kc] = cur + 1;
    *renamed = name;
    return 0;
}

static void nf_csv_mangle_dupes(struct nf_csv_state * st, const char * unnamed) {
    struct nf_csv_table * t = st->t;
    const int n = t->n_cols;
    /* the header's names as they stand (a renamed column's old name stays:
     * an earlier column holds it, which is why it was renamed) */
    struct nf_csv_names header = {0}, counts = {0};
    int ok = 1, dup = 0;
    for (int i = 0; i < n && ok; i++) {
        const int before = header.n;
        ok = nf_csv_names_add(&header, t->cols[i].name) >= 0;
        dup |= ok && header.n == before;
    }
    for (int pass = 0; pass < 2 && ok && dup; pass++) {
        for (int i = 0; i < n && ok; i++) {
            if (unnamed[i] != pass) continue;
            char * name = NULL;
            ok = nf_csv_mangle_one(&counts, &header, t->cols[i].name, &name) == 0;
            if (ok && name) {
                ok = nf_csv_names_add(&header, name) >= 0;
                free(t->cols[i].name);
                t->cols[i].name = name;
            }
        }
    }
    nf_csv_names_free(&header);
    nf_csv_names_free(&counts);
    if (!ok) nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
}

static void nf_csv_record(int c, void * data) {
    struct nf_csv_state * st = data;
    (void) c;
    struct nf_csv_table * t = st->t;
    if (st->failed) {
        nf_csv_drop_fields(st);
        return;
    }
    /* a blank line (one empty field): skipped, as pandas does */
    if (st->n_fields == 1 && st->fields[0][0] == 0) {
        nf_csv_drop_fields(st);
        return;
    }
    if (st->record == 0) {
        t->n_cols = st->n_fields;
        t->cols = calloc((size_t) t->n_cols, sizeof(*t->cols));
        if (!t->cols) {
            nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
            nf_csv_drop_fields(st);
            return;
        }
        char * unnamed = calloc((size_t) t->n_cols, 1);
        for (int i = 0; i < t->n_cols; i++) {
            char * nm = st->fields[i];
            if (!nm[0]) { /* pandas names an empty header "Unnamed: i" */
                free(nm);
                nm = malloc(32);
                if (nm) snprintf(nm, 32, "Unnamed: %d", i);
                if (unnamed) unnamed[i] = 1;
            }
            t->cols[i].name = nm;
            st->fields[i] = NULL;
            if (!nm) nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
        }
        if (!unnamed) nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
        if (!st->failed) nf_csv_mangle_dupes(st, unnamed);
        free(unnamed);
        st->n_fields = 0;
        st->record = 1;
        return;
    }
    if (st->n_fields != t->n_cols) {
        char m[900];
        snprintf(m, sizeof(m), "%s: row %lld has %d fields, the header has %d", st->name, (long long) st->record,
                 st->n_fields, t->n_cols);
        nf_csv_fail(st, NF_ERR_FORMAT, m);
        nf_csv_drop_fields(st);
        return;
    }
    if (t->n_rows == st->cap_rows) {
        int64_t nc = st->cap_rows ? st->cap_rows * 2 : 64;
        for (int i = 0; i < t->n_cols; i++) {
            char ** r = realloc(t->cols[i].raw, (size_t) nc * sizeof(char *));
            if (!r) {
                nf_csv_fail(st, NF_ERR_NOMEM, "out of memory reading a CSV file");
                nf_csv_drop_fields(st);
                return;
            }
            t->cols[i].raw = r;
        }
        st->cap_rows = nc;
    }
    for (int i = 0; i < t->n_cols; i++) t->cols[i].raw[t->n_rows] = st->fields[i];
    st->n_fields = 0;
    t->n_rows++;
    st->record++;
}

/* One token as pandas' tokenizer reads an integer (str_to_int64 /
 * str_to_uint64): blanks around it, a sign, ASCII digits only. Overflow is
 * seen digit by digit, before the rest of the token is looked at, as pandas
 * does. Unsigned: a leading '-' only notes a signed value (*neg) and stops;
 * a value above INT64_MAX is noted in *big. */
enum { NF_CSV_TOK_INT, NF_CSV_TOK_INVALID, NF_CSV_TOK_OVERFLOW };
static int nf_csv_int_token(const char * s, int is_unsigned, int * neg, int * big) {
    while (*s && strchr(NF_CSV_SPACE, *s)) s++;
    int minus = 0;
    if (*s == '-') {
        if (is_unsigned) {
            *neg = 1;
            return NF_CSV_TOK_INT;
        }
        minus = 1;
        s++;
    } else if (*s == '+') {
        s++;
    }
    if (!(*s >= '0' && *s <= '9')) return NF_CSV_TOK_INVALID;
    const uint64_t lim = is_unsigned ? UINT64_MAX : minus ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        const uint64_t d = (uint64_t) (*s - '0');
        if (v > (lim - d) / 10) return NF_CSV_TOK_OVERFLOW;
        v = v * 10 + d;
    }
    while (*s && strchr(NF_CSV_SPACE, *s)) s++;
    if (*s) return NF_CSV_TOK_INVALID;
    if (is_unsigned && v > (uint64_t) INT64_MAX) *big = 1;
    return NF_CSV_TOK_INT;
}

int nf__csv_is_bool(const char * s, int * v) {
    static const char *const t[] = {"True", "TRUE", "true"}, *const f[] = {"False", "FALSE", "false"};
    for (int i = 0; i < 3; i++) {
        if (strcmp(s, t[i]) == 0) return *v = 1, 1;
        if (strcmp(s, f[i]) == 0) return *v = 0, 1;
    }
    return 0;
}

/* pandas.read_csv's type of a column (the C parser of pandas 2.x, with its
 * defaults), tried in its order:
 *   int64     every non-missing token an integer; with missing ones float64.
 *             The first token (in row order) that is not an integer sends the
 *             column on to float64; the first that overflows int64, to
 *   uint64    tokens read as unsigned, a '-' token only noted: the first that
 *             is not an integer sends the column on to float64, one that
 *             overflows uint64 makes it text; values above INT64_MAX together
 *             with a negative or a missing value make it text with the NA
 *             strings kept as written (pandas keeps the column "as is");
 *             a negative value alone makes it text;
 *   float64   every non-missing token a number that does not overflow
 *             (1e400 does: text; 1e-400 is 0; inf / -Infinity are numbers);
 *   bool      every non-missing token True/TRUE/true/False/FALSE/false: bool
 *             without missing values, else text holding Python bools;
 *   object    text.
 * The model was checked against pandas 2.3 on random columns of tricky
 * tokens (uint64 and int64 limits, signs, blanks, NA strings, overflow). */
static void nf_csv_type_column(struct nf_csv_column * col, int64_t n) {
    int64_t r;
    int neg = 0, big = 0, tok = NF_CSV_TOK_INT;
    for (r = 0; r < n && tok == NF_CSV_TOK_INT; r++)
        if (!col->missing[r]) tok = nf_csv_int_token(col->raw[r], 0, &neg, &big);
    if (tok == NF_CSV_TOK_INT) {
        col->type = col->n_missing ? NF_CSV_FLOAT : NF_CSV_INT;
        return;
    }
    if (tok == NF_CSV_TOK_OVERFLOW) {
        tok = NF_CSV_TOK_INT;
        for (r = 0; r < n && tok == NF_CSV_TOK_INT; r++)
            if (!col->missing[r]) tok = nf_csv_int_token(col->raw[r], 1, &neg, &big);
        if (tok == NF_CSV_TOK_OVERFLOW) return; /* text */
        if (tok == NF_CSV_TOK_INT) {
            if (big && (neg || col->n_missing)) { /* text, NA strings as written */
                memset(col->missing, 0, (size_t) n);
                col->n_missing = 0;
            } else if (!neg) {
                col->type = NF_CSV_INT; /* uint64 */
            }
            return;
        }
    }
    double d;
    int ii;
    for (r = 0; r < n; r++)
        if (!col->missing[r] && !nf__csv_parse_number(col->raw[r], &d, &ii)) break;
    if (r == n) {
        col->type = NF_CSV_FLOAT;
        return;
    }
    int b;
    for (r = 0; r < n; r++)
        if (!col->missing[r] && !nf__csv_is_bool(col->raw[r], &b)) return; /* text */
    col->bools = 1;
    col->type = col->n_missing ? NF_CSV_TEXT : NF_CSV_BOOL;
}

static int nf_csv_type_columns(struct nf_csv_table * t, const char * name, nf_err * err) {
    const int64_t n = t->n_rows;
    for (int c = 0; c < t->n_cols; c++) {
        struct nf_csv_column * col = &t->cols[c];
        col->num = malloc((size_t) (n ? n : 1) * sizeof(double));
        col->missing = calloc((size_t) (n ? n : 1), 1);
        if (!col->num || !col->missing) return nf__err_set(err, NF_ERR_NOMEM, "out of memory reading %s", name);
        for (int64_t r = 0; r < n; r++) {
            col->num[r] = NAN;
            if (nf__csv_is_na(col->raw[r])) {
                col->missing[r] = 1;
                col->n_missing++;
            }
        }
        col->type = NF_CSV_TEXT;
        nf_csv_type_column(col, n);
        if (col->bools) {
            /* bools as Python prints them: True / False */
            for (int64_t r = 0; r < n; r++) {
                int b;
                if (col->missing[r] || !nf__csv_is_bool(col->raw[r], &b)) continue;
                char * s = strdup(b ? "True" : "False");
                if (!s) return nf__err_set(err, NF_ERR_NOMEM, "out of memory reading %s", name);
                free(col->raw[r]);
                col->raw[r] = s;
                col->num[r] = b;
            }
        } else if (col->type != NF_CSV_TEXT) {
            int ii;
            for (int64_t r = 0; r < n; r++)
                if (!col->missing[r]) nf__csv_parse_number(col->raw[r], &col->num[r], &ii);
        }
    }
    return NF_OK;
}

int nf__csv_parse(const char * buf, size_t len, const char * name, struct nf_csv_table * t, nf_err * err) {
    return nf__csv_parse_sep(buf, len, name, ',', t, err);
}

int nf__csv_sep_of(const char * path) {
    const size_t n = strlen(path) - nf__compression_ext_len(path);
    return n > 4 && strncasecmp(path + n - 4, ".tsv", 4) == 0 ? '\t' : ',';
}

int nf__csv_parse_sep(const char * buf, size_t len, const char * name, int sep, struct nf_csv_table * t, nf_err * err) {
    memset(t, 0, sizeof(*t));
    snprintf(t->path, sizeof(t->path), "%s", name);
    if (len >= 3 && (unsigned char) buf[0] == 0xEF && (unsigned char) buf[1] == 0xBB &&
        (unsigned char) buf[2] == 0xBF) {
        buf += 3;
        len -= 3;
    }
    char en[512];
    nf__esc(en, sizeof(en), name);
    size_t k = 0;
    while (k < len && (buf[k] == '\n' || buf[k] == '\r')) k++;
    if (k == len) return nf__err_set(err, NF_ERR_FORMAT, "%s: empty file (no header row)", en);
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
        return nf__err_set(err, NF_ERR_NOMEM, "csv_init failed");
    csv_set_space_func(&p, nf_csv_no_space); /* blanks are part of a field, as pandas keeps them */
    csv_set_delim(&p, (unsigned char) sep);
    struct nf_csv_state st = {.name = en, .t = t, .err = err};
    size_t done = csv_parse(&p, buf, len, nf_csv_field, nf_csv_record, &st);
    int perr = done != len ? csv_error(&p) : 0;
    if (!perr && csv_fini(&p, nf_csv_field, nf_csv_record, &st) != 0) perr = csv_error(&p);
    csv_free(&p);
    nf_csv_drop_fields(&st);
    free(st.fields);
    if (!st.failed && perr) {
        char m[900];
        snprintf(m, sizeof(m), "%s: row %lld: malformed CSV (%s)", en, (long long) st.record, csv_strerror(perr));
        nf_csv_fail(&st, NF_ERR_FORMAT, m);
    }
    if (!st.failed && st.record == 0) {
        char m[600];
        snprintf(m, sizeof(m), "%s: empty file (no header row)", en);
        nf_csv_fail(&st, NF_ERR_FORMAT, m);
    }
    if (!st.failed && nf_csv_type_columns(t, en, err) != NF_OK) st.failed = 1;
    if (st.failed) {
        nf__csv_free(t);
        return err->code ? err->code : NF_ERR_FORMAT;
    }
    for (int c = 0; c < t->n_cols; c++) nf__csv_index_add(t, c);
    return NF_OK;
}

int nf__csv_read(const char * path, struct nf_csv_table * t, nf_err * err) { return nf__csv_read_sep(path, 0, t, err); }

int nf__csv_read_sep(const char * path, int sep, struct nf_csv_table * t, nf_err * err) {
    char * data = NULL;
    size_t len = 0;
    memset(t, 0, sizeof(*t));
    NF_TRY(nf__file_read_decompressed(path, &data, &len, NF_CSV_MAX_BYTES, err));
    int rc = nf__csv_parse_sep(data, len, path, sep ? sep : nf__csv_sep_of(path), t, err);
    free(data);
    return rc;
}

void nf__csv_index_add(struct nf_csv_table * t, int col) {
    if (t->index.n == (size_t) col && nf__smap_put(&t->index, t->cols[col].name, strlen(t->cols[col].name), col) != 0)
        nf__smap_free(&t->index); /* out of memory (or a name twice): nf__csv_find scans */
}

int nf__csv_find(const struct nf_csv_table * t, const char * name) {
    if (t->n_cols > 0 && t->index.n == (size_t) t->n_cols) return nf__smap_get(&t->index, name, strlen(name));
    for (int i = 0; i < t->n_cols; i++)
        if (strcmp(t->cols[i].name, name) == 0) return i;
    return -1;
}

void nf__csv_free(struct nf_csv_table * t) {
    if (t->cols) {
        for (int c = 0; c < t->n_cols; c++) {
            struct nf_csv_column * col = &t->cols[c];
            if (col->raw)
                for (int64_t r = 0; r < t->n_rows; r++) free(col->raw[r]);
            free(col->raw);
            free(col->name);
            free(col->num);
            free(col->missing);
        }
    }
    free(t->cols);
    nf__smap_free(&t->index);
    memset(t, 0, sizeof(*t));
}
