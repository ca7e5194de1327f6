/* test-tabstar-fit.c FIXTURES -- TabSTAR's fit (src/tabular/tabstar-fit*.c;
 * spec finetune.md §3):
 *
 *   pieces   FIXTURES/pieces.txt (reference/tabstar_fit_fixtures.py: tabstar
 *            1.1.16's split_to_val, sklearn's roc_auc_score / r2_score,
 *            torch's stack().mean(0) and float32 loss sum): the split's row
 *            ids equal, the refusals where upstream raises, metrics within
 *            1e-15 (the same double arithmetic), the float32 mean and loss and
 *            the threshold bit for bit;
 *   loop     a fake training step (no model): the batches each epoch feeds
 *            (replayed permutations, or numpy's RandomState(seed) ones), loss
 *            scale 1/2, the updates grouped by the global batch count (an odd
 *            count of batches per epoch alternates [2,2,1] / [1,2,2]), the
 *            OneCycle lr and beta1 of each epoch (the spec's closed forms),
 *            early stopping on a scripted metric (strict >, patience 5, the
 *            stopping epoch not checkpointed), the epochs averaged within the
 *            loss threshold and their float32 mean written back, the best
 *            epoch's adapter without averaging. */
#include "tabular/tabstar-fit.h"
#include "core/nf-ops.h"
#include "nf-test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pieces.txt ------------------------------------------------------------ */

/* the numbers of one " | "-separated field */
static int64_t nums(char * f, double * out, int64_t cap) {
    int64_t n = 0;
    char * e;
    for (;;) {
        while (*f == ' ') f++;
        if (!*f) break;
        const double v = strtod(f, &e);
        if (e == f) break;
        if (n < cap) out[n] = v;
        n++;
        f = e;
    }
    return n;
}

static int split_fields(char * line, char ** f, int cap) {
    int n = 0;
    f[n++] = line;
    for (char * p = line; (p = strstr(p, " | ")) && n < cap; p += 3) {
        *p = 0;
        f[n++] = p + 3;
    }
    return n;
}

enum { CAP = 40000 };
static double a[CAP], b[CAP], c[CAP];

static void check_split(char ** f) {
    char name[64], kind[8];
    long long n, val;
    sscanf(f[0], "split %63s %7s %lld %lld", name, kind, &n, &val);
    const int64_t ny = nums(f[1], a, CAP);
    int64_t * y = malloc((size_t) n * sizeof(int64_t));
    for (int64_t i = 0; i < ny && i < n; i++) y[i] = (int64_t) a[i];
    const int cls = strcmp(kind, "cls") == 0;
    CHECK(!cls || ny == n, "%s: %lld class ids for %lld rows", name, (long long) ny, n);
    struct nf_tsf_split s;
    nf_err err = {0};
    const int rc = nf__tsf_split_to_val(cls ? y : NULL, n, &s, &err);
    if (strncmp(f[2], "error", 5) == 0) {
        CHECK(rc == NF_ERR_INPUT, "%s: upstream raises, nofall returned %s", name, nf_result_name(rc));
        printf("split %s: refused as upstream: %s\n", name, err.msg);
        free(y);
        return;
    }
    CHECK_RC(rc, NF_OK, &err);
    const int64_t nt = nums(f[2], b, CAP), nv = nums(f[3], c, CAP);
    int same = rc == NF_OK && s.n_train == nt && s.n_val == nv;
    for (int64_t i = 0; same && i < nt; i++) same = s.train[i] == (int64_t) b[i];
    for (int64_t i = 0; same && i < nv; i++) same = s.val[i] == (int64_t) c[i];
    CHECK(same, "%s: split differs (train %lld / %lld rows, val %lld / %lld)", name, (long long) s.n_train,
          (long long) nt, (long long) s.n_val, (long long) nv);
    printf("split %s (%s, %lld rows): train %lld, val %lld row ids identical: %s\n", name, kind, n, (long long) nt,
           (long long) nv, same ? "yes" : "NO");
    nf__tsf_split_free(&s);
    free(y);
}

