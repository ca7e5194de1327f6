/* test-csv-types.c -- the CSV reader's column types against pandas.read_csv
 * (tests/fixtures/csv-types/columns.tsv, made by reference/csv_types_fixtures.py
 * with the pandas AutoGluon runs on): every column of the fixture, written as a
 * quoted one-column CSV, gets pandas' dtype -- int64 / uint64 / float64 / bool,
 * text with the NA strings missing, text with them kept as written, text of
 * Python bools -- and bool fields read True / False as Python prints them;
 * header rows with empty and duplicate names get pandas' column names
 * (headers.tsv). */
#include "io/nf-io.h"
#include "nf-test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* what nofall's typing says, in the fixture's words */
static const char * nf_dtype(const struct nf_csv_column * c, int64_t n, int any_na) {
    if (c->type == NF_CSV_INT) {
        for (int64_t r = 0; r < n; r++) { /* pandas' uint64: a value above INT64_MAX */
            const char * s = c->raw[r];
            while (*s == ' ') s++;
            if (*s != '-' && strtoull(s, NULL, 10) > (unsigned long long) INT64_MAX) return "uint64";
        }
        return "int64";
    }
    if (c->type == NF_CSV_FLOAT) return "float64";
    if (c->type == NF_CSV_BOOL) return "bool";
    if (c->bools) return "object_bool";
    if (!any_na) return "object_any";
    return c->n_missing ? "object" : "object_raw";
}

/* Wide headers in linear time: n columns, a third named "d" (renamed d.1,
 * d.2, ...), a third empty ("Unnamed: i"), parsed and every name looked up
 * (nf__csv_find); the best of three in process CPU time, so other processes
 * on the machine do not count. -1 on a wrong result. */
