/* test-tabular.c -- the tables and the predictor of nofall-tabular.h: a
 * table built column by column (as the Python package builds one) gives the
 * same fit and the same outputs, bit for bit, as the same table read from a
 * CSV file; the column builders' and the mirror spec's refusals name the
 * table, row and column; nothing leaks on any path (the ASan build). */
#include "nofall-tabular.h"
#include "nf-test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char * const CSV = "num,cat,two,y\n"
                                "1.5,red,a,x\n"
                                "2.25,blue,b,z\n"
                                "NA,red,a,x\n"
                                "-4,green,b,z\n"
                                "3,blue,a,x\n"
                                "0.5,,b,z\n"
                                "7,red,a,x\n"
                                "8,green,b,z\n";

static nf_table * columns_table(nf_err * err) {
    nf_table * t = NULL;
    const double num[8] = {1.5, 2.25, NAN, -4, 3, 0.5, 7, 8};
    const char * cat[8] = {"red", "blue", "red", "green", "blue", NULL, "red", "green"};
    const char * two[8] = {"a", "b", "a", "b", "a", "b", "a", "b"};
    const char * y[8] = {"x", "z", "x", "z", "x", "z", "x", "z"};
    if (nf_table_new("cols", 8, &t, err) != NF_OK || nf_table_add_numeric(t, "num", num, 0, err) != NF_OK ||
        nf_table_add_text(t, "cat", cat, NULL, err) != NF_OK || nf_table_add_text(t, "two", two, NULL, err) != NF_OK ||
        nf_table_add_text(t, "y", y, NULL, err) != NF_OK) {
        nf_table_free(t);
        return NULL;
    }
    return t;
}

/* A wide table (n feature columns, every fifth a copy of the one before it,
 * 8 rows) fitted; the predictor's own CPU time (best of three) and *kept.
 * Duplicate features are found by hashing, so ten times the columns take
 * about ten times the time (a pairwise scan takes a hundred times). */
