/* test-tables.c -- tables as pandas reads them (docs/tables.md): a CSV
 * compressed as .gz / .bz2 / .xz / .zst (libzstd builds; and two streams concatenated, an upper-case
 * extension) reads into the same table as the plain file; a truncated, a
 * corrupt and an empty stream are NF_ERR_FORMAT naming the file (no crash);
 * a plain file whose name says nothing is read as it is. Written here with
 * zlib / libbz2 / liblzma, read back through nf__csv_read. The metrics of
 * nf_predictor_score against scikit-learn's (fixtures/tables/metrics.txt). */
#include "io/nf-io.h"
#include "nf-test.h"
#include "tabular/tabular-impl.h"

#include <bzlib.h>
#include <math.h>
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>
#ifdef NF_HAVE_ZSTD
#include <zstd.h>
#endif

static const char nf_csv_text[] = "a,b,label\n1,x,yes\n2,\"y, z\",no\n3.5,,yes\n-4,w,no\n";

static int nf_write(const char * path, const void * p, size_t n) {
    FILE * f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(p, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* gzip member of s (zlib's deflate with a gzip wrapper) */
static size_t nf_gz(const char * s, size_t n, unsigned char * out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    z.next_in = (unsigned char *) s;
    z.avail_in = (uInt) n;
    z.next_out = out;
    z.avail_out = (uInt) cap;
    const int r = deflate(&z, Z_FINISH);
    const size_t got = cap - z.avail_out;
    deflateEnd(&z);
    return r == Z_STREAM_END ? got : 0;
}

static size_t nf_bz(const char * s, size_t n, unsigned char * out, size_t cap) {
    unsigned int got = (unsigned) cap;
    return BZ2_bzBuffToBuffCompress((char *) out, &got, (char *) s, (unsigned) n, 9, 0, 0) == BZ_OK ? got : 0;
}

static size_t nf_xz(const char * s, size_t n, unsigned char * out, size_t cap) {
    size_t pos = 0;
    return lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *) s, n, out, &pos, cap) == LZMA_OK ? pos
                                                                                                                 : 0;
}

#ifdef NF_HAVE_ZSTD
/* a zstd frame with its checksum (as the zstd tool writes it) */
static size_t nf_zst(const char * s, size_t n, unsigned char * out, size_t cap) {
    ZSTD_CCtx * z = ZSTD_createCCtx();
    if (!z) return 0;
    ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1);
    const size_t r = ZSTD_compress2(z, out, cap, s, n);
    ZSTD_freeCCtx(z);
    return ZSTD_isError(r) ? 0 : r;
}
#endif

/* the table read from path equals the plain one (names, types, raw fields) */
static void nf_same_table(const char * path, const struct nf_csv_table * want) {
    struct nf_csv_table t;
    nf_err err = {0};
    CHECK_RC(nf__csv_read(path, &t, &err), NF_OK, &err);
    if (err.code) return;
    CHECK(t.n_cols == want->n_cols && t.n_rows == want->n_rows, "%s: %d x %lld", path, t.n_cols, (long long) t.n_rows);
    for (int c = 0; c < t.n_cols && c < want->n_cols; c++) {
        CHECK(strcmp(t.cols[c].name, want->cols[c].name) == 0, "%s: column %d name %s", path, c, t.cols[c].name);
        CHECK(t.cols[c].type == want->cols[c].type, "%s: column %d type", path, c);
        for (int64_t r = 0; r < t.n_rows && r < want->n_rows; r++)
            CHECK(strcmp(t.cols[c].raw[r], want->cols[c].raw[r]) == 0, "%s: [%lld,%d] %s", path, (long long) r, c,
                  t.cols[c].raw[r]);
    }
    nf__csv_free(&t);
}

/* reading path fails with NF_ERR_FORMAT, the message names the file and says what */
static void nf_refused(const char * path, const char * what) {
    struct nf_csv_table t;
    nf_err err = {0};
    CHECK_RC(nf__csv_read(path, &t, &err), NF_ERR_FORMAT, &err);
    CHECK(strstr(err.msg, path) != NULL, "%s: message does not name the file: %s", path, err.msg);
    CHECK(strstr(err.msg, what) != NULL, "%s: message does not say '%s': %s", path, what, err.msg);
}