static double nf_wide_seconds(int n) {
    size_t cap = (size_t) n * 16 + 64, k = 0;
    char * csv = malloc(cap);
    if (!csv) return -1;
    for (int i = 0; i < n; i++)
        k += (size_t) snprintf(csv + k, cap - k, "%s%s", i ? "," : "", i % 3 == 0 ? "d" : i % 3 == 1 ? "" : "c");
    csv[k++] = '\n';
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < n; i++) k += (size_t) snprintf(csv + k, cap - k, "%s", i + 1 < n ? "1," : "1\n");
    double best = -1;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        struct nf_csv_table t;
        nf_err err = {0};
        int ok = nf__csv_parse(csv, k, "wide.csv", &t, &err) == NF_OK && t.n_cols == n;
        CHECK(ok, "wide header of %d columns: %s", n, err.msg);
        for (int i = 0; ok && i < n; i++) ok = nf__csv_find(&t, t.cols[i].name) == i;
        CHECK(ok, "wide header of %d columns: a name not found at its column", n);
        if (ok) nf__csv_free(&t);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        const double s = (double) (b.tv_sec - a.tv_sec) + 1e-9 * (double) (b.tv_nsec - a.tv_nsec);
        if (!ok)
            best = -1, rep = 3;
        else if (best < 0 || s < best)
            best = s;
    }
    free(csv);
    return best;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-csv-types FIXTURES\n");
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/columns.tsv", argv[1]);
    FILE * f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    if (!f) return 1;
    char line[4096], csv[8192];
    int cols = 0, agree = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char * want = line;
        char * p = strchr(line, '\t');
        if (!p) continue;
        *p++ = 0;
        char shown[4096];
        snprintf(shown, sizeof(shown), "%s", p);
        for (char * q = shown; *q; q++)
            if (*q == '\t') *q = '|';
        /* one quoted token per row; a second column keeps blank tokens rows */
        size_t k = (size_t) snprintf(csv, sizeof(csv), "a,b\n");
        int n = 0, any_na = 0;
        for (char * tok = p;; n++) {
            char * e = strchr(tok, '\t');
            if (e) *e = 0;
            any_na |= nf__csv_is_na(tok);
            k += (size_t) snprintf(csv + k, sizeof(csv) - k, "\"%s\",1\n", tok);
            if (!e) break;
            tok = e + 1;
        }
        n++;
        struct nf_csv_table t;
        nf_err err = {0};
        int rc = nf__csv_parse(csv, k, "columns.tsv", &t, &err);
        CHECK(rc == NF_OK && t.n_rows == n, "column %d: parse: %s", cols + 1, err.msg);
        if (rc != NF_OK) continue;
        const struct nf_csv_column * c = &t.cols[0];
        const char * got = nf_dtype(c, n, any_na);
        cols++;
        agree += strcmp(got, want) == 0;
        CHECK(strcmp(got, want) == 0, "column %d [%s]: pandas %s, nofall %s", cols, shown, want, got);
        for (int64_t r = 0; c->bools && r < n; r++)
            CHECK(c->missing[r] || strcmp(c->raw[r], "True") == 0 || strcmp(c->raw[r], "False") == 0,
                  "column %d row %lld: bool field read '%s'", cols, (long long) r + 1, c->raw[r]);
        nf__csv_free(&t);
    }
    fclose(f);
    CHECK(cols >= 500, "only %d columns in %s", cols, path);
    printf("csv types: %d of %d columns typed as pandas types them\n", agree, cols);

    /* header names: empty ones "Unnamed: i", duplicates renamed as pandas renames them */
    snprintf(path, sizeof(path), "%s/headers.tsv", argv[1]);
    f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    if (!f) return 1;
    int heads = 0, same = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char * arrow = strstr(line, "\t->\t");
        if (!arrow) continue;
        *arrow = 0;
        const char * want = arrow + 4;
        size_t k = 0;
        int n = 1;
        for (char * q = line; *q; q++) n += *q == '\t';
        /* the header, quoted; one data row */
        csv[k++] = '"';
        for (char * q = line; *q; q++)
            k += (size_t) snprintf(csv + k, sizeof(csv) - k, "%s", *q == '\t' ? "\",\"" : (char[]){*q, 0});
        k += (size_t) snprintf(csv + k, sizeof(csv) - k, "\"\n");
        for (int i = 0; i < n; i++) k += (size_t) snprintf(csv + k, sizeof(csv) - k, i ? ",1" : "1");
        k += (size_t) snprintf(csv + k, sizeof(csv) - k, "\n");
        struct nf_csv_table t;
        nf_err err = {0};
        int rc = nf__csv_parse(csv, k, "headers.tsv", &t, &err);
        heads++;
        CHECK(rc == NF_OK && t.n_cols == n, "header %d: parse: %s", heads, err.msg);
        if (rc != NF_OK) continue;
        char got[4096];
        size_t g = 0;
        got[0] = 0;
        for (int i = 0; i < t.n_cols; i++)
            g += (size_t) snprintf(got + g, sizeof(got) - g, "%s%s", i ? "\t" : "", t.cols[i].name);
        same += strcmp(got, want) == 0;
        CHECK(strcmp(got, want) == 0, "header %d: pandas [%s], nofall [%s]", heads, want, got);
        nf__csv_free(&t);
    }
    fclose(f);
    CHECK(heads >= 200, "only %d headers in %s", heads, path);
    printf("csv headers: %d of %d named as pandas names them\n", same, heads);

    /* ten times the columns in about ten times the time (a quadratic lookup
     * or renaming takes a hundred times; the bound leaves room for caches) */
    const double t1 = nf_wide_seconds(6000), t2 = nf_wide_seconds(60000);
    CHECK(t1 > 0 && t2 > 0 && t2 < 30 * t1, "wide headers: 6,000 columns %.4f s, 60,000 columns %.4f s", t1, t2);
    printf("csv wide headers: 6,000 columns %.4f s, 60,000 columns %.4f s (ratio %.1f, linear 10)\n", t1, t2, t2 / t1);
    return nf_test_done("test-csv-types");
}