static double wide_fit_seconds(int n, int * kept) {
    nf_err err = {0};
    nf_table * t = NULL;
    double v[8];
    char name[32];
    uint64_t x = 88172645463325252ull;
    double best = -1;
    *kept = -1;
    if (nf_table_new("wide", 8, &t, &err) != NF_OK) return -1;
    for (int c = 0; c < n; c++) {
        if (c % 5 != 4) /* a copy of column c - 1 otherwise */
            for (int r = 0; r < 8; r++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, v[r] = (double) (x >> 40);
        snprintf(name, sizeof(name), "f%d", c);
        if (nf_table_add_numeric(t, name, v, 1, &err) != NF_OK) break;
    }
    const double y[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    int ok = nf_table_n_cols(t) == n && nf_table_add_numeric(t, "y", y, 1, &err) == NF_OK;
    CHECK(ok, "wide table of %d columns: %s", n, err.msg);
    for (int rep = 0; ok && rep < 3; rep++) {
        struct nf_predictor_opts o = {.task = NF_PREDICT_AUTO, .n_estimators = 1, .seed = 1};
        nf_predictor * p = NULL;
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        ok = nf_predictor_fit(t, "y", &o, &p, &err) == NF_OK;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        CHECK(ok, "fit on %d columns: %s", n, err.msg);
        if (ok) *kept = nf_predictor_n_kept(p);
        nf_predictor_free(p);
        const double sec = (double) (b.tv_sec - a.tv_sec) + 1e-9 * (double) (b.tv_nsec - a.tv_nsec);
        if (ok && (best < 0 || sec < best)) best = sec;
    }
    nf_table_free(t);
    return ok ? best : -1;
}

int main(void) {
    nf_err err = {0};
    const char * dir = "tabular.tmp";
    char csv[256], mdir[256];
    snprintf(csv, sizeof(csv), "%s.csv", dir);
    snprintf(mdir, sizeof(mdir), "%s-model", dir);
    FILE * f = fopen(csv, "w");
    CHECK(f && fputs(CSV, f) >= 0 && fclose(f) == 0, "write %s", csv);
    const char * keys[] = {"dim", "layers", "heads"};
    const char * vals[] = {"16", "1", "2"};
    CHECK_RC(nf_model_gen_weights("mitra", mdir, 3, 3, keys, vals, &err), NF_OK, &err);

    nf_table *a = NULL, *b = columns_table(&err);
    CHECK_RC(nf_table_read_csv(csv, &a, &err), NF_OK, &err);
    CHECK(b != NULL, "columns table: %s", err.msg);
    if (!a || !b) return 1;
    CHECK(nf_table_n_rows(a) == 8 && nf_table_n_cols(a) == 4, "csv shape");
    CHECK(nf_table_col_type(a, 0) == NF_COLUMN_FLOAT64 && nf_table_col_type(b, 1) == NF_COLUMN_TEXT, "types");

    struct nf_predictor_opts o = {.task = NF_PREDICT_AUTO, .n_estimators = 2, .seed = 9};
    nf_predictor *pa = NULL, *pb = NULL;
    CHECK_RC(nf_predictor_fit(a, "y", &o, &pa, &err), NF_OK, &err);
    CHECK_RC(nf_predictor_fit(b, "y", &o, &pb, &err), NF_OK, &err);
    if (!pa || !pb) return 1;
    nf_table_free(b); /* the predictor keeps its own copy */
    b = NULL;
    CHECK(nf_predictor_task(pa) == NF_PREDICT_CLASSIFICATION && nf_predictor_n_classes(pa) == 2, "task");
    CHECK(strcmp(nf_predictor_class_name(pb, 1), "z") == 0, "class 1: %s", nf_predictor_class_name(pb, 1));
    CHECK(nf_predictor_n_kept(pa) == nf_predictor_n_kept(pb) && nf_predictor_n_kept(pa) == 3, "kept %d / %d",
          nf_predictor_n_kept(pa), nf_predictor_n_kept(pb));
    for (int j = 0; j < nf_predictor_n_kept(pa); j++) {
        struct nf_column_info x, y;
        nf_predictor_column(pa, nf_predictor_kept(pa, j), &x);
        nf_predictor_column(pb, nf_predictor_kept(pb, j), &y);
        CHECK(strcmp(x.name, y.name) == 0 && strcmp(x.kind, y.kind) == 0, "kept %d: %s %s / %s %s", j, x.name, x.kind,
              y.name, y.kind);
    }
    for (int64_t e = 0; e < 2; e++)
        CHECK(memcmp(nf_predictor_mirror_signs(pa, e), nf_predictor_mirror_signs(pb, e), 3 * sizeof(int)) == 0,
              "signs of member %lld", (long long) e);

    nf_backend * be = NULL;
    nf_model * m = NULL;
    CHECK_RC(nf_backend_init("cpu", 0, &be, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, mdir, &m, &err), NF_OK, &err);
    double oa[16], ob[16];
    float la[32], lb[32];
    CHECK_RC(nf_predictor_predict(pa, m, a, oa, la, &err), NF_OK, &err);
    b = columns_table(&err);
    CHECK_RC(nf_predictor_predict(pb, m, b, ob, lb, &err), NF_OK, &err);
    CHECK(memcmp(oa, ob, sizeof(oa)) == 0 && memcmp(la, lb, sizeof(la)) == 0, "csv and column tables differ");
    for (int r = 0; r < 8; r++) CHECK(fabs(oa[2 * r] + oa[2 * r + 1] - 1) < 1e-12, "row %d sums", r);

    /* explicit signs: the predictor's own reproduce it; wrong ones are refused */
    const char * names[3];
    int signs[6];
    for (int j = 0; j < 3; j++) {
        struct nf_column_info ci;
        nf_predictor_column(pa, nf_predictor_kept(pa, j), &ci);
        names[j] = ci.name;
    }
    memcpy(signs, nf_predictor_mirror_signs(pa, 0), sizeof(signs));
    struct nf_mirror_spec spec = {
        .source = "spec", .n_columns = 3, .columns = names, .n_estimators = 2, .signs = signs};
    struct nf_predictor_opts os = {.mirror = &spec};
    nf_predictor * pc = NULL;
    CHECK_RC(nf_predictor_fit(a, "y", &os, &pc, &err), NF_OK, &err);
    double oc[16];
    if (pc) CHECK_RC(nf_predictor_predict(pc, m, a, oc, NULL, &err), NF_OK, &err);
    CHECK(pc && memcmp(oa, oc, sizeof(oa)) == 0, "given signs do not reproduce");
    nf_predictor_free(pc);
    pc = NULL;
    signs[4] = 0;
    CHECK_RC(nf_predictor_fit(a, "y", &os, &pc, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "spec: member 2, column");
    signs[4] = 1;
    names[1] = "nope";
    CHECK_RC(nf_predictor_fit(a, "y", &os, &pc, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "kept column 2 is 'nope'");
    CHECK(pc == NULL, "no predictor on failure");

    /* the model parts: "tabstar" fits TabSTAR's verbalizer on the same table
     * (the same classes, one member, no mirror); a type without a part is refused */
    struct nf_predictor_opts ot = {.model_type = "sptransformer"};
    CHECK_RC(nf_predictor_fit(a, "y", &ot, &pc, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "model type 'sptransformer'");
    CHECK(strcmp(nf_predictor_model_type(pa), "mitra") == 0 && nf_predictor_n_artifacts(pa) == 3, "mitra part");
    ot.model_type = "tabstar";
    CHECK_RC(nf_predictor_fit(a, "y", &ot, &pc, &err), NF_OK, &err);
    if (pc) {
        CHECK(strcmp(nf_predictor_model_type(pc), "tabstar") == 0 && nf_predictor_n_estimators(pc) == 1 &&
                  nf_predictor_mirror_signs(pc, 0) == NULL && nf_predictor_n_classes(pc) == 2 &&
                  strcmp(nf_predictor_class_name(pc, 1), nf_predictor_class_name(pa, 1)) == 0,
              "tabstar part");
        CHECK_RC(nf_predictor_check_table(pc, a, &err), NF_OK, &err);
    }
    nf_predictor_free(pc);
    pc = NULL;

    /* test tables that do not fit */
    nf_table * t = NULL;
    const double v2[2] = {1, 2};
    CHECK_RC(nf_table_new("test", 2, &t, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(t, "num", v2, 0, &err), NF_OK, &err);
    CHECK_RC(nf_predictor_check_table(pa, t, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "test: column 'cat' of the training table");
    const char * words[2] = {"1", "two"};
    CHECK_RC(nf_table_add_text(t, "numtext", words, NULL, &err), NF_OK, &err);
    nf_table_free(t);

    /* integer columns beyond 2^53, exactly (AutoGluon compares int64 / uint64 values):
     * two values one double apart are a 0/1 column, three values that are two
     * doubles an int column; built by nf_table_add_int or read from a CSV file */
    {
        const int64_t P = 9007199254740992LL; /* 2^53 */
        const int64_t b2[8] = {P, P + 1, P, P + 1, P + 1, P, P, P + 1},
                      b3[8] = {P, P + 1, P + 2, P, P + 1, P + 2, P, P};
        const uint64_t u2[8] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX,     UINT64_MAX - 1,
                                UINT64_MAX, UINT64_MAX,     UINT64_MAX - 1, UINT64_MAX - 1};
        const char * y8[8] = {"x", "z", "x", "z", "x", "z", "x", "z"};
        char icsv[256];
        snprintf(icsv, sizeof(icsv), "%s-ints.csv", dir);
        FILE * fi = fopen(icsv, "w");
        CHECK(fi != NULL, "write %s", icsv);
        if (fi) {
            fputs("b2,b3,u2,y\n", fi);
            for (int r = 0; r < 8; r++)
                fprintf(fi, "%lld,%lld,%llu,%s\n", (long long) b2[r], (long long) b3[r], (unsigned long long) u2[r],
                        y8[r]);
            fclose(fi);
        }
        nf_table * tt[2] = {NULL, NULL};
        CHECK_RC(nf_table_new("ints", 8, &tt[0], &err), NF_OK, &err);
        CHECK_RC(nf_table_add_int(tt[0], "b2", b2, 0, &err), NF_OK, &err);
        CHECK_RC(nf_table_add_int(tt[0], "b3", b3, 0, &err), NF_OK, &err);
        CHECK_RC(nf_table_add_int(tt[0], "u2", u2, 1, &err), NF_OK, &err);
        CHECK_RC(nf_table_add_text(tt[0], "y", y8, NULL, &err), NF_OK, &err);
        CHECK_RC(nf_table_read_csv(icsv, &tt[1], &err), NF_OK, &err);
        for (int k = 0; k < 2 && tt[0] && tt[1]; k++) {
            nf_predictor * pi = NULL;
            CHECK_RC(nf_predictor_fit(tt[k], "y", &o, &pi, &err), NF_OK, &err);
            for (int c = 0; pi && c < nf_predictor_n_columns(pi); c++) {
                struct nf_column_info ci;
                nf_predictor_column(pi, c, &ci);
                const char * want = strcmp(ci.name, "b3") == 0 ? "numeric" : "bool";
                CHECK(strcmp(ci.csv_type, "int64") == 0 && strcmp(ci.kind, want) == 0 && ci.kept >= 0,
                      "%s table, column %s: %s %s kept %d (want int64 %s kept)", k ? "csv" : "built", ci.name,
                      ci.csv_type, ci.kind, ci.kept, want);
            }
            nf_predictor_free(pi);
        }
        nf_table_free(tt[0]);
        nf_table_free(tt[1]);
        remove(icsv);
    }

    /* the column builders' refusals */
    CHECK_RC(nf_table_new("X", 2, &t, &err), NF_OK, &err);
    const double bad_int[2] = {1, NAN}, frac[2] = {1, 2.5};
    CHECK_RC(nf_table_add_numeric(t, "i", bad_int, 1, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "X: row 2, column 'i': missing value in an int64 column");
    CHECK_RC(nf_table_add_numeric(t, "i", frac, 1, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "2.5 is not an int64");
    CHECK_RC(nf_table_add_numeric(t, "i", v2, 1, &err), NF_OK, &err);
    CHECK_RC(nf_table_add_numeric(t, "i", v2, 0, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "column 'i' twice");
    const char * latin[2] = {"ok", "\xff\xfe"};
    CHECK_RC(nf_table_add_text(t, "s", latin, NULL, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "row 2, column 's': not valid UTF-8");
    CHECK(nf_table_n_cols(t) == 1, "refused columns not added: %d", nf_table_n_cols(t));
    nf_predictor * pd = NULL;
    CHECK_RC(nf_predictor_fit(t, "i", NULL, &pd, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "no feature column is left");
    CHECK_RC(nf_predictor_fit(t, "absent", NULL, &pd, &err), NF_ERR_INPUT, &err);
    CHECK_MSG(&err, "X: no column 'absent'");
    nf_table_free(t);

    nf_predictor_free(pa);
    nf_predictor_free(pb);
    nf_model_free(m);
    nf_backend_free(be);
    nf_table_free(a);
    nf_table_free(b);
    /* wide tables: duplicates dropped (one in five), in linear time */
    int k1, k2;
    const double t1 = wide_fit_seconds(3000, &k1), t2 = wide_fit_seconds(30000, &k2);
    CHECK(k1 == 2400 && k2 == 24000, "wide tables: kept %d of 3,000 and %d of 30,000 (want 2,400, 24,000)", k1, k2);
    CHECK(t1 > 0 && t2 > 0 && t2 < 30 * t1, "wide fits: 3,000 columns %.4f s, 30,000 columns %.4f s", t1, t2);
    printf("wide fits: 3,000 columns %.4f s, 30,000 columns %.4f s (ratio %.1f, linear 10)\n", t1, t2, t2 / t1);
    return nf_test_done("tabular");
}
