/* test-seq-track.c -- nf_seq_track_* (nofall-genomics.h; docs/sequences.md)
 * on a small SpTransformer configuration (dim 8, depth 1, context 10, window
 * 64): a sequence of 150 positions with 7 bases of reference on the left is
 * scored in 3 tiles; every tile's rows must equal one forward (nf_model_forward,
 * built here) on that tile's span with its flanks from the reference and N
 * beyond it -- bitwise, the same forward on the same tokens (cpu is
 * deterministic); a sequence of one window is one forward, bitwise equal to
 * a direct forward; strand '-' equals '+' on the reverse complement with the
 * rows reversed; the TSV has 1-based positions, the bedGraph 0-based
 * half-open ones. */
#include "nofall-genomics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...)                                            \
    do {                                                         \
        if (!(c)) {                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            fails++;                                             \
        }                                                        \
    } while (0)

enum { CTX = 10, WIN = 64, C = 3 + 2, LEFT = 7, N = 150, RIGHT = 0 };

/* probabilities of one forward on tok (1 x L), rows 0..L-2CTX */
static int forward_probs(nf_model * m, const int64_t * tok, int64_t L, float * p, nf_err * err) {
    float * lg = malloc((size_t) ((L - 2 * CTX) * C) * sizeof(float));
    const struct nf_array a = {"tokens", NF_ARRAY_I64, 2, {1, L}, (void *) tok};
    int rc = nf_model_forward(m, &a, 1, lg, err);
    for (int64_t r = 0; rc == NF_OK && r < L - 2 * CTX; r++) {
        const float * x = lg + r * C;
        const double mx = fmax(fmax(x[0], x[1]), x[2]);
        double e[3], s = 0;
        for (int c = 0; c < 3; c++) s += (e[c] = exp((double) x[c] - mx));
        for (int c = 0; c < 3; c++) p[r * C + c] = (float) (e[c] / s);
        for (int c = 3; c < C; c++) p[r * C + c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
    }
    free(lg);
    return rc;
}

int main(void) {
    nf_err err = {0};
    const char * keys[] = {"dim", "depth", "tissues", "context", "window"};
    char ctx[16], win[16];
    snprintf(ctx, sizeof(ctx), "%d", CTX);
    snprintf(win, sizeof(win), "%d", WIN);
    const char * vals[] = {"8", "1", "2", ctx, win};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    if (nf_model_gen_weights("sptransformer", "test-seq-track.tmp", 7, 5, keys, vals, &err) != NF_OK ||
        nf_backend_init("cpu", 0, &be, &err) != NF_OK || nf_model_load(be, "test-seq-track.tmp", &m, &err) != NF_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return 1;
    }
    int8_t ids[LEFT + N + RIGHT];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < LEFT + N + RIGHT; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int8_t) (x % 4);
    }
    ids[LEFT + 20] = 4; /* an N inside */
    float * want = malloc((size_t) (WIN * C) * sizeof(float));
    int64_t tok[WIN + 2 * CTX];

    /* 1. tiled: each tile equals one forward on its own span */
    nf_seq_track t = {0};
    CHECK(nf_seq_track_score(m, ids, N, LEFT, RIGHT, '+', "chrT", 1001, 0, &t, &err) == NF_OK, "%s", err.msg);
    CHECK(t.tiles == 3 && t.tile == WIN && t.n == N && t.channels == C, "tiles %lld tile %lld", (long long) t.tiles,
          (long long) t.tile);
    for (int64_t t0 = 0; t.probs && t0 < N; t0 += WIN) {
        const int64_t len = N - t0 < WIN ? N - t0 : WIN, L = len + 2 * CTX;
        for (int64_t j = 0; j < L; j++) {
            const int64_t k = LEFT + t0 - CTX + j; /* index into ids */
            tok[j] = k >= 0 && k < LEFT + N + RIGHT ? ids[k] : 4;
        }
        CHECK(forward_probs(m, tok, L, want, &err) == NF_OK, "%s", err.msg);
        CHECK(memcmp(want, t.probs + t0 * C, (size_t) (len * C) * sizeof(float)) == 0, "tile at %lld differs",
              (long long) t0);
    }
    /* the left flank came from the reference: tile 0 differs from N padding */
    nf_seq_track tn = {0};
    CHECK(nf_seq_track_score(m, ids + LEFT, N, 0, 0, '+', "chrT", 1001, 0, &tn, &err) == NF_OK, "%s", err.msg);
    CHECK(tn.probs && t.probs && memcmp(tn.probs, t.probs, (size_t) (WIN * C) * sizeof(float)) != 0,
          "the reference's left flank made no difference");
    nf_seq_track_free(&tn);

    /* 2. one window: bitwise a direct forward of the padded sequence */
    nf_seq_track one = {0};
    CHECK(nf_seq_track_score(m, ids + LEFT, WIN, 0, 0, '+', NULL, 0, 0, &one, &err) == NF_OK, "%s", err.msg);
    for (int j = 0; j < WIN + 2 * CTX; j++) tok[j] = j < CTX || j >= CTX + WIN ? 4 : ids[LEFT + j - CTX];
    CHECK(forward_probs(m, tok, WIN + 2 * CTX, want, &err) == NF_OK, "%s", err.msg);
    CHECK(one.tiles == 1 && one.probs && memcmp(want, one.probs, (size_t) (WIN * C) * sizeof(float)) == 0,
          "one window != one forward");
    CHECK(strcmp(one.contig, "sequence") == 0 && one.start == 1, "default contig/start");
    nf_seq_track_free(&one);

    /* 3. strand '-': '+' on the reverse complement, rows reversed */
    int8_t rc[LEFT + N + RIGHT];
    for (int i = 0; i < LEFT + N + RIGHT; i++) {
        const int8_t b = ids[LEFT + N + RIGHT - 1 - i];
        rc[i] = b == 4 ? 4 : (int8_t) (3 - b);
    }
    nf_seq_track minus = {0}, plus = {0};
    CHECK(nf_seq_track_score(m, ids, N, LEFT, RIGHT, '-', "chrT", 1001, 0, &minus, &err) == NF_OK, "%s", err.msg);
    CHECK(nf_seq_track_score(m, rc, N, RIGHT, LEFT, '+', "chrT", 1001, 0, &plus, &err) == NF_OK, "%s", err.msg);
    for (int64_t i = 0; minus.probs && plus.probs && i < N; i++)
        if (memcmp(minus.probs + i * C, plus.probs + (N - 1 - i) * C, C * sizeof(float)) != 0) {
            CHECK(0, "strand '-' row %lld is not the reverse complement's row %lld", (long long) i,
                  (long long) (N - 1 - i));
            break;
        }
    CHECK(minus.strand == '-', "strand");
    nf_seq_track_free(&plus);

    /* 4. writers: TSV 1-based, bedGraph 0-based half-open */
    CHECK(nf_seq_track_write_tsv(&minus, "test-seq-track.tmp/t.tsv", 0, &err) == NF_OK, "%s", err.msg);
    CHECK(nf_seq_track_write_bedgraph(&minus, 2, "test-seq-track.tmp/d.bedGraph", 0, &err) == NF_OK, "%s", err.msg);
    char line[1024];
    FILE * f = fopen("test-seq-track.tmp/t.tsv", "r");
    CHECK(f && fgets(line, sizeof(line), f) &&
              strcmp(line, "contig\tpos\tstrand\tacceptor\tdonor\ttissue_0\ttissue_1\n") == 0,
          "TSV header: %s", line);
    int rows = 0;
    while (f && fgets(line, sizeof(line), f)) {
        char contig[64], strand[4];
        long long pos;
        double a, d;
        CHECK(sscanf(line, "%63s %lld %3s %lf %lf", contig, &pos, strand, &a, &d) == 5, "TSV row %s", line);
        CHECK(strcmp(contig, "chrT") == 0 && pos == 1001 + rows && strcmp(strand, "-") == 0, "TSV row %d: %s", rows,
              line);
        CHECK(fabs(a - minus.probs[rows * C + 1]) <= 1e-6 * fmax(1, fabs(a)) &&
                  fabs(d - minus.probs[rows * C + 2]) <= 1e-6 * fmax(1, fabs(d)),
              "TSV row %d values", rows);
        rows++;
    }
    CHECK(rows == N, "TSV rows %d", rows);
    if (f) fclose(f);
    f = fopen("test-seq-track.tmp/d.bedGraph", "r");
    CHECK(f && fgets(line, sizeof(line), f) && strncmp(line, "track type=bedGraph", 19) == 0, "bedGraph track line");
    rows = 0;
    while (f && fgets(line, sizeof(line), f)) {
        char contig[64];
        long long s, e;
        double v;
        CHECK(sscanf(line, "%63s %lld %lld %lf", contig, &s, &e, &v) == 4, "bedGraph row %s", line);
        CHECK(s == 1000 + rows && e == s + 1, "bedGraph row %d: %s", rows, line);
        CHECK(fabs(v - minus.probs[rows * C + 2]) <= 1e-6 * fmax(1, fabs(v)), "bedGraph row %d value", rows);
        rows++;
    }
    CHECK(rows == N, "bedGraph rows %d", rows);
    if (f) fclose(f);
    CHECK(nf_seq_track_score(m, ids, N, 0, 0, 'x', NULL, 1, 0, &plus, &err) == NF_ERR_INPUT, "bad strand accepted");
    nf_seq_track_free(&minus);
    nf_seq_track_free(&t);
    free(want);
    nf_model_free(m);
    nf_backend_free(be);
    if (fails) return 1;
    printf("seq-track: ok\n");
    return 0;
}