static void pieces(const char * dir) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/pieces.txt", dir);
    FILE * fp = fopen(path, "r");
    CHECK(fp != NULL, "cannot open %s", path);
    if (!fp) return;
    static char line[1 << 20];
    int n_auc = 0, n_r2 = 0, n_avg = 0, n_loss = 0, n_th = 0;
    double worst_auc = 0, worst_r2 = 0;
    while (fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || !line[0]) continue;
        char * f[8] = {0};
        const int nf = split_fields(line, f, 8);
        if (strncmp(line, "split ", 6) == 0 && nf == 4) {
            check_split(f);
        } else if (strncmp(line, "auc ", 4) == 0 && nf == 4) {
            long long C, n;
            sscanf(f[0], "auc %lld %lld", &C, &n);
            nums(f[1], a, CAP);
            const int64_t np = nums(f[2], b, CAP);
            const double want = strtod(f[3], NULL);
            int64_t * y = malloc((size_t) n * sizeof(int64_t));
            float * p = malloc((size_t) (n * C) * sizeof(float));
            for (int64_t i = 0; i < n; i++) y[i] = (int64_t) a[i];
            for (int64_t i = 0; i < n * C; i++) p[i] = 0.0f;
            if (C == 2) /* the class-1 column only: column 0 its complement */
                for (int64_t i = 0; i < n && i < np; i++) p[i * 2 + 1] = (float) b[i], p[i * 2] = 1.0f - (float) b[i];
            else
                for (int64_t i = 0; i < n * C && i < np; i++) p[i] = (float) b[i];
            const double got = nf__tsf_metric(C, n, y, NULL, p), dd = fabs(got - want);
            worst_auc = dd > worst_auc ? dd : worst_auc;
            CHECK(dd <= 1e-15, "auc C=%lld n=%lld: %.17g, sklearn %.17g", C, n, got, want);
            n_auc++;
            free(y), free(p);
        } else if (strncmp(line, "r2 ", 3) == 0 && nf == 4) {
            long long n;
            sscanf(f[0], "r2 %lld", &n);
            nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float * p = malloc((size_t) n * sizeof(float));
            for (int64_t i = 0; i < n; i++) p[i] = (float) b[i];
            const double want = strtod(f[3], NULL), got = nf__tsf_metric(1, n, NULL, a, p);
            const double dd = fabs(got - want) / fmax(1.0, fabs(want));
            worst_r2 = dd > worst_r2 ? dd : worst_r2;
            CHECK(dd <= 1e-15, "r2 n=%lld: %.17g, sklearn %.17g", n, got, want);
            n_r2++;
            free(p);
        } else if (strncmp(line, "avgf32 ", 7) == 0 && nf == 3) {
            long long k, m;
            sscanf(f[0], "avgf32 %lld %lld", &k, &m);
            nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float * x = malloc((size_t) (k * m) * sizeof(float));
            float * got = malloc((size_t) m * sizeof(float));
            const float ** xs = malloc((size_t) k * sizeof(float *));
            for (int64_t i = 0; i < k * m; i++) x[i] = (float) a[i];
            for (int64_t i = 0; i < k; i++) xs[i] = x + i * m;
            nf__tsf_mean_f32(xs, (int) k, m, got);
            int64_t bad = 0;
            for (int64_t j = 0; j < m; j++) bad += got[j] != (float) b[j];
            CHECK(bad == 0, "stack().mean(0) of %lld x %lld: %lld values differ in bits", k, m, (long long) bad);
            n_avg++;
            free(x), free(got), free(xs);
        } else if (strncmp(line, "valloss ", 8) == 0 && nf == 4) {
            const int64_t nb = nums(f[1], a, CAP);
            nums(f[2], b, CAP);
            float l[64];
            int64_t r[64];
            for (int64_t i = 0; i < nb && i < 64; i++) l[i] = (float) a[i], r[i] = (int64_t) b[i];
            const float got = nf__tsf_val_loss(l, r, (int) nb), want = (float) strtod(f[3], NULL);
            CHECK(got == want, "validation loss of %lld batches: %.9g, upstream %.9g", (long long) nb, got, want);
            n_loss++;
        } else if (strncmp(line, "thresh ", 7) == 0 && nf == 2) {
            const double bl = strtod(line + 7, NULL), want = strtod(f[1], NULL);
            CHECK(nf__tsf_threshold(bl) == want, "threshold of %.17g: %.17g, upstream %.17g", bl, nf__tsf_threshold(bl),
                  want);
            n_th++;
        } else {
            CHECK(0, "unreadable record: %.60s", line);
        }
    }
    fclose(fp);
    CHECK(n_auc >= 10 && n_r2 >= 3 && n_avg >= 4 && n_loss >= 3 && n_th >= 5, "records missing");
    printf("metrics: %d ROC-AUC (max |diff| %.3g), %d R2 (max rel diff %.3g); %d float32 means, %d validation "
           "losses, %d thresholds bit for bit\n",
           n_auc, worst_auc, n_r2, worst_r2, n_avg, n_loss, n_th);
}