/* dates as pandas decides them (fixtures/tables/dates.tsv, pandas' verdict per
 * value): every value pandas reads is ISO 8601 to nofall or "might be a date"
 * (refused, never guessed); every value pandas gives NaT is neither -- a
 * category like "room 2" or an id like "A-00017" is no date */
static void nf_dates(const char * dir) {
    char path[1024], line[512];
    snprintf(path, sizeof(path), "%s/dates.tsv", dir);
    FILE * f = fopen(path, "r");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') continue;
        char * tab = strrchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        const int pandas = tab[1] == '1';
        int64_t ns;
        const int nofall = nf__iso_datetime_ns(line, &ns) || nf__date_maybe(line);
        CHECK(nofall == pandas, "'%s': pandas %s, nofall %s", line, pandas ? "a date" : "NaT",
              nofall ? "a (possible) date" : "no date");
        n++;
    }
    fclose(f);
    CHECK(n >= 50, "%d forms in %s", n, path);
}

/* the metrics against scikit-learn's (fixtures/tables/metrics.txt, made by
 * reference/metrics_fixture.py): within 1e-12 relative, NaN where sklearn's is */
static int nf_close(double a, double b) {
    if (isnan(b)) return isnan(a);
    return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1);
}
static void nf_metrics(const char * dir) {
    char path[1024], kind[8], name[64];
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    FILE * f = fopen(path, "r");
    CHECK(f != NULL, "%s: cannot open", path);
    if (!f) return;
    int cases = 0;
    char line[256];
    while (fscanf(f, "%7s", kind) == 1) {
        if (kind[0] == '#') {
            if (!fgets(line, sizeof(line), f)) break;
            continue;
        }
        long long n = 0;
        int K = 1;
        if (fscanf(f, "%63s %lld", name, &n) != 2 || n < 1 || n > 100000 ||
            (strcmp(kind, "cls") == 0 && (fscanf(f, "%d", &K) != 1 || K < 2 || K > 10))) {
            CHECK(0, "%s: bad case header", path);
            break;
        }
        int64_t * y = malloc((size_t) n * sizeof(int64_t));
        double *yv = malloc((size_t) n * sizeof(double)), *P = malloc((size_t) n * (size_t) K * sizeof(double));
        double want[3], got[3];
        nf_err err = {0};
        int ok = y && yv && P;
        for (long long i = 0; ok && i < n; i++) {
            if (kind[0] == 'c') {
                long long v;
                ok = fscanf(f, "%lld", &v) == 1;
                y[i] = v;
            } else
                ok = fscanf(f, "%lf", &yv[i]) == 1;
        }
        for (long long i = 0; ok && i < n * K; i++) ok = fscanf(f, "%lf", &P[i]) == 1;
        for (int i = 0; ok && i < 3; i++) ok = fscanf(f, "%lf", &want[i]) == 1;
        CHECK(ok, "%s: case %s unreadable", path, name);
        if (ok) {
            const int rc = kind[0] == 'c' ? nf__metrics_classification(y, P, n, K, &got[0], &got[1], &got[2], &err)
                                          : nf__metrics_regression(yv, P, n, &got[0], &got[1], &got[2], &err);
            CHECK_RC(rc, NF_OK, &err);
            static const char * const what[2][3] = {{"accuracy", "log_loss", "roc_auc"}, {"r2", "rmse", "mae"}};
            for (int i = 0; i < 3; i++)
                CHECK(nf_close(got[i], want[i]), "%s %s: %.17g, sklearn %.17g", name, what[kind[0] != 'c'][i], got[i],
                      want[i]);
            cases++;
        }
        free(y), free(yv), free(P);
        if (!ok) break;
    }
    fclose(f);
    CHECK(cases >= 10, "%s: %d cases", path, cases);
}