/* ---- the loop on a fake step ----------------------------------------------------- */

enum { FP = 6, MAXB = 4096, MAXE = 64 };
struct fake {
    float w[FP];
    int64_t n_val;
    const double * yv;
    int n_grad, n_upd, epoch_pass;
    int64_t seen[MAXB]; /* the train rows fed, in order */
    int64_t n_seen;
    int upd_after[MAXB]; /* number of grad calls before each update */
    float scale_seen;
    double lr_seen[MAXB], b1_seen[MAXB];
    float w_at_eval[MAXE][FP]; /* the adapter at each validation pass */
    const double * noise;      /* per pass: prediction = y + noise * (-1)^i */
    const float * vloss;       /* per pass: each batch's loss */
    float written[FP];
    int n_write;
};

static int f_grad(void * u, const int64_t * rows, int64_t nb, float scale, float * loss, nf_err * err) {
    (void) err;
    struct fake * f = u;
    for (int64_t i = 0; i < nb && f->n_seen < MAXB; i++) f->seen[f->n_seen++] = rows[i];
    f->scale_seen = scale;
    *loss = 0.25f * (float) (f->n_grad % 7);
    f->n_grad++;
    return NF_OK;
}
static int f_update(void * u, double lr, double b1, nf_err * err) {
    (void) err;
    struct fake * f = u;
    if (f->n_upd < MAXB) {
        f->upd_after[f->n_upd] = f->n_grad;
        f->lr_seen[f->n_upd] = lr, f->b1_seen[f->n_upd] = b1;
    }
    f->n_upd++;
    for (int j = 0; j < FP; j++) f->w[j] += (float) (lr * 1000.0) * (float) (j + 1) - 0.01f * (float) f->n_upd;
    return NF_OK;
}
static int f_eval(void * u, int64_t b, int64_t e, float * logits, float * loss, nf_err * err) {
    (void) err;
    struct fake * f = u;
    if (b == 0) {
        memcpy(f->w_at_eval[f->epoch_pass < MAXE ? f->epoch_pass : MAXE - 1], f->w, sizeof(f->w));
        f->epoch_pass++;
    }
    const int p = f->epoch_pass - 1;
    for (int64_t i = b; i < e; i++) logits[i - b] = (float) (f->yv[i] + f->noise[p] * ((i % 2) ? -1.0 : 1.0));
    *loss = f->vloss[p];
    return NF_OK;
}
static int f_read(void * u, float * w, nf_err * err) {
    (void) err;
    memcpy(w, ((struct fake *) u)->w, sizeof(float) * FP);
    return NF_OK;
}
static int f_write(void * u, const float * w, nf_err * err) {
    (void) err;
    struct fake * f = u;
    memcpy(f->w, w, sizeof(float) * FP);
    memcpy(f->written, w, sizeof(float) * FP);
    f->n_write++;
    return NF_OK;
}