int main(int argc, char ** argv) {
    if (argc > 1) nf_dates(argv[1]);
    if (argc > 1) nf_metrics(argv[1]);
    const size_t n = strlen(nf_csv_text);
    unsigned char buf[4096], two[8192];
    struct nf_csv_table plain;
    nf_err err = {0};
    CHECK(nf_write("tables-plain.csv", nf_csv_text, n) == 0, "write");
    CHECK_RC(nf__csv_read("tables-plain.csv", &plain, &err), NF_OK, &err);
    if (err.code) return 1;
    CHECK(plain.n_cols == 3 && plain.n_rows == 4, "plain table %d x %lld", plain.n_cols, (long long) plain.n_rows);

    static const struct {
        const char * ext;
        size_t (*pack)(const char *, size_t, unsigned char *, size_t);
        const char * corrupt; /* what the message says of a flipped byte */
        const char * name;    /* nf__compression_of */
    } kinds[] = {{"gz", nf_gz, "gzip", "gzip"},
                 {"bz2", nf_bz, "bzip2", "bz2"},
                 {"xz", nf_xz, "xz", "xz"},
#ifdef NF_HAVE_ZSTD
                 {"zst", nf_zst, "zstd", "zstd"}
#endif
    };
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char path[256];
        const size_t m = kinds[k].pack(nf_csv_text, n, buf, sizeof(buf));
        CHECK(m > 20, "%s: compress", kinds[k].ext);
        if (m <= 20) continue;
        snprintf(path, sizeof(path), "tables.csv.%s", kinds[k].ext);
        CHECK(nf_write(path, buf, m) == 0, "write");
        nf_same_table(path, &plain);
        CHECK(strcmp(nf__compression_of(path), kinds[k].name) == 0, "%s", path);

        /* the extension in any case, as pandas lower-cases it */
        snprintf(path, sizeof(path), "tables-upper.CSV.%c%s", kinds[k].ext[0] - 32, kinds[k].ext + 1);
        CHECK(nf_write(path, buf, m) == 0, "write");
        nf_same_table(path, &plain);

        /* two streams in a row: the header in one, the rows in the other */
        const char * rows = strchr(nf_csv_text, '\n') + 1;
        const size_t h = (size_t) (rows - nf_csv_text);
        const size_t m1 = kinds[k].pack(nf_csv_text, h, two, sizeof(two));
        const size_t m2 = m1 ? kinds[k].pack(rows, n - h, two + m1, sizeof(two) - m1) : 0;
        CHECK(m1 && m2, "%s: compress two", kinds[k].ext);
        snprintf(path, sizeof(path), "tables-two.csv.%s", kinds[k].ext);
        CHECK(nf_write(path, two, m1 + m2) == 0, "write");
        nf_same_table(path, &plain);

        /* truncated: every prefix is refused (or, for a prefix that ends
         * exactly between streams, reads); never a crash */
        snprintf(path, sizeof(path), "tables-cut.csv.%s", kinds[k].ext);
        for (size_t cut = 0; cut < m; cut++) {
            CHECK(nf_write(path, buf, cut) == 0, "write");
            struct nf_csv_table t;
            err = (nf_err){0};
            const int rc = nf__csv_read(path, &t, &err);
            CHECK(rc == NF_ERR_FORMAT && strstr(err.msg, path), "%s cut at %zu of %zu: rc %d %s", kinds[k].ext, cut, m,
                  rc, err.msg);
            if (rc == NF_OK) nf__csv_free(&t);
        }
        CHECK(nf_write(path, buf, m / 2) == 0, "write");
        nf_refused(path, "truncated");

        /* a flipped byte in the middle: corrupt, or (xz, bz2 checks) refused */
        snprintf(path, sizeof(path), "tables-bad.csv.%s", kinds[k].ext);
        buf[m / 2] ^= 0x55;
        CHECK(nf_write(path, buf, m) == 0, "write");
        nf_refused(path, kinds[k].corrupt);
    }
    /* a name that says no compression: the bytes as they are (a gzip file
     * called .csv is text to the reader, and not valid UTF-8 there) */
    const size_t m = nf_gz(nf_csv_text, n, buf, sizeof(buf));
    CHECK(nf_write("tables-gzip-bytes.csv", buf, m) == 0, "write");
    {
        struct nf_csv_table t;
        err = (nf_err){0};
        CHECK(nf__csv_read("tables-gzip-bytes.csv", &t, &err) != NF_OK, "gzip bytes in a .csv read as a table");
        if (err.code == NF_OK) nf__csv_free(&t);
    }
    CHECK(nf__compression_of("x.csv") == NULL && nf__compression_ext_len("x.tsv.gz") == 3, "compression_of");
    nf__csv_free(&plain);
    return nf_test_done("test-tables");
}