static void loop(void) {
    enum { NT = 300, NV = 200 }; /* 5 batches per epoch (odd), 2 validation batches */
    double yv[NV];
    for (int i = 0; i < NV; i++) yv[i] = sin(0.37 * i) * 2.0;
    /* epochs 1..10 and the final pass: metric = R2, falling with the noise */
    const double noise[] = {0.5, 0.3, 0.3, 0.4, 0.2, 0.25, 0.25, 0.21, 0.22, 0.9, 0.1};
    const float vloss[] = {1.0f, 0.8f, 0.9f, 0.81f, 0.7f, 0.75f, 0.9f, 0.71f, 0.72f, 0.6f, 0.5f};
    struct fake f;
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    struct nf_tsf_step s = {&f, FP, 1, f_grad, f_update, f_eval, f_read, f_write};
    struct nf_tsf_opts o;
    nf__tsf_opts_default(&o);
    CHECK(o.max_epochs == 50 && o.patience == 5 && o.batch == 64 && o.accumulation == 2 && o.val_batch == 128,
          "defaults");
    static int64_t pm[50][NT];
    const int64_t * pp[50];
    for (int e = 0; e < 50; e++) { /* each epoch's order: a rotation, reversed on odd epochs */
        for (int i = 0; i < NT; i++) pm[e][i] = (e % 2 ? NT - 1 - i + 17 * e : i + 17 * e) % NT;
        pp[e] = pm[e];
    }
    o.perms = pp;
    struct nf_tsf_result r;
    nf_err err = {0};
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    /* early stopping: bests at 1, 2, 5 (3 ties 2: not strictly better); 6..10 fail, 10 stops */
    CHECK(r.n_epochs == 10 && r.best_epoch == 5, "ran %d epochs, best %d (want 10, 5)", r.n_epochs, r.best_epoch);
    for (int e = 0; e < r.n_epochs; e++) {
        const struct nf_tsf_epoch * ep = &r.epochs[e];
        const int best = e == 0 || e == 1 || e == 4;
        CHECK(ep->best == best, "epoch %d best %d", e + 1, ep->best);
        CHECK(ep->stopped == (e == 9), "epoch %d stopped %d", e + 1, ep->stopped);
        CHECK(ep->val_loss == (double) vloss[e], "epoch %d val loss %.9g", e + 1, ep->val_loss);
        /* OneCycle, total_steps 50 (spec §3.3's closed forms, 1e-15 relative) */
        const int sst = e;
        double lr, b1;
        if (sst <= 4) {
            const double c = cos(3.141592653589793 * sst / 4.0) + 1.0;
            lr = 1e-3 + (4e-5 - 1e-3) / 2.0 * c;
            b1 = 0.85 + 0.05 * c;
        } else {
            const double c = cos(3.141592653589793 * (sst - 4) / 45.0) + 1.0;
            lr = 4e-9 + (1e-3 - 4e-9) / 2.0 * c;
            b1 = 0.95 - 0.05 * c;
        }
        CHECK(fabs(ep->lr - lr) <= 1e-15 * lr && fabs(ep->beta1 - b1) <= 1e-15, "epoch %d lr %.17g beta1 %.17g", e + 1,
              ep->lr, ep->beta1);
        /* the updates: 5 batches per epoch, steps counted globally: [2,2,1] on odd epochs, [1,2,2] on even */
        CHECK(ep->updates == 3, "epoch %d: %d updates", e + 1, ep->updates);
    }
    CHECK(fabs(r.epochs[0].lr - 4e-5) < 1e-19 && fabs(r.epochs[0].beta1 - 0.95) < 1e-16,
          "epoch 1: lr %.17g beta1 %.17g", r.epochs[0].lr, r.epochs[0].beta1);
    CHECK(fabs(r.epochs[4].lr - 1e-3) < 1e-18 && fabs(r.epochs[4].beta1 - 0.85) < 1e-16, "epoch 5 peak");
    const int want_after[6] = {2, 4, 5, 6, 8, 10}; /* grad calls before each of the first 6 updates */
    for (int i = 0; i < 6; i++)
        CHECK(f.upd_after[i] == want_after[i], "update %d after %d batches (want %d)", i + 1, f.upd_after[i],
              want_after[i]);
    CHECK(f.n_upd == 30 && f.n_grad == 50, "%d updates, %d batches", f.n_upd, f.n_grad);
    CHECK(f.lr_seen[3] == r.epochs[1].lr && f.b1_seen[3] == r.epochs[1].beta1, "update 4 used epoch 2's schedule");
    CHECK(f.scale_seen == 0.5f, "loss scale %g", f.scale_seen);
    int fed = f.n_seen == 10 * NT;
    for (int e = 0; e < 10 && fed; e++)
        for (int i = 0; i < NT && fed; i++) fed = f.seen[e * NT + i] == pm[e][i];
    CHECK(fed, "the replayed permutations are the batches fed");
    /* train loss: batch losses 0.25 (k % 7) weighted by rows (64,64,64,64,44) */
    {
        const int64_t rows[5] = {64, 64, 64, 64, 44};
        double t = 0;
        for (int k = 0; k < 5; k++) t += 0.25 * (double) ((5 + k) % 7) * (double) rows[k];
        CHECK(fabs(r.epochs[1].train_loss - t / NT) < 1e-15, "epoch 2 train loss %.17g, want %.17g",
              r.epochs[1].train_loss, t / NT);
    }
    /* averaging: min loss 0.7 (epoch 5; epoch 10 stopped, not a checkpoint):
     * threshold 0.7 + 0.02 + 0.03 * 0.7 / 1.0 = 0.741 -> epochs 5, 8, 9 */
    CHECK(r.n_averaged == 3, "%d epochs averaged (want 3)", r.n_averaged);
    for (int e = 0; e < r.n_epochs; e++)
        CHECK(r.epochs[e].averaged == (e == 4 || e == 7 || e == 8), "epoch %d averaged %d", e + 1,
              r.epochs[e].averaged);
    int mean_ok = f.n_write == 1;
    for (int j = 0; j < FP; j++) {
        const double m = ((double) f.w_at_eval[4][j] + f.w_at_eval[7][j] + f.w_at_eval[8][j]) / 3.0;
        mean_ok = mean_ok && fabs(f.written[j] - m) <= 1e-6 * fmax(1.0, fabs(m));
    }
    CHECK(mean_ok, "the averaged adapter written back (%d writes)", f.n_write);
    CHECK(f.epoch_pass == 11 && r.final_val_loss == (double) vloss[10], "the final adapter validated (%d passes)",
          f.epoch_pass);
    nf__tsf_result_free(&r);

    /* no averaging (the paper version): the best epoch's adapter */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.average = 0;
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    CHECK(f.n_write == 1 && memcmp(f.written, f.w_at_eval[4], sizeof(f.written)) == 0,
          "the best epoch's adapter written back");
    nf__tsf_result_free(&r);

    /* a cap of 3 epochs (OneCycle total_steps 3), 6 batches (even), own generator */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.average = 1, o.max_epochs = 3, o.perms = NULL, o.seed = 5;
    CHECK_RC(nf__tsf_run(&s, 320, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    CHECK(r.n_epochs == 3 && f.n_upd == 9 && f.n_seen == 960, "3 epochs, %d updates, %d rows", f.n_upd, (int) f.n_seen);
    {
        struct nf_onecycle oc;
        nf_onecycle_defaults(&oc, 1e-3, 3);
        oc.pct_start = 0.1;
        double lr;
        CHECK(nf_onecycle_at(&oc, 2, &lr, NULL, NULL) == NF_OK && lr == r.epochs[2].lr, "cap: schedule of 3 steps");
        struct nf_np_rng g;
        nf__np_rng_seed(&g, 5);
        int64_t p[320];
        int same = 1;
        for (int e = 0; e < 3; e++) {
            nf__np_permutation(&g, 320, p);
            for (int i = 0; i < 320; i++) same = same && f.seen[e * 320 + i] == p[i];
        }
        CHECK(same, "own generator: RandomState(seed).permutation per epoch");
    }
    nf__tsf_result_free(&r);
    /* max_epochs 10: torch's empty first phase, total_steps 11 as upstream's retry */
    memset(&f, 0, sizeof(f));
    f.n_val = NV, f.yv = yv, f.noise = noise, f.vloss = vloss;
    o.max_epochs = 10;
    CHECK_RC(nf__tsf_run(&s, NT, NV, NULL, yv, &o, &r, &err), NF_OK, &err);
    {
        struct nf_onecycle oc;
        nf_onecycle_defaults(&oc, 1e-3, 11);
        oc.pct_start = 0.1;
        double lr;
        CHECK(nf_onecycle_at(&oc, 3, &lr, NULL, NULL) == NF_OK && lr == r.epochs[3].lr, "10 epochs: 11 steps");
    }
    nf__tsf_result_free(&r);
    CHECK_RC(nf__tsf_run(&s, 0, NV, NULL, yv, &o, &r, &err), NF_ERR_ARG, &err);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-tabstar-fit FIXTURES\n");
        return 2;
    }
    pieces(argv[1]);
    loop();
    return nf_test_done("test-tabstar-fit");
}
